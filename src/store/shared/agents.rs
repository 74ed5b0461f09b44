//! Agents, on both backends.

use async_trait::async_trait;

use super::backend::{Store, FOR_UPDATE};
use super::binds::BindAll;
use crate::model::{Agent, AgentPatch, Page, PageRequest};
use crate::store::pages::{beyond, direction, explain_empty_agent_page};
use crate::store::payload::Column;
use crate::store::rows::{to_json, AgentRow};
use crate::store::timestamp::Timestamp;
use crate::store::{AgentStore, Result, StoreError};

#[async_trait]
impl AgentStore for Store {
    async fn create_agent(&self, tenant: &str, agent: &Agent) -> Result<()> {
        sqlx::query("insert into agents (tenant_id, id, created_at, body) values ($1, $2, $3, $4)")
            .bind_all((
                tenant,
                &agent.id,
                Timestamp(agent.created_at),
                self.codec.seal(tenant, Column::AgentBody, to_json(agent)?)?,
            ))
            .execute(self.writer())
            .await?;
        Ok(())
    }

    async fn get_agent(&self, tenant: &str, id: &str) -> Result<Agent> {
        let row: Option<AgentRow> =
            sqlx::query_as("select body from agents where tenant_id = $1 and id = $2")
                .bind_all((tenant, id))
                .fetch_optional(self.reader())
                .await?;
        row.ok_or(StoreError::AgentNotFound)?.open(&self.codec, tenant)
    }

    async fn list_agents(&self, tenant: &str, page: &PageRequest) -> Result<Page<Agent>> {
        let scan = page.scan_order();
        let rows: Vec<AgentRow> = sqlx::query_as(&format!(
            r"select a.body from agents a
              where a.tenant_id = $1
                and ($2 is null or (a.created_at, a.pk) {} (
                    select c.created_at, c.pk from agents c where c.tenant_id = $1 and c.id = $2))
              order by a.created_at {dir}, a.pk {dir} limit $3",
            beyond(scan),
            dir = direction(scan)
        ))
        .bind_all((tenant, page.cursor_id(), page.fetch_limit()))
        .fetch_all(self.reader())
        .await?;
        if let (true, Some(cursor)) = (rows.is_empty(), page.cursor_id()) {
            explain_empty_agent_page(self, tenant, cursor).await?;
        }
        let agents = rows
            .into_iter()
            .map(|row| row.open(&self.codec, tenant))
            .collect::<Result<Vec<_>>>()?;
        Ok(page.finish(agents, false, |a| a.id.clone()))
    }

    async fn update_agent(&self, tenant: &str, id: &str, patch: AgentPatch) -> Result<Agent> {
        let mut tx = self.writer().begin().await?;
        let row: Option<AgentRow> = sqlx::query_as(&format!(
            "select body from agents where tenant_id = $1 and id = $2{FOR_UPDATE}"
        ))
        .bind_all((tenant, id))
        .fetch_optional(&mut *tx)
        .await?;
        let agent: Agent = row.ok_or(StoreError::AgentNotFound)?.open(&self.codec, tenant)?;
        let agent = patch.apply(agent, crate::store::now())?;
        sqlx::query("update agents set body = $3 where tenant_id = $1 and id = $2")
            .bind_all((tenant, id, self.codec.seal(tenant, Column::AgentBody, to_json(&agent)?)?))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(agent)
    }

    async fn delete_agent(&self, tenant: &str, id: &str) -> Result<()> {
        let deleted = sqlx::query("delete from agents where tenant_id = $1 and id = $2")
            .bind_all((tenant, id))
            .execute(self.writer())
            .await?;
        if deleted.rows_affected() == 0 {
            return Err(StoreError::AgentNotFound);
        }
        Ok(())
    }
}
