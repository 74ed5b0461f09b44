//! `?action=` of `…/cancel`: how the run is stopped.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use utoipa::openapi::path::{Parameter, ParameterIn};
use utoipa::IntoParams;

use crate::http::doc_params::query_param;
use crate::http::error::ApiError;
use crate::http::list_query::string;
use crate::model::StopAction;

pub struct StopQuery {
    pub action: StopAction,
}

impl<S: Send + Sync> FromRequestParts<S> for StopQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        let mut action = StopAction::default();
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            if name == "action" {
                action =
                    serde_json::from_value(value.clone().into_owned().into()).map_err(|_| {
                        ApiError::invalid(
                            "action",
                            format!("must be `cancel`, `interrupt` or `rollback`, got `{value}`"),
                        )
                    })?;
            }
        }
        Ok(Self { action })
    }
}

impl IntoParams for StopQuery {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let action = string()
            .enum_values(Some(["cancel", "interrupt", "rollback"]))
            .default(Some("cancel".into()));
        vec![query_param(
            "action",
            action,
            "`cancel` leaves the session as it was; `interrupt` appends the run's input and \
             what it finished as a turn and ends it `interrupted`; `rollback` cancels the run \
             and deletes it, its events and its Idempotency-Key.",
        )]
    }
}
