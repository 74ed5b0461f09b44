//! The events of a response's stream as one type: the translator builds them, serde
//! writes their `data`, and the document's schema of that `data` is derived from them.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// Declares the events, each with its name: the `type` of its `data` and its `event:`
/// line.
macro_rules! response_events {
    ($(
        $(#[$doc:meta])*
        $variant:ident = $name:tt { $($(#[$field_attr:meta])* $field:ident: $ty:ty),* $(,)? },
    )*) => {
        /// One event of a response's stream, as its `data` carries it (with its
        /// `sequence_number`, counted from 0 over the run's events).
        #[derive(Debug, Serialize, ToSchema)]
        #[serde(tag = "type")]
        #[schema(as = OpenAiResponseEvent)]
        pub enum ResponseEvent {$(
            $(#[$doc])*
            #[serde(rename = $name)]
            $variant { $($(#[$field_attr])* $field: $ty),* },
        )*}

        impl ResponseEvent {
            /// Every event's name, in the order a stream may send them.
            pub const NAMES: &[&str] = &[$($name),*];

            pub fn event_name(&self) -> &'static str {
                match self {
                    $(Self::$variant { .. } => $name,)*
                }
            }
        }
    };
}

response_events! {
    /// The response as it was created, its output empty.
    Created = "response.created" { response: Value },
    /// The response once its run runs, its output empty.
    InProgress = "response.in_progress" { response: Value },
    /// An output item begins: an assistant message with no content yet, a function call
    /// with no arguments yet, or any other item whole.
    OutputItemAdded = "response.output_item.added" {
        output_index: usize, item: Value,
    },
    /// The message's text part begins, empty.
    ContentPartAdded = "response.content_part.added" {
        item_id: String, output_index: usize, content_index: usize, part: OutputText,
    },
    /// Text of the message, as the model streams it.
    OutputTextDelta = "response.output_text.delta" {
        item_id: String, output_index: usize, content_index: usize, delta: String,
        logprobs: Vec<Value>,
    },
    /// The message's whole text.
    OutputTextDone = "response.output_text.done" {
        item_id: String, output_index: usize, content_index: usize, text: String,
        logprobs: Vec<Value>,
    },
    /// The message's text part, whole.
    ContentPartDone = "response.content_part.done" {
        item_id: String, output_index: usize, content_index: usize, part: OutputText,
    },
    /// A function call's arguments, in one delta.
    FunctionCallArgumentsDelta = "response.function_call_arguments.delta" {
        item_id: String, output_index: usize, #[schema(value_type = String)] delta: Value,
    },
    /// A function call's whole arguments, and the function's name.
    FunctionCallArgumentsDone = "response.function_call_arguments.done" {
        item_id: String, output_index: usize,
        #[schema(value_type = String)] arguments: Value, #[schema(value_type = String)] name: Value,
    },
    /// An output item, whole.
    OutputItemDone = "response.output_item.done" {
        output_index: usize, item: Value,
    },
    /// The response, whole, as it completed.
    Completed = "response.completed" { response: Value },
    /// The response, whole, as far as it got: cut short by a limit or interrupted.
    Incomplete = "response.incomplete" { response: Value },
    /// The response, whole, failed or cancelled.
    Failed = "response.failed" { response: Value },
    /// The stream broke off: the message says where to read on from.
    Error = "error" {
        code: &'static str, message: String, #[schema(required = true)] param: Option<String>,
    },
}

/// An `output_text` content part as the stream shows it: no annotations, no log
/// probabilities.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = OpenAiOutputText)]
pub struct OutputText {
    /// `output_text`.
    #[serde(rename = "type")]
    #[schema(value_type = String, pattern = "^output_text$")]
    kind: &'static str,
    pub text: String,
    #[schema(value_type = Vec<Object>)]
    annotations: [Value; 0],
    #[schema(value_type = Vec<Object>)]
    logprobs: [Value; 0],
}

impl OutputText {
    pub fn new(text: String) -> Self {
        Self { kind: "output_text", text, annotations: [], logprobs: [] }
    }
}

/// An event with its place in the stream: what an event's `data` is.
#[derive(Serialize)]
pub struct Numbered<'a> {
    #[serde(flatten)]
    pub event: &'a ResponseEvent,
    pub sequence_number: i64,
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use utoipa::PartialSchema;

    use super::*;

    #[test]
    fn an_events_type_is_its_name_and_its_number_goes_beside_it() {
        let events = [
            ResponseEvent::Created { response: json!({"id": "resp_1"}) },
            ResponseEvent::OutputTextDelta {
                item_id: "msg_1".into(),
                output_index: 2,
                content_index: 0,
                delta: "Hi".into(),
                logprobs: Vec::new(),
            },
            ResponseEvent::ContentPartDone {
                item_id: "msg_1".into(),
                output_index: 2,
                content_index: 0,
                part: OutputText::new("Hi there".into()),
            },
            ResponseEvent::Error { code: "server_error", message: "broke".into(), param: None },
        ];
        for event in &events {
            let data = serde_json::to_value(Numbered { event, sequence_number: 7 }).unwrap();
            assert_eq!(data["type"], event.event_name(), "{data}");
            assert_eq!(data["sequence_number"], 7, "{data}");
            assert!(ResponseEvent::NAMES.contains(&event.event_name()));
        }
        let delta = serde_json::to_value(Numbered { event: &events[1], sequence_number: 3 });
        assert_eq!(
            delta.unwrap(),
            json!({"type": "response.output_text.delta", "sequence_number": 3, "item_id": "msg_1",
                   "output_index": 2, "content_index": 0, "delta": "Hi", "logprobs": []})
        );
        let part = serde_json::to_value(&events[2]).unwrap();
        assert_eq!(
            part["part"],
            json!({"type": "output_text", "text": "Hi there", "annotations": [], "logprobs": []})
        );
        assert_eq!(serde_json::to_value(&events[3]).unwrap()["param"], Value::Null);
    }

    #[test]
    fn the_schema_gives_each_event_the_type_serde_writes() {
        let schema = serde_json::to_value(ResponseEvent::schema()).unwrap();
        let types: Vec<&str> = (schema["oneOf"].as_array().unwrap().iter())
            .map(|event| event["properties"]["type"]["enum"][0].as_str().unwrap())
            .collect();
        assert_eq!(types, ResponseEvent::NAMES);
    }
}
