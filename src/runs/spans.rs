//! The run engine's spans, shaped by the GenAI semantic conventions. They name runs,
//! sessions, models and tools and count tokens; what anyone said stays out of them.

use std::time::SystemTime;

use opentelemetry::KeyValue;
use tracing::field::Empty;
use tracing::Span;

use crate::llm::PROVIDER;
use crate::model::{Run, SessionId, Usage};
use crate::store::Claim;
use crate::telemetry;

/// The claim of a run by a worker of this replica, from the query that found it.
pub(super) fn record_claim(claim: &Claim, began: SystemTime) {
    let run = &claim.record.run;
    let attributes = vec![
        KeyValue::new("run_id", run.id.to_string()),
        KeyValue::new("attempt", claim.attempts),
        KeyValue::new("gen_ai.conversation.id", run.session_id.clone()),
    ];
    telemetry::record_span("claim run", began, claim.record.trace_parent.as_deref(), attributes);
}

/// One execution of a run, in the trace of the request that queued or last resumed it.
pub(super) fn invoke_agent(claim: &Claim) -> Span {
    let run = &claim.record.run;
    let span = tracing::info_span!(
        "invoke_agent",
        run_id = %run.id,
        attempt = claim.attempts,
        otel.status_code = Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.provider.name = PROVIDER,
        gen_ai.request.model = %run.model,
        gen_ai.conversation.id = %run.session_id,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        agent_sessions.run.status = Empty,
        "error.type" = Empty,
    );
    if let Some(parent) = &claim.record.trace_parent {
        telemetry::follow(&span, parent);
    }
    span
}

/// What an execution of `run` came to; `before` is the run's usage when it was claimed,
/// which earlier executions used.
pub(super) fn record_outcome(span: &Span, run: &Run, before: &Usage) {
    span.record("agent_sessions.run.status", run.status.as_str());
    span.record("gen_ai.usage.input_tokens", run.usage.input_tokens - before.input_tokens);
    span.record("gen_ai.usage.output_tokens", run.usage.output_tokens - before.output_tokens);
    if let Some(error) = &run.error {
        telemetry::failed(span, &error.code);
    }
}

/// One call of a tool the service runs: `kind` is `function` for a webhook,
/// `extension` for an MCP server's tool.
pub(super) fn execute_tool(name: &str, call_id: &str, kind: &'static str) -> Span {
    tracing::info_span!(
        "execute_tool",
        otel.name = %format_args!("execute_tool {name}"),
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %name,
        gen_ai.tool.call.id = %call_id,
        gen_ai.tool.type = kind,
        "error.type" = Empty,
    )
}

/// A compaction of the session's history into a summary.
pub(super) fn compaction(session_id: &SessionId) -> Span {
    tracing::info_span!(
        "compact",
        otel.name = "compact session",
        otel.status_code = Empty,
        gen_ai.conversation.id = session_id.as_str(),
        agent_sessions.items_compacted = Empty,
        "error.type" = Empty,
    )
}
