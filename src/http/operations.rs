//! Endpoints for operators: liveness, readiness and metrics; `/` leads to the console.

use axum::extract::State;
use axum::response::Redirect;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use utoipa::ToSchema;

use super::error::{ApiError, Result, Unavailable};
use super::{metrics, AppState};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics::export))
        .route("/", get(|| async { Redirect::temporary("/console") }))
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Health {
    /// Always `ok`.
    status: &'static str,
}

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "Up", body = Health)))]
async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// The process is up and answers: what a liveness probe asks. Unlike `/readyz`, it
/// stays 200 while the process shuts down, so the probe never kills a draining process.
#[utoipa::path(get, path = "/livez", tag = "operations",
    responses((status = 200, description = "Live", body = Health)))]
async fn livez() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// The database answers, and, once a write has failed for a full disk or a missed
/// deadline, commits a write of the probe's own again; every stored value is under a configured key (as last
/// counted; 503 `encryption_key_missing` names the missing key ids), and the process is
/// not shutting down (503 `shutting_down` from SIGTERM on); a load balancer sends traffic
/// only while this is 200.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Ready", body = Health),
        (status = 503, response = Unavailable),
    ))]
async fn readyz(State(state): State<AppState>) -> Result<Json<Health>> {
    if state.draining.is_cancelled() {
        return Err(ApiError::ShuttingDown);
    }
    // The store's deadline bounds the probe (2 s for a ping).
    match state.store.ping().await {
        Ok(()) => {
            let missing = state.key_census.missing();
            if !missing.is_empty() {
                return Err(ApiError::KeysMissing(missing));
            }
            Ok(Json(Health { status: "ok" }))
        }
        Err(error) => Err(ApiError::DatabaseUnavailable(error)),
    }
}
