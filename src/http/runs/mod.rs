//! `/v1/sessions/{session_id}/runs`: run the agent's next turn, follow it, cancel it,
//! answer its client tools. Parsing and answering only: the use cases are `crate::runs`.

mod answers;
mod control;
mod follow;
mod schemas;
mod stop_query;

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;

use super::answer::Replayed;
use super::error::{JsonWrite, Lookup, Result};
use super::extract::{AppJsonText, Preconditions, TenantSession};
use super::AppState;
use crate::model::{
    AgentConfig, CompletionWebhook, IdempotencyKey, Identifier, IfBusy, Metadata, Run,
};
use crate::runs::{ConfigRequest, StartRun};
pub(super) use answers::{__path_submit_approvals, __path_submit_tool_outputs};
pub(super) use control::{__path_cancel_run, __path_get_run, __path_list_runs};
pub(super) use follow::__path_run_events;
use follow::Mode;
use schemas::RunInput;
pub use schemas::RunStreamEvent;

/// The reads of runs, which answer at once like any other request.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/sessions/{session_id}/runs", get(control::list_runs))
        .route("/v1/sessions/{session_id}/runs/{run_id}", get(control::get_run))
}

/// The requests that wait for a run, which the request time limit must not cut off:
/// `RUN_WAIT_SECS` bounds them, or they stream exactly as long as the run lives.
pub fn waiting_router() -> Router<AppState> {
    Router::new()
        .route("/v1/sessions/{session_id}/runs", post(create_run))
        .route("/v1/sessions/{session_id}/runs/{run_id}/events", get(follow::run_events))
        .route("/v1/sessions/{session_id}/runs/{run_id}/cancel", post(control::cancel_run))
        .route(
            "/v1/sessions/{session_id}/runs/{run_id}/tool_outputs",
            post(answers::submit_tool_outputs),
        )
        .route("/v1/sessions/{session_id}/runs/{run_id}/approvals", post(answers::submit_approvals))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRunRequest {
    /// A string (a user message), one item, or a list of 1 to 1000 items.
    #[schema(value_type = RunInput)]
    input: Box<RawValue>,
    /// An agent whose configuration overrides the session's agent.
    #[schema(value_type = Option<Identifier>, inline)]
    agent_id: Option<String>,
    /// Configuration that overrides `agent_id`'s, the session's agent and the defaults.
    agent: Option<AgentConfig>,
    /// Answer with the run's events as server-sent events.
    stream: Option<bool>,
    /// Answer 202 at once; the run executes in the background.
    background: Option<bool>,
    if_busy: Option<IfBusy>,
    /// Where the run is posted when it finishes or waits for the client; over the
    /// agent's `webhook`.
    webhook: Option<CompletionWebhook>,
    #[schema(value_type = Option<Metadata>)]
    metadata: Option<BTreeMap<String, String>>,
}

/// Run the agent's next turn, creating the session if it does not exist.
///
/// Waits for the run and answers 200 with it (or 202 when it outlasts `RUN_WAIT_SECS`);
/// with `stream: true` answers its events as `text/event-stream`; with
/// `background: true` answers 202 at once. With `If-Match`, the run is created only while
/// the session is at that revision (creating a run does not change it).
#[utoipa::path(post, path = "/v1/sessions/{session_id}/runs", tag = "runs",
    params(TenantSession, Preconditions),
    request_body = CreateRunRequest,
    responses(
        (status = 200, description = "The finished run, or its events with `stream: true`", content((Run = "application/json"), (RunStreamEvent = "text/event-stream"))),
        (status = 202, description = "The queued (or still running) run", body = Run, headers(("location" = String, description = "The path of the run"))),
        Lookup,
        JsonWrite,
    ))]
async fn create_run(
    State(state): State<AppState>, session: TenantSession, preconditions: Preconditions,
    AppJsonText(request, text): AppJsonText<CreateRunRequest>,
) -> Result<(Replayed, Response)> {
    let mode = Mode::new(request.stream.unwrap_or(false), request.background.unwrap_or(false))?;
    let idempotency = preconditions.key(|key, if_match| {
        // A retry must ask for the same revision as the first request.
        let asked = match if_match {
            Some(if_match) => format!("{text}\0{if_match:?}"),
            None => text,
        };
        IdempotencyKey::for_run(key, &session.id, &asked)
    })?;
    let if_match = preconditions.if_match;
    let start = StartRun {
        input: request.input,
        config: ConfigRequest {
            agent_id: request.agent_id,
            inline: request.agent,
            webhook: request.webhook,
            ..ConfigRequest::default()
        },
        metadata: request.metadata,
        if_busy: request.if_busy.unwrap_or_default(),
        background: matches!(mode, Mode::Background),
        idempotency,
        if_match,
        run_id: None,
        request: None,
    };
    let started = state
        .runs
        .start(&session.tenant, &session.id, start)
        .await
        .map_err(|e| session.runs_error(e))?;
    let replayed = Replayed(started.replayed);
    let answer = follow::answer(&state, &session.tenant, &session.id, started, mode).await?;
    Ok((replayed, answer))
}
