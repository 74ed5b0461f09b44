//! Webhook tools: the service POSTs the call to the tool's URL and hands the response
//! body to the model. Every failure becomes the output text, so the model can recover.

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde::Serialize;
use tracing::Instrument;

use super::{spans, Engine};
use crate::llm::read_limited;
use crate::model::{FunctionTool, RequiredToolCall};
use crate::telemetry;

/// The most response body a tool output keeps.
const MAX_OUTPUT_BYTES: usize = 1024 * 1024;

#[derive(Serialize)]
struct WebhookCall<'a> {
    call_id: &'a str,
    name: &'a str,
    arguments: &'a str,
    /// The tenant of the session, for a tool that serves several.
    tenant: &'a str,
    session_id: &'a str,
    run_id: String,
}

/// The output of one webhook tool call.
pub(super) async fn call_webhook(
    engine: &Engine, tool: &FunctionTool, call: &RequiredToolCall, tenant: &str, session_id: &str,
    run_id: uuid::Uuid,
) -> String {
    let span = spans::execute_tool(&tool.name, &call.call_id, "function");
    let body = WebhookCall {
        call_id: &call.call_id,
        name: &call.name,
        arguments: &call.arguments,
        tenant,
        session_id,
        run_id: run_id.to_string(),
    };
    let posted = post(engine, tool, &body).instrument(span.clone());
    match posted.await {
        Ok(output) => output,
        Err(Failure { kind, output }) => {
            telemetry::failed(&span, &kind);
            output
        }
    }
}

/// A call that failed: a code of few values for traces, and the output the model reads.
struct Failure {
    kind: String,
    output: String,
}

impl Failure {
    fn new(kind: impl Into<String>, output: String) -> Self {
        Self { kind: kind.into(), output }
    }
}

async fn post(
    engine: &Engine, tool: &FunctionTool, body: &WebhookCall<'_>,
) -> Result<String, Failure> {
    let name = &tool.name;
    let Some(webhook) = &tool.webhook else {
        return Err(Failure::new("no_webhook", format!("error: tool `{name}` has no webhook")));
    };
    // The allow-list may have shrunk since the agent was created.
    if !engine.settings.webhooks.allows_url(&webhook.url) {
        let output = format!("error: the webhook host of tool `{name}` is not allowed");
        return Err(Failure::new("host_not_allowed", output));
    }
    let mut request = engine
        .webhook_client
        .post(&webhook.url)
        .timeout(Duration::from_millis(webhook.timeout_ms))
        .json(body);
    for (name, value) in &webhook.headers {
        request = request.header(name, value);
    }
    // The call's own context, in place of any the tool's headers name.
    let mut trace = HeaderMap::new();
    telemetry::inject(&mut trace);
    request = request.headers(trace);
    let late = || {
        let ms = webhook.timeout_ms;
        Failure::new("timeout", format!("error: tool `{name}` did not answer within {ms} ms"))
    };
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) if error.is_timeout() => return Err(late()),
        Err(_) => {
            let output = format!("error: tool `{name}` could not be reached");
            return Err(Failure::new("unreachable", output));
        }
    };
    let status = response.status();
    let body = match read_limited(response, MAX_OUTPUT_BYTES).await {
        Ok(body) => body,
        Err(error) if error.is_timeout() => return Err(late()),
        Err(_) => {
            let output = format!("error: the answer of tool `{name}` broke off");
            return Err(Failure::new("broken_answer", output));
        }
    };
    if status.is_success() {
        Ok(body)
    } else {
        let output = format!("error: tool `{name}` answered {status}: {body}");
        Err(Failure::new(status.as_str(), output))
    }
}
