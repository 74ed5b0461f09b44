//! The schema of one event of the UI message stream, as an SSE parser reads it: no event
//! name and no id, `data` a JSON chunk (or `[DONE]`, last).

use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;
use utoipa::{PartialSchema, ToSchema};

pub struct UiMessageChunk;

/// The chunk types the stream sends.
const TYPES: [&str; 13] = [
    "start",
    "start-step",
    "text-start",
    "text-delta",
    "text-end",
    "tool-input-available",
    "tool-output-available",
    "tool-output-error",
    "tool-output-denied",
    "tool-approval-request",
    "finish-step",
    "finish",
    "error",
];

impl PartialSchema for UiMessageChunk {
    fn schema() -> RefOr<Schema> {
        let chunk = ObjectBuilder::new()
            .schema_type(Type::Object)
            .property(
                "type",
                ObjectBuilder::new().schema_type(Type::String).enum_values(Some(TYPES)),
            )
            .required("type");
        let json = Extensions::from_iter([
            ("contentMediaType", serde_json::json!("application/json")),
            (
                "contentSchema",
                serde_json::to_value(Schema::Object(chunk.build())).expect("a schema serializes"),
            ),
        ]);
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .property("data", ObjectBuilder::new().schema_type(Type::String).extensions(Some(json)))
            .required("data")
            .additional_properties(Some(AdditionalProperties::<Schema>::FreeForm(false)))
            .description(Some(
                "One server-sent event of the AI SDK's UI message stream: `data` is a JSON \
                 chunk whose `type` is one of `start` (with `messageId`, the run's id), \
                 `start-step`, `text-start` / `text-delta` / `text-end`, \
                 `tool-input-available`, `tool-output-available`, `tool-output-error`, \
                 `tool-output-denied`, \
                 `tool-approval-request`, `finish-step`, `finish` (with `finishReason` and \
                 `messageMetadata: {run_id, status, usage}`) or `error` (with `errorText`); \
                 the last event's `data` is `[DONE]`.",
            ))
            .into()
    }
}

impl ToSchema for UiMessageChunk {}
