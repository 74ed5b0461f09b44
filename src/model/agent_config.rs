//! Run configuration and the rule that layers it. Configurations layer — the server
//! default, the session's agent, the run's `agent_id` and the run's inline `agent` — so
//! every field of [`AgentConfig`] is optional and a set field wins over the layers below.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::compaction::{DEFAULT_KEEP_RECENT_ITEMS, MAX_KEEP_RECENT_ITEMS};
use super::field::InvalidField;
use super::outbound::WebhookPolicy;
use super::tool::Tool;
use super::webhook::CompletionWebhook;
use super::whole_number;

/// `max_turns` when no layer sets it.
pub const DEFAULT_MAX_TURNS: u32 = 10;
const MAX_TURNS_LIMIT: u32 = 100;
/// `max_repeated_tool_calls` when no layer sets it.
pub const DEFAULT_MAX_REPEATED_TOOL_CALLS: u32 = 3;

/// The default of `max_repeated_tool_calls` for what was stored before the loop guard.
pub(super) fn default_max_repeated_tool_calls() -> u32 {
    DEFAULT_MAX_REPEATED_TOOL_CALLS
}
/// The most tokens a limit may name: what every provider's APIs take as a 32-bit integer.
const MAX_TOKENS: u32 = i32::MAX as u32;
const MAX_TOOLS: usize = 128;

/// Run configuration, as an agent is created with or a run gives inline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// A label for people; runs do not use it.
    #[schema(max_length = 256)]
    pub name: Option<String>,
    /// Absent: the layer below decides, down to the server default (`LLM_MODEL`).
    #[schema(min_length = 1, max_length = 256, pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$")]
    pub model: Option<String>,
    /// Sent first, as the system message, on every LLM call.
    pub instructions: Option<String>,
    #[schema(minimum = 0, maximum = 2)]
    pub temperature: Option<f64>,
    #[serde(default, deserialize_with = "whole_number::optional")]
    #[schema(minimum = 1, maximum = 2147483647)]
    pub max_output_tokens: Option<u32>,
    #[schema(max_items = 128)]
    pub tools: Option<Vec<Tool>>,
    /// LLM calls a run may make; 10 when no layer sets it.
    #[serde(default, deserialize_with = "whole_number::optional")]
    #[schema(minimum = 1, maximum = 100)]
    pub max_turns: Option<u32>,
    /// The run fails `tool_call_loop` when the model calls the same tool with the same
    /// arguments this many times in a row; 3 when no layer sets it.
    #[serde(default, deserialize_with = "whole_number::optional")]
    #[schema(minimum = 2, maximum = 100)]
    pub max_repeated_tool_calls: Option<u32>,
    pub context: Option<ContextConfig>,
    /// Where the service posts each run when it finishes or waits for the client.
    pub webhook: Option<CompletionWebhook>,
}

/// The settings of a run's tool loop, each defaulted where no layer set it.
pub struct ToolLoop {
    pub tools: Vec<Tool>,
    pub max_turns: u32,
    pub max_repeated_tool_calls: u32,
}

impl AgentConfig {
    /// Takes the tool loop's settings out, defaulting those no layer set.
    pub fn take_tool_loop(&mut self) -> ToolLoop {
        ToolLoop {
            tools: self.tools.take().unwrap_or_default(),
            max_turns: self.max_turns.take().unwrap_or(DEFAULT_MAX_TURNS),
            max_repeated_tool_calls: self
                .max_repeated_tool_calls
                .take()
                .unwrap_or(DEFAULT_MAX_REPEATED_TOOL_CALLS),
        }
    }

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
            max_repeated_tool_calls: self.max_repeated_tool_calls.or(base.max_repeated_tool_calls),
            context: self.context.or(base.context),
            webhook: self.webhook.or(base.webhook),
        }
    }

    /// Checks every field; `prefix` names where the configuration sits in the request
    /// (`""` for an agent body, `"agent."` inline on a run).
    pub fn validate(&self, prefix: &str, webhooks: &WebhookPolicy) -> Result<(), ConfigError> {
        let field = |name: &str| format!("{prefix}{name}");
        if let Some(name) = &self.name {
            if name.chars().count() > 256 {
                return Err(
                    InvalidField::new(field("name"), "must be at most 256 characters").into()
                );
            }
        }
        if let Some(model) = &self.model {
            check_model_name(&field("model"), model)?;
        }
        if let Some(t) = self.temperature {
            if !(0.0..=2.0).contains(&t) {
                return Err(
                    InvalidField::new(field("temperature"), "must be between 0 and 2").into()
                );
            }
        }
        let max_tokens = u64::from(MAX_TOKENS);
        let output_tokens = self.max_output_tokens.map(u64::from);
        within(&field("max_output_tokens"), output_tokens, max_tokens)?;
        let turns = self.max_turns.map(u64::from);
        within(&field("max_turns"), turns, u64::from(MAX_TURNS_LIMIT))?;
        // One call is no repetition: 1 would fail every run's first tool call.
        if self.max_repeated_tool_calls.is_some_and(|n| !(2..=MAX_TURNS_LIMIT).contains(&n)) {
            return Err(InvalidField::new(
                field("max_repeated_tool_calls"),
                format!("must be between 2 and {MAX_TURNS_LIMIT}"),
            )
            .into());
        }
        if let Some(context) = &self.context {
            within(&field("context.max_input_tokens"), context.max_input_tokens, max_tokens)?;
            context.validate(&field("context."))?;
        }
        if let Some(webhook) = &self.webhook {
            webhook.validate(&field("webhook"), webhooks)?;
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
                let (key, name) = tool.key();
                if tools[..i].iter().any(|t| t.key() == (key, name)) {
                    let what = match key {
                        "name" => format!("a tool named `{name}`"),
                        _ => format!("an MCP server labelled `{name}`"),
                    };
                    return Err(InvalidField::new(
                        format!("{at}.{key}"),
                        format!("{what} is listed twice"),
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
}

/// How much history a run sends, and what happens to the rest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextConfig {
    /// The oldest history is left out until the estimated input fits; null: no limit.
    #[serde(default, deserialize_with = "whole_number::optional")]
    #[schema(minimum = 1, maximum = 2147483647)]
    pub max_input_tokens: Option<u64>,
    #[serde(default)]
    pub strategy: ContextStrategy,
    /// With `compact`: a run whose input would exceed this estimate compacts the session
    /// first. Default: 80% of `max_input_tokens`, which `compact` then needs.
    #[serde(default, deserialize_with = "whole_number::optional")]
    #[schema(minimum = 1, maximum = 2147483647)]
    pub compact_threshold_tokens: Option<u64>,
    /// With `compact`: the newest items a compaction leaves out of the summary; 10 when
    /// absent.
    #[serde(default, deserialize_with = "whole_number::optional")]
    #[schema(minimum = 0, maximum = 1000)]
    pub keep_recent_items: Option<u32>,
}

impl ContextConfig {
    fn validate(&self, prefix: &str) -> Result<(), ConfigError> {
        let field = |name: &str| format!("{prefix}{name}");
        let tokens = |name: &str, value: Option<u64>| match value {
            Some(tokens) if !(1..=u64::from(MAX_TOKENS)).contains(&tokens) => {
                Err(InvalidField::new(field(name), format!("must be between 1 and {MAX_TOKENS}")))
            }
            _ => Ok(()),
        };
        tokens("max_input_tokens", self.max_input_tokens)?;
        tokens("compact_threshold_tokens", self.compact_threshold_tokens)?;
        if let Some(keep) = self.keep_recent_items {
            if keep > MAX_KEEP_RECENT_ITEMS {
                return Err(InvalidField::new(
                    field("keep_recent_items"),
                    format!("must be between 0 and {MAX_KEEP_RECENT_ITEMS}"),
                )
                .into());
            }
        }
        match self.strategy {
            ContextStrategy::Truncate => {
                let compacting = [
                    ("compact_threshold_tokens", self.compact_threshold_tokens.is_some()),
                    ("keep_recent_items", self.keep_recent_items.is_some()),
                ];
                if let Some((name, _)) = compacting.iter().find(|(_, set)| *set) {
                    return Err(InvalidField::new(
                        field(name),
                        "applies only with strategy `compact`",
                    )
                    .into());
                }
            }
            ContextStrategy::Compact => {
                if self.compaction().is_none() {
                    return Err(InvalidField::new(
                        field("compact_threshold_tokens"),
                        "strategy `compact` needs compact_threshold_tokens or max_input_tokens",
                    )
                    .into());
                }
            }
        }
        Ok(())
    }

    /// When runs compact, for strategy `compact`.
    pub fn compaction(&self) -> Option<CompactionPolicy> {
        if self.strategy != ContextStrategy::Compact {
            return None;
        }
        let threshold_tokens = self
            .compact_threshold_tokens
            .or_else(|| self.max_input_tokens.map(|max| (max * 4 / 5).max(1)))?;
        Some(CompactionPolicy {
            threshold_tokens,
            keep_recent_items: self.keep_recent_items.unwrap_or(DEFAULT_KEEP_RECENT_ITEMS),
        })
    }
}

/// `truncate` leaves out the oldest history; `compact` summarises it (see
/// `compact_threshold_tokens`), and truncates what still does not fit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ContextStrategy {
    #[default]
    Truncate,
    Compact,
}

/// When a run compacts its session, resolved from the agent's context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionPolicy {
    pub threshold_tokens: u64,
    pub keep_recent_items: u32,
}

/// A count that, when given, must be between 1 and `max`.
/// A model's name, as it goes into the LLM request.
pub fn check_model_name(field: &str, model: &str) -> Result<(), InvalidField> {
    let length = model.chars().count();
    if !(1..=256).contains(&length) || model.chars().any(char::is_control) {
        return Err(InvalidField::new(
            field,
            "must be 1 to 256 characters without control characters",
        ));
    }
    Ok(())
}

fn within(field: &str, value: Option<u64>, max: u64) -> Result<(), InvalidField> {
    match value {
        Some(value) if !(1..=max).contains(&value) => {
            Err(InvalidField::new(field, format!("must be between 1 and {max}")))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_settings_win_over_the_agent() {
        let agent = AgentConfig {
            model: Some("a".into()),
            instructions: Some("be brief".into()),
            ..AgentConfig::default()
        };
        let inline = AgentConfig { model: Some("b".into()), ..AgentConfig::default() };
        let merged = inline.over(agent);
        assert_eq!(merged.model.as_deref(), Some("b"));
        assert_eq!(merged.instructions.as_deref(), Some("be brief"));
    }
}
