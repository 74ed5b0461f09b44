//! The Vercel AI SDK's chat (docs/web-frontends.md), on the paths `useChat` and its
//! `DefaultChatTransport` use by default, so a page needs only
//! `new DefaultChatTransport({api: ".../v1/chat"})`: the chat id is the session id, a
//! message is an ordinary run's input, and the run's events are translated into the UI
//! message stream.

mod chunks;
mod messages;
mod parts;
mod request;
mod schemas;
mod stream;

use std::collections::HashSet;

use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::error::{BadRequest, Conflict, JsonBody, Lookup, Result};
use super::event_stream::{sse, Handover};
use super::extract::{AppJson, Tenant, TenantSession};
use super::list_query::page_limit;
use super::{ApiError, AppState};
use crate::model::{
    run_items, IfBusy, Order, PageRequest, RequiredAction, Run, RunStatus, SessionId,
};
use crate::runs::{self, ConfigRequest, StartRun, Started};
use crate::store::StoreError;
use messages::{History, UiMessage};
use request::{Ask, ChatRequest};
pub use schemas::UiMessageChunk;
use stream::UiMessageStream;

/// The chat's history, answered within the request time limit.
pub fn router() -> Router<AppState> {
    Router::new().route("/v1/chat/{session_id}/messages", get(chat_messages))
}

/// The chat's streams, which last as long as their runs.
pub fn waiting_router() -> Router<AppState> {
    Router::new()
        .route("/v1/chat", post(chat))
        .route("/v1/chat/{session_id}/stream", get(resume_stream))
}

/// Send a chat message (the AI SDK's `useChat`).
///
/// The newest message is the request: a user message starts a run with its text as the
/// input (the session is created if absent, and the agent is `agent_id`'s, else the
/// session's); an assistant message that carries tool results or approvals answers the
/// paused run it stands for. The rest of `messages` is not read: the history is the
/// session's. Answers with the run's events as the AI SDK's UI message stream.
#[utoipa::path(post, path = "/v1/chat", tag = "chat", operation_id = "send_chat_message",
    request_body = ChatRequest,
    responses(
        (status = 200, description = "The run's events as the UI message stream (`x-vercel-ai-ui-message-stream: v1`), `[DONE]` last",
            content((UiMessageChunk = "text/event-stream")),
            headers(("x-vercel-ai-ui-message-stream" = String, description = "`v1`"))),
        Lookup,
        JsonBody,
        (status = 409, response = Conflict),
    ))]
pub(super) async fn chat(
    State(state): State<AppState>, Tenant(tenant): Tenant, AppJson(request): AppJson<ChatRequest>,
) -> Result<Response> {
    let session = SessionId::parse("id", request.id.clone())?;
    let (run_id, after, answered, tools) = match request.ask()? {
        Ask::Turn(text) => {
            let started = turn(&state, &tenant, &session, &request, &text).await?;
            (started.run.id, 0, None, started.client_tools)
        }
        Ask::Answer(run_id) => {
            let (after, waits) = answer(&state, &tenant, &session, &request, run_id).await?;
            (run_id, after, Some(waits), None)
        }
    };
    let tools = match tools {
        Some(tools) => tools,
        None => client_tools(&state, &tenant, run_id).await?,
    };
    let mut translator = UiMessageStream::new(run_id, tools);
    if let Some(waits) = &answered {
        translator = translator.answering(waits);
    }
    Ok(ui_message_stream(&state, &tenant, &session, run_id, after, translator))
}

/// A user message's turn: a run with the message as its input, on the session's agent or
/// the request's.
async fn turn(
    state: &AppState, tenant: &str, session: &SessionId, request: &ChatRequest, text: &str,
) -> Result<Started> {
    let input = run_items::user_message(text);
    let start = StartRun {
        input: serde_json::value::to_raw_value(&[input]).expect("an item serializes"),
        config: ConfigRequest { agent_id: request.agent_id.clone(), ..ConfigRequest::default() },
        metadata: None,
        if_busy: IfBusy::Reject,
        background: false,
        idempotency: None,
        if_match: None,
        run_id: None,
        request: None,
    };
    let started = state.runs.start(tenant, session, start).await;
    started.map_err(|e| ApiError::from_runs(e, session.as_str(), None))
}

/// The tool results or approvals of the newest message, given to the paused run they
/// answer: where its events go on from, and what it waited for.
async fn answer(
    state: &AppState, tenant: &str, session: &SessionId, request: &ChatRequest, run_id: Uuid,
) -> Result<(i64, RequiredAction)> {
    let run_error = |e| ApiError::from_runs(e, session.as_str(), Some(&run_id.to_string()));
    let run = state.runs.get(tenant, session, run_id).await.map_err(run_error)?;
    let waits = (run.required_action.clone())
        .filter(|_| run.status == RunStatus::RequiresAction)
        .ok_or_else(|| {
            ApiError::RunNotWaiting(format!(
                "the run `{run_id}` is `{}`, not waiting for the tool results the newest message carries",
                run.status
            ))
        })?;
    let answer = request.answer(&waits)?;
    let after = state.runs.answer(tenant, session, run_id, &answer).await.map_err(run_error)?;
    Ok((after, waits))
}

/// Resume the chat's stream (`useChat({resume: true})`).
///
/// The stream of the session's run that is queued or running, from its start; 204 when
/// none is (or the session does not exist), so a page that reloads finds nothing to
/// resume.
#[utoipa::path(get, path = "/v1/chat/{session_id}/stream", tag = "chat",
    operation_id = "resume_chat_stream",
    params(TenantSession),
    responses(
        (status = 200, description = "The active run's events as the UI message stream, from its start",
            content((UiMessageChunk = "text/event-stream")),
            headers(("x-vercel-ai-ui-message-stream" = String, description = "`v1`"))),
        (status = 204, description = "No run of the session is queued or running"),
        (status = 400, response = BadRequest),
    ))]
pub(super) async fn resume_stream(
    State(state): State<AppState>, session: TenantSession,
) -> Result<Response> {
    let active = newest_run(&state, &session)
        .await?
        .filter(|run| matches!(run.status, RunStatus::Queued | RunStatus::Running));
    let Some(run) = active else {
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    let tools = client_tools(&state, &session.tenant, run.id).await?;
    let translator = UiMessageStream::new(run.id, tools).replaying(&run);
    Ok(ui_message_stream(&state, &session.tenant, &session.id, run.id, 0, translator))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct MessagesQuery {
    /// How many of the newest items the messages are made of (1 to 1000, default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    limit: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub(super) struct MessagesPage {
    data: Vec<UiMessage>,
}

/// The chat's messages, for a page's first render.
///
/// The session's newest items as the AI SDK's `UIMessage`s, oldest first: one per user
/// message and one assistant message per run, whose id is the run's (as its stream named
/// it). The input of a run not yet finished follows, and the calls of a run paused for
/// the page, so that a reloaded page can answer them.
#[utoipa::path(get, path = "/v1/chat/{session_id}/messages", tag = "chat",
    operation_id = "list_chat_messages",
    params(TenantSession, MessagesQuery),
    responses((status = 200, description = "The messages", body = MessagesPage), Lookup))]
pub(super) async fn chat_messages(
    State(state): State<AppState>, session: TenantSession,
    query: std::result::Result<Query<MessagesQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<MessagesPage>> {
    let limit = match query {
        Ok(Query(MessagesQuery { limit: None })) => PageRequest::DEFAULT_LIMIT,
        Ok(Query(MessagesQuery { limit: Some(limit) })) => {
            page_limit(&limit, PageRequest::MAX_LIMIT)?
        }
        Err(rejection) => return Err(ApiError::invalid("limit", rejection.body_text())),
    };
    // The run first: a turn it finishes before the items are read is in them, and is
    // then not shown twice.
    let newest = newest_run(&state, &session).await?;
    let page = PageRequest::first(limit, Order::Desc);
    let mut items = state
        .store
        .list_items(&session.tenant, &session.id, &page)
        .await
        .map_err(|e| session.store_error(e))?;
    items.data.reverse();
    let mut history = History::default().stored(&items.data);
    if let Some(run) = newest {
        history = history.pending(&run);
    }
    Ok(Json(MessagesPage { data: history.into_messages() }))
}

/// The session's newest run; none in a session without runs, or without the session.
async fn newest_run(state: &AppState, session: &TenantSession) -> Result<Option<Run>> {
    let page = PageRequest::first(1, Order::Desc);
    match state.runs.list(&session.tenant, &session.id, &page).await {
        Ok(runs) => Ok(runs.data.into_iter().next()),
        Err(crate::runs::RunsError::Store(StoreError::SessionNotFound)) => Ok(None),
        Err(error) => Err(session.runs_error(error)),
    }
}

/// The tools the page runs of a run made by an earlier request.
async fn client_tools(state: &AppState, tenant: &str, run_id: Uuid) -> Result<HashSet<String>> {
    let record = state
        .runs
        .locate(tenant, run_id)
        .await
        .map_err(|e| ApiError::from_runs(e, "", Some(&run_id.to_string())))?;
    Ok(runs::client_tools(&record.config))
}

fn ui_message_stream(
    state: &AppState, tenant: &str, session: &SessionId, run_id: Uuid, after: i64,
    translator: UiMessageStream,
) -> Response {
    let events = state.runs.events(tenant, session, run_id, after);
    // `useChat` reconnects only when a page loads, so a stream is not handed over at
    // shutdown: it stays open until the deadline.
    let mut response = sse(events, translator, Handover::Never);
    response.headers_mut().insert("x-vercel-ai-ui-message-stream", HeaderValue::from_static("v1"));
    response
}
