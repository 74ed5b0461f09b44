//! The schema of one event of the UI message stream, as an SSE parser reads it: no event
//! name and no id, `data` a JSON chunk (or `[DONE]`, last).

use serde_json::json;
use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::openapi::RefOr;
use utoipa::{PartialSchema, ToSchema};

use super::chunks::UiChunk;

pub struct UiMessageChunk;

impl PartialSchema for UiMessageChunk {
    fn schema() -> RefOr<Schema> {
        let chunk = json!({"$ref": format!("#/components/schemas/{}", UiChunk::name())});
        let json = Extensions::from_iter([
            ("contentMediaType", json!("application/json")),
            ("contentSchema", chunk),
        ]);
        // No event name: an SSE parser reads the event as `message`.
        let event = |data: ObjectBuilder| {
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .property(
                    "event",
                    ObjectBuilder::new().schema_type(Type::String).enum_values(Some(["message"])),
                )
                .property("data", data)
                .required("data")
                .additional_properties(Some(AdditionalProperties::<Schema>::FreeForm(false)))
        };
        let done = ObjectBuilder::new().schema_type(Type::String).enum_values(Some(["[DONE]"]));
        let chunk = ObjectBuilder::new().schema_type(Type::String).extensions(Some(json));
        OneOfBuilder::new()
            .item(event(chunk))
            .item(event(done))
            .description(Some(
                "One server-sent event of the AI SDK's UI message stream: `data` is a JSON \
                 chunk whose `type` is one of `start` (with `messageId`, the run's id), \
                 `start-step`, `text-start` / `text-delta` / `text-end`, \
                 `tool-input-available`, `tool-output-available`, `tool-output-error`, \
                 `tool-output-denied`, `tool-approval-request`, `finish-step`, `finish` (with \
                 `finishReason` and `messageMetadata: {run_id, status, usage}`) or `error` \
                 (with `errorText`); the last event's `data` is `[DONE]`.",
            ))
            .into()
    }
}

impl ToSchema for UiMessageChunk {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((UiChunk::name().into(), UiChunk::schema()));
    }
}
