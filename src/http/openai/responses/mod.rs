//! `/v1/responses`: a response is a run. With `conversation` it runs on that session;
//! otherwise on a session of its own, named as the response is: empty for a stand-alone
//! response, or a fork of the previous response's session as it stood when that
//! response completed, so answering an older response branches without touching the
//! newer ones. The caller's function tools complete the response with their calls; the
//! next request's `function_call_output` items answer them.

mod answered_calls;
pub(in crate::http) mod control;
pub(in crate::http) mod create;
pub(super) mod events;
pub(in crate::http) mod read;
mod request;
mod run_options;
mod stream;
pub(super) mod view;

use axum::http::StatusCode;
use axum::routing::{delete, get, post};
use axum::Router;
use serde_json::{Map, Value};

use super::errors::{OpenAiError, Result};
use super::ids;
use crate::http::{ApiError, AppState};
use crate::model::{Run, RunRecord, SessionId};
use crate::runs::RunsError;
use crate::store::StoreError;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/responses/{response_id}", delete(control::remove))
        .route("/v1/responses/{response_id}/cancel", post(control::cancel))
        .route("/v1/responses/{response_id}/input_items", get(read::input_items))
}

/// The routes that wait for the model, without the request time limit.
pub fn waiting_router() -> Router<AppState> {
    Router::new()
        .route("/v1/responses", post(create::create))
        .route("/v1/responses/{response_id}", get(read::read))
}

/// A response's record, if it is a stored response of the caller's.
pub(super) async fn stored(
    state: &AppState, tenant: &str, id: &str,
) -> Result<(RunRecord, Map<String, Value>)> {
    let run = ids::run_of(id).ok_or_else(|| OpenAiError::response_not_found(id))?;
    let record = match state.runs.locate(tenant, run).await {
        Ok(record) => record,
        Err(RunsError::Store(StoreError::RunNotFound)) => {
            return Err(OpenAiError::response_not_found(id))
        }
        Err(error) => return Err(ApiError::from_runs(error, "", Some(id)).into()),
    };
    let echo = echo_of(&record);
    if echo.get("store") == Some(&Value::Bool(false)) {
        return Err(OpenAiError::response_not_found(id));
    }
    Ok((record, echo))
}

/// What the adapter kept of a run's request; for a native run, what its configuration
/// says.
pub(super) fn echo_of(record: &RunRecord) -> Map<String, Value> {
    let kept = record.request.as_ref().and_then(|raw| serde_json::from_str(raw.get()).ok());
    kept.unwrap_or_else(|| {
        let mut echo = Map::new();
        echo.insert("model".into(), record.config.model.clone().into());
        echo.insert("instructions".into(), record.config.instructions.clone().into());
        echo.insert("tools".into(), Value::Array(Vec::new()));
        echo.insert("tool_choice".into(), "auto".into());
        echo.insert("parallel_tool_calls".into(), true.into());
        echo
    })
}

/// The stored, completed response `id` that a request answers from or compacts:
/// anything else is 400 `previous_response_not_found`.
pub(super) async fn previous(state: &AppState, tenant: &str, id: &str) -> Result<RunRecord> {
    let (record, _) = stored(state, tenant, id).await.map_err(|error| match error {
        OpenAiError::Own { status: StatusCode::NOT_FOUND, .. } => {
            OpenAiError::previous_response(id, "is not a stored response")
        }
        other => other,
    })?;
    if record.run.status != crate::model::RunStatus::Completed {
        return Err(OpenAiError::previous_response(id, "has not completed"));
    }
    Ok(record)
}

pub(super) fn session_of(run: &Run) -> Result<SessionId> {
    Ok(SessionId::parse("session_id", run.session_id.clone())?)
}
