//! The gate in front of every `/v1` route: who is calling, may they do this, and not too
//! often.

use axum::extract::{Request, State};
use axum::http::{header, HeaderName, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tracing::Span;

use super::error::ApiError;
use super::AppState;
use crate::auth::{Caller, RateState, Refused};

/// Authenticates the request, checks that its caller may make it, takes it from the
/// caller's rate limit and hands the caller to the handler (see [`super::extract::Tenant`]).
pub async fn authorize(
    State(state): State<AppState>, mut request: Request, next: Next,
) -> Response {
    let authorization = request.headers().get(header::AUTHORIZATION).map(HeaderValue::as_bytes);
    let caller = match state.auth.authenticate(authorization).await {
        Ok(caller) => caller,
        Err(Refused::Unauthenticated(why)) => {
            return ApiError::Unauthorized(why.into()).into_response()
        }
        Err(Refused::Store(error)) => return ApiError::from(error).into_response(),
    };
    let span = Span::current();
    span.record("key_id", caller.key_id());
    if let Some(tenant) = caller.tenant() {
        span.record("tenant", tenant);
    }
    if let Err(refusal) = permit(&caller, request.method(), request.uri().path()) {
        return refusal.into_response();
    }
    let rate = state.auth.take(&caller);
    let mut response = match rate {
        Some(rate) if !rate.allowed => ApiError::RateLimited(rate.reset_secs).into_response(),
        _ => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
    };
    if let Some(rate) = rate {
        add_rate_headers(&mut response, rate);
    }
    response
}

/// What each caller may do: the admin manages keys only, tenants' keys everything else,
/// `read` keys only what does not change anything.
fn permit(caller: &Caller, method: &Method, path: &str) -> Result<(), ApiError> {
    let keys_route = path == "/v1/api_keys" || path.starts_with("/v1/api_keys/");
    match caller {
        Caller::Admin if !keys_route => Err(ApiError::Forbidden(
            "the admin key manages API keys only; call this with a tenant's API key".into(),
        )),
        Caller::Anonymous if keys_route => Err(ApiError::Forbidden(
            "API keys are managed with the admin key; set ADMIN_API_KEY to turn authentication on"
                .into(),
        )),
        Caller::Key(_) if keys_route => {
            Err(ApiError::Forbidden("only the admin key manages API keys".into()))
        }
        _ if !caller.can_write() && !matches!(*method, Method::GET | Method::HEAD) => {
            Err(ApiError::Forbidden("this API key has the `read` scope only".into()))
        }
        _ => Ok(()),
    }
}

fn add_rate_headers(response: &mut Response, rate: RateState) {
    let headers = response.headers_mut();
    for (name, value) in [
        ("ratelimit-limit", u64::from(rate.limit)),
        ("ratelimit-remaining", u64::from(rate.remaining)),
        ("ratelimit-reset", rate.reset_secs),
    ] {
        headers.insert(HeaderName::from_static(name), HeaderValue::from(value));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::{ApiKey, Scope};

    fn key(scopes: Vec<Scope>) -> Caller {
        Caller::Key(Arc::new(ApiKey {
            id: uuid::Uuid::now_v7(),
            tenant: "acme".into(),
            name: "test".into(),
            prefix: "ask_abcd".into(),
            scopes,
            created_at: chrono::Utc::now(),
            expires_at: None,
            last_used_at: None,
        }))
    }

    #[test]
    fn each_caller_reaches_only_its_routes() {
        let code = |caller: &Caller, method: Method, path: &str| {
            permit(caller, &method, path).err().map(|e| e.code())
        };
        let (reader, writer) = (key(vec![Scope::Read]), key(vec![Scope::Read, Scope::Write]));
        assert_eq!(code(&reader, Method::GET, "/v1/sessions"), None);
        assert_eq!(code(&reader, Method::POST, "/v1/sessions"), Some("forbidden"));
        assert_eq!(code(&reader, Method::DELETE, "/v1/agents/a"), Some("forbidden"));
        assert_eq!(code(&writer, Method::PATCH, "/v1/sessions/s"), None);
        assert_eq!(code(&writer, Method::GET, "/v1/api_keys"), Some("forbidden"));
        assert_eq!(code(&Caller::Admin, Method::GET, "/v1/sessions"), Some("forbidden"));
        assert_eq!(code(&Caller::Admin, Method::DELETE, "/v1/api_keys/x"), None);
        assert_eq!(code(&Caller::Anonymous, Method::POST, "/v1/sessions"), None);
        assert_eq!(code(&Caller::Anonymous, Method::GET, "/v1/api_keys"), Some("forbidden"));
        // A session named like the keys route is a session.
        assert_eq!(code(&writer, Method::GET, "/v1/api_keys_x"), None);
    }
}
