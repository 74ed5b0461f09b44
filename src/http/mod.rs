//! The router and the middleware every request passes through.

mod agents;
mod answer;
pub mod api_keys;
mod auth;
mod chat;
mod checkpoints;
mod compactions;
mod console;
mod doc_params;
mod error;
mod event_stream;
mod examples;
mod extract;
mod forks;
mod history;
mod items;
mod list_query;
mod metrics;
mod openai;
pub mod openapi;
mod operations;
mod owner_state;
mod query_params;
mod revision;
mod runs;
mod server_span;
mod sessions;
mod state;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::header::CONNECTION;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router};
use tokio_util::sync::CancellationToken;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};
use tower_http::request_id::{
    MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer,
};
use tower_http::trace::TraceLayer;
use tracing::Span;
use uuid::Uuid;

pub use error::{ApiError, Problem};

use crate::auth::Auth;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::runs::Runs;
use crate::store::SessionStore;
use error::InternalCause;

/// What every handler can reach. Cheap to clone. Built by [`crate::app`], which owns
/// the wiring; the handlers only use it.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn SessionStore>,
    pub auth: Arc<Auth>,
    pub metrics: Arc<Metrics>,
    /// The key ids stored values are under but `ENCRYPTION_KEYS` lacks, for `/readyz`.
    pub key_census: Arc<crate::upkeep::KeyCensus>,
    pub runs: Runs,
    /// How long a run that is neither streamed nor in the background is waited for.
    pub run_wait: Duration,
    pub sealer: Arc<crate::sealing::Sealer>,
    pub model_aliases: Arc<crate::config::ModelAliases>,
    /// Cancelled when shutdown starts: `/readyz` answers 503 from then on, and every
    /// answer closes its connection.
    pub draining: CancellationToken,
    /// Cancelled when the process stops listening, `SHUTDOWN_DELAY_SECS` later: open
    /// event streams end, so that their clients go on at another replica.
    pub closing: CancellationToken,
}

/// The whole API with its middleware.
pub fn router(state: AppState, config: &Config) -> Result<Router, InvalidOrigin> {
    let timeout = Duration::from_secs(config.request_timeout_secs);
    let bounded = Router::new()
        .merge(sessions::router())
        .merge(items::router())
        .merge(state::router())
        .merge(owner_state::router())
        .merge(checkpoints::router())
        .merge(history::router())
        .merge(forks::router())
        .merge(compactions::router())
        .merge(agents::router())
        .merge(runs::router())
        .merge(api_keys::router())
        .merge(chat::router())
        .route_layer(middleware::from_fn_with_state(timeout, time_limit));
    // Every `/v1` route, and only those, is behind the auth gate: it answers 401 before
    // anything of the request is looked at.
    let api = bounded
        .merge(runs::waiting_router())
        .merge(compactions::waiting_router())
        .merge(chat::waiting_router())
        .route_layer(middleware::from_fn(query_params::check))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth::authorize));
    let open = Router::new()
        .merge(operations::router())
        .merge(openapi::router())
        .merge(console::router())
        .route_layer(middleware::from_fn_with_state(timeout, time_limit))
        .route_layer(middleware::from_fn(query_params::check));
    // The OpenAI routes answer errors in OpenAI's shape, the auth gate's included.
    let openai = openai::router()
        .route_layer(middleware::from_fn_with_state(timeout, time_limit))
        .merge(openai::waiting_router())
        .route_layer(middleware::from_fn(query_params::check))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth::authorize))
        .route_layer(middleware::from_fn(openai::rewrite_errors));
    let routes = api
        .merge(openai)
        .merge(open)
        .fallback(|headers: HeaderMap| unrouted(headers, ApiError::RouteNotFound))
        .method_not_allowed_fallback(|headers: HeaderMap| {
            unrouted(headers, ApiError::MethodNotAllowed)
        });
    // Listed outermost first: the request id exists before the span that records it,
    // and the metrics see the answers to panics and timeouts too.
    let layers = ServiceBuilder::new()
        .layer(SetRequestIdLayer::x_request_id(MakeUuidV7))
        .layer(middleware::from_fn(server_span::trace))
        .layer(middleware::from_fn_with_state(state.draining.clone(), close_when_draining))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(request_span)
                .on_response(log_response)
                .on_failure(()),
        )
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(middleware::from_fn_with_state(state.metrics.clone(), metrics::track))
        .layer(CatchPanicLayer::custom(|_| {
            ApiError::Internal("the handler panicked".into()).into_response()
        }))
        .option_layer(cors(&config.cors_allowed_origins)?)
        .layer(DefaultBodyLimit::max(config.max_body_bytes))
        .layer(Extension(extract::BodyLimit(config.max_body_bytes)))
        .layer(Extension(state::StateLimit(config.max_state_bytes)));
    Ok(routes.layer(layers).with_state(state))
}

#[derive(Clone, Copy)]
struct MakeUuidV7;

impl MakeRequestId for MakeUuidV7 {
    fn make_request_id<B>(&mut self, _: &axum::http::Request<B>) -> Option<RequestId> {
        HeaderValue::from_str(&Uuid::now_v7().to_string()).ok().map(RequestId::new)
    }
}

fn request_span(request: &axum::http::Request<axum::body::Body>) -> Span {
    let request_id =
        request.headers().get("x-request-id").and_then(|id| id.to_str().ok()).unwrap_or_default();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| request.uri().path(), MatchedPath::as_str);
    // Logs only: the request id may be the caller's header.
    tracing::info_span!(
        target: crate::telemetry::LOG_ONLY,
        "request",
        method = %request.method(),
        route,
        request_id,
        tenant = tracing::field::Empty,
        key_id = tracing::field::Empty,
    )
}

/// Logs every answer; a 500 with the internal cause that the client never sees.
fn log_response(response: &Response, latency: Duration, _span: &Span) {
    let status = response.status().as_u16();
    let millis = latency.as_secs_f64() * 1000.0;
    match response.extensions().get::<InternalCause>() {
        Some(InternalCause(cause)) => tracing::error!(status, millis, cause, "request failed"),
        None => tracing::info!(status, millis, "request answered"),
    }
}

/// While the process drains, every answer closes its connection: the client's next
/// request opens a new one, which a balancer sends to another replica.
async fn close_when_draining(
    State(draining): State<CancellationToken>, request: Request, next: Next,
) -> Response {
    let mut response = next.run(request).await;
    if draining.is_cancelled() {
        response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

async fn time_limit(State(limit): State<Duration>, request: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::Timeout(limit.as_secs()).into_response(),
    }
}

/// The answer to a request no route takes: a problem document, or OpenAI's shape for
/// OpenAI's clients, which read nothing else.
async fn unrouted(headers: HeaderMap, error: ApiError) -> Response {
    let response = error.into_response();
    if openai::from_openai_client(&headers) {
        return openai::reshape(response);
    }
    response
}

/// A `CORS_ALLOWED_ORIGINS` entry that is not a valid origin.
#[derive(Debug, thiserror::Error)]
#[error("CORS_ALLOWED_ORIGINS: `{0}` is not a valid origin")]
pub struct InvalidOrigin(String);

/// CORS for the configured origins; none configured, no CORS headers at all.
fn cors(origins: &[String]) -> Result<Option<CorsLayer>, InvalidOrigin> {
    if origins.is_empty() {
        return Ok(None);
    }
    let allow_origin = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        let list = origins
            .iter()
            .map(|o| HeaderValue::from_str(o).map_err(|_| InvalidOrigin(o.clone())))
            .collect::<Result<Vec<_>, _>>()?;
        AllowOrigin::list(list)
    };
    Ok(Some(
        CorsLayer::new()
            .allow_origin(allow_origin)
            // PUT: history and state replacements, checkpoints.
            .allow_methods([Method::GET, Method::POST, Method::PUT, Method::PATCH, Method::DELETE])
            // Whatever headers the page's client sends (`last-event-id` to resume,
            // `if-match`, the `openai` package's `x-stainless-*`): none of them grants
            // anything, only the bearer key does, and a fixed list breaks each new client.
            .allow_headers(AllowHeaders::mirror_request())
            .max_age(Duration::from_secs(600))
            .expose_headers([
                HeaderName::from_static("x-request-id"),
                HeaderName::from_static("idempotent-replayed"),
                HeaderName::from_static("location"),
                HeaderName::from_static("etag"),
                HeaderName::from_static("retry-after"),
                HeaderName::from_static("ratelimit-limit"),
                HeaderName::from_static("ratelimit-remaining"),
                HeaderName::from_static("ratelimit-reset"),
            ]),
    ))
}
