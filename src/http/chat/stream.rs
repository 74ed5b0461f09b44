//! The run's events as the AI SDK's UI message stream (`x-vercel-ai-ui-message-stream:
//! v1`): `data:` lines of JSON chunks, one assistant message per run (its id is the
//! run's), a step per model call, and `[DONE]` last. The assistant's text streams as
//! `text-*` chunks; tool calls as `tool-input-available` and their outputs as
//! `tool-output-available`, marked `providerExecuted` when the service ran the tool; a
//! pause for approvals as `tool-approval-request`; the end as `finish` with the run's
//! usage in the message metadata, or as `error`.

use std::collections::HashSet;

use axum::response::sse::Event;
use serde_json::{json, Value};
use uuid::Uuid;

use super::chunks::UiChunk;
use super::parts::{Said, Steps};
use crate::http::event_stream::Translator;
use crate::model::{RequiredAction, RequiredActionKind, Run, RunEvent, RunEventKind, RunStatus};

pub struct UiMessageStream {
    run_id: Uuid,
    /// The tools the page runs: their calls are not marked as run by the service.
    client_tools: HashSet<String>,
    started: bool,
    steps: Steps,
    /// The id of the text part that is streaming.
    text: Option<String>,
    /// Calls the page knows of, and those of them whose outputs it has: an answer the run
    /// took without an event of its own (a page's tool output, a rejection) is sent from
    /// the run's output when its next status arrives.
    calls: HashSet<String>,
    answered: HashSet<String>,
    /// Calls that waited for a person: a rejection of one is shown as denied.
    approving: HashSet<String>,
    /// Calls of the page's tools it answered before this stream began: shown as answered,
    /// not asked of the page again.
    answered_before: HashSet<String>,
}

impl UiMessageStream {
    pub fn new(run_id: Uuid, client_tools: HashSet<String>) -> Self {
        Self {
            run_id,
            client_tools,
            started: false,
            steps: Steps::default(),
            text: None,
            calls: HashSet::new(),
            answered: HashSet::new(),
            approving: HashSet::new(),
            answered_before: HashSet::new(),
        }
    }

    /// The stream that replays the run from its start for a page that reloaded: the
    /// calls of its tools that the page answered already are not asked again (the AI SDK
    /// would run them once more).
    pub fn replaying(mut self, run: &Run) -> Self {
        for said in run.output.iter().flat_map(|item| Said::read(item)) {
            if let Said::Output { call_id, .. } = said {
                self.answered_before.insert(call_id);
            }
        }
        self
    }

    /// The stream that goes on from a pause the page answered: the message is the one the
    /// page has, with these calls in it.
    pub fn answering(mut self, waited_for: &RequiredAction) -> Self {
        for call in &waited_for.tool_calls {
            self.calls.insert(call.call_id.clone());
            match waited_for.kind {
                RequiredActionKind::ApproveToolCalls => self.approving.insert(call.call_id.clone()),
                // The page has the outputs it sent.
                RequiredActionKind::SubmitToolOutputs => self.answered.insert(call.call_id.clone()),
            };
        }
        self
    }

    fn begin(&mut self, out: &mut Vec<UiChunk>) {
        if !std::mem::replace(&mut self.started, true) {
            out.push(UiChunk::Start { message_id: self.run_id.to_string() });
        }
    }

    fn model_part(&mut self, out: &mut Vec<UiChunk>) {
        let change = self.steps.model_part();
        if change.finish {
            out.push(UiChunk::FinishStep);
        }
        if change.start {
            out.push(UiChunk::StartStep);
        }
    }

    /// Opens a text part at this event, unless one is open.
    fn open_text(&mut self, out: &mut Vec<UiChunk>, seq: i64) -> String {
        if let Some(id) = &self.text {
            return id.clone();
        }
        self.model_part(out);
        let id = format!("text-{seq}");
        out.push(UiChunk::TextStart { id: id.clone() });
        self.text = Some(id.clone());
        id
    }

    fn item(&mut self, out: &mut Vec<UiChunk>, seq: i64, said: Said) {
        match said {
            Said::Message { role, text } if role == "assistant" => {
                // A message whose text did not stream arrives whole.
                let streamed = self.text.is_some();
                let id = self.open_text(out, seq);
                if !streamed && !text.is_empty() {
                    out.push(UiChunk::TextDelta { id: id.clone(), delta: text });
                }
                out.push(UiChunk::TextEnd { id });
                self.text = None;
            }
            Said::Call { call_id, name, input, mcp } => {
                self.model_part(out);
                self.calls.insert(call_id.clone());
                let provider_executed = mcp
                    || !self.client_tools.contains(&name)
                    || self.answered_before.contains(&call_id);
                out.push(UiChunk::ToolInputAvailable {
                    tool_call_id: call_id,
                    tool_name: name,
                    input,
                    provider_executed,
                    dynamic: mcp,
                });
            }
            Said::Output { call_id, output } => self.output(out, call_id, output),
            Said::Denied { call_id } => self.output(out, call_id, Ok(json!({"error": "rejected"}))),
            // Input steered into the run, and items the chat does not show.
            Said::Message { .. } | Said::Other => {}
        }
    }

    fn output(&mut self, out: &mut Vec<UiChunk>, call_id: String, output: Result<Value, String>) {
        if !self.answered.insert(call_id.clone()) {
            return;
        }
        self.steps.tool_output();
        let rejected = matches!(&output, Ok(output) if output["error"] == "rejected");
        let chunk = match output {
            _ if rejected && self.approving.contains(&call_id) => {
                UiChunk::ToolOutputDenied { tool_call_id: call_id }
            }
            Ok(output) => UiChunk::ToolOutputAvailable { tool_call_id: call_id, output },
            Err(error_text) => UiChunk::ToolOutputError { tool_call_id: call_id, error_text },
        };
        out.push(chunk);
    }

    fn status(&mut self, out: &mut Vec<UiChunk>, run: &Run) {
        for said in run.output.iter().flat_map(|item| Said::read(item)) {
            let (call_id, output) = match said {
                Said::Output { call_id, output } => (call_id, output),
                Said::Denied { call_id } => (call_id, Ok(json!({"error": "rejected"}))),
                _ => continue,
            };
            if self.calls.contains(&call_id) {
                self.output(out, call_id, output);
            }
        }
        let finish_reason = match run.status {
            RunStatus::Queued | RunStatus::Running => return,
            RunStatus::RequiresAction => {
                let waits = run.required_action.as_ref();
                let approvals = waits.filter(|w| w.kind == RequiredActionKind::ApproveToolCalls);
                for call in approvals.iter().flat_map(|w| &w.tool_calls) {
                    self.approving.insert(call.call_id.clone());
                    out.push(UiChunk::ToolApprovalRequest {
                        approval_id: call.call_id.clone(),
                        tool_call_id: call.call_id.clone(),
                    });
                }
                "tool-calls"
            }
            RunStatus::Completed => {
                match run.incomplete_details.as_ref().map(|d| d.reason.as_str()) {
                    Some("max_output_tokens") => "length",
                    Some("content_filter") => "content-filter",
                    _ => "stop",
                }
            }
            RunStatus::Interrupted => "other",
            RunStatus::Failed | RunStatus::Cancelled => {
                let error_text = match &run.error {
                    Some(error) => format!("{}: {}", error.code, error.message),
                    None => format!("the run was {}", run.status),
                };
                out.push(UiChunk::Error { error_text });
                return;
            }
        };
        if self.steps.close() {
            out.push(UiChunk::FinishStep);
        }
        let message_metadata = json!({"run_id": run.id, "status": run.status, "usage": run.usage});
        out.push(UiChunk::Finish { finish_reason, message_metadata });
    }
}

impl UiMessageStream {
    /// The chunks that stand for one of the run's events.
    fn chunks(&mut self, event: &RunEvent) -> Vec<UiChunk> {
        let mut out = Vec::new();
        self.begin(&mut out);
        match &event.kind {
            RunEventKind::Status(run) => self.status(&mut out, run),
            RunEventKind::TextDelta(delta) => {
                let id = self.open_text(&mut out, event.seq);
                out.push(UiChunk::TextDelta { id, delta: delta.clone() });
            }
            RunEventKind::ItemCreated(item) => {
                for said in Said::read(item) {
                    self.item(&mut out, event.seq, said);
                }
            }
            RunEventKind::CompactionCreated(_) => {}
        }
        out
    }
}

impl Translator for UiMessageStream {
    fn translate(&mut self, event: &RunEvent) -> Vec<Event> {
        let chunks = self.chunks(event).into_iter();
        chunks.map(|chunk| Event::default().data(chunk.data())).collect()
    }

    fn finish(&mut self, broke: bool) -> Vec<Event> {
        let mut out = Vec::new();
        if broke {
            let error_text = "the stream broke off; the run goes on: reload the chat to resume it";
            out.push(
                Event::default().data(UiChunk::Error { error_text: error_text.into() }.data()),
            );
        }
        out.push(Event::default().data("[DONE]"));
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::value::RawValue;

    use super::*;

    fn run(status: &str, required_action: Value) -> Box<Run> {
        serde_json::from_value(json!({
            "id": "019a0000-0000-7000-8000-000000000000", "session_id": "s", "status": status,
            "created_at": "2026-11-26T10:00:00Z", "started_at": null, "finished_at": null,
            "model": "m", "input": [], "output": [], "required_action": required_action,
            "error": null, "incomplete_details": null, "metadata": {},
            "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "llm_calls": 0},
        }))
        .unwrap()
    }

    fn chunks(stream: &mut UiMessageStream, kinds: Vec<RunEventKind>) -> Vec<Value> {
        let chunks =
            (1..).zip(kinds).flat_map(|(seq, kind)| stream.chunks(&RunEvent { seq, kind }));
        chunks.map(|chunk| serde_json::to_value(chunk).unwrap()).collect()
    }

    fn item(value: Value) -> RunEventKind {
        RunEventKind::ItemCreated(RawValue::from_string(value.to_string()).unwrap())
    }

    #[test]
    fn mcp_calls_are_dynamic_tools_the_service_ran() {
        let mut stream = UiMessageStream::new(uuid::Uuid::nil(), HashSet::new());
        let waiting = json!({"type": "approve_tool_calls", "tool_calls": [
            {"call_id": "mcpr_1", "name": "drop", "arguments": "{}", "server_label": "db"}]});
        let got = chunks(
            &mut stream,
            vec![
                RunEventKind::Status(run("running", Value::Null)),
                item(
                    json!({"type": "mcp_list_tools", "id": "l", "server_label": "db", "tools": []}),
                ),
                item(json!({"type": "mcp_approval_request", "id": "mcpr_1", "server_label": "db",
                        "name": "drop", "arguments": "{}"})),
                item(
                    json!({"type": "mcp_call", "id": "mcp_1", "server_label": "db", "name": "count",
                        "arguments": "{\"t\":1}", "output": null, "error": "down", "status": "failed"}),
                ),
                RunEventKind::Status(run("requires_action", waiting)),
            ],
        );
        let kinds: Vec<&str> = got.iter().map(|c| c["type"].as_str().unwrap()).collect();
        // The engine adds a step's approval requests, then makes its other MCP calls.
        let expected = [
            "start",
            "start-step",
            "tool-input-available",
            "tool-input-available",
            "tool-output-error",
            "tool-approval-request",
            "finish-step",
            "finish",
        ];
        assert_eq!(kinds, expected);
        assert_eq!(got[2]["toolCallId"], "mcpr_1");
        assert_eq!(
            got[3],
            json!({"type": "tool-input-available", "toolCallId": "mcp_1",
            "toolName": "count", "input": {"t": 1}, "providerExecuted": true, "dynamic": true})
        );
        assert_eq!(
            got[4],
            json!({"type": "tool-output-error", "toolCallId": "mcp_1", "errorText": "down"})
        );
        assert_eq!(got[5]["toolCallId"], "mcpr_1");
    }
}
