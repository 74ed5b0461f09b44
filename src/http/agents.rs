//! `/v1/agents`: reusable run configuration.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::NoContent;
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use utoipa::ToSchema;

use super::answer::Created;
use super::error::{ApiError, JsonBody, Lookup, Result};
use super::error::{BadRequest, NotFound};
use super::extract::{present, AppJson, Tenant, TenantAgent};
use super::list_query::ListQuery;
use super::AppState;
use crate::model::{
    whole_optional, whole_patch, Agent, AgentConfig, AgentPatch, CompletionWebhook, ContextConfig,
    Metadata, MetadataPatch, Order, Page, Tool,
};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/agents", get(list_agents).post(create_agent))
        .route("/v1/agents/{agent_id}", get(get_agent).patch(update_agent).delete(delete_agent))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAgentRequest {
    #[schema(max_length = 256)]
    name: Option<String>,
    /// Absent: the server default (`LLM_MODEL`).
    #[schema(min_length = 1, max_length = 256, pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$")]
    model: Option<String>,
    /// Sent first, as the system message, on every LLM call.
    instructions: Option<String>,
    #[schema(minimum = 0, maximum = 2)]
    temperature: Option<f64>,
    #[serde(default, deserialize_with = "whole_optional")]
    #[schema(minimum = 1, maximum = 2147483647)]
    max_output_tokens: Option<u32>,
    #[schema(max_items = 128)]
    tools: Option<Vec<Tool>>,
    /// LLM calls a run may make; 10 when absent.
    #[serde(default, deserialize_with = "whole_optional")]
    #[schema(minimum = 1, maximum = 100)]
    max_turns: Option<u32>,
    /// Calls of one tool with the same arguments in a row after which a run fails
    /// `tool_call_loop`; 3 when absent.
    #[serde(default, deserialize_with = "whole_optional")]
    #[schema(minimum = 2, maximum = 100)]
    max_repeated_tool_calls: Option<u32>,
    context: Option<ContextConfig>,
    /// Where each run's finish or pause is posted.
    webhook: Option<CompletionWebhook>,
    #[schema(value_type = Option<Metadata>)]
    metadata: Option<BTreeMap<String, String>>,
}

impl CreateAgentRequest {
    fn into_parts(self) -> (AgentConfig, Option<BTreeMap<String, String>>) {
        let config = AgentConfig {
            name: self.name,
            model: self.model,
            instructions: self.instructions,
            temperature: self.temperature,
            max_output_tokens: self.max_output_tokens,
            tools: self.tools,
            max_turns: self.max_turns,
            max_repeated_tool_calls: self.max_repeated_tool_calls,
            context: self.context,
            webhook: self.webhook,
        };
        (config, self.metadata)
    }
}

/// A field left out stays as it is; `null` resets it to its default.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateAgentRequest {
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 256)]
    name: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 256, pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$")]
    model: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    instructions: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<f64>, minimum = 0, maximum = 2)]
    temperature: Option<Option<f64>>,
    #[serde(default, deserialize_with = "whole_patch")]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 2147483647)]
    max_output_tokens: Option<Option<u32>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Vec<Tool>>, max_items = 128)]
    tools: Option<Option<Vec<Tool>>>,
    #[serde(default, deserialize_with = "whole_patch")]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 100)]
    max_turns: Option<Option<u32>>,
    #[serde(default, deserialize_with = "whole_patch")]
    #[schema(value_type = Option<u32>, minimum = 2, maximum = 100)]
    max_repeated_tool_calls: Option<Option<u32>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<ContextConfig>)]
    context: Option<Option<ContextConfig>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<CompletionWebhook>)]
    webhook: Option<Option<CompletionWebhook>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = MetadataPatch)]
    metadata: Option<Option<BTreeMap<String, Option<String>>>>,
}

/// The agent named `id`, as a 404 that names it when there is none.
pub(super) async fn find_agent(state: &AppState, tenant: &str, id: &str) -> Result<Agent> {
    state.store.get_agent(tenant, id).await.map_err(|error| ApiError::from_agent_store(error, id))
}

/// Create an agent.
#[utoipa::path(post, path = "/v1/agents", tag = "agents", request_body = CreateAgentRequest,
    responses(
        (status = 201, description = "The new agent", body = Agent, headers(("location" = String, description = "The path of the new agent"))),
        JsonBody,
    ))]
async fn create_agent(
    State(state): State<AppState>, Tenant(ref tenant): Tenant,
    AppJson(request): AppJson<CreateAgentRequest>,
) -> Result<Created<Agent>> {
    let (config, metadata) = request.into_parts();
    config.validate("", &state.runs.settings().webhooks)?;
    let metadata = Metadata::new(metadata.unwrap_or_default())?;
    let agent = Agent::new(config, metadata, crate::store::now());
    state.store.create_agent(tenant, &agent).await?;
    Ok(Created::at(format!("/v1/agents/{}", agent.id), agent.redacted()))
}

/// List agents, newest first.
#[utoipa::path(get, path = "/v1/agents", tag = "agents", params(ListQuery),
    responses(
        (status = 200, description = "A page of agents", body = Page<Agent>),
        (status = 400, response = BadRequest),
    ))]
async fn list_agents(
    State(state): State<AppState>, Tenant(ref tenant): Tenant, query: ListQuery,
) -> Result<Json<Page<Agent>>> {
    let page = state
        .store
        .list_agents(tenant, &query.page(Order::Desc))
        .await
        .map_err(|e| query.store_error(e, None))?;
    Ok(Json(page.map(Agent::redacted)))
}

/// Get an agent.
#[utoipa::path(get, path = "/v1/agents/{agent_id}", tag = "agents", params(TenantAgent),
    responses(
        (status = 200, description = "The agent", body = Agent),
        (status = 404, response = NotFound),
    ))]
async fn get_agent(State(state): State<AppState>, agent: TenantAgent) -> Result<Json<Agent>> {
    Ok(Json(find_agent(&state, &agent.tenant, &agent.id).await?.redacted()))
}

/// Change an agent.
#[utoipa::path(patch, path = "/v1/agents/{agent_id}", tag = "agents", params(TenantAgent),
    request_body = UpdateAgentRequest,
    responses((status = 200, description = "The updated agent", body = Agent), Lookup, JsonBody))]
async fn update_agent(
    State(state): State<AppState>, agent: TenantAgent,
    AppJson(request): AppJson<UpdateAgentRequest>,
) -> Result<Json<Agent>> {
    let patch = AgentPatch {
        name: request.name,
        model: request.model,
        instructions: request.instructions,
        temperature: request.temperature,
        max_output_tokens: request.max_output_tokens,
        tools: request.tools,
        max_turns: request.max_turns,
        max_repeated_tool_calls: request.max_repeated_tool_calls,
        context: request.context,
        webhook: request.webhook,
        metadata: request.metadata.map(MetadataPatch::from_request).transpose()?,
    };
    patch.as_config().validate("", &state.runs.settings().webhooks)?;
    state
        .store
        .update_agent(&agent.tenant, &agent.id, patch)
        .await
        .map(|updated| Json(updated.redacted()))
        .map_err(|e| agent.store_error(e))
}

/// Delete an agent. Sessions that name it keep the name; their runs then answer 404
/// `agent_not_found` until the session names another agent.
#[utoipa::path(delete, path = "/v1/agents/{agent_id}", tag = "agents", params(TenantAgent),
    responses((status = 204, description = "Deleted"), (status = 404, response = NotFound)))]
async fn delete_agent(State(state): State<AppState>, agent: TenantAgent) -> Result<NoContent> {
    state.store.delete_agent(&agent.tenant, &agent.id).await.map_err(|e| agent.store_error(e))?;
    Ok(NoContent)
}
