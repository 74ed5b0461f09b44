//! The OpenAPI document, generated from the handlers and types. `openapi.yaml` at the
//! repository root is this document; a test keeps the two equal.

use std::sync::OnceLock;

use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{OpenApi, ToResponse};

use super::error::Problem;
use super::{items, metrics, operations, sessions};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "agent-sessions",
        description = "Keeps AI-agent conversation sessions and their items. Errors are \
                       RFC 9457 problem documents with a stable `code`.",
        license(name = "MIT", identifier = "MIT"),
    ),
    paths(
        sessions::create_session,
        sessions::list_sessions,
        sessions::get_session,
        sessions::update_session,
        sessions::delete_session,
        items::list_items,
        items::append_items,
        items::get_item,
        items::delete_item,
        items::pop_last_item,
        items::clear_items,
        operations::healthz,
        operations::readyz,
        operations::openapi_yaml,
        metrics::export,
    ),
    components(
        schemas(Problem),
        responses(
        BadRequest,
        NotFound,
        Conflict,
        KeyReused,
        PayloadTooLarge,
        UnsupportedMediaType,
        Unavailable,
        Internal
    ),
    ),
    tags(
        (name = "sessions", description = "Conversation sessions"),
        (name = "items", description = "A session's history"),
        (name = "operations", description = "Health, readiness, metrics and this document"),
    )
)]
pub struct ApiDoc;

/// The document as YAML, generated once.
pub fn yaml() -> &'static str {
    static YAML: OnceLock<String> = OnceLock::new();
    YAML.get_or_init(|| {
        ApiDoc::openapi()
            .to_yaml()
            .expect("the OpenAPI document serializes")
    })
}

/// Declares the problem+json responses that operations refer to by name.
macro_rules! problem_responses {
    ($($name:ident => $description:literal,)*) => {$(
        #[doc = $description]
        pub struct $name;

        impl<'s> ToResponse<'s> for $name {
            fn response() -> (&'s str, RefOr<Response>) {
                (stringify!($name), problem_response($description))
            }
        }
    )*};
}

problem_responses! {
    BadRequest => "`invalid_request`: the detail names the field at fault",
    NotFound => "`session_not_found`, `item_not_found` or `session_empty`",
    Conflict => "`session_exists`: the id is taken",
    KeyReused => "`idempotency_key_reused`: the key came with a different request before",
    PayloadTooLarge => "`payload_too_large`: the body is over MAX_BODY_BYTES",
    UnsupportedMediaType => "`unsupported_media_type`: the body is not JSON",
    Unavailable => "`database_unavailable`",
    Internal => "`internal_error`: logged with the request id",
}

fn problem_response(description: &str) -> RefOr<Response> {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/problem+json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("Problem")))
                .build(),
        )
        .build()
        .into()
}
