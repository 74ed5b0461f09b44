//! The HTTP side of the metrics: every request counted and timed, and `GET /metrics`.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::AppState;
use crate::metrics::Metrics;

/// Counts and times every request. The route label is the matched path template, so
/// ids in paths do not multiply the series; unmatched paths share one label.
pub async fn track(State(metrics): State<Arc<Metrics>>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = method_label(request.method());
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let response = next.run(request).await;
    metrics.answered(&method, &route, response.status().as_u16(), started.elapsed().as_secs_f64());
    response
}

/// Methods outside the standard set share one label, so clients cannot create series.
fn method_label(method: &Method) -> String {
    const KNOWN: [Method; 9] = [
        Method::GET,
        Method::HEAD,
        Method::POST,
        Method::PUT,
        Method::PATCH,
        Method::DELETE,
        Method::OPTIONS,
        Method::CONNECT,
        Method::TRACE,
    ];
    if KNOWN.contains(method) {
        method.to_string()
    } else {
        "other".to_owned()
    }
}

/// `GET /metrics`
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses(
        (status = 200, description = "Metrics in the OpenMetrics text format", body = String, content_type = "application/openmetrics-text"),
    ))]
pub async fn export(State(state): State<AppState>) -> Result<Response, ApiError> {
    let body = state
        .metrics
        .encode(state.store.pool_stats(), state.store.append_stats())
        .map_err(|e| ApiError::Internal(format!("cannot encode metrics: {e}")))?;
    Ok((
        [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
        body,
    )
        .into_response())
}
