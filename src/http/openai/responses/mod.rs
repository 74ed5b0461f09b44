//! `/v1/responses`: a response is a run. With `conversation` it runs on that session;
//! otherwise on a session of its own, named as the response is: empty for a stand-alone
//! response, or a fork of the previous response's session as it stood when that
//! response completed, so answering an older response branches without touching the
//! newer ones. The caller's function tools complete the response with their calls; the
//! next request's `function_call_output` items answer them.

mod request;
mod stream;
mod view;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tokio::sync::oneshot;
use utoipa::ToSchema;
use uuid::Uuid;

use super::errors::{OpenAiError, Result};
use super::ids;
use super::items::{input, view as item_view};
use super::list::{List, ListQuery};
use super::OpenAiErrors;
use crate::http::event_stream::sse;
use crate::http::extract::{AppJson, Tenant};
use crate::http::{ApiError, AppState};
use crate::model::{
    Anchor, ExpiresAfter, ForkPoint, IfBusy, NewFork, NewSession, Order, Run, RunRecord, RunStatus,
    SessionId, SessionPatch,
};
use crate::runs::{ConfigRequest, RunsError, StartRun};
use crate::store::StoreError;
pub use request::CreateResponse;
use stream::ResponseStream;

/// How long the session of an unstored response may outlive its answer, should the
/// process die before deleting it.
const UNSTORED_SECS: u64 = 3600;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/responses/{response_id}", axum::routing::delete(remove))
        .route("/v1/responses/{response_id}/cancel", post(cancel))
        .route("/v1/responses/{response_id}/input_items", get(input_items))
}

/// The routes that wait for the model, without the request time limit.
pub fn waiting_router() -> Router<AppState> {
    Router::new()
        .route("/v1/responses", post(create))
        .route("/v1/responses/{response_id}", get(read))
}

/// A response's record, if it is a stored response of the caller's.
async fn stored(
    state: &AppState,
    tenant: &str,
    id: &str,
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
fn echo_of(record: &RunRecord) -> Map<String, Value> {
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

fn session_of(run: &Run) -> Result<SessionId> {
    Ok(SessionId::parse("session_id", run.session_id.clone())?)
}

/// Where a new response runs.
struct Target {
    session: SessionId,
    if_busy: IfBusy,
    /// The session is the response's own and goes when it is answered.
    unstored: bool,
}

/// Create a response.
///
/// Runs the model over the conversation, the previous response's chain, or the input
/// alone. `stream: true` answers with OpenAI's server-sent events; `background: true`
/// answers at once with the queued response.
#[utoipa::path(post, path = "/v1/responses", tag = "openai", operation_id = "create_response",
    request_body = CreateResponse,
    responses(
        (status = 200, description = "The response, or its events with `stream: true`", 
            content((Object = "application/json"), (String = "text/event-stream"))),
        OpenAiErrors,
    ))]
async fn create(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    AppJson(request): AppJson<CreateResponse>,
) -> Result<Response> {
    let (stream, background) =
        (request.stream.unwrap_or(false), request.background.unwrap_or(false));
    let store = request.store.unwrap_or(true);
    if stream && background {
        return Err(OpenAiError::invalid("stream", "cannot be combined with background: true"));
    }
    if background && !store {
        return Err(OpenAiError::invalid(
            "background",
            "needs store: true: an unstored response cannot be polled",
        ));
    }
    if request.conversation.is_some() && request.previous_response_id.is_some() {
        return Err(OpenAiError::invalid(
            "previous_response_id",
            "cannot be combined with conversation",
        ));
    }
    let requested = match &request.model {
        Some(model) => model.clone(),
        None => state.runs.settings().default_model.clone().ok_or_else(|| {
            OpenAiError::invalid("model", "is required: no LLM_MODEL is configured")
        })?,
    };
    let model = state.model_aliases.resolve(&requested).to_owned();
    let asked = request.asked(&requested, &model)?;
    let items = match &request.input {
        Some(given) => input(&state.sealer, &tenant, "input", given).await?,
        None => return Err(OpenAiError::invalid("input", "is required")),
    };
    let run_id = Uuid::now_v7();
    let mut echo = asked.echo;
    let target = target(&state, &tenant, &request, run_id, store).await?;
    echo.insert("previous_response_id".into(), request.previous_response_id.clone().into());
    let conversation = match &request.conversation {
        Some(_) => serde_json::json!({"id": target.session.as_str()}),
        None => Value::Null,
    };
    echo.insert("conversation".into(), conversation);
    let items: Vec<Box<RawValue>> = items.into_iter().map(|item| item.into_raw()).collect();
    let start = StartRun {
        input: serde_json::value::to_raw_value(&items).expect("items serialize"),
        config: ConfigRequest {
            inline: Some(asked.config),
            sampling: asked.sampling,
            client_calls_complete: true,
            ..ConfigRequest::default()
        },
        metadata: request.metadata.clone(),
        if_busy: target.if_busy,
        background,
        idempotency: None,
        run_id: Some(run_id),
        request: Some(serde_json::value::to_raw_value(&echo).expect("the echo serializes")),
    };
    let started = state.runs.start(&tenant, &target.session, start).await;
    let run = match started {
        Ok(started) => started.run,
        Err(error) => {
            if target.unstored || request.previous_response_id.is_some() {
                let _ = state.store.delete_session(&tenant, &target.session).await;
            }
            return Err(ApiError::from_runs(error, target.session.as_str(), None).into());
        }
    };
    let reading =
        target.unstored.then(|| forget_when_done(&state, &tenant, &target.session, run.id));
    if background {
        return Ok(Json(view::response(&run, &echo, true)).into_response());
    }
    if stream {
        let events = state.runs.events(&tenant, &target.session, run.id, 0);
        return Ok(sse(events, ResponseStream::new(echo, None, reading)));
    }
    let waited =
        tokio::time::timeout(state.run_wait, state.runs.wait(&tenant, &target.session, run.id, 0))
            .await;
    drop(reading);
    let run = match waited {
        Ok(run) => run.map_err(|e| ApiError::from_runs(e, target.session.as_str(), None))?,
        Err(_) => run,
    };
    Ok(Json(view::response(&run, &echo, true)).into_response())
}

/// The session a new response runs on, made ready.
async fn target(
    state: &AppState,
    tenant: &str,
    request: &CreateResponse,
    run_id: Uuid,
    store: bool,
) -> Result<Target> {
    let own = SessionId::parse("id", ids::own_session(run_id))?;
    let unstored_expiry =
        Some(Some(ExpiresAfter { anchor: Anchor::CreatedAt, seconds: UNSTORED_SECS }));
    let (source, point) = if let Some(conversation) = &request.conversation {
        let id = request::conversation_id(conversation)?;
        let not_found = || {
            OpenAiError::Api(ApiError::SessionNotFound(format!("no conversation with id `{id}`")))
        };
        let session = SessionId::parse("conversation", id.clone()).map_err(|_| not_found())?;
        match state.store.get_session(tenant, &session).await {
            Ok(_) => {}
            Err(StoreError::SessionNotFound) => return Err(not_found()),
            Err(error) => return Err(error.into()),
        }
        if store {
            return Ok(Target { session, if_busy: IfBusy::Enqueue, unstored: false });
        }
        (session, ForkPoint::All)
    } else if let Some(previous) = &request.previous_response_id {
        let (record, _) = stored(state, tenant, previous).await.map_err(|error| match error {
            OpenAiError::Own { status: StatusCode::NOT_FOUND, .. } => {
                OpenAiError::previous_response(previous, "is not a stored response")
            }
            other => other,
        })?;
        if record.run.status != RunStatus::Completed {
            return Err(OpenAiError::previous_response(previous, "has not completed"));
        }
        (session_of(&record.run)?, ForkPoint::AfterRun(record.run.id))
    } else {
        if !store {
            let new = NewSession {
                id: own.clone(),
                metadata: Default::default(),
                agent_id: None,
                expires_after: unstored_expiry,
            };
            state.store.create_session(tenant, new).await?;
        }
        return Ok(Target { session: own, if_busy: IfBusy::Reject, unstored: !store });
    };
    let fork = NewFork { id: own.clone(), metadata: None, point, idempotency: None };
    match state.store.fork_session(tenant, &source, fork).await {
        Ok(_) => {}
        Err(StoreError::RunNotFound | StoreError::SessionNotFound) => {
            let previous = request.previous_response_id.as_deref().unwrap_or_default();
            return Err(OpenAiError::previous_response(previous, "is no longer in its session"));
        }
        Err(error) => return Err(error.into()),
    }
    let expiry = if store { None } else { unstored_expiry };
    if let Some(expires_after) = expiry {
        let patch = SessionPatch { expires_after: Some(expires_after), ..SessionPatch::default() };
        state.store.update_session(tenant, &own, patch).await?;
    }
    Ok(Target { session: own, if_busy: IfBusy::Reject, unstored: !store })
}

/// Deletes an unstored response's session once it has finished and its answer was read
/// (the returned sender dropped), whether the client stayed or not.
fn forget_when_done(
    state: &AppState,
    tenant: &str,
    session: &SessionId,
    run: Uuid,
) -> oneshot::Sender<()> {
    let (reading, read) = oneshot::channel::<()>();
    let (state, tenant, session) = (state.clone(), tenant.to_owned(), session.clone());
    tokio::spawn(async move {
        let _ = read.await;
        if let Err(error) = state.runs.wait(&tenant, &session, run, 0).await {
            tracing::warn!(%error, "cannot wait for an unstored response");
        }
        if let Err(error) = state.store.delete_session(&tenant, &session).await {
            tracing::warn!(%error, "cannot delete an unstored response; it expires within the hour");
        }
    });
    reading
}

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
        ("include" = Option<Vec<String>>, Query, description = "Accepted for OpenAI's clients"),
    ),
    responses(
        (status = 200, description = "The response, or its events", 
            content((Object = "application/json"), (String = "text/event-stream"))),
        OpenAiErrors,
    ))]
async fn read(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Path(id): Path<String>,
    uri: axum::http::Uri,
) -> Result<Response> {
    let query = ReadQuery::parse(uri.query())?;
    let (record, echo) = stored(&state, &tenant, &id).await?;
    if !query.stream {
        return Ok(Json(view::response(&record.run, &echo, true)).into_response());
    }
    let session = session_of(&record.run)?;
    let events = state.runs.events(&tenant, &session, record.run.id, 0);
    Ok(sse(events, ResponseStream::new(echo, query.starting_after, None)))
}

#[derive(Serialize, ToSchema)]
pub struct ResponseDeleted {
    id: String,
    /// `response.deleted`.
    object: &'static str,
    deleted: bool,
}

/// Delete a response.
///
/// A response without a conversation goes with its session; one in a conversation
/// leaves its turn there.
#[utoipa::path(delete, path = "/v1/responses/{response_id}", tag = "openai", operation_id = "delete_response",
    params(("response_id" = String, Path, description = "The response id")),
    responses((status = 200, description = "Deleted", body = ResponseDeleted), OpenAiErrors))]
async fn remove(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Path(id): Path<String>,
) -> Result<Json<ResponseDeleted>> {
    let (record, _) = stored(&state, &tenant, &id).await?;
    let session = session_of(&record.run)?;
    if !record.run.status.is_final() {
        return Err(ApiError::SessionBusy(format!(
            "response `{id}` has not finished; cancel it first"
        ))
        .into());
    }
    let deleted = if session.as_str() == ids::own_session(record.run.id) {
        state.store.delete_session(&tenant, &session).await.map_err(RunsError::from)
    } else {
        state.runs.delete(&tenant, &session, record.run.id).await
    };
    match deleted {
        Ok(()) | Err(RunsError::Store(StoreError::SessionNotFound | StoreError::RunNotFound)) => {}
        Err(error) => return Err(ApiError::from_runs(error, session.as_str(), Some(&id)).into()),
    }
    Ok(Json(ResponseDeleted { id, object: "response.deleted", deleted: true }))
}

/// Cancel a response that has not finished; a finished one is answered as it is.
#[utoipa::path(post, path = "/v1/responses/{response_id}/cancel", tag = "openai", operation_id = "cancel_response",
    params(("response_id" = String, Path, description = "The response id")),
    responses((status = 200, description = "The response", body = Object), OpenAiErrors))]
async fn cancel(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    let (record, echo) = stored(&state, &tenant, &id).await?;
    let session = session_of(&record.run)?;
    let run = match state.runs.cancel(&tenant, &session, record.run.id).await {
        Ok(run) => run,
        Err(RunsError::Store(StoreError::RunFinished(_))) => state
            .runs
            .get(&tenant, &session, record.run.id)
            .await
            .map_err(|e| ApiError::from_runs(e, session.as_str(), Some(&id)))?,
        Err(error) => return Err(ApiError::from_runs(error, session.as_str(), Some(&id)).into()),
    };
    Ok(Json(view::response(&run, &echo, true)))
}

/// List a response's input items.
#[utoipa::path(get, path = "/v1/responses/{response_id}/input_items", tag = "openai", operation_id = "list_response_input_items",
    params(("response_id" = String, Path, description = "The response id"), ListQuery),
    responses((status = 200, description = "A page of the response's input", body = List<Object>), OpenAiErrors))]
async fn input_items(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Path(id): Path<String>,
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
    let id_of = |item: Option<&Value>| item.and_then(|i| i["id"].as_str()).map(str::to_owned);
    let (first, last) = (id_of(items.first()), id_of(items.last()));
    Ok(Json(List::new(items, first, last, more)))
}
