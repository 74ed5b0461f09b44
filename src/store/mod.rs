//! Persistence. The [`SessionStore`] trait is the only way the rest of the service reaches
//! the database; SQL lives in the backend modules and nowhere else.

mod agents;
mod api_keys;
mod at_rest;
mod checkpoints;
mod combined_writes;
mod combiner;
mod compactions;
mod deadline;
mod deliveries;
mod encryption;
mod error;
mod event_rows;
mod held;
mod idempotency;
mod outage;
mod pages;
mod payload;
mod postgres;
mod rows;
mod run_rows;
mod runs;
mod sqlite;
mod state;
mod timestamp;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

pub use agents::AgentStore;
pub use api_keys::ApiKeyStore;
pub use at_rest::{AtRestStore, Progress};
pub use checkpoints::{CheckpointRef, CheckpointStore, Keep};
pub use combiner::AppendStats;
pub use compactions::{CompactionStore, Context, Forked, HistoryMark};
pub use deliveries::{Attempt, Delivery, DeliveryStore};
pub use encryption::{Keyring, KeyringError};
pub use error::StoreError;
pub use payload::{Column, PayloadCodec};
pub use postgres::PgStore;
pub use runs::{Claim, CreatedRun, Finished, RunFlush, RunLease, RunStore, StartNow};
pub use sqlite::SqliteStore;
pub use state::{StateSnapshot, StateStore};
pub use timestamp::now;

use crate::model::{
    ExpiresAfter, IdempotencyKey, IfMatch, Item, ItemBody, NewSession, Page, PageRequest, Session,
    SessionFilter, SessionId, SessionPatch,
};

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Sessions and their items, and through its supertraits agents and runs. Every method
/// acts within one tenant and never sees rows of another.
#[async_trait]
pub trait SessionStore:
    AgentStore
    + ApiKeyStore
    + AtRestStore
    + StateStore
    + CheckpointStore
    + RunStore
    + CompactionStore
    + DeliveryStore
    + Send
    + Sync
    + 'static
{
    /// Fails with [`StoreError::SessionExists`] when the id is taken.
    async fn create_session(&self, tenant: &str, session: NewSession) -> Result<Session>;

    async fn get_session(&self, tenant: &str, id: &SessionId) -> Result<Session>;

    /// Newest first unless the page asks otherwise; ties on `created_at` are broken by
    /// insertion order, so pages never skip or repeat a session.
    async fn list_sessions(
        &self, tenant: &str, filter: &SessionFilter, page: &PageRequest,
    ) -> Result<Page<Session>>;

    /// Applies the patch under a row lock, so concurrent patches never lose a key.
    ///
    /// Every write to a session takes `if_match`: with one, the write happens only if
    /// the session exists at that revision, else fails with
    /// [`StoreError::RevisionMismatch`] having written nothing.
    async fn update_session(
        &self, tenant: &str, id: &SessionId, patch: SessionPatch, if_match: Option<IfMatch>,
    ) -> Result<Session>;

    /// Deletes the session with all its items and runs.
    async fn delete_session(
        &self, tenant: &str, id: &SessionId, if_match: Option<IfMatch>,
    ) -> Result<()>;

    /// Appends the items in order, in one transaction, creating the session if absent.
    /// Their `seq`s are contiguous: a concurrent append never lands between them.
    /// With a key seen before, nothing is appended and the first append is returned.
    async fn append_items(
        &self, tenant: &str, session_id: &SessionId, items: Vec<ItemBody>,
        idempotency: Option<IdempotencyKey>, if_match: Option<IfMatch>,
    ) -> Result<Appended>;

    async fn list_items(
        &self, tenant: &str, session_id: &SessionId, page: &PageRequest,
    ) -> Result<Page<Item>>;

    async fn get_item(&self, tenant: &str, session_id: &SessionId, item_id: Uuid) -> Result<Item>;

    /// Deletes the item, and the compactions that summarise it.
    async fn delete_item(
        &self, tenant: &str, session_id: &SessionId, item_id: Uuid,
        idempotency: Option<IdempotencyKey>, if_match: Option<IfMatch>,
    ) -> Result<()>;

    /// Removes and returns the newest item, and the compactions that summarise it.
    /// Concurrent pops each get a different item.
    async fn pop_last_item(
        &self, tenant: &str, session_id: &SessionId, idempotency: Option<IdempotencyKey>,
        if_match: Option<IfMatch>,
    ) -> Result<Item>;

    /// Replaces one item's stored object in place (same id and seq); the compactions and
    /// the finished run made from it go, as on a delete. Returns the item and the new
    /// revision.
    async fn replace_item(
        &self, tenant: &str, session_id: &SessionId, item_id: Uuid, body: ItemBody,
        idempotency: Option<IdempotencyKey>, if_match: Option<IfMatch>,
    ) -> Result<(Item, i64)>;

    /// Replaces the whole history, or what follows the item `after`, with `items`, in
    /// one transaction (creating the session if absent, as an append): the new items
    /// get seqs above every seq the session has used.
    async fn replace_items(
        &self, tenant: &str, session_id: &SessionId, items: Vec<ItemBody>, after: Option<Uuid>,
        idempotency: Option<IdempotencyKey>, if_match: Option<IfMatch>,
    ) -> Result<Appended>;

    /// Removes every item and keeps the session; its compactions go with them.
    async fn clear_items(
        &self, tenant: &str, session_id: &SessionId, idempotency: Option<IdempotencyKey>,
        if_match: Option<IfMatch>,
    ) -> Result<()>;

    /// Forgets idempotency keys first used before `cutoff`; returns how many.
    async fn purge_idempotency_keys(&self, cutoff: DateTime<Utc>) -> Result<u64>;

    /// Deletes up to `batch` expired sessions with all their rows; a session with an
    /// unfinished run waits for it. Replicas sweeping at once never take the same one.
    async fn sweep_expired(&self, batch: i64) -> Result<Swept>;

    /// Answers when the database does.
    async fn ping(&self) -> Result<()>;

    /// Commits a write that leaves nothing behind (a row of 64 KiB inserted and deleted):
    /// answers when writes can commit.
    async fn check_writes(&self) -> Result<()>;

    /// The random secret the database made for `name` when it was migrated, the same for
    /// every replica.
    async fn server_secret(&self, name: &str) -> Result<String>;

    fn pool_stats(&self) -> PoolStats;

    /// How appends were combined into transactions so far.
    fn append_stats(&self) -> AppendStats;
}

/// The result of an append.
#[derive(Debug, Clone)]
pub struct Appended {
    pub items: Vec<Item>,
    /// True when an earlier request with the same idempotency key did the append.
    pub replayed: bool,
    /// The session's revision after the append (unknown for a replay of an append made
    /// before revisions were kept, and for an empty append to no session).
    pub revision: Option<i64>,
    /// The session's state after an append that changed it; for the replay of a state
    /// write, the state its first answer held.
    pub state: Option<crate::model::StateDocument>,
}

/// What one sweep deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    pub sessions: u64,
    pub items: u64,
}

/// Database connections, for the metrics endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    pub in_use: u32,
    pub idle: u32,
}

/// How long one database operation may take unless configured otherwise
/// (`DATABASE_TIMEOUT_SECS`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// How a store opens and uses its database.
#[derive(Clone)]
pub struct Options {
    /// The most connections to Postgres.
    pub max_connections: u32,
    /// How long one database operation may take before it fails.
    pub timeout: Duration,
    /// How payloads are kept: encrypted, when it has keys.
    pub codec: PayloadCodec,
    /// The retention of sessions created without one of their own.
    pub default_expiry: Option<ExpiresAfter>,
}

impl Options {
    pub fn new(max_connections: u32) -> Self {
        Self {
            max_connections,
            timeout: DEFAULT_TIMEOUT,
            codec: PayloadCodec::default(),
            default_expiry: None,
        }
    }
}

/// Opens the database named by `url` (SQLite when it starts with `sqlite:`, Postgres for
/// `postgres:`/`postgresql:`) and brings its schema up to date.
pub async fn connect(url: &str, max_connections: u32) -> Result<Arc<dyn SessionStore>> {
    connect_with(url, Options::new(max_connections)).await
}

/// Opens the database as `options` say; each operation of the store has their timeout.
pub async fn connect_with(url: &str, options: Options) -> Result<Arc<dyn SessionStore>> {
    let Options { max_connections, timeout, codec, default_expiry } = options;
    let store: Arc<dyn SessionStore> = if url.starts_with("sqlite:") {
        Arc::new(
            SqliteStore::connect_tuned(url, timeout, |options| options)
                .await?
                .with_codec(codec)
                .with_default_expiry(default_expiry),
        )
    } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
        Arc::new(
            PgStore::connect_within(url, max_connections, timeout)
                .await?
                .with_codec(codec)
                .with_default_expiry(default_expiry),
        )
    } else {
        return Err(StoreError::UnsupportedUrl);
    };
    Ok(Arc::new(deadline::Deadline::new(store, timeout)))
}

/// The newest migration of the backend `url` names: the schema version `connect` leaves.
pub fn schema_version(url: &str) -> Option<i64> {
    if url.starts_with("sqlite:") {
        Some(SqliteStore::schema_version())
    } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
        Some(PgStore::schema_version())
    } else {
        None
    }
}
