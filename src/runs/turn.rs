//! One execution of a claimed run: the turn loop of docs/runs.md, from the stored history to a
//! final status or a pause for the client's tool outputs.

use serde_json::value::RawValue;
use serde_json::Value;
use tokio::sync::mpsc;

use super::calls;
use super::compact::{compact_for_run, RunCompaction};
use super::execution::{Execution, Outcome};
use super::history::{self, History};
use super::mcp::{self, McpSessions, Offer};
use super::Engine;
use crate::llm::{ChatRequest, Messages, Progress};
use crate::model::{mcp_items, run_items, IncompleteDetails, RunConfig, RunError, SessionId};
use crate::store::{Claim, StoreError};

/// Runs turns until the run completes, fails or waits for the client.
pub(super) async fn drive(
    engine: &Engine, claim: &Claim, exec: &mut Execution,
) -> Result<Outcome, StoreError> {
    let config = exec.record.config.clone();
    let session_id = SessionId::parse("session_id", exec.record.run.session_id.clone())?;
    let (tenant, budget) = (&claim.tenant, history_budget(&config));
    let mut history = if claim.history_empty {
        History::default()
    } else {
        history::read(engine, tenant, &session_id, budget, None).await?
    };
    if let (Some(policy), 0) = (config.compaction, exec.record.turns) {
        let current = parse_items(exec.record.run.input.iter());
        let (instructions, summary) = (config.instructions.as_deref(), history.summary.as_deref());
        if history.prepared.estimated_tokens(instructions, summary, &current)
            > policy.threshold_tokens
        {
            match compact_for_run(engine, tenant, &session_id, exec, policy.keep_recent_items)
                .await?
            {
                RunCompaction::Stored => {
                    history = history::read(engine, tenant, &session_id, budget, None).await?;
                }
                RunCompaction::Skipped => {}
                RunCompaction::Failed(error) => return Ok(Outcome::Failed(error)),
            }
        }
    }
    let mut mcp = McpSessions::new(
        engine.webhook_client.clone(),
        engine.settings.mcp_call_timeout,
        engine.settings.webhooks.clone(),
    );
    mcp::discover(exec, &mut mcp, &config).await;
    let listed = mcp_items::listed(&exec.record.run.output);
    let offer = Offer::new(&config, &listed);
    if offer.renames() && !history.mcp.is_empty() {
        let rename = |items: &mut [Value]| offer.rename(items);
        history = history::read(engine, tenant, &session_id, budget, Some(&rename)).await?;
    }
    // The same request each turn, but for its messages.
    let mut request = ChatRequest {
        model: config.model.clone(),
        messages: Messages::default(),
        tools: offer.specs.clone(),
        temperature: config.temperature,
        max_output_tokens: config.max_output_tokens,
        sampling: config.sampling.clone(),
    };
    let mut look_for_steering = claim.steered;
    loop {
        // The calls of the last model call, or of a paused run the client answered.
        let settled = calls::settle(engine, &claim.tenant, exec, &config, &mut mcp, &history.mcp);
        if let Some(pause) = settled.await {
            return Ok(pause);
        }
        if std::mem::replace(&mut look_for_steering, true) {
            take_steering(engine, claim, exec).await?;
        }
        let mut current = parse_items(exec.record.run.input.iter().chain(&exec.record.run.output));
        offer.rename(&mut current);
        request.messages = match history.prepared.messages(
            config.instructions.as_deref(),
            history.summary.as_deref(),
            &current,
            config.max_input_tokens,
        ) {
            Ok(messages) => messages,
            Err(error) => {
                return Ok(Outcome::Failed(RunError::new("context_too_long", error.to_string())))
            }
        };
        exec.record.turns += 1;
        let completion = match complete(engine, &request, exec).await {
            Ok(completion) => completion,
            Err(error) => {
                return Ok(Outcome::Failed(RunError::new(error.code.as_str(), error.message)))
            }
        };
        exec.record.run.usage.add(&completion.usage.into());
        let incomplete = IncompleteDetails::from_finish_reason(completion.finish_reason.as_deref());
        // The text streamed since the last item is all this call's.
        let text = std::mem::take(&mut exec.partial);
        if !text.is_empty() || completion.tool_calls.is_empty() {
            exec.push_item(match incomplete {
                Some(_) => run_items::incomplete_assistant_message(&text),
                None => run_items::assistant_message(&text),
            });
        }
        if incomplete.is_some() {
            exec.record.run.incomplete_details = incomplete;
        }
        if completion.tool_calls.is_empty() {
            return Ok(Outcome::Completed);
        }
        // The tools' outputs would need another LLM call: fail before running them (a
        // webhook's side effects) or pausing for the client.
        if exec.record.turns >= config.max_turns {
            return Ok(Outcome::Failed(RunError::new(
                "max_turns_exceeded",
                format!("the run made {} LLM calls without finishing", config.max_turns),
            )));
        }
        // Earlier calls named as the model calls them (the output as it was sent; the
        // input stays as it came, steered items join the output), then the new ones.
        let mut calls = current.split_off(exec.record.run.input.len());
        calls.extend(completion.tool_calls.iter().map(|call| {
            serde_json::json!({"type": "function_call", "name": call.name, "arguments": call.arguments})
        }));
        // A model that keeps asking for the same call would use up `max_turns` (and
        // repeat a tool's side effects) before it failed: fail as `max_turns` does,
        // before the calls are in the output, so none is left without its output.
        let repeated = run_items::repeated_calls(&calls);
        if repeated >= config.max_repeated_tool_calls {
            let message = format!(
                "the model called one tool with the same arguments {repeated} times in a row"
            );
            return Ok(Outcome::Failed(RunError::new("tool_call_loop", message)));
        }
        calls::take(exec, &offer, &mut mcp, &completion.tool_calls).await;
    }
}

/// Adds the input steered into the run since it last took any to its output.
pub(super) async fn take_steering(
    engine: &Engine, claim: &Claim, exec: &mut Execution,
) -> Result<(), StoreError> {
    for (n, steer) in engine.store.take_steering(claim, exec.record.steered_through).await? {
        for item in steer.input {
            exec.push_item(item);
        }
        exec.record.steered_through = n;
    }
    Ok(())
}

/// One LLM call, publishing its text as it streams.
async fn complete(
    engine: &Engine, request: &ChatRequest, exec: &mut Execution,
) -> Result<crate::llm::Completion, crate::llm::LlmError> {
    let (progress, mut received) = mpsc::unbounded_channel();
    let call = engine.llm.complete(request, progress);
    tokio::pin!(call);
    let started = std::time::Instant::now();
    let mut first_token = None;
    let mut progress = |exec: &mut Execution, progress: Progress| {
        if matches!(progress, Progress::Delta(_)) && first_token.is_none() {
            first_token = Some(started.elapsed().as_secs_f64());
        }
        exec.progress(progress);
    };
    let result = loop {
        tokio::select! {
            biased;
            Some(sent) = received.recv() => progress(exec, sent),
            result = &mut call => break result,
        }
    };
    while let Ok(sent) = received.try_recv() {
        progress(exec, sent);
    }
    let tokens = result.as_ref().map_or((0, 0), |c| (c.usage.input_tokens, c.usage.output_tokens));
    let seconds = started.elapsed().as_secs_f64();
    engine.metrics.llm_called(&request.model, seconds, first_token, tokens);
    result
}

/// How much history a run reads: enough for its token budget, and with compaction enough
/// to tell whether the threshold is passed.
fn history_budget(config: &RunConfig) -> Option<u64> {
    let threshold = config.compaction.map(|c| c.threshold_tokens);
    config
        .max_input_tokens
        .zip(threshold)
        .map_or(config.max_input_tokens.or(threshold), |(max, threshold)| Some(max.max(threshold)))
}

fn parse_items<'a>(items: impl Iterator<Item = &'a Box<RawValue>>) -> Vec<Value> {
    items.map(|item| serde_json::from_str(item.get()).unwrap_or(Value::Null)).collect()
}
