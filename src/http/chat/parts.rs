//! What the chat shows of a run's items, shared by the live stream and the history: which
//! items are text, tool calls and their outputs, and where the AI SDK's steps (one per
//! model call) begin and end.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// An item as the chat shows it, or a part of one: an MCP call is its call and its answer.
pub enum Said {
    /// A message: its role and its text.
    Message { role: String, text: String },
    /// A call of a tool the model made, with the JSON of its arguments; `mcp` for a tool
    /// of an MCP server (which the page does not know by name).
    Call { call_id: String, name: String, input: Value, mcp: bool },
    /// A tool's answer to a call: its output, or why it has none.
    Output { call_id: String, output: Result<Value, String> },
    /// A person rejected the call.
    Denied { call_id: String },
    /// Anything else (reasoning, compactions, tool lists, custom items): not shown.
    Other,
}

impl Said {
    pub fn read(item: &RawValue) -> Vec<Self> {
        #[derive(Deserialize)]
        struct Fields {
            #[serde(rename = "type")]
            kind: Option<String>,
            role: Option<String>,
            content: Option<Value>,
            call_id: Option<String>,
            id: Option<String>,
            name: Option<String>,
            arguments: Option<String>,
            output: Option<Value>,
            error: Option<String>,
            approval_request_id: Option<String>,
            approve: Option<bool>,
        }
        let Ok(fields) = serde_json::from_str::<Fields>(item.get()) else {
            return vec![Self::Other];
        };
        let input = json_or_text(fields.arguments.as_deref().unwrap_or_default());
        let name = fields.name.unwrap_or_default();
        let output = |output: Option<Value>| match output {
            Some(Value::String(text)) => json_or_text(&text),
            other => other.unwrap_or(Value::Null),
        };
        let said = match (fields.kind.as_deref(), fields.role, fields.call_id, fields.id) {
            (None | Some("message"), Some(role), _, _) => {
                Self::Message { role, text: text_of(fields.content.as_ref()) }
            }
            (Some("function_call"), _, Some(call_id), _) => {
                Self::Call { call_id, name, input, mcp: false }
            }
            (Some("function_call_output"), _, Some(call_id), _) => {
                Self::Output { call_id, output: Ok(output(fields.output)) }
            }
            (Some("mcp_approval_request"), _, _, Some(call_id)) => {
                Self::Call { call_id, name, input, mcp: true }
            }
            (Some("mcp_approval_response"), _, _, _) => {
                match (fields.approval_request_id, fields.approve) {
                    (Some(call_id), Some(false)) => Self::Denied { call_id },
                    _ => Self::Other,
                }
            }
            (Some("mcp_call"), _, _, Some(id)) => {
                let answer = match fields.error {
                    Some(error) => Err(error),
                    None => Ok(output(fields.output)),
                };
                // An approved call answers its request; another is its own call.
                return match fields.approval_request_id {
                    Some(call_id) => vec![Self::Output { call_id, output: answer }],
                    None => vec![
                        Self::Call { call_id: id.clone(), name, input, mcp: true },
                        Self::Output { call_id: id, output: answer },
                    ],
                };
            }
            _ => Self::Other,
        };
        vec![said]
    }

    /// Whether the model made this item (its text or a call): a part of a step.
    pub fn by_model(&self) -> bool {
        match self {
            Self::Message { role, .. } => role == "assistant",
            Self::Call { .. } => true,
            Self::Output { .. } | Self::Denied { .. } | Self::Other => false,
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
        let read = |json: &str| Said::read(&raw(json));
        let said = read(
            r#"{"role":"assistant","content":[{"type":"output_text","text":"Hi"},{"type":"output_text","text":"!"}]}"#,
        );
        assert!(
            matches!(&said[..], [Said::Message { role, text }] if role == "assistant" && text == "Hi!")
        );
        let said =
            read(r#"{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"}"#);
        assert!(matches!(&said[..], [Said::Call { input, mcp: false, .. }] if input["a"] == 1));
        let said = read(r#"{"type":"function_call_output","call_id":"c1","output":"not json"}"#);
        assert!(
            matches!(&said[..], [Said::Output { output: Ok(output), .. }] if output == "not json")
        );
        assert!(matches!(&read(r#"{"type":"reasoning"}"#)[..], [Said::Other]));
        let said = read(
            r#"{"type":"mcp_call","id":"m1","server_label":"s","name":"add","arguments":"{}","output":null,"error":"down","status":"failed"}"#,
        );
        assert!(
            matches!(&said[..], [Said::Call { mcp: true, .. }, Said::Output { output: Err(e), .. }] if e == "down")
        );
        let said =
            read(r#"{"type":"mcp_approval_response","approval_request_id":"r1","approve":false}"#);
        assert!(matches!(&said[..], [Said::Denied { call_id }] if call_id == "r1"));
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
