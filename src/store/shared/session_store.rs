//! The `SessionStore` of the backend: each method hands over to the module that owns
//! what it does (`sessions`, `items`, `append_writer`, `idempotency_keys`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::backend::Store;
use super::binds::BindAll;
use super::items::Removal;
use super::{idempotency_keys, items, sessions};
use crate::model::{
    IdempotencyKey, IfMatch, Item, ItemBody, NewSession, Page, PageRequest, Session, SessionFilter,
    SessionId, SessionPatch, StateChanges,
};
use crate::store::combined_writes::{Append, Replacing};
use crate::store::combiner::Combiner;
use crate::store::{
    AppendStats, Appended, PoolStats, Result, SessionStore, StateStore, StoreError, Swept,
};

#[async_trait]
impl SessionStore for Store {
    async fn create_session(&self, tenant: &str, session: NewSession) -> Result<Session> {
        sessions::create(self, tenant, session).await
    }

    async fn get_session(&self, tenant: &str, id: &SessionId) -> Result<Session> {
        sessions::get(self, tenant, id).await
    }

    async fn list_sessions(
        &self, tenant: &str, filter: &SessionFilter, page: &PageRequest,
    ) -> Result<Page<Session>> {
        sessions::list(self, tenant, filter, page).await
    }

    async fn update_session(
        &self, tenant: &str, id: &SessionId, patch: SessionPatch, if_match: Option<IfMatch>,
    ) -> Result<Session> {
        sessions::update(self, tenant, id, patch, if_match).await
    }

    async fn delete_session(
        &self, tenant: &str, id: &SessionId, if_match: Option<IfMatch>,
    ) -> Result<()> {
        sessions::delete(self, tenant, id, if_match).await
    }

    async fn append_items(
        &self, tenant: &str, session_id: &SessionId, bodies: Vec<ItemBody>,
        idempotency: Option<IdempotencyKey>, if_match: Option<IfMatch>,
    ) -> Result<Appended> {
        let changes = StateChanges::default();
        self.append_with_state(tenant, session_id, bodies, changes, idempotency, if_match).await
    }

    async fn list_items(
        &self, tenant: &str, session_id: &SessionId, page: &PageRequest,
    ) -> Result<Page<Item>> {
        items::list(self, tenant, session_id, page).await
    }

    async fn get_item(&self, tenant: &str, session_id: &SessionId, item_id: Uuid) -> Result<Item> {
        items::get(self, tenant, session_id, item_id).await
    }

    async fn delete_item(
        &self, tenant: &str, session_id: &SessionId, item_id: Uuid,
        idempotency: Option<IdempotencyKey>, if_match: Option<IfMatch>,
    ) -> Result<()> {
        items::delete(
            self,
            tenant,
            session_id,
            Removal::Item(item_id),
            (idempotency.as_ref(), if_match),
        )
        .await
    }

    async fn pop_last_item(
        &self, tenant: &str, session_id: &SessionId, idempotency: Option<IdempotencyKey>,
        if_match: Option<IfMatch>,
    ) -> Result<Item> {
        items::pop_last(self, tenant, session_id, (idempotency.as_ref(), if_match)).await
    }

    async fn replace_item(
        &self, tenant: &str, session_id: &SessionId, item_id: Uuid, body: ItemBody,
        idempotency: Option<IdempotencyKey>, if_match: Option<IfMatch>,
    ) -> Result<(Item, i64)> {
        items::replace(self, tenant, session_id, item_id, &body, (idempotency.as_ref(), if_match))
            .await
    }

    async fn replace_items(
        &self, tenant: &str, session_id: &SessionId, bodies: Vec<ItemBody>, after: Option<Uuid>,
        idempotency: Option<IdempotencyKey>, if_match: Option<IfMatch>,
    ) -> Result<Appended> {
        self.append(Append {
            tenant: tenant.to_owned(),
            session_id: session_id.clone(),
            bodies,
            idempotency,
            if_match,
            state: StateChanges::default(),
            replacing: after.map_or(Replacing::All, Replacing::After),
        })
        .await
    }

    async fn clear_items(
        &self, tenant: &str, session_id: &SessionId, idempotency: Option<IdempotencyKey>,
        if_match: Option<IfMatch>,
    ) -> Result<()> {
        items::delete(self, tenant, session_id, Removal::All, (idempotency.as_ref(), if_match))
            .await
    }

    async fn purge_idempotency_keys(&self, cutoff: DateTime<Utc>) -> Result<u64> {
        idempotency_keys::purge(self, cutoff).await
    }

    async fn sweep_expired(&self, batch: i64) -> Result<Swept> {
        sessions::sweep_expired(self, batch).await
    }

    async fn ping(&self) -> Result<()> {
        sqlx::query("select 1").execute(self.reader()).await?;
        Ok(())
    }

    async fn check_writes(&self) -> Result<()> {
        // New pages and new log, as an append needs: a row rewritten in place could
        // commit on a disk too full for any append.
        const PROBE: &str = "readiness probe";
        let mut tx = self.writer().begin().await?;
        sqlx::query("insert into server_secrets (name, value) values ($1, $2)")
            .bind_all((PROBE, "0".repeat(64 * 1024)))
            .execute(&mut *tx)
            .await?;
        sqlx::query("delete from server_secrets where name = $1")
            .bind(PROBE)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn server_secret(&self, name: &str) -> Result<String> {
        let value: Option<String> =
            sqlx::query_scalar("select value from server_secrets where name = $1")
                .bind(name)
                .fetch_optional(self.reader())
                .await?;
        value.ok_or_else(|| StoreError::Corrupt(format!("no server secret `{name}`")))
    }

    fn append_stats(&self) -> AppendStats {
        self.appends.get().map(Combiner::stats).unwrap_or_default()
    }

    fn pool_stats(&self) -> PoolStats {
        let pooled = self.pools().into_iter().fold(PoolStats::default(), |stats, pool| {
            let size = pool.size();
            let idle = pool.num_idle() as u32;
            PoolStats { in_use: stats.in_use + size.saturating_sub(idle), idle: stats.idle + idle }
        });
        let parked = self.page_readers.parked() + self.append_writer.parked();
        PoolStats { in_use: pooled.in_use.saturating_sub(parked), idle: pooled.idle + parked }
    }
}
