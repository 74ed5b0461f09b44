//! State documents kept beside sessions.

use async_trait::async_trait;

use super::{Appended, Result};
use crate::model::{IdempotencyKey, IfMatch, ItemBody, SessionId, StateDocument, StateWrite};

#[async_trait]
pub trait StateStore {
    /// The session's state document and revision.
    async fn session_state(&self, tenant: &str, id: &SessionId) -> Result<(StateDocument, i64)>;

    /// Changes the session's state under its row lock (so concurrent merge patches
    /// never lose a member), creating the session if absent (unless `if_match`, which
    /// an absent session never meets); one revision. Returns the new state and revision.
    async fn write_session_state(
        &self,
        tenant: &str,
        id: &SessionId,
        write: StateWrite,
        if_match: Option<IfMatch>,
    ) -> Result<(StateDocument, i64)>;

    /// An append (as `SessionStore::append_items`) that may also change the state in
    /// the same transaction, and may hold no items: with no items and no state change
    /// it changes nothing but records its key.
    async fn append_with_state(
        &self,
        tenant: &str,
        session_id: &SessionId,
        items: Vec<ItemBody>,
        state: Option<StateWrite>,
        idempotency: Option<IdempotencyKey>,
        if_match: Option<IfMatch>,
    ) -> Result<Appended>;
}
