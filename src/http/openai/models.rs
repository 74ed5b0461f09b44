//! `GET /v1/models`: the model names a client may ask for here: the aliases of
//! `MODEL_ALIASES` and `LLM_MODEL`.

use std::sync::OnceLock;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::errors::{OpenAiError, Result};
use super::OpenAiErrors;
use crate::http::extract::Segments;
use crate::http::{ApiError, AppState};
use crate::model::check_model_name;

#[derive(Serialize, ToSchema)]
pub struct Model {
    id: String,
    /// `model`.
    object: &'static str,
    /// Unix seconds: when this process started serving it.
    created: i64,
    owned_by: &'static str,
}

#[derive(Serialize, ToSchema)]
pub struct ModelList {
    /// `list`.
    object: &'static str,
    data: Vec<Model>,
}

/// Every model a client may name: the aliases, then `LLM_MODEL`.
fn models(state: &AppState) -> Vec<Model> {
    static STARTED: OnceLock<i64> = OnceLock::new();
    let created = *STARTED.get_or_init(|| chrono::Utc::now().timestamp());
    let default = state.runs.settings().default_model.clone();
    let mut names: Vec<String> = state.model_aliases.names().map(str::to_owned).collect();
    names.extend(default.filter(|model| !names.contains(model)));
    names
        .into_iter()
        .map(|id| Model { id, object: "model", created, owned_by: "agent-sessions" })
        .collect()
}

/// List the models.
#[utoipa::path(get, path = "/v1/models", tag = "openai", operation_id = "list_models",
    responses((status = 200, description = "The models", body = ModelList), OpenAiErrors))]
pub async fn list(State(state): State<AppState>) -> Json<ModelList> {
    Json(ModelList { object: "list", data: models(&state) })
}

/// Retrieve a model: one that `GET /v1/models` lists, else 404 `model_not_found`.
#[utoipa::path(get, path = "/v1/models/{model}", tag = "openai", operation_id = "retrieve_model",
    params(("model" = String, Path, description = "The model's id, slashes included")),
    responses((status = 200, description = "The model", body = Model), OpenAiErrors))]
pub async fn retrieve(
    State(state): State<AppState>, Segments(id): Segments<String>,
) -> Result<Json<Model>> {
    models(&state).into_iter().find(|model| model.id == id).map(Json).ok_or_else(|| {
        OpenAiError::Own {
            status: StatusCode::NOT_FOUND,
            code: "model_not_found",
            param: Some("model".into()),
            message: format!(
                "The model `{id}` does not exist here: GET /v1/models lists the models of \
                 LLM_MODEL and MODEL_ALIASES"
            ),
        }
    })
}

/// The model a request asks for (absent: `LLM_MODEL`) and the upstream model its alias
/// names.
pub fn resolve(state: &AppState, requested: Option<&str>) -> Result<(String, String)> {
    let requested = match requested {
        Some(model) => {
            check_model_name("model", model).map_err(ApiError::from)?;
            model.to_owned()
        }
        None => state.runs.settings().default_model.clone().ok_or_else(|| {
            OpenAiError::invalid("model", "is required: no LLM_MODEL is configured")
        })?,
    };
    let upstream = state.model_aliases.resolve(&requested).to_owned();
    Ok((requested, upstream))
}
