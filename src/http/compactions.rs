//! `/v1/sessions/{session_id}/compact`, `…/compactions` and `…/context`: summarising a
//! session's older items, the summaries made, and what a run sends of the session.

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

use super::answer::Created;
use super::error::Result;
use super::error::{Conflict, JsonBody, LlmFailed, Lookup};
use super::extract::{AppJson, TenantSession};
use super::list_query::ListQuery;
use super::revision::IfMatchHeader;
use super::AppState;
use crate::model::{Compaction, Order, Page, DEFAULT_KEEP_RECENT_ITEMS};
use crate::runs::CompactRequest;

/// The reads, which answer at once like any other request.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/sessions/{session_id}/compactions", get(list_compactions))
        .route("/v1/sessions/{session_id}/context", get(get_context))
}

/// Compacting waits for the LLM, which its own timeouts bound, not the request limit.
pub fn waiting_router() -> Router<AppState> {
    Router::new().route("/v1/sessions/{session_id}/compact", post(compact))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompactRequestBody {
    /// The newest items left out of the summary; 10 when absent. A tool call and its
    /// output are never split: a pair on the boundary is kept whole.
    #[serde(default, deserialize_with = "crate::model::whole_optional")]
    #[schema(minimum = 0, maximum = 1000)]
    keep_recent_items: Option<u32>,
    /// The model that summarises; the session's agent's (or the server's default) when
    /// absent.
    #[schema(min_length = 1, max_length = 256, pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$")]
    model: Option<String>,
    /// Replaces the built-in summarisation prompt, which keeps facts, decisions, open
    /// tasks, names and numbers.
    instructions: Option<String>,
}

/// What a run sends of a session.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextResponse {
    /// The latest summary as `{"type": "compaction", "summary": …}` (when the session
    /// has been compacted), then every item after it, as stored.
    #[schema(value_type = Vec<Object>)]
    data: Vec<Box<RawValue>>,
    /// The compaction whose summary comes first; null when there is none.
    #[schema(required = true)]
    compaction: Option<Compaction>,
}

/// Compact a session: summarise every item older than the newest `keep_recent_items`.
///
/// The items stay (`…/items` still returns them); runs send the summary and the items
/// after it instead. An earlier summary is folded into the new one.
#[utoipa::path(post, path = "/v1/sessions/{session_id}/compact", tag = "compactions",
    params(TenantSession, IfMatchHeader), request_body = CompactRequestBody,
    responses(
        (status = 201, description = "The new compaction", body = Compaction),
        Lookup,
        JsonBody,
        (status = 409, response = Conflict),
        (status = 429, response = LlmFailed),
        (status = 502, response = LlmFailed),
        (status = 504, response = LlmFailed),
    ))]
async fn compact(
    State(state): State<AppState>, session: TenantSession, IfMatchHeader(if_match): IfMatchHeader,
    AppJson(request): AppJson<CompactRequestBody>,
) -> Result<Created<Compaction>> {
    let request = CompactRequest {
        keep_recent_items: request.keep_recent_items.unwrap_or(DEFAULT_KEEP_RECENT_ITEMS),
        model: request.model,
        instructions: request.instructions,
        if_match,
    };
    state
        .runs
        .compact(&session.tenant, &session.id, request)
        .await
        .map(Created::new)
        .map_err(|e| session.runs_error(e))
}

/// List a session's compactions, newest first.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/compactions", tag = "compactions",
    params(TenantSession, ListQuery),
    responses(
        (status = 200, description = "A page of compactions", body = Page<Compaction>),
        Lookup,
    ))]
async fn list_compactions(
    State(state): State<AppState>, session: TenantSession, query: ListQuery,
) -> Result<Json<Page<Compaction>>> {
    let answer =
        state.store.list_compactions(&session.tenant, &session.id, &query.page(Order::Desc)).await;
    answer.map(Json).map_err(|e| query.store_error(e, Some(session.id.as_str())))
}

/// What a run sends of the session: the latest summary, then every item after it (every
/// item when the session has no compaction).
#[utoipa::path(get, path = "/v1/sessions/{session_id}/context", tag = "compactions",
    params(TenantSession),
    responses(
        (status = 200, description = "The session's context", body = ContextResponse),
        Lookup,
    ))]
async fn get_context(
    State(state): State<AppState>, session: TenantSession,
) -> Result<Json<ContextResponse>> {
    let context = state
        .store
        .context(&session.tenant, &session.id, false)
        .await
        .map_err(|e| session.store_error(e))?;
    let summary = context.compaction.as_ref().map(|c| {
        let item = serde_json::json!({"type": "compaction", "summary": c.summary});
        RawValue::from_string(item.to_string()).expect("serialized JSON is valid")
    });
    let data = summary.into_iter().chain(context.items.into_iter().map(|i| i.item)).collect();
    Ok(Json(ContextResponse { data, compaction: context.compaction }))
}
