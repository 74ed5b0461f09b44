//! The JSON Schemas of the request fields that are JSON values checked by hand (input
//! items, tools, `tool_choice`, `text`, `context_management`, `conversation`), so that
//! the document says exactly what those checks take; the input items' come from the
//! table they are checked against (`item_shapes.rs`). They are JSON literals because
//! that is how OpenAI documents them and how they read best; utoipa reads a schema from
//! JSON, and refuses to lose a keyword in doing so.

use serde_json::{json, Value};
use utoipa::openapi::schema::Schema;
use utoipa::openapi::{Ref, RefOr};
use utoipa::{Modify, PartialSchema, ToSchema};

use super::item_shapes;
use super::responses::events::{OutputText, ResponseEvent};

/// The components the fields below refer to.
pub struct Components;

impl Modify for Components {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let parts = json!({"oneOf": [
            {"type": "string"},
            {"type": "array", "items": component("OpenAiContentPart")},
        ]});
        for (name, literal) in [
            ("OpenAiContentPart", item_shapes::part_schema()),
            ("OpenAiInputItem", item_shapes::item_schema(parts)),
            ("OpenAiInput", input_literal()),
        ] {
            components.schemas.insert(name.into(), schema(literal));
        }
        // What the handlers refuse of fields together; utoipa has no field for these
        // keywords, which serialize the same as extensions.
        let given = |name: &str| (name.to_owned(), json!({"not": {"type": "null"}}));
        let both = |a: (String, Value), b: (String, Value)| json!({"required": [a.0, b.0], "properties": {a.0: a.1, b.0: b.1}});
        let is = |name: &str, value: bool| (name.to_owned(), json!({"const": value}));
        let response = json!([
            {"not": both(is("background", true), is("store", false))},
            {"not": both(given("conversation"), given("previous_response_id"))},
            {"anyOf": [
                {"not": {"required": ["if_busy"], "properties": {"if_busy": {"not": {"type": "null"}}}}},
                {"required": ["conversation"], "properties": {"conversation": {"not": {"type": "null"}}}},
            ]},
            {"not": both(given("if_busy"), is("store", false))},
        ]);
        let compact = json!([
            {"not": both(given("input"), given("previous_response_id"))},
            {"anyOf": [
                {"required": ["input"], "properties": {"input": {"not": {"type": "null"}}}},
                {"required": ["previous_response_id"], "properties": {"previous_response_id": {"type": "string"}}},
            ]},
        ]);
        for (name, rules) in [("CreateResponse", response), ("CompactRequest", compact)] {
            let Some(RefOr::T(Schema::Object(request))) = components.schemas.get_mut(name) else {
                panic!("the document has no {name} object to constrain");
            };
            request.extensions.get_or_insert_with(Default::default).insert("allOf".into(), rules);
        }
    }
}

/// One server-sent event of a response's stream: named by its `type`, its data the event
/// as JSON, numbered by `sequence_number`.
pub struct StreamEvent;

impl utoipa::PartialSchema for StreamEvent {
    fn schema() -> RefOr<Schema> {
        let names = ResponseEvent::NAMES;
        let event = json!({
            "allOf": [component(&ResponseEvent::name())],
            "required": ["sequence_number"],
            "properties": {"sequence_number": {"type": "integer", "minimum": 0}},
        });
        let mut stream_event = schema(json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["event", "data"],
            "properties": {
                "event": {"type": "string", "enum": names},
                "data": {"type": "string", "contentMediaType": "application/json"},
            },
        }));
        // utoipa has no field for `contentSchema`, which serializes the same as an extension.
        if let RefOr::T(Schema::Object(object)) = &mut stream_event {
            if let Some(RefOr::T(Schema::Object(data))) = object.properties.get_mut("data") {
                data.extensions
                    .get_or_insert_with(Default::default)
                    .insert("contentSchema".into(), event);
            }
        }
        stream_event
    }
}

impl utoipa::ToSchema for StreamEvent {
    fn name() -> std::borrow::Cow<'static, str> {
        "OpenAiStreamEvent".into()
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((ResponseEvent::name().into(), ResponseEvent::schema()));
        schemas.push((OutputText::name().into(), OutputText::schema()));
    }
}

fn schema(literal: Value) -> RefOr<Schema> {
    let read: RefOr<Schema> =
        serde_json::from_value(literal.clone()).expect("a schema literal reads as a schema");
    // utoipa's types drop the keywords they have no field for; none may be lost.
    assert_eq!(serde_json::to_value(&read).ok(), Some(literal), "a keyword was lost");
    read
}

fn component(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn kind(name: &str) -> Value {
    json!({"type": "string", "enum": [name]})
}

fn input_literal() -> Value {
    json!({
        "description": "A string (a user message) or a list of items.",
        "oneOf": [
            {"type": "string", "minLength": 1},
            {"type": "array", "minItems": 1, "items": component("OpenAiInputItem")},
        ],
    })
}

fn nullable(literal: Value) -> RefOr<Schema> {
    schema(json!({"oneOf": [{"type": "null"}, literal]}))
}

/// `input` of a response.
pub fn input() -> RefOr<Schema> {
    Ref::from_schema_name("OpenAiInput").into()
}

/// `input` of a compaction, which may name a response instead.
pub fn optional_input() -> RefOr<Schema> {
    nullable(component("OpenAiInput"))
}

/// The items a conversation starts with.
pub fn initial_items() -> RefOr<Schema> {
    nullable(json!({"type": "array", "maxItems": 20, "items": component("OpenAiInputItem")}))
}

/// The items added to a conversation.
pub fn added_items() -> RefOr<Schema> {
    schema(
        json!({"type": "array", "minItems": 1, "maxItems": 20, "items": component("OpenAiInputItem")}),
    )
}

/// `conversation`: its id, or `{"id"}`.
pub fn conversation() -> RefOr<Schema> {
    nullable(json!({"oneOf": [
        {"type": "string"},
        {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}},
    ]}))
}

/// `function` tools, the only kind the caller can run (request.rs `tools`); the names
/// follow the engine's tool names.
pub fn tools() -> RefOr<Schema> {
    let name = json!({"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"});
    let names = json!({"type": "array", "items": {"type": "string"}});
    let filter = |key: &str, value: Value| {
        json!({"type": "object", "required": [key], "additionalProperties": false,
               "properties": {key: value}})
    };
    let function = json!({"type": "object", "required": ["type", "name"], "properties": {
        "type": kind("function"), "name": name, "description": {"type": ["string", "null"]},
        "parameters": {"type": ["object", "null"]},
    }});
    let mcp = json!({"type": "object", "required": ["type", "server_label", "server_url"],
        "additionalProperties": false, "properties": {
        "type": kind("mcp"),
        "server_label": name,
        "server_url": {"type": "string", "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://[^/?#]"},
        "server_description": {"type": ["string", "null"]},
        "allowed_tools": {"oneOf": [names, filter("tool_names", names.clone())]},
        "require_approval": {"oneOf": [
            {"type": "string", "enum": ["always", "never"]},
            filter("never", filter("tool_names", names.clone())),
        ]},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
    }});
    nullable(json!({"type": "array", "maxItems": 128, "items": {"oneOf": [function, mcp]}}))
}

pub fn tool_choice() -> RefOr<Schema> {
    nullable(json!({"oneOf": [
        {"type": "string", "enum": ["auto", "none", "required"]},
        {"type": "object", "required": ["type", "name"], "properties": {"type": kind("function"), "name": {"type": "string"}}},
    ]}))
}

/// `text`: the output's format (request.rs `response_format`) and its verbosity.
pub fn text() -> RefOr<Schema> {
    let format = json!({"oneOf": [
        {"type": "null"},
        {"type": "object", "required": ["type"], "properties": {"type": kind("text")}},
        {"type": "object", "required": ["type"], "properties": {"type": kind("json_object")}},
        {
            "type": "object",
            "required": ["type", "name", "schema"],
            "properties": {"type": kind("json_schema"), "name": {"type": "string"}, "schema": {"type": "object"}},
        },
    ]});
    let verbosity = json!({"type": ["string", "null"], "enum": ["low", "medium", "high", null]});
    nullable(json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {"format": format, "verbosity": verbosity},
    }))
}

/// `[{"type": "compaction", "compact_threshold"}]`.
pub fn context_management() -> RefOr<Schema> {
    nullable(json!({
        "type": "array",
        "items": {
            "type": "object",
            "required": ["type", "compact_threshold"],
            "properties": {
                "type": kind("compaction"),
                "compact_threshold": {"type": "integer", "minimum": 1, "maximum": 2147483647},
            },
        },
    }))
}

pub fn truncation() -> RefOr<Schema> {
    schema(json!({"type": ["string", "null"], "enum": ["auto", "disabled", null]}))
}

/// Fields that are refused unless null.
pub fn refused() -> RefOr<Schema> {
    schema(json!({"type": "null"}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_reads_whole() {
        let parts = json!({"type": "string"});
        for literal in
            [item_shapes::part_schema(), item_shapes::item_schema(parts), input_literal()]
        {
            schema(literal);
        }
        let _ = [
            optional_input(),
            initial_items(),
            added_items(),
            conversation(),
            tools(),
            tool_choice(),
            text(),
            context_management(),
            truncation(),
            refused(),
        ];
    }
}
