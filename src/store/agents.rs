use async_trait::async_trait;

use super::Result;
use crate::model::{Agent, AgentPatch, Page, PageRequest};

/// Agents of a tenant.
#[async_trait]
pub trait AgentStore: Send + Sync {
    async fn create_agent(&self, tenant: &str, agent: &Agent) -> Result<()>;

    /// Fails with [`super::StoreError::AgentNotFound`].
    async fn get_agent(&self, tenant: &str, id: &str) -> Result<Agent>;

    /// Newest first unless the page asks otherwise.
    async fn list_agents(&self, tenant: &str, page: &PageRequest) -> Result<Page<Agent>>;

    /// Applies the patch under a row lock, so concurrent patches never lose a change.
    async fn update_agent(&self, tenant: &str, id: &str, patch: AgentPatch) -> Result<Agent>;

    /// Sessions that name the agent keep the name; their runs then fail to resolve it.
    async fn delete_agent(&self, tenant: &str, id: &str) -> Result<()>;
}
