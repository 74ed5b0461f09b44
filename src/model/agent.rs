//! Agents: reusable run configuration. Configurations layer — the server default, the
//! session's agent, the run's `agent_id` and the run's inline `agent` — so every field
//! of [`AgentConfig`] is optional and a set field wins over the layers below it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::field::InvalidField;
use super::metadata::{Metadata, MetadataPatch};
use super::whole;

/// `max_turns` when no layer sets it.
pub const DEFAULT_MAX_TURNS: u32 = 10;
const MAX_TURNS_LIMIT: u32 = 100;
/// The most tokens a limit may name: what every provider's APIs take as a 32-bit integer.
const MAX_TOKENS: u32 = i32::MAX as u32;
const MAX_TOOLS: usize = 128;
const DEFAULT_WEBHOOK_TIMEOUT_MS: u64 = 10_000;
const MAX_WEBHOOK_TIMEOUT_MS: u64 = 300_000;

/// A stored agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    /// A UUIDv7 given by the service.
    pub id: String,
    #[schema(required = true)]
    pub name: Option<String>,
    /// Null: the server default (`LLM_MODEL`).
    #[schema(required = true)]
    pub model: Option<String>,
    /// Sent first, as the system message, on every LLM call.
    #[schema(required = true)]
    pub instructions: Option<String>,
    #[schema(required = true, minimum = 0, maximum = 2)]
    pub temperature: Option<f64>,
    #[schema(required = true, minimum = 1, maximum = 2147483647)]
    pub max_output_tokens: Option<u32>,
    pub tools: Vec<Tool>,
    /// LLM calls a run may make before it fails with `max_turns_exceeded`.
    #[schema(minimum = 1, maximum = 100)]
    pub max_turns: u32,
    #[schema(required = true)]
    pub context: Option<ContextConfig>,
    pub metadata: Metadata,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Agent {
    /// A new agent with a generated UUIDv7 id.
    pub fn new(config: AgentConfig, metadata: Metadata, now: DateTime<Utc>) -> Self {
        Self {
            id: uuid::Uuid::now_v7().to_string(),
            name: config.name,
            model: config.model,
            instructions: config.instructions,
            temperature: config.temperature,
            max_output_tokens: config.max_output_tokens,
            tools: config.tools.unwrap_or_default(),
            max_turns: config.max_turns.unwrap_or(DEFAULT_MAX_TURNS),
            context: config.context,
            metadata,
            created_at: now,
            updated_at: now,
        }
    }

    /// What this agent contributes to a run's configuration.
    pub fn config(&self) -> AgentConfig {
        AgentConfig {
            name: self.name.clone(),
            model: self.model.clone(),
            instructions: self.instructions.clone(),
            temperature: self.temperature,
            max_output_tokens: self.max_output_tokens,
            tools: Some(self.tools.clone()),
            max_turns: Some(self.max_turns),
            context: self.context.clone(),
        }
    }
}

/// A change to an agent: a field left out stays, `null` resets it to its default.
#[derive(Debug, Clone, Default)]
pub struct AgentPatch {
    pub name: Option<Option<String>>,
    pub model: Option<Option<String>>,
    pub instructions: Option<Option<String>>,
    pub temperature: Option<Option<f64>>,
    pub max_output_tokens: Option<Option<u32>>,
    pub tools: Option<Option<Vec<Tool>>>,
    pub max_turns: Option<Option<u32>>,
    pub context: Option<Option<ContextConfig>>,
    pub metadata: Option<MetadataPatch>,
}

impl AgentPatch {
    /// The agent after this patch, as of `now`.
    pub fn apply(self, mut agent: Agent, now: DateTime<Utc>) -> Result<Agent, InvalidField> {
        fn set<T>(field: &mut T, change: Option<T>) {
            if let Some(value) = change {
                *field = value;
            }
        }
        set(&mut agent.name, self.name);
        set(&mut agent.model, self.model);
        set(&mut agent.instructions, self.instructions);
        set(&mut agent.temperature, self.temperature);
        set(&mut agent.max_output_tokens, self.max_output_tokens);
        set(&mut agent.context, self.context);
        if let Some(tools) = self.tools {
            agent.tools = tools.unwrap_or_default();
        }
        if let Some(turns) = self.max_turns {
            agent.max_turns = turns.unwrap_or(DEFAULT_MAX_TURNS);
        }
        if let Some(patch) = self.metadata {
            agent.metadata.apply(patch)?;
        }
        agent.updated_at = now;
        Ok(agent)
    }

    /// The fields this patch sets, as a configuration to validate.
    pub fn as_config(&self) -> AgentConfig {
        AgentConfig {
            name: self.name.clone().flatten(),
            model: self.model.clone().flatten(),
            instructions: self.instructions.clone().flatten(),
            temperature: self.temperature.flatten(),
            max_output_tokens: self.max_output_tokens.flatten(),
            tools: self.tools.clone().flatten(),
            max_turns: self.max_turns.flatten(),
            context: self.context.clone().flatten(),
        }
    }
}

/// Run configuration, as an agent is created with or a run gives inline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// A label for people; runs do not use it.
    #[schema(max_length = 256)]
    pub name: Option<String>,
    /// Absent: the layer below decides, down to the server default (`LLM_MODEL`).
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    pub model: Option<String>,
    /// Sent first, as the system message, on every LLM call.
    pub instructions: Option<String>,
    #[schema(minimum = 0, maximum = 2)]
    pub temperature: Option<f64>,
    #[serde(default, deserialize_with = "whole::optional")]
    #[schema(minimum = 1, maximum = 2147483647)]
    pub max_output_tokens: Option<u32>,
    #[schema(max_items = 128)]
    pub tools: Option<Vec<Tool>>,
    /// LLM calls a run may make; 10 when no layer sets it.
    #[serde(default, deserialize_with = "whole::optional")]
    #[schema(minimum = 1, maximum = 100)]
    pub max_turns: Option<u32>,
    pub context: Option<ContextConfig>,
}

impl AgentConfig {
    /// `self` over `base`: each field set here wins.
    pub fn over(self, base: AgentConfig) -> AgentConfig {
        AgentConfig {
            name: self.name.or(base.name),
            model: self.model.or(base.model),
            instructions: self.instructions.or(base.instructions),
            temperature: self.temperature.or(base.temperature),
            max_output_tokens: self.max_output_tokens.or(base.max_output_tokens),
            tools: self.tools.or(base.tools),
            max_turns: self.max_turns.or(base.max_turns),
            context: self.context.or(base.context),
        }
    }

    /// Checks every field; `prefix` names where the configuration sits in the request
    /// (`""` for an agent body, `"agent."` inline on a run).
    pub fn validate(&self, prefix: &str, webhooks: &WebhookPolicy) -> Result<(), ConfigError> {
        let field = |name: &str| format!("{prefix}{name}");
        if let Some(name) = &self.name {
            if name.chars().count() > 256 {
                return Err(
                    InvalidField::new(field("name"), "must be at most 256 characters").into(),
                );
            }
        }
        if let Some(model) = &self.model {
            let length = model.chars().count();
            if !(1..=256).contains(&length) || model.chars().any(char::is_control) {
                return Err(InvalidField::new(
                    field("model"),
                    "must be 1 to 256 characters without control characters",
                )
                .into());
            }
        }
        if let Some(t) = self.temperature {
            if !(0.0..=2.0).contains(&t) {
                return Err(
                    InvalidField::new(field("temperature"), "must be between 0 and 2").into(),
                );
            }
        }
        if let Some(tokens) = self.max_output_tokens {
            if !(1..=MAX_TOKENS).contains(&tokens) {
                return Err(InvalidField::new(
                    field("max_output_tokens"),
                    format!("must be between 1 and {MAX_TOKENS}"),
                )
                .into());
            }
        }
        if let Some(turns) = self.max_turns {
            if !(1..=MAX_TURNS_LIMIT).contains(&turns) {
                return Err(InvalidField::new(
                    field("max_turns"),
                    format!("must be between 1 and {MAX_TURNS_LIMIT}"),
                )
                .into());
            }
        }
        if let Some(context) = &self.context {
            if let Some(tokens) = context.max_input_tokens {
                if !(1..=u64::from(MAX_TOKENS)).contains(&tokens) {
                    return Err(InvalidField::new(
                        field("context.max_input_tokens"),
                        format!("must be between 1 and {MAX_TOKENS}"),
                    )
                    .into());
                }
            }
            if context.strategy == ContextStrategy::Compact {
                return Err(ConfigError::NotImplemented(format!(
                    "{}: `compact` is not implemented yet; use `truncate`",
                    field("context.strategy")
                )));
            }
        }
        if let Some(tools) = &self.tools {
            if tools.len() > MAX_TOOLS {
                return Err(InvalidField::new(
                    field("tools"),
                    format!("at most {MAX_TOOLS} tools"),
                )
                .into());
            }
            for (i, tool) in tools.iter().enumerate() {
                let at = field(&format!("tools[{i}]"));
                tool.validate(&at, webhooks)?;
                if tools[..i].iter().any(|t| t.name == tool.name) {
                    return Err(InvalidField::new(
                        format!("{at}.name"),
                        format!("a tool named `{}` is listed twice", tool.name),
                    )
                    .into());
                }
            }
        }
        Ok(())
    }
}

/// Why a configuration is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Invalid(#[from] InvalidField),
    #[error("{0}")]
    NotImplemented(String),
}

/// How much history a run sends, and what happens to the rest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextConfig {
    /// The oldest history is left out until the estimated input fits; null: no limit.
    #[serde(default, deserialize_with = "whole::optional")]
    #[schema(minimum = 1, maximum = 2147483647)]
    pub max_input_tokens: Option<u64>,
    #[serde(default)]
    pub strategy: ContextStrategy,
}

/// `truncate` leaves out the oldest history; `compact` (summarising it) is not
/// implemented yet and is refused with 400 `not_implemented`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ContextStrategy {
    #[default]
    Truncate,
    Compact,
}

/// A function the model may call. With a `webhook` the service calls it; without, the
/// run pauses as `requires_action` and the client answers with the tool's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    #[serde(rename = "type")]
    pub kind: ToolKind,
    /// 1 to 64 characters of `A-Za-z0-9_-`, unique within the agent.
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A JSON Schema object describing the arguments.
    #[serde(default = "empty_parameters")]
    #[schema(value_type = Object)]
    pub parameters: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<Webhook>,
}

fn empty_parameters() -> serde_json::Value {
    serde_json::json!({"type": "object", "properties": {}})
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    Function,
}

/// Where the service POSTs `{call_id, name, arguments, session_id, run_id}`; the
/// response body becomes the tool's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// `http` or `https`, on a host listed in `TOOL_WEBHOOK_ALLOWED_HOSTS`.
    #[schema(pattern = "^[Hh][Tt][Tt][Pp][Ss]?://[^/?#]")]
    pub url: String,
    #[serde(
        default = "default_webhook_timeout",
        deserialize_with = "whole::required"
    )]
    #[schema(minimum = 1, maximum = 300000, default = 10000)]
    pub timeout_ms: u64,
    /// Sent with every call, e.g. an `Authorization` the webhook expects.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

fn default_webhook_timeout() -> u64 {
    DEFAULT_WEBHOOK_TIMEOUT_MS
}

impl Tool {
    fn validate(&self, at: &str, webhooks: &WebhookPolicy) -> Result<(), InvalidField> {
        let name_ok = (1..=64).contains(&self.name.len())
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !name_ok {
            return Err(InvalidField::new(
                format!("{at}.name"),
                "must be 1 to 64 characters of A-Z, a-z, 0-9, _ and -",
            ));
        }
        if !self.parameters.is_object() {
            return Err(InvalidField::new(
                format!("{at}.parameters"),
                "must be a JSON Schema object",
            ));
        }
        if let Some(webhook) = &self.webhook {
            webhook.validate(&format!("{at}.webhook"), webhooks)?;
        }
        Ok(())
    }
}

impl Webhook {
    fn validate(&self, at: &str, policy: &WebhookPolicy) -> Result<(), InvalidField> {
        let url = reqwest::Url::parse(&self.url)
            .map_err(|e| InvalidField::new(format!("{at}.url"), format!("not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(InvalidField::new(
                format!("{at}.url"),
                "must be http or https",
            ));
        }
        let host = url.host_str().unwrap_or_default();
        if !policy.allows(host, url.port_or_known_default()) {
            return Err(InvalidField::new(
                format!("{at}.url"),
                format!(
                    "webhook host `{host}` is not allowed; the operator lists the hosts tools may call in TOOL_WEBHOOK_ALLOWED_HOSTS"
                ),
            ));
        }
        if !(1..=MAX_WEBHOOK_TIMEOUT_MS).contains(&self.timeout_ms) {
            return Err(InvalidField::new(
                format!("{at}.timeout_ms"),
                format!("must be between 1 and {MAX_WEBHOOK_TIMEOUT_MS}"),
            ));
        }
        for (name, value) in &self.headers {
            let valid = reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_ok()
                && reqwest::header::HeaderValue::from_str(value).is_ok();
            if !valid {
                return Err(InvalidField::new(
                    format!("{at}.headers.{name}"),
                    "is not a valid HTTP header",
                ));
            }
        }
        Ok(())
    }
}

/// The hosts webhook tools may call (`TOOL_WEBHOOK_ALLOWED_HOSTS`). Empty refuses every
/// webhook: the service must not become a proxy into the operator's network.
#[derive(Debug, Clone, Default)]
pub struct WebhookPolicy {
    /// `host` (any port) or `host:port`, lowercase.
    allowed: Vec<String>,
}

impl WebhookPolicy {
    pub fn new(hosts: &[String]) -> Self {
        Self {
            allowed: hosts
                .iter()
                .map(|h| h.trim().to_ascii_lowercase())
                .filter(|h| !h.is_empty())
                .collect(),
        }
    }

    pub fn allows(&self, host: &str, port: Option<u16>) -> bool {
        let host = host.to_ascii_lowercase();
        let with_port = port.map(|p| format!("{host}:{p}"));
        self.allowed
            .iter()
            .any(|a| *a == host || Some(a) == with_port.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_hosts_must_be_listed() {
        let policy = WebhookPolicy::new(&["tools.internal".into(), "127.0.0.1:9000".into()]);
        assert!(policy.allows("TOOLS.internal", Some(443)));
        assert!(policy.allows("127.0.0.1", Some(9000)));
        assert!(!policy.allows("127.0.0.1", Some(9001)));
        assert!(!WebhookPolicy::default().allows("tools.internal", Some(80)));
    }

    #[test]
    fn inline_settings_win_over_the_agent() {
        let agent = AgentConfig {
            model: Some("a".into()),
            instructions: Some("be brief".into()),
            ..AgentConfig::default()
        };
        let inline = AgentConfig {
            model: Some("b".into()),
            ..AgentConfig::default()
        };
        let merged = inline.over(agent);
        assert_eq!(merged.model.as_deref(), Some("b"));
        assert_eq!(merged.instructions.as_deref(), Some("be brief"));
    }
}
