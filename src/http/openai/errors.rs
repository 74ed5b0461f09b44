//! OpenAI's error shape, `{"error": {"message", "type", "param", "code"}}`, on the OpenAI
//! routes, with the status codes of the native API: every error these routes answer with
//! (from a handler, an extractor, the auth gate) is rendered in it from its values, so
//! OpenAI clients raise their usual exceptions.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::http::error::ErrorParts;
use crate::http::ApiError;
use crate::model::RunError;

/// An error of an OpenAI route: one of the native API, or one only OpenAI's API has.
#[derive(Debug)]
pub enum OpenAiError {
    Api(ApiError),
    Own { status: StatusCode, code: &'static str, param: Option<String>, message: String },
}

pub type Result<T, E = OpenAiError> = std::result::Result<T, E>;

impl<E: Into<ApiError>> From<E> for OpenAiError {
    fn from(error: E) -> Self {
        Self::Api(error.into())
    }
}

impl OpenAiError {
    pub fn invalid(param: &str, message: impl std::fmt::Display) -> Self {
        Self::Api(ApiError::invalid(param, message))
    }

    /// 400 `previous_response_not_found`: the response is unknown, not stored or cannot
    /// be answered from.
    pub fn previous_response(id: &str, why: &str) -> Self {
        Self::Own {
            status: StatusCode::BAD_REQUEST,
            code: "previous_response_not_found",
            param: Some("previous_response_id".into()),
            message: format!("previous response `{id}` {why}"),
        }
    }

    /// 400 for two fields of which a request may give one, in OpenAI's words, which
    /// clients and test suites match.
    pub fn mutually_exclusive(first: &str, second: &str) -> Self {
        Self::Own {
            status: StatusCode::BAD_REQUEST,
            code: "mutually_exclusive_parameters",
            param: Some(first.into()),
            message: format!(
                "Mutually exclusive parameters: Ensure you are only providing one of: \
                 '{first}' or '{second}'."
            ),
        }
    }

    /// The answer to a response that failed while the request waited for it: the status
    /// of the cause (429 rate limit, 400 a request the model refused or too long a
    /// context, 502 or 504 the LLM, 500 the rest), so that clients raise; a stored
    /// failed response stays retrievable under the id the message names.
    pub fn failed_response(stored_as: Option<&str>, error: &RunError) -> Self {
        let (status, code) = match error.code.as_str() {
            "llm_rate_limited" => (StatusCode::TOO_MANY_REQUESTS, "rate_limit_exceeded"),
            "context_too_long" => (StatusCode::BAD_REQUEST, "context_length_exceeded"),
            "llm_bad_request" => (StatusCode::BAD_REQUEST, "invalid_request"),
            "llm_timeout" => (StatusCode::GATEWAY_TIMEOUT, "server_error"),
            "llm_unavailable" | "llm_bad_response" | "llm_auth_failed" => {
                (StatusCode::BAD_GATEWAY, "server_error")
            }
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "server_error"),
        };
        Self::Own {
            status,
            code,
            param: None,
            message: match stored_as {
                Some(id) => format!("{}: {} (response `{id}` failed)", error.code, error.message),
                None => format!("{}: {}", error.code, error.message),
            },
        }
    }

    /// 404 `conversation_not_found`: the id names no conversation of the caller's.
    pub fn conversation_not_found(id: &str) -> Self {
        Self::Own {
            status: StatusCode::NOT_FOUND,
            code: "conversation_not_found",
            param: None,
            message: format!("no conversation with id `{id}`"),
        }
    }

    /// Whether this is [`Self::conversation_not_found`].
    pub fn is_conversation_not_found(&self) -> bool {
        matches!(self, Self::Own { code: "conversation_not_found", .. })
    }

    /// 409 `conversation_busy`: a response is in progress in the conversation, and the
    /// request asked to be refused then (`if_busy: "reject"`).
    pub fn conversation_busy(conversation: &str, response_id: &str) -> Self {
        Self::Own {
            status: StatusCode::CONFLICT,
            code: "conversation_busy",
            param: None,
            message: format!(
                "conversation `{conversation}` has response `{response_id}` in progress; \
                 wait for it, cancel it or pass if_busy: \"enqueue\""
            ),
        }
    }

    /// 404 for a response id that names no stored response of the caller's.
    pub fn response_not_found(id: &str) -> Self {
        Self::Own {
            status: StatusCode::NOT_FOUND,
            code: "response_not_found",
            param: None,
            message: format!("no response with id `{id}`"),
        }
    }
}

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        match self {
            Self::Api(error) => error.into_response(),
            Self::Own { status, code, param, message } => {
                let body = ErrorBody { error: Detail { kind: kind(status), code, param, message } };
                (status, axum::Json(body)).into_response()
            }
        }
    }
}

/// The body of an error on the OpenAI routes.
#[derive(Serialize, ToSchema)]
#[schema(as = OpenAiErrorBody, example = json!({"error": {
    "message": "previous response `resp_0199…` is not stored",
    "type": "invalid_request_error", "param": "previous_response_id",
    "code": "previous_response_not_found"}}))]
pub struct ErrorBody<C: Serialize = String> {
    pub error: Detail<C>,
}

#[derive(Serialize, ToSchema)]
pub struct Detail<C: Serialize = String> {
    pub message: String,
    /// `invalid_request_error`, `authentication_error`, `permission_error`,
    /// `rate_limit_error` or `server_error`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The request field at fault, when one is.
    #[schema(required = true)]
    pub param: Option<String>,
    #[schema(value_type = String)]
    pub code: C,
}

fn kind(status: StatusCode) -> &'static str {
    match status {
        StatusCode::UNAUTHORIZED => "authentication_error",
        StatusCode::FORBIDDEN => "permission_error",
        StatusCode::TOO_MANY_REQUESTS => "rate_limit_error",
        s if s.is_server_error() => "server_error",
        _ => "invalid_request_error",
    }
}

/// Renders the errors of the routes it wraps in OpenAI's shape, keeping their status
/// and headers.
pub async fn rewrite(request: Request, next: Next) -> Response {
    reshape(next.run(request).await)
}

/// Whether the request comes from one of OpenAI's generated clients, which name their
/// language, version and platform in `x-stainless-*` headers.
pub fn from_openai_client(headers: &HeaderMap) -> bool {
    headers.keys().any(|name| name.as_str().starts_with("x-stainless-"))
}

/// The response in OpenAI's shape if it answers an error, from the error's own values
/// (`ErrorParts`); any other response as it is.
pub fn reshape(response: Response) -> Response {
    let Some(error) = response.extensions().get::<ErrorParts>().cloned() else {
        return response;
    };
    let (mut parts, _) = response.into_parts();
    let body = ErrorBody {
        error: Detail {
            kind: kind(parts.status),
            param: error.field,
            message: error.message,
            code: error.code.to_owned(),
        },
    };
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    parts.headers.remove(header::CONTENT_LENGTH);
    let body = serde_json::to_vec(&body).expect("an error serializes");
    Response::from_parts(parts, Body::from(body))
}

#[cfg(test)]
mod tests {
    use axum::body::to_bytes;

    use super::*;

    #[tokio::test]
    async fn an_error_is_rendered_from_its_values_and_other_answers_pass() {
        let refused = reshape(ApiError::invalid("input[2].type", "unknown").into_response());
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
        assert_eq!(refused.headers()[header::CONTENT_TYPE], "application/json");
        let body = to_bytes(refused.into_body(), 4096).await.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"error": {"message": "input[2].type: unknown",
                "type": "invalid_request_error", "param": "input[2].type",
                "code": "invalid_request"}})
        );
        let busy = reshape(ApiError::SessionBusy("busy".into()).into_response());
        let body = to_bytes(busy.into_body(), 4096).await.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["param"], serde_json::Value::Null);
        let fine = reshape((StatusCode::OK, "ok").into_response());
        assert_eq!(to_bytes(fine.into_body(), 16).await.unwrap(), "ok");
    }
}
