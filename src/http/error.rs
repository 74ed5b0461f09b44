//! The error format of the API: RFC 9457 problem details with a stable `code`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::model::{ConfigError, InvalidField};
use crate::store::StoreError;

pub type Result<T, E = ApiError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidRequest(String),
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
    SessionBusy(String),
    #[error("{0}")]
    RunFinished(String),
    #[error("{0}")]
    RunNotWaiting(String),
    #[error("{0}")]
    NotImplemented(String),
    #[error("this Idempotency-Key was used with a different request")]
    IdempotencyKeyReused,
    #[error("the request body is larger than the server accepts (MAX_BODY_BYTES)")]
    PayloadTooLarge,
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
    #[error("an internal error occurred")]
    Internal(String),
}

impl ApiError {
    pub fn status_code(&self) -> StatusCode {
        match self {
            Self::InvalidRequest(_) | Self::NotImplemented(_) => StatusCode::BAD_REQUEST,
            Self::AgentNotFound(_) | Self::RunNotFound(_) => StatusCode::NOT_FOUND,
            Self::SessionBusy(_) | Self::RunFinished(_) | Self::RunNotWaiting(_) => {
                StatusCode::CONFLICT
            }
            Self::SessionNotFound(_)
            | Self::ItemNotFound(_)
            | Self::SessionEmpty(_)
            | Self::RouteNotFound => StatusCode::NOT_FOUND,
            Self::SessionExists(_) => StatusCode::CONFLICT,
            Self::IdempotencyKeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Timeout(_) | Self::DatabaseUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable, machine-readable name of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidRequest(_) => "invalid_request",
            Self::SessionNotFound(_) => "session_not_found",
            Self::SessionExists(_) => "session_exists",
            Self::ItemNotFound(_) => "item_not_found",
            Self::SessionEmpty(_) => "session_empty",
            Self::AgentNotFound(_) => "agent_not_found",
            Self::RunNotFound(_) => "run_not_found",
            Self::SessionBusy(_) => "session_busy",
            Self::RunFinished(_) => "run_finished",
            Self::RunNotWaiting(_) => "run_not_requires_action",
            Self::NotImplemented(_) => "not_implemented",
            Self::IdempotencyKeyReused => "idempotency_key_reused",
            Self::PayloadTooLarge => "payload_too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::RouteNotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::Timeout(_) => "request_timeout",
            Self::DatabaseUnavailable(_) => "database_unavailable",
            Self::Internal(_) => "internal_error",
        }
    }

    pub fn invalid(field: &str, message: impl std::fmt::Display) -> Self {
        Self::InvalidRequest(format!("{field}: {message}"))
    }

    /// Maps a store error of a request about one session (and one of its items or runs),
    /// so the detail can name them.
    pub fn from_store(error: StoreError, session_id: &str, child_id: Option<&str>) -> Self {
        match (error, child_id) {
            (StoreError::SessionNotFound, _) => {
                Self::SessionNotFound(format!("no session with id `{session_id}`"))
            }
            (StoreError::SessionExists, _) => {
                Self::SessionExists(format!("a session with id `{session_id}` already exists"))
            }
            (StoreError::ItemNotFound, Some(item_id)) => Self::ItemNotFound(format!(
                "no item with id `{item_id}` in session `{session_id}`"
            )),
            (StoreError::RunNotFound, Some(run_id)) => Self::RunNotFound(format!(
                "no run with id `{run_id}` in session `{session_id}`"
            )),
            (StoreError::SessionEmpty, _) => {
                Self::SessionEmpty(format!("session `{session_id}` has no items"))
            }
            (StoreError::SessionBusy(active), _) => Self::SessionBusy(format!(
                "session `{session_id}` has an unfinished run `{active}`; wait for it, cancel it or pass if_busy: \"enqueue\""
            )),
            (other, _) => other.into(),
        }
    }
}

impl From<ConfigError> for ApiError {
    fn from(error: ConfigError) -> Self {
        match error {
            ConfigError::Invalid(field) => field.into(),
            ConfigError::NotImplemented(detail) => Self::NotImplemented(detail),
        }
    }
}

impl From<InvalidField> for ApiError {
    fn from(error: InvalidField) -> Self {
        Self::InvalidRequest(error.to_string())
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::SessionNotFound => Self::SessionNotFound("session not found".into()),
            StoreError::SessionExists => Self::SessionExists("the session already exists".into()),
            StoreError::ItemNotFound => Self::ItemNotFound("item not found".into()),
            StoreError::SessionEmpty => Self::SessionEmpty("the session has no items".into()),
            StoreError::UnknownCursor => {
                Self::InvalidRequest("after/before: the cursor names no row of this listing".into())
            }
            StoreError::IdempotencyKeyReused => Self::IdempotencyKeyReused,
            StoreError::AgentNotFound => Self::AgentNotFound("agent not found".into()),
            StoreError::RunNotFound => Self::RunNotFound("run not found".into()),
            StoreError::SessionBusy(active) => {
                Self::SessionBusy(format!("the session has an unfinished run `{active}`"))
            }
            StoreError::RunFinished(status) => {
                Self::RunFinished(format!("the run has finished as `{status}`"))
            }
            StoreError::RunNotWaiting(status) => Self::RunNotWaiting(format!(
                "the run is `{status}`, not waiting for tool outputs"
            )),
            StoreError::Invalid(field) => field.into(),
            StoreError::Database(
                error @ (sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_)),
            ) => Self::DatabaseUnavailable(StoreError::Database(error)),
            other => Self::Internal(other.to_string()),
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
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        match self {
            Self::Internal(cause) => {
                response.extensions_mut().insert(InternalCause(cause));
            }
            Self::DatabaseUnavailable(cause) => {
                response
                    .extensions_mut()
                    .insert(InternalCause(cause.to_string()));
            }
            _ => {}
        }
        response
    }
}
