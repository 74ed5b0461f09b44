//! Agents: stored, reusable run configuration, and the changes a PATCH makes to them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::agent_config::{
    default_max_repeated_tool_calls, AgentConfig, ContextConfig, ToolLoop,
    DEFAULT_MAX_REPEATED_TOOL_CALLS, DEFAULT_MAX_TURNS,
};
use super::field::InvalidField;
use super::metadata::{Metadata, MetadataPatch};
use super::tool::Tool;
use super::webhook::CompletionWebhook;

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
    /// Calls of one tool with the same arguments in a row after which a run fails
    /// with `tool_call_loop`.
    #[serde(default = "default_max_repeated_tool_calls")]
    #[schema(minimum = 2, maximum = 100)]
    pub max_repeated_tool_calls: u32,
    #[schema(required = true)]
    pub context: Option<ContextConfig>,
    /// Where each run's finish or pause is posted; absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<CompletionWebhook>,
    pub metadata: Metadata,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Agent {
    /// A new agent with a generated UUIDv7 id.
    pub fn new(mut config: AgentConfig, metadata: Metadata, now: DateTime<Utc>) -> Self {
        let ToolLoop { tools, max_turns, max_repeated_tool_calls } = config.take_tool_loop();
        Self {
            tools,
            max_turns,
            max_repeated_tool_calls,
            id: uuid::Uuid::now_v7().to_string(),
            name: config.name,
            model: config.model,
            instructions: config.instructions,
            temperature: config.temperature,
            max_output_tokens: config.max_output_tokens,
            context: config.context,
            webhook: config.webhook,
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
            max_repeated_tool_calls: Some(self.max_repeated_tool_calls),
            context: self.context.clone(),
            webhook: self.webhook.clone(),
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
    pub max_repeated_tool_calls: Option<Option<u32>>,
    pub context: Option<Option<ContextConfig>>,
    pub webhook: Option<Option<CompletionWebhook>>,
    pub metadata: Option<MetadataPatch>,
}

impl Agent {
    /// The agent as answers show it: no webhook header values.
    pub fn redacted(mut self) -> Self {
        self.tools = self.tools.into_iter().map(Tool::redacted).collect();
        self
    }
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
        set(&mut agent.webhook, self.webhook);
        if let Some(tools) = self.tools {
            let mut tools = tools.unwrap_or_default();
            for (i, tool) in tools.iter_mut().enumerate() {
                tool.restore_redacted(&agent.tools, &format!("tools[{i}]"))?;
            }
            agent.tools = tools;
        }
        if let Some(turns) = self.max_turns {
            agent.max_turns = turns.unwrap_or(DEFAULT_MAX_TURNS);
        }
        if let Some(repeats) = self.max_repeated_tool_calls {
            agent.max_repeated_tool_calls = repeats.unwrap_or(DEFAULT_MAX_REPEATED_TOOL_CALLS);
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
            max_repeated_tool_calls: self.max_repeated_tool_calls.flatten(),
            context: self.context.clone().flatten(),
            webhook: self.webhook.clone().flatten(),
        }
    }
}
