//! Webhook tools: the service POSTs the call to the tool's URL and hands the response
//! body to the model. Every failure becomes the output text, so the model can recover.

use std::time::Duration;

use serde::Serialize;

use super::Engine;
use crate::llm::read_limited;
use crate::model::{RequiredToolCall, Tool};

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
    engine: &Engine,
    tool: &Tool,
    call: &RequiredToolCall,
    tenant: &str,
    session_id: &str,
    run_id: uuid::Uuid,
) -> String {
    let Some(webhook) = &tool.webhook else {
        return format!("error: tool `{}` has no webhook", tool.name);
    };
    // The allow-list may have shrunk since the agent was created.
    let allowed = reqwest::Url::parse(&webhook.url).is_ok_and(|url| {
        engine
            .settings
            .webhooks
            .allows(url.host_str().unwrap_or_default(), url.port_or_known_default())
    });
    if !allowed {
        return format!("error: the webhook host of tool `{}` is not allowed", tool.name);
    }
    let mut request = engine
        .webhook_client
        .post(&webhook.url)
        .timeout(Duration::from_millis(webhook.timeout_ms))
        .json(&WebhookCall {
            call_id: &call.call_id,
            name: &call.name,
            arguments: &call.arguments,
            tenant,
            session_id,
            run_id: run_id.to_string(),
        });
    for (name, value) in &webhook.headers {
        request = request.header(name, value);
    }
    let late = || {
        let (name, ms) = (&tool.name, webhook.timeout_ms);
        format!("error: tool `{name}` did not answer within {ms} ms")
    };
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) if error.is_timeout() => return late(),
        Err(_) => return format!("error: tool `{}` could not be reached", tool.name),
    };
    let status = response.status();
    let body = match read_limited(response, MAX_OUTPUT_BYTES).await {
        Ok(body) => body,
        Err(error) if error.is_timeout() => return late(),
        Err(_) => return format!("error: the answer of tool `{}` broke off", tool.name),
    };
    if status.is_success() {
        body
    } else {
        format!("error: tool `{}` answered {status}: {body}", tool.name)
    }
}
