//! Creating a response: where it runs, the run it is, and how it is answered.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::super::schemas::StreamEvent;
use super::request::{self, Asked, CreateResponse};
use super::stream::ResponseStream;
use super::{answered_calls, session_of, view};
use crate::http::event_stream::{sse, Handover};
use crate::http::extract::{AppJson, Tenant};
use crate::http::openai::errors::{OpenAiError, Result};
use crate::http::openai::items::input;
use crate::http::openai::{conversations, ids, models, OpenAiErrors};
use crate::http::{ApiError, AppState};
use crate::model::{ForkPoint, IfBusy, ItemBody, RunStatus, SessionId};
use crate::runs::{ConfigRequest, Placed, Placement, RunsError, StartRun, Started};
use crate::store::StoreError;

/// Create a response.
///
/// Runs the model over the conversation, the previous response's chain, or the input
/// alone. `stream: true` answers with OpenAI's server-sent events; `background: true`
/// answers at once with the queued response, or with both its events, which a client
/// that left resumes with `GET /v1/responses/{id}?stream=true&starting_after=N`. A
/// response waited for that fails answers the status of the cause (429, 400, 502, 504,
/// 500) in OpenAI's error shape; a stored one stays retrievable under the id its message
/// names.
#[utoipa::path(post, path = "/v1/responses", tag = "openai", operation_id = "create_response",
    request_body = CreateResponse,
    responses(
        (status = 200, description = "The response, or its events with `stream: true`", 
            content((Object = "application/json"), (StreamEvent = "text/event-stream"))),
        OpenAiErrors,
    ))]
pub(super) async fn create(
    State(state): State<AppState>, Tenant(tenant): Tenant,
    AppJson(request): AppJson<CreateResponse>,
) -> Result<Response> {
    let answering = Answering::of(&request)?;
    let (requested, model) = models::resolve(&state, request.model.as_deref())?;
    let asked = request.asked(&requested, &model)?;
    // Checked here too, so that a refusal names the request's own fields.
    asked.config.validate("", &state.runs.settings().webhooks).map_err(ApiError::from)?;
    let Some(given) = &request.input else {
        return Err(OpenAiError::invalid("input", "is required"));
    };
    let items = input(&state.sealer, &tenant, "input", given).await?;
    let run_id = Uuid::now_v7();
    let target = target(&state, &tenant, &request, run_id, answering.store).await?;
    let continued = request.conversation.is_some() || request.previous_response_id.is_some();
    let history = continued.then_some(&target.session);
    if let Err(error) = answered_calls::check(&state, &tenant, history, given).await {
        let unknown = error.is_conversation_not_found();
        return Err(refused(&state, &tenant, &request, &target, unknown, error).await);
    }
    let (start, echo) = run_of(&request, asked, &target, items, run_id, answering.background);
    let started = match state.runs.start(&tenant, &target.session, start).await {
        Ok(started) => started,
        Err(error) => return Err(not_started(&state, &tenant, &request, &target, error).await),
    };
    answering.answer(&state, &tenant, &target, started, echo).await
}

/// The run a response is, and what its request echoes back: the request's own fields,
/// with the conversation named by the session it runs on.
fn run_of(
    request: &CreateResponse, asked: Asked, target: &Placed, items: Vec<ItemBody>, run_id: Uuid,
    background: bool,
) -> (StartRun, Map<String, Value>) {
    let mut echo = asked.echo;
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
            existing_session: request.conversation.is_some(),
            ..ConfigRequest::default()
        },
        metadata: request.metadata.clone(),
        if_busy: target.if_busy,
        background,
        idempotency: None,
        if_match: None,
        run_id: Some(run_id),
        request: Some(serde_json::value::to_raw_value(&echo).expect("the echo serializes")),
    };
    (start, echo)
}

/// How a response is answered, from the request's `stream`, `background` and `store`.
struct Answering {
    stream: bool,
    background: bool,
    store: bool,
}

impl Answering {
    fn of(request: &CreateResponse) -> Result<Self> {
        let answering = Self {
            stream: request.stream.unwrap_or(false),
            background: request.background.unwrap_or(false),
            store: request.store.unwrap_or(true),
        };
        if answering.background && !answering.store {
            return Err(OpenAiError::invalid(
                "background",
                "needs store: true: an unstored response cannot be polled",
            ));
        }
        if request.conversation.is_some() && request.previous_response_id.is_some() {
            return Err(OpenAiError::mutually_exclusive("previous_response_id", "conversation"));
        }
        Ok(answering)
    }

    /// The answer to a response that started: its events, the queued response, or the
    /// response when it ends.
    async fn answer(
        self, state: &AppState, tenant: &str, target: &Placed, started: Started,
        echo: Map<String, Value>,
    ) -> Result<Response> {
        let session = &target.session;
        let reading = (target.ephemeral)
            .then(|| state.runs.forget_when_done(tenant, session, started.run.id));
        if self.stream {
            let events = state.runs.started_events(tenant, session, &started);
            // OpenAI's clients do not reconnect: the stream stays open until the shutdown
            // deadline rather than end without the response's last event. A response in
            // the background goes on when its client leaves, as every run does, and is
            // resumed with `GET …?stream=true&starting_after=N`.
            return Ok(sse(events, ResponseStream::new(echo, None, reading), Handover::Never));
        }
        if self.background {
            return Ok(Json(view::response(&started.run, &echo, true)).into_response());
        }
        // Answered when it ends, as OpenAI does, however long that takes: OpenAI's
        // clients take any answer for the final one. RUN_WAIT_SECS bounds native runs
        // only; the LLM's timeouts and `max_turns` bound this wait.
        let waited = state.runs.wait_started(tenant, session, &started).await;
        drop(reading);
        let run = waited.map_err(|e| ApiError::from_runs(e, session.as_str(), None))?;
        match (&run.error, run.status) {
            (Some(error), RunStatus::Failed) => {
                let id = ids::response_id(run.id);
                Err(OpenAiError::failed_response(self.store.then_some(id.as_str()), error))
            }
            _ => Ok(Json(view::response(&run, &echo, true)).into_response()),
        }
    }
}

/// The answer to a response whose run did not start: a busy conversation names the
/// response in progress by its `resp_` id.
async fn not_started(
    state: &AppState, tenant: &str, request: &CreateResponse, target: &Placed, error: RunsError,
) -> OpenAiError {
    let unknown = matches!(error, RunsError::Store(StoreError::SessionNotFound));
    let error = match error {
        RunsError::Store(StoreError::SessionBusy(active)) => {
            OpenAiError::conversation_busy(target.session.as_str(), &ids::response_id(active))
        }
        error => ApiError::from_runs(error, target.session.as_str(), None).into(),
    };
    refused(state, tenant, request, target, unknown, error).await
}

/// The answer to a response refused after its session was made ready: that session goes
/// if it was the response's own, and a conversation found `unknown` is OpenAI's 404.
async fn refused(
    state: &AppState, tenant: &str, request: &CreateResponse, target: &Placed, unknown: bool,
    error: OpenAiError,
) -> OpenAiError {
    state.runs.unplace(tenant, target).await;
    match request.conversation.as_ref().filter(|_| unknown) {
        Some(conversation) => match request::conversation_id(conversation) {
            Ok(id) => conversations::not_found(&id),
            Err(error) => error,
        },
        None => error,
    }
}

/// The session a new response runs on, made ready: the conversation, a fork of it for
/// an unstored response, a fork of the previous response's session as that response
/// left it, or a session of the response's own.
async fn target(
    state: &AppState, tenant: &str, request: &CreateResponse, run_id: Uuid, store: bool,
) -> Result<Placed> {
    let own = SessionId::parse("id", ids::own_session(run_id))?;
    let placement = if let Some(conversation) = &request.conversation {
        let id = request::conversation_id(conversation)?;
        if store {
            // The run's start reads the session anyway, and refuses an unknown one.
            let session = conversations::parse_id(&id)?;
            Placement::On { session, if_busy: request.if_busy.unwrap_or(IfBusy::Enqueue) }
        } else {
            let source = conversations::existing(state, tenant, &id).await?.0;
            Placement::Fork { source, point: ForkPoint::All }
        }
    } else if let Some(previous) = &request.previous_response_id {
        let record = super::previous(state, tenant, previous).await?;
        let point = ForkPoint::AfterRun(record.run.id);
        Placement::Fork { source: session_of(&record.run)?, point }
    } else {
        Placement::Alone
    };
    let placed = state.runs.place(tenant, own, placement, !store).await;
    placed.map_err(|error| match error {
        StoreError::RunNotFound | StoreError::SessionNotFound => {
            let previous = request.previous_response_id.as_deref().unwrap_or_default();
            OpenAiError::previous_response(previous, "is no longer in its session")
        }
        error => error.into(),
    })
}
