//! The rule that layers a run's configuration (docs/runs.md, "Configuration"): inline over the
//! `agent_id` agent, over the session's agent, over the server default.

use super::error::{Result, RunsError};
use super::RunSettings;
use crate::model::{
    AgentConfig, AgentId, CompletionWebhook, ContextConfig, RunConfig, Sampling, SessionId,
    ToolLoop,
};
use crate::store::{SessionStore, StoreError};

/// What a request asks of a run's configuration.
#[derive(Debug, Default)]
pub struct ConfigRequest {
    pub agent_id: Option<String>,
    pub inline: Option<AgentConfig>,
    /// What a protocol adapter asks beyond an agent's configuration.
    pub sampling: Sampling,
    /// See [`RunConfig::client_calls_complete`].
    pub client_calls_complete: bool,
    /// The session must exist already (a run on a conversation does not make one): the
    /// read of its agent refuses an unknown one, so that the adapter need not read it
    /// first. A session deleted between this read and the run's insert is made again by
    /// the insert, as it was with a read of its own.
    pub existing_session: bool,
    /// The run's own completion webhook, over any its agent has.
    pub webhook: Option<CompletionWebhook>,
}

/// The agent of a session that must exist (a conversation's, or one being compacted).
pub(super) async fn existing_session_agent(
    store: &dyn SessionStore, tenant: &str, session_id: &SessionId,
) -> Result<Option<String>> {
    Ok(store.get_session(tenant, session_id).await?.agent_id)
}

/// The configuration a run executes with on a session whose agent is `session_agent`.
pub(super) async fn resolve(
    store: &dyn SessionStore, settings: &RunSettings, tenant: &str, session_agent: Option<String>,
    request: &ConfigRequest,
) -> Result<RunConfig> {
    let mut config =
        AgentConfig { model: settings.default_model.clone(), ..AgentConfig::default() };
    if let Some(id) = session_agent {
        config = agent(store, tenant, id, true).await?.over(config);
    }
    if let Some(id) = &request.agent_id {
        AgentId::parse("agent_id", id.clone())?;
        config = agent(store, tenant, id.clone(), false).await?.over(config);
    }
    if let Some(webhook) = &request.webhook {
        webhook.validate("webhook", &settings.webhooks)?;
    }
    if let Some(inline) = &request.inline {
        inline.validate("agent.", &settings.webhooks)?;
        config = inline.clone().over(config);
    }
    let ToolLoop { tools, max_turns, max_repeated_tool_calls } = config.take_tool_loop();
    let model = config.model.ok_or_else(|| {
        crate::model::InvalidField::new(
            "agent.model",
            "no model is configured: give the agent one or set LLM_MODEL",
        )
    })?;
    Ok(RunConfig {
        model,
        instructions: config.instructions,
        temperature: config.temperature,
        max_output_tokens: config.max_output_tokens,
        tools,
        max_turns,
        max_repeated_tool_calls,
        max_input_tokens: config.context.as_ref().and_then(|c| c.max_input_tokens),
        compaction: config.context.as_ref().and_then(ContextConfig::compaction),
        sampling: request.sampling.clone(),
        client_calls_complete: request.client_calls_complete,
        webhook: request.webhook.clone().or(config.webhook),
    })
}

async fn agent(
    store: &dyn SessionStore, tenant: &str, agent_id: String, by_session: bool,
) -> Result<AgentConfig> {
    match store.get_agent(tenant, &agent_id).await {
        Ok(agent) => Ok(agent.config()),
        Err(StoreError::AgentNotFound) => Err(RunsError::AgentNotFound { agent_id, by_session }),
        Err(error) => Err(error.into()),
    }
}
