//! A `POST /v1/responses` body, checked field by field, and what it asks of the engine:
//! every field OpenAI documents is either carried out, echoed as given, or refused with
//! a 400 naming it. None is dropped unseen: unknown fields are refused too.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

use super::super::errors::{OpenAiError, Result};
use super::super::schemas;
use super::run_options::{context, response_format, tool_choice, tools};
use crate::model::{whole_optional, AgentConfig, IfBusy, Metadata, Sampling};

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateResponse {
    /// The model asked for; `MODEL_ALIASES` maps it to the upstream model. Absent:
    /// `LLM_MODEL`.
    #[schema(min_length = 1, max_length = 256, pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$")]
    pub model: Option<String>,
    #[schema(schema_with = schemas::input, required = true)]
    pub input: Option<Value>,
    pub instructions: Option<String>,
    /// A conversation id, or `{"id"}`: the model sees the conversation, and the turn is
    /// appended to it.
    #[schema(schema_with = schemas::conversation)]
    pub conversation: Option<Value>,
    /// With a `conversation` that has an unfinished response: `enqueue` (the default)
    /// waits for it, `reject` answers 409, `interrupt`, `rollback` and `steer` act as on
    /// a native run.
    pub if_busy: Option<IfBusy>,
    /// Answer from this response: the model sees its chain.
    pub previous_response_id: Option<String>,
    /// `function` tools, which the caller runs.
    #[schema(schema_with = schemas::tools)]
    pub tools: Option<Vec<Value>>,
    /// `auto`, `none`, `required` or `{"type": "function", "name"}`.
    #[schema(schema_with = schemas::tool_choice)]
    pub tool_choice: Option<Value>,
    #[schema(minimum = 0, maximum = 2)]
    pub temperature: Option<f64>,
    #[schema(minimum = 0, maximum = 1)]
    pub top_p: Option<f64>,
    #[serde(default, deserialize_with = "whole_optional")]
    #[schema(minimum = 1, maximum = 2147483647)]
    pub max_output_tokens: Option<u32>,
    pub parallel_tool_calls: Option<bool>,
    #[schema(value_type = Option<Metadata>)]
    pub metadata: Option<BTreeMap<String, String>>,
    /// Default true; false: nothing is kept once the response is answered.
    pub store: Option<bool>,
    pub stream: Option<bool>,
    /// Accepted: the stream has nothing to leave out.
    #[serde(rename = "stream_options")]
    #[schema(value_type = Option<Object>)]
    pub _stream_options: Option<Map<String, Value>>,
    pub background: Option<bool>,
    /// `[{"type": "compaction", "compact_threshold"}]`.
    #[schema(schema_with = schemas::context_management)]
    pub context_management: Option<Vec<Value>>,
    /// Accepted: a Response holds everything it has already.
    #[serde(rename = "include")]
    pub _include: Option<Vec<String>>,
    /// `{"format": {"type": "text" | "json_object" | "json_schema", …}, "verbosity"?}`.
    #[schema(schema_with = schemas::text)]
    pub text: Option<Value>,
    /// `auto` or `disabled`; echoed.
    #[schema(schema_with = schemas::truncation)]
    pub truncation: Option<String>,
    /// Echoed; the upstream model reasons as it does.
    #[schema(value_type = Option<Object>)]
    pub reasoning: Option<Map<String, Value>>,
    pub user: Option<String>,
    pub service_tier: Option<String>,
    pub prompt_cache_key: Option<String>,
    pub prompt_cache_retention: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub prompt_cache_options: Option<Map<String, Value>>,
    pub safety_identifier: Option<String>,
    /// Echoed: the service runs no built-in tools.
    #[serde(default, deserialize_with = "whole_optional")]
    #[schema(maximum = 2147483647)]
    pub max_tool_calls: Option<u32>,
    /// Only 0: log probabilities are not available.
    #[serde(default, deserialize_with = "whole_optional")]
    #[schema(minimum = 0, maximum = 0)]
    pub top_logprobs: Option<u32>,
    /// Refused: prompt templates are not available.
    #[schema(schema_with = schemas::refused)]
    pub prompt: Option<Value>,
}

/// A tool as the Response echoes it: an MCP server's header values are credentials, kept
/// with the run and never shown.
fn redacted(tool: &Value) -> Value {
    let mut tool = tool.clone();
    if let Some(Value::Object(headers)) = tool.get_mut("headers") {
        headers.values_mut().for_each(|value| *value = crate::model::REDACTED.into());
    }
    tool
}

/// What a request asks of the run, once checked.
pub struct Asked {
    pub config: AgentConfig,
    pub sampling: Sampling,
    /// The request's fields as the Response echoes them.
    pub echo: Map<String, Value>,
}

impl CreateResponse {
    /// Checks the fields that configure the run; `model` is the upstream model.
    pub fn asked(&self, requested_model: &str, model: &str) -> Result<Asked> {
        if self.if_busy.is_some() && (self.conversation.is_none() || self.store == Some(false)) {
            return Err(OpenAiError::invalid(
                "if_busy",
                "applies only to a stored response in a `conversation`",
            ));
        }
        if self.prompt.is_some() {
            return Err(OpenAiError::invalid("prompt", "prompt templates are not available"));
        }
        if self.top_logprobs.is_some_and(|n| n > 0) {
            return Err(OpenAiError::invalid(
                "top_logprobs",
                "log probabilities are not available",
            ));
        }
        if self.max_tool_calls.is_some_and(|n| n > i32::MAX as u32) {
            return Err(OpenAiError::invalid(
                "max_tool_calls",
                "must be a whole number from 0 to 2147483647",
            ));
        }
        if let Some(truncation) = &self.truncation {
            if !matches!(truncation.as_str(), "auto" | "disabled") {
                return Err(OpenAiError::invalid("truncation", "must be `auto` or `disabled`"));
            }
        }
        if self.top_p.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
            return Err(OpenAiError::invalid("top_p", "must be between 0 and 1"));
        }
        let tools = self.tools.as_deref().map(tools).transpose()?;
        let tool_choice = self.tool_choice.as_ref().map(tool_choice).transpose()?;
        let response_format = match &self.text {
            Some(text) => response_format(text)?,
            None => None,
        };
        let context = match &self.context_management {
            Some(entries) => context(entries)?,
            None => None,
        };
        let config = AgentConfig {
            model: Some(model.to_owned()),
            instructions: self.instructions.clone(),
            temperature: self.temperature,
            max_output_tokens: self.max_output_tokens,
            tools,
            context,
            ..AgentConfig::default()
        };
        let sampling = Sampling {
            top_p: self.top_p,
            tool_choice,
            parallel_tool_calls: self.parallel_tool_calls,
            response_format,
        };
        Ok(Asked { config, sampling, echo: self.echo(requested_model) })
    }

    /// The fields a Response shows of its request, with OpenAI's defaults for the unset.
    fn echo(&self, model: &str) -> Map<String, Value> {
        let or = |value: &Option<Value>, default: Value| value.clone().unwrap_or(default);
        let json = |value: Option<Value>| value.unwrap_or(Value::Null);
        let fields = json!({
            "model": model,
            "instructions": self.instructions,
            "tools": self.tools.iter().flatten().map(redacted).collect::<Vec<_>>(),
            "tool_choice": or(&self.tool_choice, json!("auto")),
            "temperature": self.temperature.unwrap_or(1.0),
            "top_p": self.top_p.unwrap_or(1.0),
            "max_output_tokens": self.max_output_tokens,
            "parallel_tool_calls": self.parallel_tool_calls.unwrap_or(true),
            "store": self.store.unwrap_or(true),
            "background": self.background.unwrap_or(false),
            "text": or(&self.text, json!({"format": {"type": "text"}})),
            "truncation": self.truncation.as_deref().unwrap_or("disabled"),
            "reasoning": self.reasoning.clone().map(Value::Object)
                .unwrap_or_else(|| json!({"effort": null, "summary": null})),
            "user": self.user,
            "service_tier": self.service_tier.as_deref().unwrap_or("default"),
            "prompt_cache_key": self.prompt_cache_key,
            "prompt_cache_retention": self.prompt_cache_retention,
            "prompt_cache_options": self.prompt_cache_options,
            "safety_identifier": self.safety_identifier,
            "max_tool_calls": self.max_tool_calls,
            "top_logprobs": self.top_logprobs.unwrap_or(0),
            "context_management": json(self.context_management.clone().map(Value::Array)),
            "prompt": null,
        });
        match fields {
            Value::Object(fields) => fields,
            _ => unreachable!("an object literal"),
        }
    }
}

/// The conversation a request names: `"id"` or `{"id"}`.
pub fn conversation_id(conversation: &Value) -> Result<String> {
    let id = match conversation {
        Value::String(id) => Some(id.as_str()),
        Value::Object(fields) => fields.get("id").and_then(Value::as_str),
        _ => None,
    };
    id.map(str::to_owned).ok_or_else(|| {
        OpenAiError::invalid("conversation", "must be a conversation id or {\"id\": …}")
    })
}
