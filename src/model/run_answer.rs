//! What a client sends to a paused run: the outputs of its client tools, or approvals of
//! its calls of server-side tools. Each call is answered exactly once.

use serde::Deserialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;

use super::field::InvalidField;
use super::run::{RequiredAction, RequiredActionKind};
use super::{mcp_items, run_items};

/// A client tool's answer to one of the run's `required_action.tool_calls`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolOutput {
    pub call_id: String,
    /// What the tool returned, as text the model reads.
    pub output: String,
}

/// A person's decision on one of the run's `required_action.tool_calls`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    pub call_id: String,
    /// True runs the call; false answers the model `{"error": "rejected", "reason"}`.
    pub approve: bool,
    /// Why, for the model, when the call is rejected.
    #[serde(default)]
    pub reason: Option<String>,
}

/// The answer to a paused run.
#[derive(Debug, Clone)]
pub enum RunAnswer {
    ToolOutputs(Vec<ToolOutput>),
    Approvals(Vec<Approval>),
}

/// What an answer adds to the run: output items, and the calls it may now make.
#[derive(Debug, Default)]
pub struct Answered {
    pub items: Vec<Box<RawValue>>,
    pub approved: Vec<String>,
}

impl RunAnswer {
    /// The pause this answers.
    pub fn kind(&self) -> RequiredActionKind {
        match self {
            Self::ToolOutputs(_) => RequiredActionKind::SubmitToolOutputs,
            Self::Approvals(_) => RequiredActionKind::ApproveToolCalls,
        }
    }

    fn call_ids(&self) -> (&'static str, Vec<&str>) {
        match self {
            Self::ToolOutputs(outputs) => {
                ("outputs", outputs.iter().map(|o| o.call_id.as_str()).collect())
            }
            Self::Approvals(approvals) => {
                ("approvals", approvals.iter().map(|a| a.call_id.as_str()).collect())
            }
        }
    }
}

impl RequiredAction {
    /// What `answer` adds to the run, in the order of the calls. Every call needs exactly
    /// one answer, and no answer may name another call.
    pub fn answer(&self, answer: &RunAnswer) -> Result<Answered, InvalidField> {
        let (field, ids) = answer.call_ids();
        for (i, id) in ids.iter().enumerate() {
            let at = format!("{field}[{i}].call_id");
            if !self.tool_calls.iter().any(|c| c.call_id == *id) {
                let message = format!("the run is not waiting for call `{id}`");
                return Err(InvalidField::new(at, message));
            }
            if ids[..i].contains(id) {
                return Err(InvalidField::new(at, format!("call `{id}` is answered twice")));
            }
        }
        if let Some(call) = self.tool_calls.iter().find(|c| !ids.contains(&c.call_id.as_str())) {
            let message = format!("call `{}` is not answered", call.call_id);
            return Err(InvalidField::new(field, message));
        }
        let mut answered = Answered::default();
        for call in &self.tool_calls {
            let id = call.call_id.as_str();
            match answer {
                RunAnswer::ToolOutputs(outputs) => {
                    let output = outputs.iter().find(|o| o.call_id == id).map(|o| &o.output);
                    let output = output.expect("every call is answered");
                    answered.items.push(run_items::function_call_output(id, output));
                }
                RunAnswer::Approvals(approvals) => {
                    let approval = approvals.iter().find(|a| a.call_id == id);
                    match approval.expect("every call is answered") {
                        // A decision on an MCP call is an item of its own, which the
                        // engine reads back.
                        Approval { approve, reason, .. } if call.server_label.is_some() => {
                            let response =
                                mcp_items::approval_response(id, *approve, reason.as_deref());
                            answered.items.push(response);
                        }
                        Approval { approve: true, .. } => answered.approved.push(id.to_owned()),
                        Approval { reason, .. } => {
                            let rejected =
                                serde_json::json!({"error": "rejected", "reason": reason});
                            let output = rejected.to_string();
                            answered.items.push(run_items::function_call_output(id, &output));
                        }
                    }
                }
            }
        }
        Ok(answered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RequiredToolCall;

    fn waiting(ids: &[&str]) -> RequiredAction {
        let call = |id: &&str| RequiredToolCall {
            call_id: (*id).to_owned(),
            name: "send".into(),
            arguments: "{}".into(),
            server_label: None,
        };
        let tool_calls = ids.iter().map(call).collect();
        RequiredAction { kind: RequiredActionKind::ApproveToolCalls, tool_calls }
    }

    fn approval(id: &str, approve: bool) -> Approval {
        Approval { call_id: id.into(), approve, reason: Some("not now".into()) }
    }

    #[test]
    fn approvals_run_some_calls_and_answer_the_rejected_ones() {
        let answer = RunAnswer::Approvals(vec![approval("b", false), approval("a", true)]);
        let answered = waiting(&["a", "b"]).answer(&answer).unwrap();
        assert_eq!(answered.approved, ["a"]);
        let rejected = r#"{"type":"function_call_output","call_id":"b","output":"{\"error\":\"rejected\",\"reason\":\"not now\"}"}"#;
        assert_eq!(answered.items.iter().map(|i| i.get()).collect::<Vec<_>>(), [rejected]);
    }

    #[test]
    fn decisions_on_mcp_calls_are_items_of_their_own() {
        let mut action = waiting(&["mcpr_1", "mcpr_2"]);
        for call in &mut action.tool_calls {
            call.server_label = Some("calc".into());
        }
        let answer =
            RunAnswer::Approvals(vec![approval("mcpr_1", true), approval("mcpr_2", false)]);
        let answered = action.answer(&answer).unwrap();
        assert!(answered.approved.is_empty(), "the response items say it");
        let items: Vec<&str> = answered.items.iter().map(|i| i.get()).collect();
        assert_eq!(
            items,
            [
                r#"{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":true,"reason":"not now"}"#,
                r#"{"type":"mcp_approval_response","approval_request_id":"mcpr_2","approve":false,"reason":"not now"}"#,
            ]
        );
    }

    #[test]
    fn each_call_is_answered_exactly_once() {
        let refused = |approvals: Vec<Approval>| {
            let error = waiting(&["a", "b"]).answer(&RunAnswer::Approvals(approvals)).unwrap_err();
            error.to_string()
        };
        let unknown = refused(vec![approval("a", true), approval("c", true)]);
        assert!(unknown.starts_with("approvals[1].call_id: "), "{unknown}");
        let twice = refused(vec![approval("a", true), approval("a", false)]);
        assert!(twice.contains("answered twice"), "{twice}");
        let missing = refused(vec![approval("a", true)]);
        assert_eq!(missing, "approvals: call `b` is not answered");
    }
}
