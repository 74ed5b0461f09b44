//! The request as traces show it: a server span after the HTTP semantic conventions,
//! continuing the caller's `traceparent`. It ends with the response's head; a stream's
//! body goes on after it.

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use tracing::field::Empty;
use tracing::Instrument;

use crate::telemetry::{self, TRACE_ONLY};

pub(super) async fn trace(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let route = request.extensions().get::<MatchedPath>().map(|path| path.as_str().to_owned());
    let name = match &route {
        Some(route) => format!("{method} {route}"),
        None => method.to_string(),
    };
    let span = tracing::info_span!(
        target: TRACE_ONLY,
        "request",
        otel.name = name,
        otel.kind = "server",
        otel.status_code = Empty,
        http.request.method = %method,
        http.route = route,
        http.response.status_code = Empty,
        // A path no route matched could hold anything a caller wrote.
        url.path = route.is_some().then(|| request.uri().path()),
        url.scheme = "http",
        "error.type" = Empty,
    );
    telemetry::continue_from(&span, request.headers());
    let response = next.run(request).instrument(span.clone()).await;
    let status = response.status();
    // Traces keep signed integers; an unsigned one would arrive as text.
    span.record("http.response.status_code", i64::from(status.as_u16()));
    if status.is_server_error() {
        telemetry::failed(&span, status.as_str());
    }
    response
}
