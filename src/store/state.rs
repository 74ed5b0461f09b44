//! State documents kept beside sessions: each session's, and those its owners share.

use async_trait::async_trait;

use super::{Appended, Result};
use crate::model::{
    IdempotencyKey, IfMatch, ItemBody, OwnerDocument, SessionId, StateChanges, StateDocument,
    StateWrite,
};

/// A session's state as one snapshot read it.
#[derive(Debug, Clone)]
pub struct StateSnapshot {
    pub state: StateDocument,
    pub revision: i64,
    /// The documents of the session's user and app: read only when asked, and none
    /// where the session has no such owner or the owner no document.
    pub user: Option<StateDocument>,
    pub app: Option<StateDocument>,
}

#[async_trait]
pub trait StateStore {
    /// The session's state document and revision, and when `owners` its user's and
    /// app's documents, all in one snapshot.
    async fn session_state(
        &self, tenant: &str, id: &SessionId, owners: bool,
    ) -> Result<StateSnapshot>;

    /// An append (as `SessionStore::append_items`) that may also name the session's
    /// owners and change its state and theirs, all in its transaction, and may hold no
    /// items: with no items and no change it changes nothing but records its key. A
    /// state write is such an append; its state changes under the session's row lock,
    /// so concurrent merge patches never lose a member.
    async fn append_with_state(
        &self, tenant: &str, session_id: &SessionId, items: Vec<ItemBody>, changes: StateChanges,
        idempotency: Option<IdempotencyKey>, if_match: Option<IfMatch>,
    ) -> Result<Appended>;

    /// An app's or a user's document and its revision.
    async fn owner_state(
        &self, tenant: &str, document: &OwnerDocument,
    ) -> Result<(StateDocument, i64)>;

    /// Changes an app's or a user's document under its row lock, creating it if absent
    /// (unless `if_match`, which an absent document never meets).
    async fn write_owner_state(
        &self, tenant: &str, document: &OwnerDocument, write: StateWrite, if_match: Option<IfMatch>,
    ) -> Result<(StateDocument, i64)>;
}
