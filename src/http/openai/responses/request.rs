//! A `POST /v1/responses` body, checked field by field, and what it asks of the engine:
//! every field OpenAI documents is either carried out, echoed as given, or refused with
//! a 400 naming it. None is dropped unseen: unknown fields are refused too.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

use super::super::errors::{OpenAiError, Result};
use crate::model::{
    whole_optional, AgentConfig, ContextConfig, ContextStrategy, Sampling, Tool, ToolKind,
};

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateResponse {
    /// The model asked for; `MODEL_ALIASES` maps it to the upstream model. Absent:
    /// `LLM_MODEL`.
    #[schema(min_length = 1, max_length = 256)]
    pub model: Option<String>,
    /// A string (a user message) or a list of items.
    #[schema(value_type = Object)]
    pub input: Option<Value>,
    pub instructions: Option<String>,
    /// A conversation id, or `{"id"}`: the model sees the conversation, and the turn is
    /// appended to it.
    #[schema(value_type = Option<Object>)]
    pub conversation: Option<Value>,
    /// Answer from this response: the model sees its chain.
    pub previous_response_id: Option<String>,
    /// `function` tools, which the caller runs.
    #[schema(value_type = Option<Vec<Object>>)]
    pub tools: Option<Vec<Value>>,
    /// `auto`, `none`, `required` or `{"type": "function", "name"}`.
    #[schema(value_type = Option<Object>)]
    pub tool_choice: Option<Value>,
    #[schema(minimum = 0, maximum = 2)]
    pub temperature: Option<f64>,
    #[schema(minimum = 0, maximum = 1)]
    pub top_p: Option<f64>,
    #[serde(default, deserialize_with = "whole_optional")]
    #[schema(minimum = 1, maximum = 2147483647)]
    pub max_output_tokens: Option<u32>,
    pub parallel_tool_calls: Option<bool>,
    pub metadata: Option<BTreeMap<String, String>>,
    /// Default true; false: nothing is kept once the response is answered.
    pub store: Option<bool>,
    pub stream: Option<bool>,
    /// Accepted: the stream has nothing to leave out.
    #[serde(rename = "stream_options")]
    #[schema(value_type = Option<Object>)]
    pub _stream_options: Option<Value>,
    pub background: Option<bool>,
    /// `[{"type": "compaction", "compact_threshold"}]`.
    #[schema(value_type = Option<Vec<Object>>)]
    pub context_management: Option<Vec<Value>>,
    /// Accepted: a Response holds everything it has already.
    #[serde(rename = "include")]
    pub _include: Option<Vec<String>>,
    /// `{"format": {"type": "text" | "json_object" | "json_schema", …}, "verbosity"?}`.
    #[schema(value_type = Option<Object>)]
    pub text: Option<Value>,
    /// `auto` or `disabled`; echoed.
    pub truncation: Option<String>,
    /// Echoed; the upstream model reasons as it does.
    #[schema(value_type = Option<Object>)]
    pub reasoning: Option<Value>,
    pub user: Option<String>,
    pub service_tier: Option<String>,
    pub prompt_cache_key: Option<String>,
    pub prompt_cache_retention: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub prompt_cache_options: Option<Value>,
    pub safety_identifier: Option<String>,
    /// Echoed: the service runs no built-in tools.
    #[serde(default, deserialize_with = "whole_optional")]
    pub max_tool_calls: Option<u32>,
    /// Only 0: log probabilities are not available.
    #[serde(default, deserialize_with = "whole_optional")]
    #[schema(maximum = 0)]
    pub top_logprobs: Option<u32>,
    /// Refused: prompt templates are not available.
    #[schema(value_type = Option<Object>)]
    pub prompt: Option<Value>,
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
        if self.prompt.is_some() {
            return Err(OpenAiError::invalid("prompt", "prompt templates are not available"));
        }
        if self.top_logprobs.is_some_and(|n| n > 0) {
            return Err(OpenAiError::invalid(
                "top_logprobs",
                "log probabilities are not available",
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
            "tools": self.tools.clone().unwrap_or_default(),
            "tool_choice": or(&self.tool_choice, json!("auto")),
            "temperature": self.temperature.unwrap_or(1.0),
            "top_p": self.top_p.unwrap_or(1.0),
            "max_output_tokens": self.max_output_tokens,
            "parallel_tool_calls": self.parallel_tool_calls.unwrap_or(true),
            "store": self.store.unwrap_or(true),
            "background": self.background.unwrap_or(false),
            "text": or(&self.text, json!({"format": {"type": "text"}})),
            "truncation": self.truncation.as_deref().unwrap_or("disabled"),
            "reasoning": or(&self.reasoning, json!({"effort": null, "summary": null})),
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

/// The caller's `function` tools, as tools the engine offers and the caller answers.
fn tools(given: &[Value]) -> Result<Vec<Tool>> {
    given
        .iter()
        .enumerate()
        .map(|(i, tool)| {
            let at = format!("tools[{i}]");
            let kind = tool.get("type").and_then(Value::as_str).unwrap_or_default();
            if kind != "function" {
                return Err(OpenAiError::invalid(
                    &format!("{at}.type"),
                    format!("`{kind}` tools are not available; only `function` tools"),
                ));
            }
            let name = match tool.get("name") {
                Some(Value::String(name)) => name.clone(),
                _ => return Err(OpenAiError::invalid(&format!("{at}.name"), "must be a string")),
            };
            let description = match tool.get("description") {
                None | Some(Value::Null) => None,
                Some(Value::String(text)) => Some(text.clone()),
                Some(_) => {
                    return Err(OpenAiError::invalid(
                        &format!("{at}.description"),
                        "must be a string",
                    ))
                }
            };
            let parameters = match tool.get("parameters") {
                None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
                Some(Value::Object(schema)) => Value::Object(schema.clone()),
                Some(_) => {
                    return Err(OpenAiError::invalid(
                        &format!("{at}.parameters"),
                        "must be a JSON Schema object",
                    ))
                }
            };
            Ok(Tool { kind: ToolKind::Function, name, description, parameters, webhook: None })
        })
        .collect()
}

/// `tool_choice` in the Chat Completions form.
fn tool_choice(choice: &Value) -> Result<Value> {
    match choice {
        Value::String(mode) if matches!(mode.as_str(), "auto" | "none" | "required") => {
            Ok(choice.clone())
        }
        Value::Object(fields) if fields.get("type") == Some(&json!("function")) => {
            match fields.get("name") {
                Some(Value::String(name)) => {
                    Ok(json!({"type": "function", "function": {"name": name}}))
                }
                _ => Err(OpenAiError::invalid("tool_choice.name", "must be a string")),
            }
        }
        _ => Err(OpenAiError::invalid(
            "tool_choice",
            "must be `auto`, `none`, `required` or {\"type\": \"function\", \"name\"}",
        )),
    }
}

/// `text.format` as the Chat Completions `response_format`; none for plain text.
fn response_format(text: &Value) -> Result<Option<Value>> {
    let Some(fields) = text.as_object() else {
        return Err(OpenAiError::invalid("text", "must be an object"));
    };
    if let Some((name, _)) =
        fields.iter().find(|(k, _)| !matches!(k.as_str(), "format" | "verbosity"))
    {
        return Err(OpenAiError::invalid(&format!("text.{name}"), "is not a field of `text`"));
    }
    let Some(format) = fields.get("format").filter(|f| !f.is_null()) else {
        return Ok(None);
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "json_object"}))),
        Some("json_schema") => {
            let name = format.get("name").and_then(Value::as_str).ok_or_else(|| {
                OpenAiError::invalid("text.format.name", "is required for `json_schema`")
            })?;
            let schema = format.get("schema").filter(|s| s.is_object()).ok_or_else(|| {
                OpenAiError::invalid("text.format.schema", "must be a JSON Schema object")
            })?;
            let mut json_schema = json!({"name": name, "schema": schema});
            for key in ["strict", "description"] {
                if let Some(value) = format.get(key).filter(|v| !v.is_null()) {
                    json_schema[key] = value.clone();
                }
            }
            Ok(Some(json!({"type": "json_schema", "json_schema": json_schema})))
        }
        _ => Err(OpenAiError::invalid(
            "text.format.type",
            "must be `text`, `json_object` or `json_schema`",
        )),
    }
}

/// `context_management`: compaction when the input passes `compact_threshold` tokens.
fn context(entries: &[Value]) -> Result<Option<ContextConfig>> {
    let mut threshold = None;
    for (i, entry) in entries.iter().enumerate() {
        let at = format!("context_management[{i}]");
        if entry.get("type").and_then(Value::as_str) != Some("compaction") {
            return Err(OpenAiError::invalid(&format!("{at}.type"), "must be `compaction`"));
        }
        let field = format!("{at}.compact_threshold");
        let tokens = entry
            .get("compact_threshold")
            .and_then(Value::as_u64)
            .filter(|n| (1..=u64::from(i32::MAX as u32)).contains(n));
        threshold = Some(tokens.ok_or_else(|| {
            OpenAiError::invalid(&field, "must be a whole number of tokens from 1 to 2147483647")
        })?);
    }
    Ok(threshold.map(|tokens| ContextConfig {
        max_input_tokens: None,
        strategy: ContextStrategy::Compact,
        compact_threshold_tokens: Some(tokens),
        keep_recent_items: None,
    }))
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
