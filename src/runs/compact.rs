//! Compaction: the LLM summarises a session's older items, so that runs can send the
//! summary and the recent items instead of the whole history. Used by `POST …/compact`
//! and by runs whose agent's context strategy is `compact`.

use serde_json::Value;
use tokio::sync::mpsc;
use tracing::Instrument;
use uuid::Uuid;

use super::context::build_messages;
use super::error::{Result, RunsError};
use super::execution::Execution;
use super::{config, spans, ConfigRequest, Engine, Runs};
use crate::llm::{ChatRequest, LlmError, Message, Messages, Progress, Role};
use crate::model::{
    AgentConfig, Compaction, IfMatch, InvalidField, RunError, RunEventKind, Sampling, SessionId,
    MAX_KEEP_RECENT_ITEMS,
};
use crate::store::{Context, StoreError};
use crate::telemetry;

/// What the summariser is told unless the request gives its own `instructions`.
pub const SUMMARY_PROMPT: &str = "You compact the history of a conversation between a user \
and an AI assistant, so that the assistant can carry on from your summary alone. Write a \
concise summary that keeps every fact stated by the user or by tools, every decision made, \
every open task and question, and all names, numbers, identifiers, dates and amounts exactly \
as given. When the text starts with an earlier summary, fold it in. Write only the summary.";

/// The first line of the text given to the summariser, before the rendered items.
pub const CONVERSATION_HEADING: &str = "The conversation to summarise:";

/// What a client asks of a compaction.
#[derive(Debug, Default)]
pub struct CompactRequest {
    pub keep_recent_items: u32,
    /// The session's agent's model (or the server default) when absent.
    pub model: Option<String>,
    /// Replaces [`SUMMARY_PROMPT`].
    pub instructions: Option<String>,
    /// Compacts only a session at this revision: checked before the LLM is called, and
    /// again where the compaction is stored.
    pub if_match: Option<IfMatch>,
}

/// The part of a session's uncompacted items that a compaction summarises.
struct Plan {
    /// How many of the context's items, from the first, the summary covers.
    summarised: usize,
}

impl Runs {
    /// Summarises the session's items older than the newest `keep_recent_items` (and any
    /// earlier summary) and stores the compaction. Nothing is stored when the LLM fails.
    pub async fn compact(
        &self, tenant: &str, session_id: &SessionId, request: CompactRequest,
    ) -> Result<Compaction> {
        if request.keep_recent_items > MAX_KEEP_RECENT_ITEMS {
            return Err(InvalidField::new(
                "keep_recent_items",
                format!("must be between 0 and {MAX_KEEP_RECENT_ITEMS}"),
            )
            .into());
        }
        let engine = &*self.engine;
        if let Some(if_match) = request.if_match {
            let current = engine.store.get_session(tenant, session_id).await?.revision;
            if !if_match.admits(Some(current)) {
                return Err(StoreError::RevisionMismatch { current: Some(current) }.into());
            }
        }
        // The model and instructions obey the rules an agent's do.
        let asked = AgentConfig { model: request.model.clone(), ..AgentConfig::default() };
        asked.validate("", &engine.settings.webhooks)?;
        let context = engine.store.context(tenant, session_id, true).await?;
        let plan = plan(&context, request.keep_recent_items)?;
        let model = match request.model {
            Some(model) => model,
            None => {
                let store = &*engine.store;
                let agent = config::existing_session_agent(store, tenant, session_id).await?;
                let config = config::resolve(
                    store,
                    &engine.settings,
                    tenant,
                    agent,
                    &ConfigRequest::default(),
                )
                .await?;
                config.model
            }
        };
        let instructions = request.instructions.as_deref();
        let compaction = summarise(engine, session_id, &context, &plan, &model, instructions, None)
            .await
            .map_err(RunsError::Llm)?;
        let base = context.compaction.as_ref();
        let summarised = plan.summarised as i64;
        let if_match = request.if_match;
        let store = &*engine.store;
        store.add_compaction(tenant, session_id, base, summarised, &compaction, if_match).await?;
        Ok(compaction)
    }
}

impl Runs {
    /// The LLM's summary of `items` (session items), which nothing stores: for clients
    /// that keep their history themselves and send the summary back as an item.
    pub async fn summarise(
        &self, items: &[Value], model: &str, instructions: Option<&str>,
    ) -> Result<(String, crate::model::Usage)> {
        summary_of(&self.engine, None, items, model, instructions).await.map_err(RunsError::Llm)
    }
}

/// What a run's compaction came to.
pub(super) enum RunCompaction {
    Stored,
    /// Too few items, or the history changed meanwhile: the run carries on without.
    Skipped,
    /// The summary's call failed: so does the run, with its code.
    Failed(RunError),
}

/// Compacts the session for the run in `exec` with its model, keeping `keep` items. The
/// call counts in the run's usage, and a stored compaction is a `compaction.created`
/// event of the run.
pub(super) async fn compact_for_run(
    engine: &Engine, tenant: &str, session_id: &SessionId, exec: &mut Execution, keep: u32,
) -> Result<RunCompaction, StoreError> {
    let context = engine.store.context(tenant, session_id, false).await?;
    let Ok(plan) = plan(&context, keep) else {
        return Ok(RunCompaction::Skipped);
    };
    let (model, run_id) = (&exec.record.config.model, Some(exec.record.run.id));
    let summary = summarise(engine, session_id, &context, &plan, model, None, run_id);
    let compaction = match summary.await {
        Ok(compaction) => compaction,
        Err(error) => {
            exec.record.run.usage.llm_calls += 1;
            let error = RunError::new(error.code.as_str(), error.message);
            return Ok(RunCompaction::Failed(error));
        }
    };
    let base = context.compaction.as_ref();
    let summarised = plan.summarised as i64;
    match (engine.store)
        .add_compaction(tenant, session_id, base, summarised, &compaction, None)
        .await
    {
        Ok(()) => {}
        Err(StoreError::HistoryChanged) => return Ok(RunCompaction::Skipped),
        Err(error) => return Err(error),
    }
    exec.record.run.usage.add(&compaction.usage);
    exec.emit(RunEventKind::CompactionCreated(Box::new(compaction)));
    Ok(RunCompaction::Stored)
}

/// Leaves the newest `keep` items out of the summary, and with them the call of any
/// tool output among them: a call and its output are summarised together or kept
/// together, never split.
fn plan(context: &Context, keep: u32) -> Result<Plan> {
    let items: Vec<Value> = (context.items.iter())
        .map(|item| serde_json::from_str(item.item.get()).unwrap_or(Value::Null))
        .collect();
    let call_id = |item: &Value, kind: &str| {
        (item.get("type").and_then(Value::as_str) == Some(kind))
            .then(|| item.get("call_id").and_then(Value::as_str))
            .flatten()
            .map(str::to_owned)
    };
    let mut first_kept = items.len().saturating_sub(keep as usize);
    let mut moved = true;
    while moved && first_kept > 0 {
        moved = false;
        for output in items[first_kept..].iter().filter_map(|i| call_id(i, "function_call_output"))
        {
            let call = (items[..first_kept].iter())
                .rposition(|i| call_id(i, "function_call").as_deref() == Some(output.as_str()));
            if let Some(call) = call {
                first_kept = call;
                moved = true;
            }
        }
    }
    if first_kept == 0 {
        return Err(RunsError::NothingToCompact { items: items.len(), keep });
    }
    Ok(Plan { summarised: first_kept })
}

/// Asks the LLM for the summary of the earlier summary and the planned items.
async fn summarise(
    engine: &Engine, session_id: &SessionId, context: &Context, plan: &Plan, model: &str,
    instructions: Option<&str>, run_id: Option<Uuid>,
) -> Result<Compaction, LlmError> {
    let summarised = &context.items[..plan.summarised];
    let through = summarised.last().expect("a plan summarises at least one item");
    let values: Vec<Value> = (summarised.iter())
        .map(|item| serde_json::from_str(item.item.get()).unwrap_or(Value::Null))
        .collect();
    let earlier_summary = context.compaction.as_ref().map(|c| c.summary.as_str());
    let span = spans::compaction(session_id);
    let summary = summary_of(engine, earlier_summary, &values, model, instructions)
        .instrument(span.clone())
        .await;
    let (summary, usage) =
        summary.inspect_err(|error| telemetry::failed(&span, error.code.as_str()))?;
    span.record("agent_sessions.items_compacted", plan.summarised as i64);
    let earlier = context.compaction.as_ref().map_or(0, |c| c.items_compacted);
    Ok(Compaction {
        id: Uuid::now_v7(),
        session_id: session_id.as_str().to_owned(),
        created_at: crate::store::now(),
        run_id,
        through_item_id: through.id,
        through_seq: through.seq,
        items_compacted: earlier + plan.summarised as i64,
        summary,
        model: model.to_owned(),
        usage,
    })
}

/// The LLM's summary of an earlier summary and `items`, and what the call used.
async fn summary_of(
    engine: &Engine, earlier: Option<&str>, items: &[Value], model: &str,
    instructions: Option<&str>,
) -> Result<(String, crate::model::Usage), LlmError> {
    let mut text = format!("{CONVERSATION_HEADING}\n\n");
    if let Some(earlier) = earlier {
        text.push_str(&format!("[earlier summary]\n{earlier}\n\n"));
    }
    let messages = build_messages(None, None, &[], items, None)
        .expect("without a budget the context always fits");
    for message in &messages {
        text.push_str(&render(message));
        text.push('\n');
    }
    let request = ChatRequest {
        model: model.to_owned(),
        messages: Messages::plain(vec![
            Message::text(Role::System, instructions.unwrap_or(SUMMARY_PROMPT)),
            Message::text(Role::User, text),
        ]),
        tools: Vec::new(),
        temperature: None,
        max_output_tokens: None,
        sampling: Sampling::default(),
    };
    // The summary is not streamed to anyone: its text is gathered from the deltas.
    let (progress, mut received) = mpsc::unbounded_channel();
    let started = std::time::Instant::now();
    let completion = engine.llm.complete(&request, progress).await;
    // A summarising call is a model call like a turn's, in the same series.
    let tokens =
        completion.as_ref().map_or((0, 0), |c| (c.usage.input_tokens, c.usage.output_tokens));
    engine.metrics.llm_called(model, started.elapsed().as_secs_f64(), None, tokens);
    let completion = completion?;
    let (mut usage, mut summary): (crate::model::Usage, _) =
        (completion.usage.into(), String::new());
    while let Ok(progress) = received.try_recv() {
        match progress {
            Progress::Request => usage.llm_calls += 1,
            Progress::Delta(text) => summary.push_str(&text),
        }
    }
    Ok((summary, usage))
}

/// One message as a line of the text to summarise; tool calls and outputs included.
fn render(message: &Message) -> String {
    let text = message.content.as_deref().unwrap_or_default();
    match message.role {
        Role::System => format!("system: {text}"),
        Role::User => format!("user: {text}"),
        Role::Assistant if message.tool_calls.is_empty() => format!("assistant: {text}"),
        Role::Assistant => (message.tool_calls.iter())
            .map(|c| {
                format!(
                    "assistant called tool `{}` with arguments {} (call {})",
                    c.function.name, c.function.arguments, c.id
                )
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Role::Tool => format!(
            "tool output for call {}: {text}",
            message.tool_call_id.as_deref().unwrap_or_default()
        ),
    }
}
