//! `POST /v1/responses/compact`: the LLM summarises a history the client holds (its
//! `input`) or a response's chain, and the summary comes back sealed in a `compaction`
//! item after the history's user messages, for the client to send as input later. The
//! service keeps nothing of it.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use super::errors::{OpenAiError, Result};
use super::items::{input, view, SEALED_SUMMARY};
use super::OpenAiErrors;
use crate::http::extract::{AppJson, Tenant};
use crate::http::{ApiError, AppState};
use crate::model::{Item, Order, PageRequest, SessionId, Usage};

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompactRequest {
    #[schema(min_length = 1, max_length = 256, pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$")]
    model: Option<String>,
    /// The history to compact: a string or a list of items.
    #[schema(schema_with = super::schemas::optional_input)]
    input: Option<Value>,
    /// Compact this response's chain instead.
    previous_response_id: Option<String>,
    /// Replaces the summariser's own instructions.
    instructions: Option<String>,
    /// Accepted for OpenAI's clients; the summariser has no use for them.
    #[serde(rename = "prompt_cache_key")]
    _prompt_cache_key: Option<String>,
    #[serde(rename = "prompt_cache_retention")]
    _prompt_cache_retention: Option<String>,
    #[serde(rename = "prompt_cache_options")]
    #[schema(value_type = Option<Object>)]
    _prompt_cache_options: Option<serde_json::Map<String, Value>>,
    #[serde(rename = "service_tier")]
    _service_tier: Option<String>,
}

/// Compact a history into a sealed summary.
#[utoipa::path(post, path = "/v1/responses/compact", tag = "openai", operation_id = "compact_response",
    request_body = CompactRequest,
    responses((status = 200, description = "The compacted history", body = Object), OpenAiErrors))]
pub async fn compact(
    State(state): State<AppState>, Tenant(tenant): Tenant,
    AppJson(request): AppJson<CompactRequest>,
) -> Result<Json<Value>> {
    let items = compacted(&state, &tenant, &request).await?;
    let (_, model) = super::models::resolve(&state, request.model.as_deref())?;
    let (summary, usage) = state
        .runs
        .summarise(&items, &model, request.instructions.as_deref())
        .await
        .map_err(|error| ApiError::from_runs(error, "", None))?;
    let sealed = state.sealer.seal(&tenant, SEALED_SUMMARY, &summary).await?;
    Ok(Json(compaction(&items, sealed, &usage)))
}

/// The items a request compacts: its input, or the chain of its previous response.
async fn compacted(state: &AppState, tenant: &str, request: &CompactRequest) -> Result<Vec<Value>> {
    match (&request.input, &request.previous_response_id) {
        (Some(_), Some(_)) => {
            Err(OpenAiError::invalid("previous_response_id", "cannot be combined with input"))
        }
        (None, None) => {
            Err(OpenAiError::invalid("input", "give the input to compact or previous_response_id"))
        }
        (Some(given), None) => Ok(input(&state.sealer, tenant, "input", given)
            .await?
            .into_iter()
            .map(|item| serde_json::from_str(item.into_raw().get()).expect("checked JSON"))
            .collect()),
        (None, Some(previous)) => chain(state, tenant, previous).await,
    }
}

/// The compacted history: the user's messages as they were, then the sealed summary.
fn compaction(items: &[Value], sealed: String, usage: &Usage) -> Value {
    let id = Uuid::now_v7().simple().to_string();
    let mut output: Vec<Value> = (items.iter().enumerate())
        .filter(|(_, item)| is_user_message(item))
        .map(|(i, item)| {
            let raw = serde_json::value::to_raw_value(item).expect("a value serializes");
            view(&raw, &format!("msg_{id}_{i}"))
        })
        .collect();
    output.push(
        json!({"type": "compaction", "id": format!("cmp_{id}"), "encrypted_content": sealed}),
    );
    json!({
        "id": format!("cmp_{id}"),
        "object": "response.compaction",
        "created_at": chrono::Utc::now().timestamp(),
        "output": output,
        "usage": super::responses::view::usage(usage),
    })
}

fn is_user_message(item: &Value) -> bool {
    matches!(item.get("type").and_then(Value::as_str), None | Some("message"))
        && item.get("role").and_then(Value::as_str) == Some("user")
}

/// The history of a response's session through that response's turn.
async fn chain(state: &AppState, tenant: &str, previous: &str) -> Result<Vec<Value>> {
    let record = super::responses::previous(state, tenant, previous).await?;
    let run = record.run.id;
    let session = SessionId::parse("session_id", record.run.session_id.clone())?;
    let mut items: Vec<Item> = Vec::new();
    let mut page = Some(PageRequest::first(PageRequest::MAX_LIMIT, Order::Asc));
    while let Some(request) = page {
        let found = state.store.list_items(tenant, &session, &request).await;
        let found = found.map_err(|e| ApiError::from_store(e, session.as_str(), None))?;
        page = found.next(&request);
        items.extend(found.data);
    }
    let end = items
        .iter()
        .rposition(|item| item.run_id == Some(run))
        .ok_or_else(|| OpenAiError::previous_response(previous, "is no longer in its session"))?;
    Ok(items[..=end]
        .iter()
        .map(|item| serde_json::from_str(item.item.get()).unwrap_or(Value::Null))
        .collect())
}
