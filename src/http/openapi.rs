//! The OpenAPI document, generated from the handlers and types. `openapi.yaml` at the
//! repository root is this document; a test keeps the two equal.

use std::sync::OnceLock;

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{Modify, OpenApi};
use utoipa_swagger_ui::SwaggerUi;

use super::error::{
    BadRequest, Conflict, Forbidden, Internal, KeyReused, LlmFailed, NotFound, PayloadTooLarge,
    Problem, RateLimited, RevisionMismatch, StorageFull, Unauthorized, Unavailable,
    UnsupportedMediaType,
};
use super::examples::Examples;
use super::extract::id_schema;
use super::openai::{self, ErrorBody, OpenAiErrors, Schemas as OpenAiSchemas};
use super::runs::RunStreamEvent;
use super::{
    agents, api_keys, chat, checkpoints, compactions, forks, history, items, metrics, operations,
    owner_state, runs, sessions, state, AppState,
};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "agent-sessions",
        description = "Keeps AI-agent conversation sessions and their items, and runs agent \
                       turns against them. Errors are RFC 9457 problem documents with a \
                       stable `code`.",
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
        history::replace_item,
        history::replace_items,
        state::read,
        state::replace,
        state::merge,
        owner_state::read_app,
        owner_state::replace_app,
        owner_state::merge_app,
        owner_state::read_user,
        owner_state::replace_user,
        owner_state::merge_user,
        checkpoints::put_checkpoint,
        checkpoints::put_writes,
        checkpoints::get_checkpoint,
        checkpoints::list,
        checkpoints::tenant::list_all,
        checkpoints::delete_all,
        checkpoints::tenant::delete_runs,
        checkpoints::tenant::prune,
        forks::fork_session,
        compactions::compact,
        compactions::list_compactions,
        compactions::get_context,
        agents::create_agent,
        agents::list_agents,
        agents::get_agent,
        agents::update_agent,
        agents::delete_agent,
        runs::create_run,
        runs::list_runs,
        runs::get_run,
        runs::run_events,
        runs::cancel_run,
        runs::submit_tool_outputs,
        runs::submit_approvals,
        openai::conversations::create,
        openai::conversations::read,
        openai::conversations::update,
        openai::conversations::remove,
        openai::conversations::list_items,
        openai::conversations::add_items,
        openai::conversations::read_item,
        openai::conversations::delete_item,
        openai::responses::create::create,
        openai::responses::read::read,
        openai::responses::control::remove,
        openai::responses::control::cancel,
        openai::responses::read::input_items,
        openai::compact::compact,
        openai::models::list,
        openai::models::retrieve,
        chat::chat,
        chat::resume_stream,
        chat::chat_messages,
        api_keys::create_api_key,
        api_keys::list_api_keys,
        api_keys::delete_api_key,
        operations::healthz,
        operations::livez,
        operations::readyz,
        openapi_yaml,
        metrics::export,
    ),
    components(
        schemas(Problem, RunStreamEvent, ErrorBody, chat::UiMessageChunk),
        responses(
        BadRequest,
        Unauthorized,
        Forbidden,
        RateLimited,
        NotFound,
        Conflict,
        KeyReused,
        RevisionMismatch,
        LlmFailed,
        PayloadTooLarge,
        UnsupportedMediaType,
        Unavailable,
        StorageFull,
        Internal,
        OpenAiErrors
    ),
    ),
    modifiers(&OpenAiSchemas, &ContractDetails, &Examples),
    tags(
        (name = "sessions", description = "Conversation sessions"),
        (name = "items", description = "A session's history"),
        (name = "state", description = "JSON documents kept beside a session and shared by its app and user, each written with its revision"),
        (name = "checkpoints", description = "Snapshots of an agent's execution (LangGraph's checkpoints), per session and namespace"),
        (name = "agents", description = "Reusable run configuration"),
        (name = "runs", description = "Running the agent's next turn over a session"),
        (name = "compactions", description = "Summaries of a session's older items, and what runs send"),
        (name = "openai", description = "OpenAI's Conversations and Responses API over the same sessions and runs; errors in OpenAI's shape"),
        (name = "chat", description = "The Vercel AI SDK's chat (`useChat`) over the same sessions and runs"),
        (name = "api_keys", description = "The tenants' API keys, managed with the admin key"),
        (name = "operations", description = "Health, readiness, metrics and this document"),
    )
)]
pub struct ApiDoc;

/// What holds for every operation, added in one place rather than on each handler.
struct ContractDetails;

impl Modify for ContractDetails {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let request_id = || {
            HeaderBuilder::new()
                .schema(ObjectBuilder::new().schema_type(Type::String))
                .description(Some("The request's `x-request-id`, or a generated UUIDv7"))
                .build()
        };
        let replayed = || {
            HeaderBuilder::new()
                .schema(ObjectBuilder::new().schema_type(Type::String))
                .description(Some("`true` when this answers a retry"))
                .build()
        };
        let etag = || {
            HeaderBuilder::new()
                .schema(ObjectBuilder::new().schema_type(Type::String))
                .description(Some(
                    "The revision of the session (of the app's or user's document on their routes) after this answer, in quotes: what `If-Match` takes",
                ))
                .build()
        };
        for (path, item) in openapi.paths.paths.iter_mut() {
            // A session's own reads answer its revision, a state document's read its own.
            let tagged_read = path == "/v1/sessions/{session_id}"
                || path == "/v1/sessions/{session_id}/items"
                || path.ends_with("/state");
            let operations = [
                (&mut item.get, false),
                (&mut item.post, true),
                (&mut item.put, true),
                (&mut item.patch, true),
                (&mut item.delete, true),
            ];
            for (operation, operation_writes) in operations {
                let Some(operation) = operation else { continue };
                if path.starts_with("/v1/") {
                    // Any request can run into the time limit, a lost database or a
                    // fault, and, with authentication on, the key check and the rate limit.
                    for (status, name) in [
                        ("401", "Unauthorized"),
                        ("403", "Forbidden"),
                        ("429", "RateLimited"),
                        ("500", "Internal"),
                        ("503", "Unavailable"),
                    ] {
                        operation
                            .responses
                            .responses
                            .entry(status.into())
                            .or_insert_with(|| Ref::from_response_name(name).into());
                    }
                    if operation_writes {
                        operation
                            .responses
                            .responses
                            .entry("507".into())
                            .or_insert_with(|| Ref::from_response_name("StorageFull").into());
                    }
                    // A key is needed only with `ADMIN_API_KEY` set: the empty
                    // requirement says that the service may run without one.
                    operation.security = Some(vec![
                        SecurityRequirement::new("bearer", Vec::<String>::new()),
                        SecurityRequirement::default(),
                    ]);
                }
                let (mut idempotent, mut conditional) = (false, false);
                for parameter in operation.parameters.iter_mut().flatten() {
                    parameter.schema = id_schema(&parameter.name).or(parameter.schema.take());
                    match parameter.name.as_str() {
                        "Last-Event-ID" => parameter.schema = Some(event_id_schema().into()),
                        "Idempotency-Key" => idempotent = true,
                        "If-Match" => conditional = true,
                        _ => {}
                    }
                }
                if conditional {
                    operation
                        .responses
                        .responses
                        .entry("412".into())
                        .or_insert_with(|| Ref::from_response_name("RevisionMismatch").into());
                }
                // What a conditional write answers (but a 204's nothing) carries the
                // revision it made.
                let tagged = conditional || tagged_read;
                for (status, response) in operation.responses.responses.iter_mut() {
                    if let RefOr::T(response) = response {
                        response.headers.insert("x-request-id".into(), request_id());
                        // Any success of a retry-safe operation may answer a retry.
                        if idempotent && status.starts_with('2') {
                            response.headers.insert("idempotent-replayed".into(), replayed());
                        }
                        if tagged && status.starts_with('2') && status != "204" {
                            response.headers.insert("etag".into(), etag());
                        }
                    }
                }
            }
        }
        if let Some(components) = openapi.components.as_mut() {
            components.add_security_scheme(
                "bearer",
                SecurityScheme::Http(
                    HttpBuilder::new()
                        .scheme(HttpAuthScheme::Bearer)
                        .description(Some(
                            "An API key (`ask_…`), or for `/v1/api_keys` the admin key; needed only when the service runs with `ADMIN_API_KEY`",
                        ))
                        .build(),
                ),
            );
            if let Some(RefOr::T(Schema::Object(request))) =
                components.schemas.get_mut("CreateRunRequest")
            {
                // `stream` and `background` ask for answers that exclude each other; utoipa
                // has no field for `not`, which serializes the same as an extension.
                let both = serde_json::json!({
                    "required": ["stream", "background"],
                    "properties": {"stream": {"const": true}, "background": {"const": true}},
                });
                request.extensions.get_or_insert_with(Default::default).insert("not".into(), both);
            }
            if let Some(RefOr::T(Schema::Object(request))) =
                components.schemas.get_mut("ForkSessionRequest")
            {
                // A fork is cut at an item or before a run, not both (null is absent).
                let both = serde_json::json!({
                    "required": ["through_item_id", "before_run_id"],
                    "properties": {
                        "through_item_id": {"type": "string"},
                        "before_run_id": {"type": "string"},
                    },
                });
                request.extensions.get_or_insert_with(Default::default).insert("not".into(), both);
            }
            for response in components.responses.values_mut() {
                if let RefOr::T(response) = response {
                    response.headers.insert("x-request-id".into(), request_id());
                }
            }
        }
    }
}

/// The `id:` of a run's event, as `Last-Event-ID` sends it back.
fn event_id_schema() -> Schema {
    ObjectBuilder::new().schema_type(Type::String).pattern(Some("^[0-9]{1,18}$")).into()
}

/// The document as YAML, generated once. It goes through `serde_json::Value` so that
/// every object's keys come out sorted: utoipa keeps JSON Schema keywords it has no field
/// for (`contentSchema`) in a `HashMap`, whose order changes from process to process.
pub fn yaml() -> &'static str {
    static YAML: OnceLock<String> = OnceLock::new();
    YAML.get_or_init(|| {
        let document =
            serde_json::to_value(ApiDoc::openapi()).expect("the OpenAPI document serializes");
        serde_norway::to_string(&document).expect("a JSON value serializes as YAML")
    })
}

/// The document at `/openapi.yaml`, and the interactive docs on it at `/docs`.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/openapi.yaml", get(openapi_yaml))
        .merge(SwaggerUi::new("/docs").url("/openapi.json", ApiDoc::openapi()))
}

/// This API's OpenAPI document.
#[utoipa::path(get, path = "/openapi.yaml", tag = "operations",
    responses(
        (status = 200, description = "The OpenAPI document", body = Object, content_type = "application/yaml"),
    ))]
async fn openapi_yaml() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/yaml")], yaml())
}
