//! Persistence. The [`SessionStore`] trait is the only way the rest of the service reaches
//! the database; SQL lives in the backend modules and nowhere else.

mod agents;
mod error;
mod postgres;
mod rows;
mod run_rows;
mod runs;
mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

pub use agents::AgentStore;
pub use error::StoreError;
pub use postgres::PgStore;
pub use runs::{Claim, CreatedRun, RunStore, StartNow};
pub use sqlite::SqliteStore;

use crate::model::{
    IdempotencyKey, Item, ItemBody, NewSession, Page, PageRequest, Run, Session, SessionId,
    SessionPatch,
};

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Sessions and their items, and through its supertraits agents and runs. Every method
/// acts within one tenant and never sees rows of another.
#[async_trait]
pub trait SessionStore: AgentStore + RunStore + Send + Sync + 'static {
    /// Fails with [`StoreError::SessionExists`] when the id is taken.
    async fn create_session(&self, tenant: &str, session: NewSession) -> Result<Session>;

    async fn get_session(&self, tenant: &str, id: &SessionId) -> Result<Session>;

    /// Newest first unless the page asks otherwise; ties on `created_at` are broken by
    /// insertion order, so pages never skip or repeat a session.
    async fn list_sessions(
        &self,
        tenant: &str,
        metadata: &[(String, String)],
        page: &PageRequest,
    ) -> Result<Page<Session>>;

    /// Applies the patch under a row lock, so concurrent patches never lose a key.
    async fn update_session(
        &self,
        tenant: &str,
        id: &SessionId,
        patch: SessionPatch,
    ) -> Result<Session>;

    /// Deletes the session with all its items and runs.
    async fn delete_session(&self, tenant: &str, id: &SessionId) -> Result<()>;

    /// Appends the items in order, in one transaction, creating the session if absent.
    /// Their `seq`s are contiguous: a concurrent append never lands between them.
    /// With a key seen before, nothing is appended and the first append is returned.
    async fn append_items(
        &self,
        tenant: &str,
        session_id: &SessionId,
        items: Vec<ItemBody>,
        idempotency: Option<IdempotencyKey>,
    ) -> Result<Appended>;

    async fn list_items(
        &self,
        tenant: &str,
        session_id: &SessionId,
        page: &PageRequest,
    ) -> Result<Page<Item>>;

    async fn get_item(&self, tenant: &str, session_id: &SessionId, item_id: Uuid) -> Result<Item>;

    async fn delete_item(&self, tenant: &str, session_id: &SessionId, item_id: Uuid) -> Result<()>;

    /// Removes and returns the newest item. Concurrent pops each get a different item.
    async fn pop_last_item(&self, tenant: &str, session_id: &SessionId) -> Result<Item>;

    /// Removes every item and keeps the session.
    async fn clear_items(&self, tenant: &str, session_id: &SessionId) -> Result<()>;

    /// Forgets idempotency keys first used before `cutoff`; returns how many.
    async fn purge_idempotency_keys(&self, cutoff: DateTime<Utc>) -> Result<u64>;

    /// The fingerprint and response stored for a key used since `since`.
    async fn idempotency_key(
        &self,
        tenant: &str,
        key: &str,
        since: DateTime<Utc>,
    ) -> Result<Option<(Vec<u8>, Option<String>)>>;

    /// Answers when the database does.
    async fn ping(&self) -> Result<()>;

    fn pool_stats(&self) -> PoolStats;
}

/// The result of an append.
#[derive(Debug, Clone)]
pub struct Appended {
    pub items: Vec<Item>,
    /// True when an earlier request with the same idempotency key did the append.
    pub replayed: bool,
}

/// Database connections, for the metrics endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    pub in_use: u32,
    pub idle: u32,
}

/// Opens the database named by `url` (SQLite when it starts with `sqlite:`, Postgres for
/// `postgres:`/`postgresql:`) and brings its schema up to date.
pub async fn connect(url: &str, max_connections: u32) -> Result<Arc<dyn SessionStore>> {
    if url.starts_with("sqlite:") {
        Ok(Arc::new(SqliteStore::connect(url).await?))
    } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
        Ok(Arc::new(PgStore::connect(url, max_connections).await?))
    } else {
        Err(StoreError::UnsupportedUrl)
    }
}

/// Finds why a page of items came back empty: no such session, or a cursor that names no
/// item of it. Neither means the page is simply empty. Only empty pages pay for this.
async fn explain_empty_page(
    store: &dyn SessionStore,
    tenant: &str,
    session_id: &SessionId,
    cursor: Option<Uuid>,
) -> Result<()> {
    match cursor {
        Some(cursor) => match store.get_item(tenant, session_id, cursor).await {
            Err(StoreError::ItemNotFound) => Err(StoreError::UnknownCursor),
            other => other.map(drop),
        },
        None => store.get_session(tenant, session_id).await.map(drop),
    }
}

/// Finds why a page of runs came back empty: no such session, or a cursor that names no
/// run of it.
async fn explain_empty_run_page(
    store: &dyn SessionStore,
    tenant: &str,
    session_id: &SessionId,
    cursor: Option<Uuid>,
) -> Result<()> {
    match cursor {
        Some(cursor) => match store.get_run(tenant, session_id, cursor).await {
            Err(StoreError::RunNotFound) => Err(StoreError::UnknownCursor),
            other => other.map(drop),
        },
        None => store.get_session(tenant, session_id).await.map(drop),
    }
}

/// Finds why a page of agents after or before `cursor` came back empty: the cursor names
/// no agent.
async fn explain_empty_agent_page(
    store: &dyn SessionStore,
    tenant: &str,
    cursor: &str,
) -> Result<()> {
    match store.get_agent(tenant, cursor).await {
        Err(StoreError::AgentNotFound) => Err(StoreError::UnknownCursor),
        other => other.map(drop),
    }
}

/// The run that an earlier request with `key` created, if it still exists. A retry is
/// answered with it before anything else of the request is looked up again (its agent
/// may be gone by now); `create_run` decides again, atomically, for retries that race.
pub async fn replayed_run(
    store: &dyn SessionStore,
    tenant: &str,
    session_id: &SessionId,
    key: &IdempotencyKey,
) -> Result<Option<Run>> {
    let since = now() - IdempotencyKey::ttl();
    let Some((fingerprint, response)) = store.idempotency_key(tenant, &key.key, since).await?
    else {
        return Ok(None);
    };
    let first = rows::first_response(key, fingerprint, response)?;
    match store
        .get_run(tenant, session_id, run_rows::replayed_run_id(&first)?)
        .await
    {
        Ok(run) => Ok(Some(run)),
        Err(StoreError::RunNotFound | StoreError::SessionNotFound) => Ok(None),
        Err(error) => Err(error),
    }
}

/// Timestamps are kept to the microsecond, the precision both databases store, so a
/// value reads back exactly as it was written.
pub fn now() -> DateTime<Utc> {
    use chrono::SubsecRound;
    Utc::now().trunc_subsecs(6)
}
