//! What the chat shows of a run's items, shared by the live stream and the history: which
//! items are text, tool calls and their outputs, and where the AI SDK's steps (one per
//! model call) begin and end.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// An item as the chat shows it.
pub enum Said {
    /// A message: its role and its text.
    Message { role: String, text: String },
    /// A call of a tool the model made, with the JSON of its arguments.
    Call { call_id: String, name: String, input: Value },
    /// A tool's answer to a call.
    Output { call_id: String, output: Value },
    /// Anything else (reasoning, compactions, custom items): not shown.
    Other,
}

impl Said {
    pub fn read(item: &RawValue) -> Self {
        #[derive(Deserialize)]
        struct Fields {
            #[serde(rename = "type")]
            kind: Option<String>,
            role: Option<String>,
            content: Option<Value>,
            call_id: Option<String>,
            name: Option<String>,
            arguments: Option<String>,
            output: Option<Value>,
        }
        let Ok(fields) = serde_json::from_str::<Fields>(item.get()) else {
            return Self::Other;
        };
        match (fields.kind.as_deref(), fields.role, fields.call_id) {
            (None | Some("message"), Some(role), _) => {
                Self::Message { role, text: text_of(fields.content.as_ref()) }
            }
            (Some("function_call"), _, Some(call_id)) => Self::Call {
                call_id,
                name: fields.name.unwrap_or_default(),
                input: json_or_text(fields.arguments.as_deref().unwrap_or_default()),
            },
            (Some("function_call_output"), _, Some(call_id)) => {
                let output = match fields.output {
                    Some(Value::String(text)) => json_or_text(&text),
                    other => other.unwrap_or(Value::Null),
                };
                Self::Output { call_id, output }
            }
            _ => Self::Other,
        }
    }

    /// Whether the model made this item (its text or a call): a part of a step.
    pub fn by_model(&self) -> bool {
        match self {
            Self::Message { role, .. } => role == "assistant",
            Self::Call { .. } => true,
            Self::Output { .. } | Self::Other => false,
        }
    }
}

/// A message's text: its `content` string, or its parts' texts joined.
fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => {
            parts.iter().filter_map(|part| part["text"].as_str()).collect()
        }
        _ => String::new(),
    }
}

/// Arguments and outputs are JSON text when the model or tool wrote JSON: the page gets
/// the value; other text stays text.
fn json_or_text(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// Where a run's parts are in the AI SDK's steps: a step holds one model call's text and
/// tool calls, then the outputs of those calls; the model's next part begins the next.
#[derive(Default)]
pub struct Steps {
    open: bool,
    /// The open step has had a tool's output: the model's next part is a new call.
    answered: bool,
}

/// What a part changes in the steps.
pub struct StepChange {
    pub finish: bool,
    pub start: bool,
}

impl Steps {
    /// Before the model's next part (text or a call).
    pub fn model_part(&mut self) -> StepChange {
        let change =
            StepChange { finish: self.open && self.answered, start: !self.open || self.answered };
        self.open = true;
        self.answered = false;
        change
    }

    /// Before a tool's output: it belongs to the step of its call.
    pub fn tool_output(&mut self) {
        self.answered = true;
    }

    /// At the end of the run or of its stream: whether a step is to be finished.
    pub fn close(&mut self) -> bool {
        std::mem::take(&mut self.open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_owned()).unwrap()
    }

    #[test]
    fn items_read_as_what_the_chat_shows() {
        let said = Said::read(&raw(
            r#"{"role":"assistant","content":[{"type":"output_text","text":"Hi"},{"type":"output_text","text":"!"}]}"#,
        ));
        assert!(
            matches!(said, Said::Message { ref role, ref text } if role == "assistant" && text == "Hi!")
        );
        let said = Said::read(&raw(
            r#"{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"}"#,
        ));
        assert!(matches!(said, Said::Call { ref input, .. } if input["a"] == 1));
        let said = Said::read(&raw(
            r#"{"type":"function_call_output","call_id":"c1","output":"not json"}"#,
        ));
        assert!(matches!(said, Said::Output { ref output, .. } if output == "not json"));
        assert!(matches!(Said::read(&raw(r#"{"type":"reasoning"}"#)), Said::Other));
    }

    #[test]
    fn a_step_ends_where_the_model_speaks_after_tools() {
        let mut steps = Steps::default();
        let first = steps.model_part();
        assert!(first.start && !first.finish);
        let same = steps.model_part();
        assert!(!same.start && !same.finish, "text and calls of one model call are one step");
        steps.tool_output();
        let next = steps.model_part();
        assert!(next.start && next.finish);
        assert!(steps.close());
        assert!(!steps.close());
    }
}
