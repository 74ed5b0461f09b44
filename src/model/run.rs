//! Runs: one agent turn over a session, from `queued` to a final status.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;
use uuid::Uuid;

use super::metadata::Metadata;
use super::session::Usage;
use super::webhook::WebhookDelivery;

/// `queued → running → (requires_action ⇄ running) → completed | failed | cancelled |
/// interrupted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Queued,
    Running,
    RequiresAction,
    Completed,
    Failed,
    Cancelled,
    /// Stopped by the client with what it finished kept as a turn of the session.
    Interrupted,
}

impl RunStatus {
    pub const ALL: [RunStatus; 7] = [
        Self::Queued,
        Self::Running,
        Self::RequiresAction,
        Self::Completed,
        Self::Failed,
        Self::Cancelled,
        Self::Interrupted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::RequiresAction => "requires_action",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Interrupted => "interrupted",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// No further change can happen.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled | Self::Interrupted)
    }

    /// The run's input and output are a turn of its session.
    pub fn keeps_turn(self) -> bool {
        matches!(self, Self::Completed | Self::Interrupted)
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One turn of an agent over a session.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Run {
    pub id: Uuid,
    pub session_id: String,
    pub status: RunStatus,
    pub created_at: DateTime<Utc>,
    #[schema(required = true)]
    pub started_at: Option<DateTime<Utc>>,
    #[schema(required = true)]
    pub finished_at: Option<DateTime<Utc>>,
    /// The model the run calls.
    pub model: String,
    /// The items the run was given; appended to the session when it completes.
    #[schema(value_type = Vec<Object>)]
    pub input: Vec<Box<RawValue>>,
    /// The items the run generated so far: function calls, their outputs, the
    /// assistant's message.
    #[schema(value_type = Vec<Object>)]
    pub output: Vec<Box<RawValue>>,
    /// Set while the run waits for the client's tool outputs.
    #[schema(required = true)]
    pub required_action: Option<RequiredAction>,
    pub usage: Usage,
    #[schema(required = true)]
    pub error: Option<RunError>,
    /// Why the model's answer is cut short (its message item then has `"status":
    /// "incomplete"`); null when it is whole.
    #[serde(default)]
    #[schema(required = true)]
    pub incomplete_details: Option<IncompleteDetails>,
    pub metadata: Metadata,
    /// How the latest post to the run's completion `webhook` stands; absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookDelivery>,
}

/// Why the model stopped before it finished its answer, as the Responses API says it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IncompleteDetails {
    /// `max_output_tokens` (the answer hit the limit) or `content_filter` (the provider
    /// withheld the rest).
    pub reason: String,
}

impl IncompleteDetails {
    /// The reason a chat completion's `finish_reason` stands for, if it cut the answer.
    pub fn from_finish_reason(finish_reason: Option<&str>) -> Option<Self> {
        let reason = match finish_reason? {
            "length" => "max_output_tokens",
            "content_filter" => "content_filter",
            _ => return None,
        };
        Some(Self { reason: reason.to_owned() })
    }
}

/// What the run waits for: outputs of the client tools the model called, or approvals
/// of its calls of server-side tools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RequiredAction {
    /// Runs paused before this field existed waited for tool outputs too.
    #[serde(rename = "type", default)]
    pub kind: RequiredActionKind,
    pub tool_calls: Vec<RequiredToolCall>,
}

/// What a paused run asks of the client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RequiredActionKind {
    /// Run the calls and post their outputs to `…/tool_outputs`.
    #[default]
    SubmitToolOutputs,
    /// Approve or reject each call of a server-side tool at `…/approvals`.
    ApproveToolCalls,
}

impl RequiredActionKind {
    /// What a client sends to answer the pause.
    pub fn answers(self) -> &'static str {
        match self {
            Self::SubmitToolOutputs => "tool outputs",
            Self::ApproveToolCalls => "approvals",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RequiredToolCall {
    pub call_id: String,
    pub name: String,
    /// The JSON text the model produced, unparsed.
    pub arguments: String,
    /// The MCP server of the tool, for a call of an MCP tool (its `mcp_approval_request`
    /// has this `call_id` as its id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_label: Option<String>,
}

/// Why a run failed, with a stable `code` (`llm_rate_limited`, `max_turns_exceeded`, …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunError {
    pub code: String,
    pub message: String,
}

impl RunError {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self { code: code.into(), message: message.into() }
    }
}

/// What to do when the session has an active run already.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum IfBusy {
    /// 409 `session_busy`.
    #[default]
    Reject,
    /// Queue behind the active run; runs of a session execute in creation order.
    Enqueue,
    /// Interrupt the session's unfinished runs (see [`StopAction::Interrupt`]), then run.
    Interrupt,
    /// Roll back the session's unfinished runs (see [`StopAction::Rollback`]), then run.
    Rollback,
    /// Add the input to the active run's next model call and to its turn; once that run
    /// has finished, queue a run as `Enqueue` does.
    Steer,
}

/// How `…/cancel` stops a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopAction {
    /// The run ends `cancelled` and its session is left as it was.
    #[default]
    Cancel,
    /// The run ends `interrupted`: its input and what it finished (tool calls with their
    /// outputs, the partial assistant message marked `"status": "incomplete"`) are
    /// appended to the session as a turn.
    Interrupt,
    /// The run is cancelled and then deleted with its events and its Idempotency-Key:
    /// nothing of it is left.
    Rollback,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_stored_before_its_type_existed_waits_for_tool_outputs() {
        let stored: RequiredAction = serde_json::from_str(r#"{"tool_calls": []}"#).unwrap();
        assert_eq!(stored.kind, RequiredActionKind::SubmitToolOutputs);
        let written = serde_json::to_value(&stored).unwrap();
        assert_eq!(written, serde_json::json!({"type": "submit_tool_outputs", "tool_calls": []}));
    }
}
