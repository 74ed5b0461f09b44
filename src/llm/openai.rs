//! [`LlmClient`] over any OpenAI-compatible `/chat/completions` endpoint, streamed.

mod errors;
mod stream;

use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use reqwest::header::{HeaderMap, CONTENT_TYPE};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::timeout;
use tracing::field::Empty;
use tracing::{Instrument, Span};

use super::sse::SseParser;
use super::{
    read_limited, ChatRequest, Completion, LlmClient, LlmError, LlmErrorCode, LlmSettings,
    Messages, Progress, TokenUsage, ToolSpec, PROVIDER,
};
use crate::secret::Secret;
use crate::telemetry;
use errors::{provider_message, retry_after, retryable, status_code, timed_out, transport_error};
use stream::Accumulator;

/// How much of an error answer is kept for its message.
const MAX_ERROR_BYTES: usize = 64 * 1024;

/// Talks to one endpoint with one connection pool, shared by every run.
#[derive(Debug)]
pub struct OpenAiClient {
    http: reqwest::Client,
    url: String,
    /// The endpoint's host and port, as spans name the server.
    server: (String, Option<u16>),
    settings: LlmSettings,
}

impl OpenAiClient {
    pub fn new(settings: LlmSettings) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .build()
            .context("building the LLM HTTP client")?;
        let url = format!("{}/chat/completions", settings.base_url.trim_end_matches('/'));
        let parsed = reqwest::Url::parse(&url).context("LLM_BASE_URL: not a URL")?;
        let server =
            (parsed.host_str().unwrap_or_default().to_owned(), parsed.port_or_known_default());
        Ok(Self { http, url, server, settings })
    }
}

#[async_trait]
impl LlmClient for OpenAiClient {
    async fn complete(
        &self, request: &ChatRequest, progress: mpsc::UnboundedSender<Progress>,
    ) -> Result<Completion, LlmError> {
        let span = self.chat_span(request);
        let result = self.complete_retrying(request, progress).instrument(span.clone()).await;
        match &result {
            Ok(completion) => {
                if let Some(model) = &completion.model {
                    span.record("gen_ai.response.model", model.as_str());
                }
                if let Some(reason) = &completion.finish_reason {
                    span.record("agent_sessions.finish_reason", reason.as_str());
                }
                // Traces keep signed integers; an unsigned one would arrive as text.
                let TokenUsage { input_tokens, output_tokens, .. } = completion.usage;
                span.record("gen_ai.usage.input_tokens", input_tokens as i64);
                span.record("gen_ai.usage.output_tokens", output_tokens as i64);
            }
            Err(error) => telemetry::failed(&span, error.code.as_str()),
        }
        result
    }
}

impl OpenAiClient {
    /// The model call as traces show it, after the GenAI conventions: names and numbers,
    /// never the messages.
    fn chat_span(&self, request: &ChatRequest) -> Span {
        let (address, port) = (&self.server.0, self.server.1);
        tracing::info_span!(
            "chat",
            otel.name = %format_args!("chat {}", request.model),
            otel.kind = "client",
            otel.status_code = Empty,
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = PROVIDER,
            gen_ai.request.model = %request.model,
            gen_ai.request.temperature = request.temperature,
            gen_ai.request.max_tokens = request.max_output_tokens.map(i64::from),
            gen_ai.response.model = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            agent_sessions.finish_reason = Empty,
            server.address = %address,
            server.port = port.map(i64::from),
            "error.type" = Empty,
        )
    }

    /// The request, retried as the settings allow while nothing has streamed yet.
    async fn complete_retrying(
        &self, request: &ChatRequest, progress: mpsc::UnboundedSender<Progress>,
    ) -> Result<Completion, LlmError> {
        let body = serde_json::to_vec(&RequestBody::new(request)).map_err(|e| {
            LlmError::new(LlmErrorCode::BadRequest, format!("cannot encode the request: {e}"))
        })?;
        let body = Bytes::from(body);
        let mut retries = 0;
        loop {
            let mut acc = Accumulator::default();
            let _ = progress.send(Progress::Request);
            let attempt = self.attempt(body.clone(), &progress, &mut acc);
            let failure = match timeout(self.settings.request_timeout, attempt).await {
                Ok(Ok(completion)) => return Ok(completion),
                Ok(Err(failure)) => failure,
                Err(_) => {
                    Failure::from(timed_out("the whole request", self.settings.request_timeout))
                }
            };
            let error = self.redact(failure.error);
            if acc.delivered || !retryable(error.code) || retries >= self.settings.max_retries {
                return Err(error);
            }
            // A provider that asks for a longer pause than a retry may wait would only
            // refuse again: honour it by giving up now.
            if failure.retry_after.is_some_and(|wait| wait > self.settings.retry_max_delay) {
                return Err(error);
            }
            let delay = failure
                .retry_after
                .unwrap_or_else(|| self.backoff(retries).min(self.settings.retry_max_delay));
            retries += 1;
            tracing::warn!(
                code = error.code.as_str(),
                retry = retries,
                max_retries = self.settings.max_retries,
                delay_ms = delay.as_millis() as u64,
                error = %error.message,
                "retrying the LLM request"
            );
            tokio::time::sleep(delay).await;
        }
    }
}

impl OpenAiClient {
    /// One request and its stream. `acc` lives outside so the caller can tell, even
    /// after a timeout cancelled this future, whether text was already published.
    async fn attempt(
        &self, body: Bytes, progress: &mpsc::UnboundedSender<Progress>, acc: &mut Accumulator,
    ) -> Result<Completion, Failure> {
        let idle = self.settings.idle_timeout;
        let mut headers = HeaderMap::new();
        telemetry::inject(&mut headers);
        let mut request = (self.http.post(&self.url))
            .headers(headers)
            .header(CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(key) = &self.settings.api_key {
            request = request.bearer_auth(key.expose());
        }
        let response = timeout(idle, request.send())
            .await
            .map_err(|_| timed_out("the response headers", idle))?
            .map_err(transport_error)?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            // The status decides the outcome; a body that never comes only loses detail.
            let text = match timeout(idle, read_limited(response, MAX_ERROR_BYTES)).await {
                Ok(Ok(text)) => text,
                _ => String::new(),
            };
            let code = status_code(status.as_u16(), &text);
            let detail = provider_message(&text);
            let error = LlmError::new(code, format!("the LLM answered {status}: {detail}"));
            return Err(Failure { error, retry_after });
        }
        let mut body = response.bytes_stream();
        let mut parser = SseParser::default();
        loop {
            let chunk = match timeout(idle, body.next()).await {
                Err(_) => return Err(timed_out("the next stream chunk", idle).into()),
                Ok(None) => return Ok(acc.finish(false)?),
                Ok(Some(Err(e))) => return Err(transport_error(e).into()),
                Ok(Some(Ok(chunk))) => chunk,
            };
            for data in parser.feed(&chunk) {
                if acc.apply(&data, progress)? {
                    return Ok(acc.finish(true)?);
                }
            }
        }
    }

    /// Full jitter: concurrent runs that failed together do not retry together.
    fn backoff(&self, retries: u32) -> Duration {
        let ceiling = self
            .settings
            .retry_base_delay
            .saturating_mul(2u32.saturating_pow(retries))
            .min(self.settings.retry_max_delay);
        ceiling.mul_f64(fastrand::f64())
    }

    /// Some providers echo the key they rejected; it must not reach logs or clients.
    fn redact(&self, mut error: LlmError) -> LlmError {
        if let Some(key) =
            self.settings.api_key.as_ref().map(Secret::expose).filter(|k| !k.is_empty())
        {
            error.message = error.message.replace(key, "***");
        }
        error
    }
}

/// A failed attempt, with how long the provider asked us to wait before the next.
struct Failure {
    error: LlmError,
    retry_after: Option<Duration>,
}

impl From<LlmError> for Failure {
    fn from(error: LlmError) -> Self {
        Self { error, retry_after: None }
    }
}

#[derive(Serialize)]
struct RequestBody<'a> {
    model: &'a str,
    messages: &'a Messages,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<&'a Value>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct Tool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: ToolFunction<'a>,
}

#[derive(Serialize)]
struct ToolFunction<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    parameters: &'a Value,
}

impl<'a> From<&'a ToolSpec> for Tool<'a> {
    fn from(spec: &'a ToolSpec) -> Self {
        Self {
            kind: "function",
            function: ToolFunction {
                name: &spec.name,
                description: spec.description.as_deref(),
                parameters: &spec.parameters,
            },
        }
    }
}

impl<'a> RequestBody<'a> {
    fn new(request: &'a ChatRequest) -> Self {
        let sampling = &request.sampling;
        Self {
            model: &request.model,
            messages: &request.messages,
            stream: true,
            stream_options: StreamOptions { include_usage: true },
            temperature: request.temperature,
            max_tokens: request.max_output_tokens,
            tools: request.tools.iter().map(Tool::from).collect(),
            top_p: sampling.top_p,
            // Providers refuse tool options on a request without tools.
            tool_choice: sampling.tool_choice.as_ref().filter(|_| !request.tools.is_empty()),
            parallel_tool_calls: sampling.parallel_tool_calls.filter(|_| !request.tools.is_empty()),
            response_format: sampling.response_format.as_ref(),
        }
    }
}
