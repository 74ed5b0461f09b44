//! Reading a response: as it stands, or as its events, and its input items.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::Value;

use super::super::schemas::StreamEvent;
use super::stream::ResponseStream;
use super::{session_of, stored, view};
use crate::http::event_stream::{sse, Handover};
use crate::http::extract::{Segments, Tenant};
use crate::http::openai::errors::{OpenAiError, Result};
use crate::http::openai::ids;
use crate::http::openai::items::view as item_view;
use crate::http::openai::list::{IncludeQuery, List, ListQuery};
use crate::http::openai::OpenAiErrors;
use crate::http::AppState;
use crate::model::Order;

/// `?stream=true&starting_after=N` of a read.
struct ReadQuery {
    stream: bool,
    starting_after: Option<i64>,
}

impl ReadQuery {
    fn parse(query: Option<&str>) -> Result<Self> {
        let mut read = Self { stream: false, starting_after: None };
        for (name, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            match &*name {
                "stream" => {
                    read.stream = match &*value {
                        "true" => true,
                        "false" => false,
                        _ => return Err(OpenAiError::invalid("stream", "must be true or false")),
                    }
                }
                "starting_after" => {
                    let n = value.parse::<i64>().ok().filter(|n| *n >= 0);
                    read.starting_after = Some(n.ok_or_else(|| {
                        OpenAiError::invalid(
                            "starting_after",
                            "must be a sequence number (0 or more)",
                        )
                    })?);
                }
                _ => {}
            }
        }
        Ok(read)
    }
}

/// Get a response.
///
/// With `stream=true`, its events from the start, or after `starting_after`, then live
/// until it ends.
#[utoipa::path(get, path = "/v1/responses/{response_id}", tag = "openai", operation_id = "get_response",
    params(
        ("response_id" = String, Path, description = "The response id"),
        ("stream" = Option<bool>, Query, description = "Answer with the response's events"),
        ("starting_after" = Option<i64>, Query, minimum = 0, description = "Send the events after this sequence number"),
        IncludeQuery,
    ),
    responses(
        (status = 200, description = "The response, or its events", 
            content((Object = "application/json"), (StreamEvent = "text/event-stream"))),
        OpenAiErrors,
    ))]
pub(super) async fn read(
    State(state): State<AppState>, Tenant(tenant): Tenant, Segments(id): Segments<String>,
    uri: axum::http::Uri,
) -> Result<Response> {
    let query = ReadQuery::parse(uri.query())?;
    let (record, echo) = stored(&state, &tenant, &id).await?;
    if !query.stream {
        return Ok(Json(view::response(&record.run, &echo, true)).into_response());
    }
    let session = session_of(&record.run)?;
    let events = state.runs.events(&tenant, &session, record.run.id, 0);
    let translator = ResponseStream::new(echo, query.starting_after, None);
    Ok(sse(events, translator, Handover::Never))
}

/// List a response's input items.
#[utoipa::path(get, path = "/v1/responses/{response_id}/input_items", tag = "openai", operation_id = "list_response_input_items",
    params(("response_id" = String, Path, description = "The response id"), ListQuery),
    responses((status = 200, description = "A page of the response's input", body = List<Object>), OpenAiErrors))]
pub(super) async fn input_items(
    State(state): State<AppState>, Tenant(tenant): Tenant, Segments(id): Segments<String>,
    query: ListQuery,
) -> Result<Json<List<Value>>> {
    let (record, _) = stored(&state, &tenant, &id).await?;
    let run_id = record.run.id;
    let mut items: Vec<Value> = (record.run.input.iter().enumerate())
        .map(|(i, item)| item_view(item, &ids::input_item(run_id, i)))
        .collect();
    if query.order == Order::Desc {
        items.reverse();
    }
    if let Some(after) = &query.after {
        let at =
            items.iter().position(|item| item["id"].as_str() == Some(after)).ok_or_else(|| {
                OpenAiError::invalid(
                    "after",
                    format!("no item with id `{after}` in this response's input"),
                )
            })?;
        items.drain(..=at);
    }
    let more = items.len() > query.limit as usize;
    items.truncate(query.limit as usize);
    Ok(Json(List::of_items(items, more)))
}
