//! The session's history as the AI SDK's `UIMessage`s, for a page's first render: a user
//! (or system) message per stored message, and one assistant message per run, with the
//! id the run's stream gave it (the run's id), its text parts and its tool parts in the
//! state the stream left them. A run still going shows its input; a run paused for the
//! page shows its calls waiting, so a reloaded page can answer them.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use super::parts::{Said, Steps};
use crate::model::{Item, RequiredActionKind, Run, RunStatus};

/// A message as `useChat` holds it: `{id, role, parts, metadata?}`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UiMessage {
    pub id: String,
    pub role: UiRole,
    /// `{type: "text", text, state}`, `{type: "step-start"}`, tool parts
    /// `{type: "tool-<name>", toolCallId, state, input, output?, approval?}`, and others
    /// a page may hold (not read).
    #[schema(value_type = Vec<Object>)]
    pub parts: Vec<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum UiRole {
    System,
    User,
    Assistant,
}

/// Builds the messages from items in order.
#[derive(Default)]
pub struct History {
    messages: Vec<UiMessage>,
    /// The run of the assistant message being built (`Some(None)`: items of no run),
    /// which the items of that run go on; `None` after any other message.
    building: Option<Option<Uuid>>,
    steps: Steps,
    /// The runs whose turns are among the stored items.
    stored_runs: HashSet<Uuid>,
}

impl History {
    /// Adds a stored item of run `run_id`, or an item of a run not yet stored under
    /// `id` (its input, or what a paused run made).
    pub fn push(&mut self, id: String, run_id: Option<Uuid>, item: &RawValue) {
        for said in Said::read(item) {
            self.said(id.clone(), run_id, said);
        }
    }

    fn said(&mut self, id: String, run_id: Option<Uuid>, said: Said) {
        match said {
            Said::Message { role, text } if role != "assistant" => {
                self.building = None;
                let role = if role == "user" { UiRole::User } else { UiRole::System };
                let parts = vec![json!({"type": "text", "text": text, "state": "done"})];
                self.messages.push(UiMessage { id, role, parts });
            }
            Said::Other => {}
            said => {
                self.begin_assistant(run_id.map_or(id, |run| run.to_string()), run_id);
                let step_starts = said.by_model() && self.steps.model_part().start;
                if matches!(said, Said::Output { .. } | Said::Denied { .. }) {
                    self.steps.tool_output();
                }
                let parts = &mut self.messages.last_mut().expect("an assistant message").parts;
                if step_starts {
                    parts.push(json!({"type": "step-start"}));
                }
                match said {
                    Said::Message { text, .. } => {
                        parts.push(json!({"type": "text", "text": text, "state": "done"}));
                    }
                    Said::Call { call_id, name, input, mcp: false } => parts.push(json!({
                        "type": format!("tool-{name}"), "toolCallId": call_id,
                        "state": "input-available", "input": input,
                    })),
                    Said::Call { call_id, name, input, mcp: true } => parts.push(json!({
                        "type": "dynamic-tool", "toolName": name, "toolCallId": call_id,
                        "state": "input-available", "input": input,
                    })),
                    Said::Output { call_id, output } => {
                        let call = parts.iter_mut().find(|p| p["toolCallId"] == call_id.as_str());
                        match (call, output) {
                            // A webhook call a person rejected, as the stream showed it.
                            (Some(part), Ok(output)) if output["error"] == "rejected" => {
                                deny(part);
                            }
                            (Some(part), Ok(output)) => {
                                part["state"] = "output-available".into();
                                part["output"] = output;
                            }
                            (Some(part), Err(error)) => {
                                part["state"] = "output-error".into();
                                part["errorText"] = error.into();
                            }
                            (None, _) => {}
                        }
                    }
                    Said::Denied { call_id } => {
                        let call = parts.iter_mut().find(|p| p["toolCallId"] == call_id.as_str());
                        call.into_iter().for_each(deny);
                    }
                    Said::Other => {}
                }
            }
        }
    }

    /// Begins the assistant message of `run_id`, unless it is the one being built.
    fn begin_assistant(&mut self, id: String, run_id: Option<Uuid>) {
        if self.building != Some(run_id) {
            self.building = Some(run_id);
            self.steps = Steps::default();
            self.messages.push(UiMessage { id, role: UiRole::Assistant, parts: Vec::new() });
        }
    }

    /// Adds the stored items, oldest first.
    pub fn stored(mut self, items: &[Item]) -> Self {
        for item in items {
            self.stored_runs.extend(item.run_id);
            self.push(item.id.to_string(), item.run_id, &item.item);
        }
        self
    }

    /// Adds what the session's newest run holds that the session does not yet: the input
    /// of a run that has not finished, and the output of one paused for the page, its
    /// waiting calls marked as the stream left them.
    pub fn pending(mut self, run: &Run) -> Self {
        if run.status.is_final() || self.stored_runs.contains(&run.id) {
            return self;
        }
        self.building = None;
        for (n, input) in run.input.iter().enumerate() {
            self.push(format!("{}-input-{n}", run.id), None, input);
        }
        let Some(waits) =
            run.required_action.as_ref().filter(|_| run.status == RunStatus::RequiresAction)
        else {
            return self;
        };
        for item in &run.output {
            self.push(run.id.to_string(), Some(run.id), item);
        }
        let waiting: HashSet<&str> = waits.tool_calls.iter().map(|c| c.call_id.as_str()).collect();
        let approving = waits.kind == RequiredActionKind::ApproveToolCalls;
        let parts = self.messages.last_mut().map(|m| &mut m.parts).into_iter().flatten();
        for part in parts.filter(|p| p["toolCallId"].as_str().is_some_and(|c| waiting.contains(c)))
        {
            if approving {
                part["state"] = "approval-requested".into();
                part["approval"] = json!({"id": part["toolCallId"]});
            }
        }
        self
    }

    pub fn into_messages(self) -> Vec<UiMessage> {
        self.messages
    }
}

/// A call a person rejected, as the AI SDK holds one: denied, with the decision.
fn deny(part: &mut Value) {
    part["state"] = "output-denied".into();
    part["approval"] = json!({"id": part["toolCallId"], "approved": false});
}
