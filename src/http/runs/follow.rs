//! How a run is answered: waited for, streamed as server-sent events, or accepted.

use std::future::Future;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use axum::Json;
use uuid::Uuid;

use super::schemas::RunStreamEvent;
use crate::http::error::{ApiError, Lookup, Result};
use crate::http::event_stream::{sse, Handover, Translator};
use crate::http::extract::TenantRun;
use crate::http::AppState;
use crate::model::{Run, RunEvent, SessionId};
use crate::runs::{RunsError, Started};

/// How a new run is answered.
pub(super) enum Mode {
    Wait,
    Stream,
    Background,
}

impl Mode {
    pub(super) fn new(stream: bool, background: bool) -> Result<Self> {
        match (stream, background) {
            (true, true) => {
                Err(ApiError::invalid("stream", "cannot be combined with background: true"))
            }
            (true, false) => Ok(Self::Stream),
            (false, true) => Ok(Self::Background),
            (false, false) => Ok(Self::Wait),
        }
    }
}

/// Answers with a run just started (or an earlier request's run) in `mode`.
pub(super) async fn answer(
    state: &AppState, tenant: &str, session_id: &SessionId, started: Started, mode: Mode,
) -> Result<Response> {
    Ok(match mode {
        Mode::Background => accepted(started.run),
        Mode::Stream => sse(
            state.runs.started_events(tenant, session_id, &started),
            Native,
            Handover::ReconnectAfterFirst(&state.closing),
        ),
        Mode::Wait => {
            let waited = state.runs.wait_started(tenant, session_id, &started);
            settle(state, tenant, session_id, started.run.id, waited).await?
        }
    })
}

/// Waits for the run to finish or need the client: 200; 202 once `RUN_WAIT_SECS` pass.
pub(super) async fn wait(
    state: &AppState, tenant: &str, session_id: &SessionId, run_id: Uuid, after: i64,
) -> Result<Response> {
    let waited = state.runs.wait(tenant, session_id, run_id, after);
    settle(state, tenant, session_id, run_id, waited).await
}

/// The run as `waited` ends it, or as it is when `RUN_WAIT_SECS` pass (202).
async fn settle(
    state: &AppState, tenant: &str, session_id: &SessionId, run_id: Uuid,
    waited: impl Future<Output = Result<Run, RunsError>>,
) -> Result<Response> {
    let not_found = |e| ApiError::from_runs(e, session_id.as_str(), Some(&run_id.to_string()));
    match tokio::time::timeout(state.run_wait, waited).await {
        Ok(run) => Ok(Json(run.map_err(not_found)?).into_response()),
        Err(_) => {
            let run = state.runs.get(tenant, session_id, run_id).await.map_err(not_found)?;
            Ok(accepted(run))
        }
    }
}

fn accepted(run: Run) -> Response {
    let location = format!("/v1/sessions/{}/runs/{}", run.session_id, run.id);
    (StatusCode::ACCEPTED, [(header::LOCATION, location)], Json(run)).into_response()
}

/// The native stream: each event as it is, named, numbered by its seq, its data JSON.
pub(super) struct Native;

impl Translator for Native {
    fn translate(&mut self, event: &RunEvent) -> Vec<Event> {
        vec![Event::default().event(event.name()).id(event.seq.to_string()).data(event.data_json())]
    }
}

/// Follow a run's events.
///
/// Replays the events from the start, or after the `Last-Event-ID` header, then follows
/// them live. The stream ends after `run.completed`, `run.failed`, `run.cancelled`,
/// `run.interrupted` or `run.requires_action`, or with the comment `: shutting down:
/// reconnect with Last-Event-ID` when the replica stops: follow again from the last id.
/// Ids increase through a run but may skip: a run executed again after its replica died
/// starts 10,000 past its last stored event, with a new `run.started`.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/runs/{run_id}/events", tag = "runs",
    params(
        TenantRun,
        ("Last-Event-ID" = Option<String>, Header, description = "Replay the events after this one (an event's `id`)"),
    ),
    responses(
        (status = 200, description = "The run's events", content((RunStreamEvent = "text/event-stream"))),
        Lookup,
    ))]
pub async fn run_events(
    State(state): State<AppState>, run: TenantRun, headers: HeaderMap,
) -> Result<Response> {
    let after = match headers.get("last-event-id") {
        None => 0,
        Some(value) => value
            .to_str()
            .ok()
            .map(str::trim)
            .filter(|v| (1..=18).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|v| v.parse::<i64>().ok())
            .ok_or_else(|| {
                ApiError::invalid("Last-Event-ID", "must be an event id (1 to 18 digits)")
            })?,
    };
    state.runs.get(&run.tenant, &run.session, run.id).await.map_err(|e| run.runs_error(e))?;
    let events = state.runs.events(&run.tenant, &run.session, run.id, after);
    Ok(sse(events, Native, Handover::Reconnect(&state.closing)))
}
