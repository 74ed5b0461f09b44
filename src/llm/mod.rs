//! The LLM behind a run: one streamed Chat Completions request per turn.
//!
//! [`LlmClient`] is the seam: the worker only knows this trait, so tests and other
//! providers plug in without touching the run engine.

mod messages;
mod openai;
mod sse;

use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use tokio::sync::mpsc;

use crate::secret::Secret;

pub use messages::Messages;
pub use openai::OpenAiClient;

/// The protocol of the LLM calls, as `gen_ai.provider.name` names it in traces.
pub const PROVIDER: &str = "openai";

/// A response body cut off after `limit` bytes, as text: a peer cannot make the service
/// hold more than that.
pub(crate) async fn read_limited(
    mut response: reqwest::Response, limit: usize,
) -> Result<String, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        body.extend_from_slice(&chunk);
        if body.len() >= limit {
            body.truncate(limit);
            break;
        }
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// One Chat Completions request, already translated from session items.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Messages,
    pub tools: Vec<ToolSpec>,
    pub temperature: Option<f64>,
    pub max_output_tokens: Option<u32>,
    pub sampling: crate::model::Sampling,
}

/// A Chat Completions message, serialized exactly as the protocol wants it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    pub role: Role,
    /// `None` only for an assistant message that carries tool calls and no text.
    pub content: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallMessage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    pub fn text(role: Role, content: impl Into<String>) -> Self {
        Self { role, content: Some(content.into()), tool_calls: Vec::new(), tool_call_id: None }
    }

    pub fn tool_calls(calls: Vec<ToolCall>) -> Self {
        Self {
            role: Role::Assistant,
            content: None,
            tool_calls: calls.into_iter().map(ToolCallMessage::from).collect(),
            tool_call_id: None,
        }
    }

    pub fn tool_output(call_id: impl Into<String>, output: impl Into<String>) -> Self {
        Self {
            role: Role::Tool,
            content: Some(output.into()),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// A tool call as it appears inside an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallMessage {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: FunctionCall,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionCall {
    pub name: String,
    pub arguments: String,
}

impl From<ToolCall> for ToolCallMessage {
    fn from(call: ToolCall) -> Self {
        Self {
            id: call.call_id,
            kind: "function",
            function: FunctionCall { name: call.name, arguments: call.arguments },
        }
    }
}

/// A function the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: Option<String>,
    /// A JSON Schema object.
    pub parameters: serde_json::Value,
}

/// A tool call the model produced, accumulated from its streamed pieces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub call_id: String,
    pub name: String,
    /// The JSON text the model produced, passed on unparsed.
    pub arguments: String,
}

/// What one streamed completion produced besides its text, which came to the caller as
/// [`Progress::Delta`]s only: a run keeps the text as it streams (for an interruption),
/// and a second copy here held each streamed answer twice.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Completion {
    pub tool_calls: Vec<ToolCall>,
    pub usage: TokenUsage,
    pub finish_reason: Option<String>,
    /// The model that answered, as the provider named it.
    pub model: Option<String>,
}

/// Token counts as the provider reported them; zero when it reported none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
}

/// One call's usage in a run's and a session's terms.
impl From<TokenUsage> for crate::model::Usage {
    fn from(tokens: TokenUsage) -> Self {
        Self {
            input_tokens: tokens.input_tokens as i64,
            output_tokens: tokens.output_tokens as i64,
            total_tokens: tokens.total_tokens as i64,
            // Requests are counted as they are made (`Progress::Request`), retries too.
            llm_calls: 0,
        }
    }
}

/// Why a completion failed. The code becomes the run's `error.code`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct LlmError {
    pub code: LlmErrorCode,
    pub message: String,
}

impl LlmError {
    pub fn new(code: LlmErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmErrorCode {
    /// 429 after every retry.
    RateLimited,
    /// 5xx or connection failures after every retry.
    Unavailable,
    /// No response, or no chunk within the idle timeout, after every retry.
    Timeout,
    /// Malformed JSON, an unexpected shape, or a stream that ended before it finished.
    BadResponse,
    /// 401 or 403: the API key is missing or wrong.
    AuthFailed,
    /// The provider said the request does not fit the model's context window.
    ContextTooLong,
    /// Any other 4xx: the provider refused the request (an unknown model, say).
    BadRequest,
}

impl LlmErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RateLimited => "llm_rate_limited",
            Self::Unavailable => "llm_unavailable",
            Self::Timeout => "llm_timeout",
            Self::BadResponse => "llm_bad_response",
            Self::AuthFailed => "llm_auth_failed",
            Self::ContextTooLong => "context_too_long",
            Self::BadRequest => "llm_bad_request",
        }
    }
}

/// What a completion reports while it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// A request went to the provider, a retry included: each one is billed, whether it
    /// then succeeds, fails or is cut off by a cancel.
    Request,
    /// Text the model produced.
    Delta(String),
}

/// Streams one completion. Requests and text deltas go to `progress` as they happen, so
/// the run can count, publish and keep them; the rest of the finished completion is
/// returned.
///
/// Implementations retry what is worth retrying, but never once a delta has been sent:
/// the client has seen that text, and a second attempt would contradict it.
#[async_trait]
pub trait LlmClient: Send + Sync {
    async fn complete(
        &self, request: &ChatRequest, progress: mpsc::UnboundedSender<Progress>,
    ) -> Result<Completion, LlmError>;
}

/// Where the OpenAI-compatible endpoint is and how patient to be with it.
#[derive(Debug, Clone)]
pub struct LlmSettings {
    /// Up to and including `/v1`: requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    pub api_key: Option<Secret>,
    pub connect_timeout: Duration,
    /// The whole request, from sending to the last chunk.
    pub request_timeout: Duration,
    /// The longest wait for the response headers or between two chunks.
    pub idle_timeout: Duration,
    /// Attempts after the first; 0 never retries.
    pub max_retries: u32,
    /// The first backoff; each retry doubles it, with full jitter.
    pub retry_base_delay: Duration,
    /// No backoff, and no `Retry-After`, waits longer than this.
    pub retry_max_delay: Duration,
}
