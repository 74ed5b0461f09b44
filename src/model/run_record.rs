//! What the engine keeps of a run beyond what clients see: the configuration it was
//! created with and how far it got.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use uuid::Uuid;

use super::agent_config::CompactionPolicy;
use super::idempotency::IdempotencyKey;
use super::mcp_tool::McpTool;
use super::metadata::Metadata;
use super::revision::IfMatch;
use super::run::{Run, RunError, RunStatus};
use super::run_event::{RunEvent, RunEventKind};
use super::run_items;
use super::tool::{FunctionTool, Tool};
use super::webhook::CompletionWebhook;

/// The configuration a run executes with, resolved from its layers when it was created,
/// so later changes to an agent never alter a queued run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub model: String,
    pub instructions: Option<String>,
    pub temperature: Option<f64>,
    pub max_output_tokens: Option<u32>,
    pub tools: Vec<Tool>,
    pub max_turns: u32,
    /// Absent in runs stored before the loop guard existed: the default.
    #[serde(default = "super::agent_config::default_max_repeated_tool_calls")]
    pub max_repeated_tool_calls: u32,
    pub max_input_tokens: Option<u64>,
    /// Set for strategy `compact`; absent in runs stored before compaction existed.
    #[serde(default)]
    pub compaction: Option<CompactionPolicy>,
    #[serde(default, skip_serializing_if = "Sampling::is_default")]
    pub sampling: Sampling,
    /// Calls of client tools complete the run with the calls in its output, for the
    /// client to answer in a later run, instead of pausing it as `requires_action`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub client_calls_complete: bool,
    /// Where each finish or pause of the run is posted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<CompletionWebhook>,
}

impl RunConfig {
    /// The function tools, in order.
    pub fn functions(&self) -> impl Iterator<Item = &FunctionTool> {
        self.tools.iter().filter_map(|tool| match tool {
            Tool::Function(function) => Some(function),
            Tool::Mcp(_) => None,
        })
    }

    /// The MCP servers, in order.
    pub fn mcp_servers(&self) -> impl Iterator<Item = &McpTool> {
        self.tools.iter().filter_map(|tool| match tool {
            Tool::Mcp(server) => Some(server),
            Tool::Function(_) => None,
        })
    }
}

/// How the model samples beyond the temperature, in the Chat Completions form the LLM is
/// sent. Only protocol adapters set these; a native run leaves them to the provider.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// `"auto"`, `"none"`, `"required"` or `{"type": "function", "function": {"name"}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// `{"type": "json_object"}` or `{"type": "json_schema", "json_schema": {…}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<Value>,
}

impl Sampling {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// A run with what the worker needs to carry it on: its configuration and how many LLM
/// calls it has made. Stored as one document; status and lease live in columns.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    pub run: Run,
    pub config: RunConfig,
    pub turns: u32,
    /// What the protocol adapter that created the run keeps of its request, to show the
    /// run in its own terms; the engine never reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Box<RawValue>>,
    /// The Idempotency-Key the run was created with, which a rollback deletes with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// The number of the last [`Steer`] the run took into its output.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub steered_through: i64,
    /// Calls of server-side tools a person approved that the run has yet to make.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approved: Vec<String>,
    /// The W3C `traceparent` of the request that queued the run, or last resumed it,
    /// which its execution continues on whichever replica claims it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_parent: Option<String>,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// Input that joins a session's unfinished run (`if_busy: "steer"`), with what a run of
/// its own needs, should that run finish before it takes the input.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Steer {
    pub run_id: Uuid,
    pub input: Vec<Box<RawValue>>,
    pub config: RunConfig,
    pub metadata: Metadata,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Box<RawValue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_parent: Option<String>,
}

impl From<NewRun> for Steer {
    fn from(run: NewRun) -> Self {
        Self {
            run_id: run.id,
            input: run.input,
            config: run.config,
            metadata: run.metadata,
            request: run.request,
            trace_parent: run.trace_parent,
        }
    }
}

impl From<Steer> for NewRun {
    fn from(steer: Steer) -> Self {
        Self {
            id: steer.run_id,
            input: steer.input,
            config: steer.config,
            metadata: steer.metadata,
            idempotency: None,
            if_match: None,
            request: steer.request,
            trace_parent: steer.trace_parent,
        }
    }
}

impl RunRecord {
    /// Ends the run `interrupted` with what its stored events show it finished: the
    /// items generated since its execution last started, then the text streamed since
    /// the last of them (see [`run_items::keep_interrupted`]), then the input steered
    /// into it that they do not show. `events` are the run's events, oldest first;
    /// `steered` the items steered in after `steered_through` and the number of the last.
    pub fn interrupt(
        &mut self, events: &[RunEvent], steered: (Vec<Box<RawValue>>, i64), last_event_seq: i64,
        now: DateTime<Utc>,
    ) -> RunEvent {
        let last_status = events.iter().rposition(|e| matches!(e.kind, RunEventKind::Status(_)));
        let executing = last_status.filter(|&i| {
            matches!(&events[i].kind, RunEventKind::Status(run) if run.status == RunStatus::Running)
        });
        let (steered, steered_through) = steered;
        // The worker took steered input in order, each item an event of its own: the
        // events show a prefix of it.
        let mut shown = 0;
        let mut partial = String::new();
        for event in executing.map_or(&[][..], |i| &events[i + 1..]) {
            match &event.kind {
                RunEventKind::ItemCreated(item) => {
                    if steered.get(shown).is_some_and(|next| next.get() == item.get()) {
                        shown += 1;
                    }
                    self.run.output.push(item.clone());
                    partial.clear();
                }
                RunEventKind::TextDelta(delta) => partial.push_str(delta),
                RunEventKind::Status(_) | RunEventKind::CompactionCreated(_) => {}
            }
        }
        run_items::keep_interrupted(&mut self.run.output, &partial);
        self.run.output.extend(steered.into_iter().skip(shown));
        self.steered_through = steered_through;
        self.end(RunStatus::Interrupted, None, last_event_seq, now)
    }

    /// Moves the run to `status`, which is final or `requires_action`, and returns the
    /// event that announces it, numbered after `last_event_seq`.
    pub fn end(
        &mut self, status: RunStatus, error: Option<RunError>, last_event_seq: i64,
        now: DateTime<Utc>,
    ) -> RunEvent {
        self.run.status = status;
        if status.is_final() {
            self.run.finished_at = Some(now);
            self.run.required_action = None;
        }
        self.run.error = error;
        RunEvent::for_status(last_event_seq + 1, &self.run)
    }
}

/// What a new run needs; the store gives it its status and timestamps.
#[derive(Debug, Clone)]
pub struct NewRun {
    pub id: Uuid,
    pub input: Vec<Box<RawValue>>,
    pub config: RunConfig,
    pub metadata: Metadata,
    /// A retry with this key and the same request gets the first request's run.
    pub idempotency: Option<IdempotencyKey>,
    /// Creates the run only while the session is at this revision (a run's creation
    /// does not change it).
    pub if_match: Option<IfMatch>,
    /// See [`RunRecord::request`].
    pub request: Option<Box<RawValue>>,
    /// See [`RunRecord::trace_parent`].
    pub trace_parent: Option<String>,
}
