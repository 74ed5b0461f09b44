//! OpenAI's error shape, `{"error": {"message", "type", "param", "code"}}`, on the OpenAI
//! routes, with the status codes of the native API: every problem document these routes
//! answer with (from a handler, an extractor, the auth gate) is rewritten into it, so
//! OpenAI clients raise their usual exceptions.

use axum::body::{to_bytes, Body};
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

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

/// The parts of a problem document the rewrite reads.
#[derive(Deserialize)]
struct Problem {
    detail: String,
    code: String,
}

/// Rewrites the problem documents of the routes it wraps into OpenAI's shape, keeping
/// their status and headers.
pub async fn rewrite(request: Request, next: Next) -> Response {
    reshape(next.run(request).await).await
}

/// Whether the request comes from one of OpenAI's generated clients, which name their
/// language, version and platform in `x-stainless-*` headers.
pub fn from_openai_client(headers: &HeaderMap) -> bool {
    headers.keys().any(|name| name.as_str().starts_with("x-stainless-"))
}

/// The response with its problem document, if it has one, in OpenAI's shape.
pub async fn reshape(response: Response) -> Response {
    let is_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"application/problem+json"));
    if !is_problem {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // A problem document is a few hundred bytes that this service wrote.
    let Ok(bytes) = to_bytes(body, 64 * 1024).await else {
        return ApiError::Internal("a problem document could not be read".into()).into_response();
    };
    let Ok(problem) = serde_json::from_slice::<Problem>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let param = (problem.code == "invalid_request").then(|| param_of(&problem.detail)).flatten();
    let body = ErrorBody {
        error: Detail {
            kind: kind(parts.status),
            param,
            message: problem.detail,
            code: problem.code,
        },
    };
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    parts.headers.remove(header::CONTENT_LENGTH);
    let body = serde_json::to_vec(&body).expect("an error serializes");
    Response::from_parts(parts, Body::from(body))
}

/// The field a bad-input detail names first (`"input[2].type: …"` → `input[2].type`).
fn param_of(detail: &str) -> Option<String> {
    let (field, _) = detail.split_once(": ")?;
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']' | '-');
    (!field.is_empty() && field.chars().all(valid)).then(|| field.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_param_is_the_field_a_detail_names() {
        assert_eq!(param_of("input[2].type: unknown").as_deref(), Some("input[2].type"));
        assert_eq!(param_of("Idempotency-Key: must be ASCII").as_deref(), Some("Idempotency-Key"));
        assert_eq!(param_of("the body is not JSON: expected value"), None);
        assert_eq!(param_of("no colon"), None);
    }
}
