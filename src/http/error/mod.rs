//! The error format of the API: RFC 9457 problem details with a stable `code`.

mod mapping;
mod responses;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::llm::LlmErrorCode;
use crate::store::StoreError;
pub use responses::{
    BadRequest, Conflict, Forbidden, Internal, JsonBody, JsonWrite, KeyReused, LlmFailed, Lookup,
    NotFound, PayloadTooLarge, RateLimited, RevisionMismatch, StorageFull, Unauthorized,
    Unavailable, UnsupportedMediaType,
};

pub type Result<T, E = ApiError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Bad input: `field` names where it sits in the request (`input[2].type`, a query
    /// parameter, a header).
    #[error("{field}: {message}")]
    InvalidRequest { field: String, message: String },
    #[error("{0}")]
    SessionNotFound(String),
    #[error("{0}")]
    SessionExists(String),
    #[error("{0}")]
    ItemNotFound(String),
    #[error("{0}")]
    SessionEmpty(String),
    #[error("{0}")]
    AgentNotFound(String),
    #[error("{0}")]
    RunNotFound(String),
    #[error("{0}")]
    ApiKeyNotFound(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("this API key made more requests than RATE_LIMIT_PER_KEY allows; retry in {0} s")]
    RateLimited(u64),
    #[error("{0}")]
    SessionBusy(String),
    #[error("{0}")]
    RunFinished(String),
    #[error("{0}")]
    RunNotWaiting(String),
    #[error("{0}")]
    NothingToCompact(String),
    #[error("{0}")]
    HistoryChanged(String),
    /// The LLM call a request made itself (a compaction's summary) failed.
    #[error("{1}")]
    Llm(LlmErrorCode, String),
    #[error("this Idempotency-Key was used with a different request")]
    IdempotencyKeyReused,
    /// `If-Match` named another revision than the session's; nothing was written.
    #[error("{0}")]
    RevisionMismatch(String),
    /// A write named another app or user than the session's (`field`).
    #[error("{field}: {message}")]
    OwnerMismatch { field: &'static str, message: String },
    #[error("{0}")]
    StateNotFound(String),
    #[error("{0}")]
    CheckpointNotFound(String),
    /// A state write whose result is over `MAX_STATE_BYTES`.
    #[error("state: {0}")]
    StateTooLarge(String),
    #[error(
        "the request body is larger than the limit of {0} bytes ({size}, MAX_BODY_BYTES)",
        size = human_size(*.0)
    )]
    PayloadTooLarge(usize),
    #[error("the request body must be JSON (Content-Type: application/json)")]
    UnsupportedMediaType,
    #[error("no such endpoint")]
    RouteNotFound,
    #[error("the endpoint does not allow this method")]
    MethodNotAllowed,
    #[error("the request took longer than {0} seconds")]
    Timeout(u64),
    #[error("the database is not reachable")]
    DatabaseUnavailable(#[source] StoreError),
    /// Nothing of the write was stored: the database's disk is full.
    #[error("the database's storage is full: nothing of this request was stored; retry once space is freed")]
    StorageFull,
    #[error("an internal error occurred")]
    Internal(String),
    /// A stored value is under a key the service was not given: never garbage instead.
    #[error("{0}")]
    EncryptionKeyMissing(String),
    /// Stored values are under keys the service was not given: not ready to serve them.
    #[error("stored values are under encryption keys that ENCRYPTION_KEYS does not list: {}", .0.join(", "))]
    KeysMissing(Vec<String>),
    /// The process is shutting down: a balancer should send elsewhere.
    #[error("the process is shutting down; requests go to another replica")]
    ShuttingDown,
}

/// Bytes in MiB, or KiB below one MiB; to one decimal where that is not a whole number.
fn human_size(bytes: usize) -> String {
    let (amount, unit) = if bytes >= 1 << 20 {
        (bytes as f64 / f64::from(1 << 20), "MiB")
    } else {
        (bytes as f64 / 1024.0, "KiB")
    };
    if amount.fract() == 0.0 {
        format!("{amount:.0} {unit}")
    } else {
        format!("{amount:.1} {unit}")
    }
}

impl ApiError {
    pub fn status_code(&self) -> StatusCode {
        match self {
            Self::InvalidRequest { .. } | Self::NothingToCompact(_) => StatusCode::BAD_REQUEST,
            Self::HistoryChanged(_) => StatusCode::CONFLICT,
            Self::Llm(code, _) => match code {
                LlmErrorCode::BadRequest | LlmErrorCode::ContextTooLong => StatusCode::BAD_REQUEST,
                LlmErrorCode::RateLimited => StatusCode::TOO_MANY_REQUESTS,
                LlmErrorCode::Timeout => StatusCode::GATEWAY_TIMEOUT,
                LlmErrorCode::Unavailable
                | LlmErrorCode::BadResponse
                | LlmErrorCode::AuthFailed => StatusCode::BAD_GATEWAY,
            },
            Self::AgentNotFound(_) | Self::RunNotFound(_) | Self::ApiKeyNotFound(_) => {
                StatusCode::NOT_FOUND
            }
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::RateLimited(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::SessionBusy(_) | Self::RunFinished(_) | Self::RunNotWaiting(_) => {
                StatusCode::CONFLICT
            }
            Self::SessionNotFound(_)
            | Self::ItemNotFound(_)
            | Self::SessionEmpty(_)
            | Self::RouteNotFound => StatusCode::NOT_FOUND,
            Self::SessionExists(_) | Self::OwnerMismatch { .. } => StatusCode::CONFLICT,
            Self::StateNotFound(_) | Self::CheckpointNotFound(_) => StatusCode::NOT_FOUND,
            Self::IdempotencyKeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            Self::RevisionMismatch(_) => StatusCode::PRECONDITION_FAILED,
            Self::PayloadTooLarge(_) | Self::StateTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Timeout(_)
            | Self::DatabaseUnavailable(_)
            | Self::KeysMissing(_)
            | Self::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            Self::StorageFull => StatusCode::INSUFFICIENT_STORAGE,
            Self::Internal(_) | Self::EncryptionKeyMissing(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable, machine-readable name of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidRequest { .. } => "invalid_request",
            Self::SessionNotFound(_) => "session_not_found",
            Self::SessionExists(_) => "session_exists",
            Self::ItemNotFound(_) => "item_not_found",
            Self::SessionEmpty(_) => "session_empty",
            Self::AgentNotFound(_) => "agent_not_found",
            Self::RunNotFound(_) => "run_not_found",
            Self::ApiKeyNotFound(_) => "api_key_not_found",
            Self::Unauthorized(_) => "unauthorized",
            Self::Forbidden(_) => "forbidden",
            Self::RateLimited(_) => "rate_limited",
            Self::SessionBusy(_) => "session_busy",
            Self::RunFinished(_) => "run_finished",
            Self::RunNotWaiting(_) => "run_not_requires_action",
            Self::NothingToCompact(_) => "nothing_to_compact",
            Self::HistoryChanged(_) => "history_changed",
            Self::Llm(code, _) => code.as_str(),
            Self::IdempotencyKeyReused => "idempotency_key_reused",
            Self::RevisionMismatch(_) => "revision_mismatch",
            Self::OwnerMismatch { .. } => "owner_mismatch",
            Self::StateNotFound(_) => "state_not_found",
            Self::CheckpointNotFound(_) => "checkpoint_not_found",
            Self::PayloadTooLarge(_) | Self::StateTooLarge(_) => "payload_too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::RouteNotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::Timeout(_) => "request_timeout",
            Self::DatabaseUnavailable(_) => "database_unavailable",
            Self::StorageFull => "storage_full",
            Self::Internal(_) => "internal_error",
            Self::EncryptionKeyMissing(_) | Self::KeysMissing(_) => "encryption_key_missing",
            Self::ShuttingDown => "shutting_down",
        }
    }

    pub fn invalid(field: &str, message: impl std::fmt::Display) -> Self {
        Self::InvalidRequest { field: field.to_owned(), message: message.to_string() }
    }

    /// The request field at fault, for bad input.
    fn field(&self) -> Option<&str> {
        match self {
            Self::InvalidRequest { field, .. } => Some(field),
            Self::StateTooLarge(_) => Some("state"),
            Self::OwnerMismatch { field, .. } => Some(field),
            _ => None,
        }
    }
}

/// An RFC 9457 problem document.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "type": "urn:agent-sessions:problem:session_not_found",
    "title": "Not Found",
    "status": 404,
    "detail": "no session with id `support-4711`",
    "code": "session_not_found"
}))]
pub struct Problem {
    /// A URI naming the kind of problem: `urn:agent-sessions:problem:<code>`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The HTTP status phrase.
    pub title: String,
    pub status: u16,
    /// What went wrong with this request; for bad input it names the field.
    pub detail: String,
    /// A stable snake_case name of the error, for programs to match on.
    pub code: String,
}

/// What an error's problem document says, kept in the response's extensions as values:
/// routes that speak another protocol render the same error in that protocol's shape
/// from them, never by reading the document back.
#[derive(Debug, Clone)]
pub struct ErrorParts {
    pub code: &'static str,
    /// The request field at fault, for bad input.
    pub field: Option<String>,
    pub message: String,
}

/// The cause of a 500, kept in the response's extensions for the logging middleware:
/// it is logged with the request id and never sent to the client.
#[derive(Debug, Clone)]
pub struct InternalCause(pub String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status_code();
        let problem = Problem {
            kind: format!("urn:agent-sessions:problem:{}", self.code()),
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            status: status.as_u16(),
            detail: self.to_string(),
            code: self.code().to_owned(),
        };
        let body = serde_json::to_vec(&problem).expect("a problem serializes");
        let mut response = (status, body).into_response();
        response.extensions_mut().insert(ErrorParts {
            code: self.code(),
            field: self.field().map(str::to_owned),
            message: problem.detail,
        });
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
        match self {
            Self::Internal(cause) | Self::EncryptionKeyMissing(cause) => {
                response.extensions_mut().insert(InternalCause(cause));
            }
            Self::Unauthorized(_) => {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            Self::RateLimited(seconds) => {
                response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
            }
            Self::DatabaseUnavailable(cause) => {
                // Retrying is the right move; with its Idempotency-Key nothing doubles.
                response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                response.extensions_mut().insert(InternalCause(cause.to_string()));
            }
            Self::StorageFull => {
                // Space comes back when an operator frees it, or retention deletes.
                response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("30"));
            }
            _ => {}
        }
        response
    }
}
