use async_trait::async_trait;

use super::Result;
use crate::model::{Compaction, IfMatch, Item, NewFork, Page, PageRequest, Session, SessionId};

/// Compactions of a session's history, and forks of sessions.
///
/// A compaction never changes items. It lives only as long as every item it summarises:
/// deleting or popping an item at or before its `through_seq`, or clearing the session,
/// deletes it in the same transaction, so a summary never outlives the content it was
/// made from.
#[async_trait]
pub trait CompactionStore: Send + Sync {
    /// The session's newest compaction; none when it has none, or no longer exists (one
    /// statement: a run reads it with every turn).
    async fn latest_compaction(
        &self, tenant: &str, session_id: &SessionId,
    ) -> Result<Option<Compaction>>;

    /// What a run sends of the session: its newest compaction and every item after it
    /// (all items without one), oldest first. With `idle`, fails with
    /// [`super::StoreError::SessionBusy`] while the session has an unfinished run.
    async fn context(&self, tenant: &str, session_id: &SessionId, idle: bool) -> Result<Context>;

    /// The session's [`HistoryMark`] and its items after `seq`, oldest first, as of one
    /// snapshot (one statement): a run that holds the history as of the same mark reads
    /// only what was appended since.
    async fn appended_since(
        &self, tenant: &str, session_id: &SessionId, seq: i64,
    ) -> Result<(HistoryMark, Vec<Item>)>;

    /// Stores a compaction made from the session as `base` saw it: the previous
    /// compaction it folded in (if any) and the `summarised` items after it must all
    /// still be there, and no newer compaction may cover as much; otherwise nothing is
    /// stored and it fails with [`super::StoreError::HistoryChanged`]. One without a
    /// `run_id` fails with `SessionBusy` while a run is unfinished, and adds its usage to
    /// the session (a run's compaction counts in the run's usage instead).
    async fn add_compaction(
        &self, tenant: &str, session_id: &SessionId, base: Option<&Compaction>, summarised: i64,
        compaction: &Compaction, if_match: Option<IfMatch>,
    ) -> Result<()>;

    /// Newest first unless the page asks otherwise.
    async fn list_compactions(
        &self, tenant: &str, session_id: &SessionId, page: &PageRequest,
    ) -> Result<Page<Compaction>>;

    /// Makes a new session holding copies of the source's items up to the fork point
    /// (new ids, `seq` from 1) and of its compactions within them, in one transaction of
    /// one statement per table, reading the source as of one snapshot and never locking
    /// it. A request whose Idempotency-Key came with the same request before gets that
    /// request's fork.
    async fn fork_session(&self, tenant: &str, source: &SessionId, fork: NewFork)
        -> Result<Forked>;
}

/// What a run sends of a session.
#[derive(Debug, Clone)]
pub struct Context {
    pub compaction: Option<Compaction>,
    pub items: Vec<Item>,
}

/// Which history a session holds: the session row, with when it was made (SQLite gives a
/// session deleted and made again the pk of the old one), and how often anything but an
/// append changed its items or compactions. While all three stay, its history only grew
/// at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryMark {
    pub session_pk: i64,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub rewrites: i64,
}

/// What `fork_session` did.
#[derive(Debug, Clone)]
pub struct Forked {
    pub session: Session,
    /// An earlier request with the same Idempotency-Key made this fork.
    pub replayed: bool,
}

/// What a fork's Idempotency-Key keeps: the session the fork made.
pub(super) fn fork_response(session_id: &str) -> String {
    serde_json::json!({ "session_id": session_id }).to_string()
}

/// The fork an earlier request with the same key made.
pub(super) fn replayed_fork(response: &str) -> Result<String> {
    serde_json::from_str::<serde_json::Value>(response)
        .ok()
        .and_then(|first| first["session_id"].as_str().map(str::to_owned))
        .ok_or_else(|| super::StoreError::Corrupt(format!("idempotency response `{response}`")))
}
