//! OpenAI's Conversations and Responses API (docs/openai.md): the
//! same sessions and runs in the wire format OpenAI's clients speak. A translation at
//! the edge, not a second engine: a conversation is a session, a response a run, its
//! stream a translation of the run's events, a compact a summary by the engine's
//! summariser.

pub(super) mod compact;
pub(super) mod conversations;
mod errors;
mod ids;
mod item_shapes;
mod items;
mod list;
pub(super) mod models;
pub(super) mod responses;
mod schemas;

use std::collections::BTreeMap;

use axum::routing::{get, post};
use axum::Router;
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::response::{Response as ResponseDoc, ResponseBuilder};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{IntoResponses, ToResponse};

use super::AppState;
pub use errors::ErrorBody;
pub(super) use errors::{from_openai_client, reshape, rewrite as rewrite_errors};
pub(super) use schemas::Components as Schemas;

/// The routes answered within the request time limit.
pub(super) fn router() -> Router<AppState> {
    Router::new()
        .merge(conversations::router())
        .merge(responses::router())
        .route("/v1/models", get(models::list))
        .route("/v1/models/{*model}", get(models::retrieve))
}

/// The routes that wait for the model.
pub(super) fn waiting_router() -> Router<AppState> {
    Router::new()
        .merge(responses::waiting_router())
        .route("/v1/responses/compact", post(compact::compact))
}

/// The errors of the OpenAI routes, in OpenAI's shape, by status.
pub struct OpenAiErrors;

/// Every status an OpenAI route may answer with an error.
const STATUSES: [&str; 13] =
    ["400", "401", "403", "404", "409", "413", "415", "422", "429", "500", "502", "503", "504"];

impl<'s> ToResponse<'s> for OpenAiErrors {
    fn response() -> (&'s str, RefOr<ResponseDoc>) {
        let response = ResponseBuilder::new()
            .description("An error in OpenAI's shape")
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("OpenAiErrorBody")))
                    .build(),
            )
            .build();
        ("OpenAiError", response.into())
    }
}

impl IntoResponses for OpenAiErrors {
    fn responses() -> BTreeMap<String, RefOr<ResponseDoc>> {
        STATUSES
            .iter()
            .map(|status| ((*status).to_owned(), Ref::from_response_name("OpenAiError").into()))
            .collect()
    }
}
