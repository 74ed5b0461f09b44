//! Session state: the sealed `state` column of a session's row.

use async_trait::async_trait;

use super::appends::open_state;
use super::backend::{Store, NOW};
use crate::model::{IdempotencyKey, IfMatch, ItemBody, SessionId, StateDocument, StateWrite};
use crate::store::combiner::{Append, Replacing};
use crate::store::rows::live;
use crate::store::{Appended, Result, StateStore, StoreError};

#[async_trait]
impl StateStore for Store {
    async fn session_state(&self, tenant: &str, id: &SessionId) -> Result<(StateDocument, i64)> {
        let row: Option<(Option<String>, i64)> = sqlx::query_as(&format!(
            "select state, revision from sessions where tenant_id = $1 and id = $2 and {}",
            live("sessions", NOW)
        ))
        .bind(tenant)
        .bind(id.as_str())
        .fetch_optional(self.reader())
        .await?;
        let (state, revision) = row.ok_or(StoreError::SessionNotFound)?;
        Ok((open_state(&self.codec, tenant, state)?, revision))
    }

    async fn write_session_state(
        &self,
        tenant: &str,
        id: &SessionId,
        write: StateWrite,
        if_match: Option<IfMatch>,
    ) -> Result<(StateDocument, i64)> {
        // A state write is an append of no items that changes the state.
        let written =
            self.append_with_state(tenant, id, Vec::new(), Some(write), None, if_match).await?;
        match (written.state, written.revision) {
            (Some(state), Some(revision)) => Ok((state, revision)),
            _ => Err(StoreError::Corrupt("a state write without its state".into())),
        }
    }

    async fn append_with_state(
        &self,
        tenant: &str,
        session_id: &SessionId,
        bodies: Vec<ItemBody>,
        state: Option<StateWrite>,
        idempotency: Option<IdempotencyKey>,
        if_match: Option<IfMatch>,
    ) -> Result<Appended> {
        let append = Append {
            tenant: tenant.to_owned(),
            session_id: session_id.clone(),
            bodies,
            idempotency,
            if_match,
            state,
            replacing: Replacing::Nothing,
        };
        self.append(append).await
    }
}
