//! `GET /v1/models`: the model names a client may ask for here: the aliases of
//! `MODEL_ALIASES` and `LLM_MODEL`.

use std::sync::OnceLock;

use axum::extract::State;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::errors::{OpenAiError, Result};
use super::OpenAiErrors;
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

/// List the models.
#[utoipa::path(get, path = "/v1/models", tag = "openai", operation_id = "list_models",
    responses((status = 200, description = "The models", body = ModelList), OpenAiErrors))]
pub async fn list(State(state): State<AppState>) -> Json<ModelList> {
    static STARTED: OnceLock<i64> = OnceLock::new();
    let created = *STARTED.get_or_init(|| chrono::Utc::now().timestamp());
    let default = state.runs.settings().default_model.clone();
    let mut names: Vec<String> = state.model_aliases.names().map(str::to_owned).collect();
    names.extend(default.filter(|model| !names.contains(model)));
    let data = names
        .into_iter()
        .map(|id| Model { id, object: "model", created, owned_by: "agent-sessions" })
        .collect();
    Json(ModelList { object: "list", data })
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
