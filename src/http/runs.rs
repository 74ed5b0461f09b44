//! `/v1/sessions/{session_id}/runs`: run the agent's next turn, follow it, cancel it,
//! answer its client tools.

use std::collections::BTreeMap;
use std::convert::Infallible;

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::{Stream, StreamExt};
use serde::Deserialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;
use uuid::Uuid;

use super::agents::find_agent;
use super::error::{ApiError, Result};
use super::extract::{
    idempotency_key, AppJson, AppJsonText, ListQuery, RunPath, SessionPath, Tenant,
    IDEMPOTENT_REPLAYED,
};
use super::openapi::{
    BadRequest, Conflict, Internal, KeyReused, NotFound, PayloadTooLarge, UnsupportedMediaType,
};
use super::run_schemas::{RunInput, RunStreamEvent};
use super::AppState;
use crate::model::{
    run_items, AgentConfig, IdempotencyKey, IfBusy, ItemBody, Metadata, NewRun, Order, Page, Run,
    RunConfig, RunEvent, SessionId, ToolOutput, DEFAULT_MAX_TURNS,
};
use crate::store::{self, StoreError};

/// The reads of runs, which answer at once like any other request.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/sessions/{session_id}/runs", get(list_runs))
        .route("/v1/sessions/{session_id}/runs/{run_id}", get(get_run))
}

/// The requests that wait for a run, which the request time limit must not cut off:
/// `RUN_WAIT_SECS` bounds them, or they stream exactly as long as the run lives.
pub fn waiting_router() -> Router<AppState> {
    Router::new()
        .route("/v1/sessions/{session_id}/runs", post(create_run))
        .route(
            "/v1/sessions/{session_id}/runs/{run_id}/events",
            get(run_events),
        )
        .route(
            "/v1/sessions/{session_id}/runs/{run_id}/cancel",
            post(cancel_run),
        )
        .route(
            "/v1/sessions/{session_id}/runs/{run_id}/tool_outputs",
            post(submit_tool_outputs),
        )
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRunRequest {
    /// A string (a user message), one item, or a list of 1 to 1000 items.
    #[schema(value_type = RunInput)]
    input: Box<RawValue>,
    /// An agent whose configuration overrides the session's agent.
    #[schema(
        min_length = 1,
        max_length = 128,
        pattern = "^[A-Za-z0-9_.:@-]*[A-Za-z0-9_:@-][A-Za-z0-9_.:@-]*$"
    )]
    agent_id: Option<String>,
    /// Configuration that overrides `agent_id`'s, the session's agent and the defaults.
    agent: Option<AgentConfig>,
    /// Answer with the run's events as server-sent events.
    stream: Option<bool>,
    /// Answer 202 at once; the run executes in the background.
    background: Option<bool>,
    if_busy: Option<IfBusy>,
    #[schema(value_type = Option<Metadata>)]
    metadata: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolOutputsRequest {
    /// One output for each of `required_action.tool_calls`.
    #[schema(min_items = 1, max_items = 128)]
    outputs: Vec<ToolOutput>,
    /// Answer with the run's further events as server-sent events.
    stream: Option<bool>,
}

/// The items of a run's input.
fn parse_input(input: &RawValue) -> Result<Vec<Box<RawValue>>> {
    let text = input.get().trim_start();
    if text.starts_with('"') {
        let message: String =
            serde_json::from_str(text).map_err(|e| ApiError::invalid("input", e))?;
        return Ok(vec![run_items::user_message(&message)]);
    }
    if text.starts_with('{') {
        return Ok(vec![ItemBody::new("input", input.to_owned())?.into_raw()]);
    }
    if text.starts_with('[') {
        let items: Vec<Box<RawValue>> =
            serde_json::from_str(text).map_err(|e| ApiError::invalid("input", e))?;
        return Ok(ItemBody::batch("input", items)?
            .into_iter()
            .map(ItemBody::into_raw)
            .collect());
    }
    Err(ApiError::invalid(
        "input",
        "must be a string, an item object or a list of items",
    ))
}

/// The run's configuration: inline over `agent_id`'s agent over the session's agent over
/// the server default.
async fn resolve_config(
    state: &AppState,
    tenant: &str,
    session_id: &SessionId,
    agent_id: Option<&str>,
    inline: Option<AgentConfig>,
) -> Result<RunConfig> {
    let mut config = AgentConfig {
        model: state.default_model.clone(),
        ..AgentConfig::default()
    };
    match state.store.get_session(tenant, session_id).await {
        Ok(session) => {
            if let Some(id) = session.agent_id {
                let agent = find_agent(state, tenant, &id)
                    .await
                    .map_err(|error| match error {
                        ApiError::AgentNotFound(_) => ApiError::AgentNotFound(format!(
                            "session `{}` names agent `{id}`, which does not exist",
                            session_id.as_str()
                        )),
                        other => other,
                    })?;
                config = agent.config().over(config);
            }
        }
        Err(StoreError::SessionNotFound) => {}
        Err(error) => return Err(error.into()),
    }
    if let Some(id) = agent_id {
        crate::model::AgentId::parse("agent_id", id.to_owned())?;
        config = find_agent(state, tenant, id).await?.config().over(config);
    }
    if let Some(inline) = inline {
        inline.validate("agent.", &state.runs.settings().webhooks)?;
        config = inline.over(config);
    }
    let model = config.model.ok_or_else(|| {
        ApiError::invalid(
            "agent.model",
            "no model is configured: give the agent one or set LLM_MODEL",
        )
    })?;
    Ok(RunConfig {
        model,
        instructions: config.instructions,
        temperature: config.temperature,
        max_output_tokens: config.max_output_tokens,
        tools: config.tools.unwrap_or_default(),
        max_turns: config.max_turns.unwrap_or(DEFAULT_MAX_TURNS),
        max_input_tokens: config.context.and_then(|c| c.max_input_tokens),
    })
}

/// Run the agent's next turn.
///
/// Waits for the run and answers 200 with it (or 202 when it outlasts `RUN_WAIT_SECS`);
/// with `stream: true` answers its events as `text/event-stream`; with
/// `background: true` answers 202 at once.
#[utoipa::path(
    post,
    path = "/v1/sessions/{session_id}/runs",
    tag = "runs",
    params(
        ("session_id" = String, Path, description = "The session id; created if absent"),
        ("Idempotency-Key" = Option<String>, Header, description = "Makes retries safe: the same key with the same request answers with the first request's run instead of starting another; kept for 24 hours"),
    ),
    request_body = CreateRunRequest,
    responses(
        (status = 200, description = "The finished run, or its events with `stream: true`", content(
            (Run = "application/json"),
            (RunStreamEvent = "text/event-stream"),
        ), headers(("idempotent-replayed" = String, description = "`true` when this answers a retry"))),
        (status = 202, description = "The queued (or still running) run", body = Run,
         headers(
            ("location" = String, description = "The path of the run"),
            ("idempotent-replayed" = String, description = "`true` when this answers a retry"),
        )),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        (status = 413, response = PayloadTooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = KeyReused),
        (status = 500, response = Internal),
    )
)]
async fn create_run(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    SessionPath(session_id): SessionPath,
    headers: HeaderMap,
    AppJsonText(request, body): AppJsonText<CreateRunRequest>,
) -> Result<Response> {
    let stream = request.stream.unwrap_or(false);
    let background = request.background.unwrap_or(false);
    if stream && background {
        return Err(ApiError::invalid(
            "stream",
            "cannot be combined with background: true",
        ));
    }
    let idempotency = idempotency_key(&headers)?
        .map(|key| {
            let body = std::str::from_utf8(&body).unwrap_or_default();
            IdempotencyKey::for_run(key, &session_id, body)
        })
        .transpose()?;
    let store_error = |e| ApiError::from_store(e, session_id.as_str(), None);
    if let Some(key) = &idempotency {
        let first = store::replayed_run(&*state.store, tenant, &session_id, key)
            .await
            .map_err(store_error)?;
        if let Some(run) = first {
            return answer(
                &state,
                tenant,
                &session_id,
                run,
                true,
                mode(stream, background),
            )
            .await;
        }
    }
    let input = parse_input(&request.input)?;
    let metadata = Metadata::new(request.metadata.unwrap_or_default())?;
    let config = resolve_config(
        &state,
        tenant,
        &session_id,
        request.agent_id.as_deref(),
        request.agent,
    )
    .await?;
    let run = NewRun {
        id: Uuid::now_v7(),
        input,
        config,
        metadata,
        idempotency,
    };
    // A background run is answered as queued; the others start here when they can.
    let (run, replayed) = state
        .runs
        .create(
            tenant,
            &session_id,
            run,
            request.if_busy.unwrap_or_default(),
            !background,
        )
        .await
        .map_err(store_error)?;
    answer(
        &state,
        tenant,
        &session_id,
        run,
        replayed,
        mode(stream, background),
    )
    .await
}

/// How a new run is answered.
enum Mode {
    Wait,
    Stream,
    Background,
}

fn mode(stream: bool, background: bool) -> Mode {
    match (stream, background) {
        (true, _) => Mode::Stream,
        (_, true) => Mode::Background,
        _ => Mode::Wait,
    }
}

/// Answers with a new run (or, `replayed`, an earlier request's run) in `mode`.
async fn answer(
    state: &AppState,
    tenant: &str,
    session_id: &SessionId,
    run: Run,
    replayed: bool,
    mode: Mode,
) -> Result<Response> {
    let mut response = match mode {
        Mode::Background => accepted(run),
        Mode::Stream => sse(state.runs.events(tenant, session_id, run.id, 0)),
        Mode::Wait => wait(state, tenant, session_id, run.id, 0).await?,
    };
    if replayed {
        response.headers_mut().insert(
            IDEMPOTENT_REPLAYED.clone(),
            HeaderValue::from_static("true"),
        );
    }
    Ok(response)
}

/// Waits for the run to finish or need the client: 200; 202 once `RUN_WAIT_SECS` pass.
async fn wait(
    state: &AppState,
    tenant: &str,
    session_id: &SessionId,
    run_id: Uuid,
    after: i64,
) -> Result<Response> {
    let waited = tokio::time::timeout(
        state.run_wait,
        state.runs.wait(tenant, session_id, run_id, after),
    )
    .await;
    match waited {
        Ok(run) => Ok(Json(run.map_err(|e| not_found(e, session_id, run_id))?).into_response()),
        Err(_) => {
            let run = state
                .store
                .get_run(tenant, session_id, run_id)
                .await
                .map_err(|e| not_found(e, session_id, run_id))?;
            Ok(accepted(run))
        }
    }
}

fn not_found(error: StoreError, session_id: &SessionId, run_id: Uuid) -> ApiError {
    ApiError::from_store(error, session_id.as_str(), Some(&run_id.to_string()))
}

fn accepted(run: Run) -> Response {
    let location = format!("/v1/sessions/{}/runs/{}", run.session_id, run.id);
    (
        StatusCode::ACCEPTED,
        [(header::LOCATION, location)],
        Json(run),
    )
        .into_response()
}

/// The events as server-sent events, with keep-alive comments while the run is quiet.
fn sse(events: impl Stream<Item = Result<RunEvent, StoreError>> + Send + 'static) -> Response {
    let events = events
        .take_while(|event| {
            if let Err(error) = event {
                tracing::warn!(%error, "a run's event stream broke off");
            }
            std::future::ready(event.is_ok())
        })
        .filter_map(|event| std::future::ready(event.ok()))
        .map(|event| {
            Ok::<_, Infallible>(
                Event::default()
                    .event(event.event)
                    .id(event.seq.to_string())
                    .data(event.data.get()),
            )
        });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// List a session's runs, newest first.
#[utoipa::path(
    get,
    path = "/v1/sessions/{session_id}/runs",
    tag = "runs",
    params(("session_id" = String, Path, description = "The session id"), ListQuery),
    responses(
        (status = 200, description = "A page of runs", body = Page<Run>),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
async fn list_runs(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    SessionPath(session_id): SessionPath,
    query: ListQuery,
) -> Result<Json<Page<Run>>> {
    let page = state
        .store
        .list_runs(tenant, &session_id, &query.page(Order::Desc))
        .await
        .map_err(|e| query.store_error(e, Some(session_id.as_str())))?;
    Ok(Json(page))
}

/// Get a run.
#[utoipa::path(
    get,
    path = "/v1/sessions/{session_id}/runs/{run_id}",
    tag = "runs",
    params(
        ("session_id" = String, Path, description = "The session id"),
        ("run_id" = String, Path, description = "The run id"),
    ),
    responses(
        (status = 200, description = "The run", body = Run),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
async fn get_run(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    SessionPath(session_id): SessionPath,
    run: RunPath,
) -> Result<Json<Run>> {
    let found = state
        .store
        .get_run(tenant, &session_id, run.id)
        .await
        .map_err(|e| ApiError::from_store(e, session_id.as_str(), Some(&run.raw)))?;
    Ok(Json(found))
}

/// Follow a run's events.
///
/// Replays the events from the start, or after the `Last-Event-ID` header, then follows
/// them live. The stream ends after `run.completed`, `run.failed`, `run.cancelled` or
/// `run.requires_action`.
#[utoipa::path(
    get,
    path = "/v1/sessions/{session_id}/runs/{run_id}/events",
    tag = "runs",
    params(
        ("session_id" = String, Path, description = "The session id"),
        ("run_id" = String, Path, description = "The run id"),
        ("Last-Event-ID" = Option<String>, Header, description = "Replay the events after this one (an event's `id`)"),
    ),
    responses(
        (status = 200, description = "The run's events", content((RunStreamEvent = "text/event-stream"))),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
async fn run_events(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    SessionPath(session_id): SessionPath,
    run: RunPath,
    headers: HeaderMap,
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
    state
        .store
        .get_run(tenant, &session_id, run.id)
        .await
        .map_err(|e| ApiError::from_store(e, session_id.as_str(), Some(&run.raw)))?;
    Ok(sse(state.runs.events(tenant, &session_id, run.id, after)))
}

/// Cancel a run that has not finished. Its history stays exactly as it was.
#[utoipa::path(
    post,
    path = "/v1/sessions/{session_id}/runs/{run_id}/cancel",
    tag = "runs",
    params(
        ("session_id" = String, Path, description = "The session id"),
        ("run_id" = String, Path, description = "The run id"),
    ),
    responses(
        (status = 200, description = "The cancelled run", body = Run),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        (status = 500, response = Internal),
    )
)]
async fn cancel_run(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    SessionPath(session_id): SessionPath,
    run: RunPath,
) -> Result<Json<Run>> {
    let cancelled = state
        .runs
        .cancel(tenant, &session_id, run.id)
        .await
        .map_err(|e| ApiError::from_store(e, session_id.as_str(), Some(&run.raw)))?;
    Ok(Json(cancelled))
}

/// Answer a `requires_action` run's client tool calls; the run goes on.
#[utoipa::path(
    post,
    path = "/v1/sessions/{session_id}/runs/{run_id}/tool_outputs",
    tag = "runs",
    params(
        ("session_id" = String, Path, description = "The session id"),
        ("run_id" = String, Path, description = "The run id"),
    ),
    request_body = ToolOutputsRequest,
    responses(
        (status = 200, description = "The run once it finishes or needs the client again, or its events with `stream: true`", content(
            (Run = "application/json"),
            (RunStreamEvent = "text/event-stream"),
        )),
        (status = 202, description = "The run, still executing after RUN_WAIT_SECS", body = Run),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        (status = 413, response = PayloadTooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 500, response = Internal),
    )
)]
async fn submit_tool_outputs(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    SessionPath(session_id): SessionPath,
    run: RunPath,
    AppJson(request): AppJson<ToolOutputsRequest>,
) -> Result<Response> {
    let (_, after) = state
        .store
        .submit_tool_outputs(tenant, &session_id, run.id, &request.outputs)
        .await
        .map_err(|e| ApiError::from_store(e, session_id.as_str(), Some(&run.raw)))?;
    state.runs.wake();
    if request.stream.unwrap_or(false) {
        return Ok(sse(state.runs.events(tenant, &session_id, run.id, after)));
    }
    wait(&state, tenant, &session_id, run.id, after).await
}
