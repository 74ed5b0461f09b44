//! Schemas of the runs API that the derive cannot express, written with utoipa's builders:
//! a run's `input` (a string, an item or 1 to 1000 items) and its `text/event-stream`
//! events, whose `data` is JSON text that JSON Schema describes with `contentSchema`.

use std::borrow::Cow;

use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::schema::{
    AdditionalProperties, ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, Type,
};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};

use crate::model::{CompactionCreated, ItemBody, ItemCreated, MessageDelta, Run, RunEvent};

/// The schema of `input` on a new run.
pub struct RunInput;

impl PartialSchema for RunInput {
    fn schema() -> RefOr<Schema> {
        let item = || {
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .additional_properties(Some(AdditionalProperties::<Schema>::FreeForm(true)))
        };
        OneOfBuilder::new()
            .item(ObjectBuilder::new().schema_type(Type::String).min_length(Some(1)))
            .item(item())
            .item(
                ArrayBuilder::new()
                    .items(item())
                    .min_items(Some(1))
                    .max_items(Some(ItemBody::MAX_BATCH)),
            )
            .description(Some(
                "What a run is given: a non-empty string (a user message), one item, or a list \
                 of 1 to 1000 items.",
            ))
            .into()
    }
}

impl ToSchema for RunInput {}

/// The schema of one event of a run's `text/event-stream`, as an SSE parser reads it:
/// `event` names it, `id` numbers it from 1 within the run, `data` is JSON.
pub struct RunStreamEvent;

impl PartialSchema for RunStreamEvent {
    fn schema() -> RefOr<Schema> {
        let run_events = [
            RunEvent::CREATED,
            RunEvent::STARTED,
            RunEvent::REQUIRES_ACTION,
            RunEvent::COMPLETED,
            RunEvent::FAILED,
            RunEvent::CANCELLED,
            RunEvent::INTERRUPTED,
        ];
        OneOfBuilder::new()
            .item(event(&run_events, Run::name()))
            .item(event(&[RunEvent::MESSAGE_DELTA], MessageDelta::name()))
            .item(event(&[RunEvent::ITEM_CREATED], ItemCreated::name()))
            .item(event(&[RunEvent::COMPACTION_CREATED], CompactionCreated::name()))
            .description(Some(
                "One server-sent event of a run. `run.created`, `run.started`, \
                 `run.requires_action`, `run.completed`, `run.failed`, `run.cancelled` and \
                 `run.interrupted` carry the Run; `message.delta` a MessageDelta; `item.created` an \
                 ItemCreated; `compaction.created` a CompactionCreated.",
            ))
            .into()
    }
}

impl ToSchema for RunStreamEvent {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((Run::name().into(), Run::schema()));
        schemas.push((MessageDelta::name().into(), MessageDelta::schema()));
        schemas.push((ItemCreated::name().into(), ItemCreated::schema()));
        schemas.push((CompactionCreated::name().into(), CompactionCreated::schema()));
        CompactionCreated::schemas(schemas);
        Run::schemas(schemas);
    }
}

/// An event named one of `names` whose `data` is JSON of the schema `data`.
fn event(names: &[&str], data: Cow<'static, str>) -> ObjectBuilder {
    let json = Extensions::from_iter([
        ("contentMediaType", serde_json::json!("application/json")),
        (
            "contentSchema",
            serde_json::to_value(Ref::from_schema_name(data)).expect("a reference serializes"),
        ),
    ]);
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property(
            "event",
            ObjectBuilder::new().schema_type(Type::String).enum_values(Some(names.iter().copied())),
        )
        .required("event")
        .property(
            "id",
            ObjectBuilder::new().schema_type(Type::String).pattern(Some("^[1-9][0-9]*$")),
        )
        .required("id")
        .property("data", ObjectBuilder::new().schema_type(Type::String).extensions(Some(json)))
        .required("data")
        .additional_properties(Some(AdditionalProperties::<Schema>::FreeForm(false)))
}
