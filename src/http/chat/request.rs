//! The body `useChat` posts, in the AI SDK's names, and what it asks of the session: a
//! new turn from its newest user message, or answers to the run its newest assistant
//! message stands for. The rest of `messages` is the page's copy of the history, which
//! the service keeps itself and does not read.

use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use super::messages::{UiMessage, UiRole};
use crate::http::ApiError;
use crate::model::{
    Approval, Identifier, RequiredAction, RequiredActionKind, RunAnswer, ToolOutput,
};

/// What `DefaultChatTransport` sends: `{id, messages, trigger, messageId}`, plus the
/// fields a page adds with the transport's `body` option (`agent_id`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatRequest {
    /// The chat's id, which is the session's: created if absent.
    #[schema(value_type = Identifier, inline)]
    pub id: String,
    /// The page's messages; only the newest is read.
    #[schema(min_items = 1)]
    pub messages: Vec<UiMessage>,
    /// Only `submit-message`: a regeneration (`regenerate-message`) is refused, as the
    /// service keeps the history and a turn it kept stays.
    #[schema(pattern = "^submit-message$")]
    pub trigger: String,
    /// The message the request is about: the assistant message whose tool calls it
    /// answers, or a user message the page edited (refused: the history is the
    /// service's, and a turn it kept stays).
    #[serde(rename = "messageId")]
    pub message_id: Option<String>,
    /// The agent to run, over the session's.
    #[schema(value_type = Option<Identifier>, inline)]
    pub agent_id: Option<String>,
}

/// What the newest message asks for.
pub enum Ask {
    /// A new turn with this text as the user's message.
    Turn(String),
    /// Answers to the paused run the assistant message stands for.
    Answer(Uuid),
}

impl ChatRequest {
    /// What the request asks of the session, or the field at fault.
    pub fn ask(&self) -> Result<Ask, ApiError> {
        match self.trigger.as_str() {
            "submit-message" => {}
            "regenerate-message" => {
                return Err(ApiError::invalid(
                    "trigger",
                    "`regenerate-message` is not supported: the service keeps the history, and a turn it kept stays; send a new message instead",
                ))
            }
            other => {
                return Err(ApiError::invalid(
                    "trigger",
                    format!("must be `submit-message`, got `{other}`"),
                ))
            }
        }
        for (i, message) in self.messages.iter().enumerate() {
            if let Some(j) = message.parts.iter().position(|part| !part.is_object()) {
                return Err(ApiError::invalid(
                    &format!("messages[{i}].parts[{j}]"),
                    "must be an object",
                ));
            }
        }
        let at = self.messages.len().checked_sub(1);
        let (Some(at), Some(last)) = (at, self.messages.last()) else {
            return Err(ApiError::invalid("messages", "must hold at least one message"));
        };
        match last.role {
            UiRole::User if self.message_id.is_some() => Err(ApiError::invalid(
                "messageId",
                "editing a sent message is not supported: the service keeps the history, and a turn it kept stays; send a new message instead",
            )),
            UiRole::User => user_text(last, at).map(Ask::Turn),
            // The stream named the assistant message after its run.
            UiRole::Assistant => last.id.parse().map(Ask::Answer).map_err(|_| {
                ApiError::invalid(
                    &format!("messages[{at}].id"),
                    "an assistant message that answers tool calls must be the one the service streamed (its id is the run's)",
                )
            }),
            UiRole::System => Err(ApiError::invalid(
                &format!("messages[{at}].role"),
                "the newest message must be the user's, or the assistant's with tool results",
            )),
        }
    }

    /// The newest message's answers to what the run waits for.
    pub fn answer(&self, waits_for: &RequiredAction) -> Result<RunAnswer, ApiError> {
        let at = self.messages.len() - 1;
        let parts = &self.messages[at].parts;
        let part_of = |call_id: &str| {
            parts.iter().enumerate().find(|(_, part)| {
                part["toolCallId"].as_str() == Some(call_id) && is_tool_part(part)
            })
        };
        let missing = |call_id: &str, what: &str| {
            ApiError::invalid(
                &format!("messages[{at}].parts"),
                format!("no {what} for tool call `{call_id}`, which the run waits for"),
            )
        };
        match waits_for.kind {
            RequiredActionKind::SubmitToolOutputs => {
                let mut outputs = Vec::new();
                for call in &waits_for.tool_calls {
                    let (_, part) = part_of(&call.call_id)
                        .filter(|(_, part)| {
                            matches!(
                                part["state"].as_str(),
                                Some("output-available" | "output-error")
                            )
                        })
                        .ok_or_else(|| missing(&call.call_id, "output"))?;
                    outputs.push(ToolOutput {
                        call_id: call.call_id.clone(),
                        output: output_text(part),
                    });
                }
                Ok(RunAnswer::ToolOutputs(outputs))
            }
            RequiredActionKind::ApproveToolCalls => {
                let mut approvals = Vec::new();
                for call in &waits_for.tool_calls {
                    let (i, part) =
                        part_of(&call.call_id).ok_or_else(|| missing(&call.call_id, "approval"))?;
                    let approval = &part["approval"];
                    let Some(approve) = approval["approved"].as_bool() else {
                        return Err(ApiError::invalid(
                            &format!("messages[{at}].parts[{i}].approval.approved"),
                            "must be true or false: the run waits for a person's decision on this call before anything else",
                        ));
                    };
                    let reason = approval["reason"].as_str().map(str::to_owned);
                    approvals.push(Approval { call_id: call.call_id.clone(), approve, reason });
                }
                Ok(RunAnswer::Approvals(approvals))
            }
        }
    }
}

/// The text of a user message's text parts; a part the service cannot send is refused
/// rather than dropped.
fn user_text(message: &UiMessage, at: usize) -> Result<String, ApiError> {
    let mut texts = Vec::new();
    for (i, part) in message.parts.iter().enumerate() {
        match part["type"].as_str() {
            Some("text") => match part["text"].as_str() {
                Some(text) => texts.push(text),
                None => {
                    return Err(ApiError::invalid(
                        &format!("messages[{at}].parts[{i}].text"),
                        "must be a string",
                    ))
                }
            },
            Some("file") => {
                return Err(ApiError::invalid(
                    &format!("messages[{at}].parts[{i}].type"),
                    "file parts are not supported: the runs send text to the model",
                ))
            }
            Some(_) => {}
            None => {
                return Err(ApiError::invalid(
                    &format!("messages[{at}].parts[{i}].type"),
                    "is required",
                ))
            }
        }
    }
    let text = texts.join("\n\n");
    if text.trim().is_empty() {
        return Err(ApiError::invalid(&format!("messages[{at}].parts"), "hold no text"));
    }
    Ok(text)
}

fn is_tool_part(part: &Value) -> bool {
    part["type"].as_str().is_some_and(|kind| kind.starts_with("tool-") || kind == "dynamic-tool")
}

/// A tool's result as the text the model reads: a string as it is, anything else as
/// JSON, an error as its text.
fn output_text(part: &Value) -> String {
    if part["state"] == "output-error" {
        let error = part["errorText"].as_str().unwrap_or("the tool failed");
        return serde_json::json!({"error": error}).to_string();
    }
    match &part["output"] {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}
