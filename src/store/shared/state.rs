//! State documents: a session's (the sealed `state` column of its row) and those its
//! owners share (`owner_states`).

use async_trait::async_trait;

use super::backend::{Store, NOW};
use super::binds::BindAll;
use super::documents::open_state;
use super::owners::write_document;
use crate::model::{
    IdempotencyKey, IfMatch, ItemBody, OwnerDocument, SessionId, StateChanges, StateDocument,
    StateWrite,
};
use crate::store::combined_writes::{Append, Replacing};
use crate::store::payload::Column;
use crate::store::rows::live;
use crate::store::timestamp::Timestamp;
use crate::store::{Appended, Result, StateSnapshot, StateStore, StoreError};

/// What the state read finds: the session's state and revision, and its owners'
/// documents (null when not asked for, or absent).
type StateRow = (Option<String>, i64, Option<String>, Option<String>);

#[async_trait]
impl StateStore for Store {
    async fn session_state(
        &self, tenant: &str, id: &SessionId, owners: bool,
    ) -> Result<StateSnapshot> {
        // One statement: one snapshot of the three documents.
        let (documents, joins) = match owners {
            true => (
                "u.state, a.state",
                "left join owner_states u on u.tenant_id = s.tenant_id and u.app_id = s.app_id \
                     and u.user_id = s.user_id \
                 left join owner_states a on a.tenant_id = s.tenant_id and a.app_id = s.app_id \
                     and a.user_id = ''",
            ),
            false => ("null, null", ""),
        };
        let row: Option<StateRow> = sqlx::query_as(&format!(
            "select s.state, s.revision, {documents} from sessions s {joins} \
             where s.tenant_id = $1 and s.id = $2 and {}",
            live("s", NOW)
        ))
        .bind_all((tenant, id.as_str()))
        .fetch_optional(self.reader())
        .await?;
        let (state, revision, user, app) = row.ok_or(StoreError::SessionNotFound)?;
        let owner = |stored: Option<String>| match stored {
            Some(_) => open_state(&self.codec, tenant, Column::OwnerState, stored).map(Some),
            None => Ok(None),
        };
        Ok(StateSnapshot {
            state: open_state(&self.codec, tenant, Column::SessionState, state)?,
            revision,
            user: owner(user)?,
            app: owner(app)?,
        })
    }

    async fn append_with_state(
        &self, tenant: &str, session_id: &SessionId, bodies: Vec<ItemBody>, state: StateChanges,
        idempotency: Option<IdempotencyKey>, if_match: Option<IfMatch>,
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

    async fn owner_state(
        &self, tenant: &str, document: &OwnerDocument,
    ) -> Result<(StateDocument, i64)> {
        let (app, user) = document.key();
        let row: Option<(Option<String>, i64)> = sqlx::query_as(
            "select state, revision from owner_states \
             where tenant_id = $1 and app_id = $2 and user_id = $3",
        )
        .bind_all((tenant, app, user))
        .fetch_optional(self.reader())
        .await?;
        let (state, revision) = row.ok_or(StoreError::StateNotFound)?;
        Ok((open_state(&self.codec, tenant, Column::OwnerState, state)?, revision))
    }

    async fn write_owner_state(
        &self, tenant: &str, document: &OwnerDocument, write: StateWrite, if_match: Option<IfMatch>,
    ) -> Result<(StateDocument, i64)> {
        let mut tx = self.writer().begin().await?;
        let now = Timestamp::now();
        let written =
            write_document(&mut tx, &self.codec, tenant, document.key(), &write, if_match, now)
                .await?;
        tx.commit().await?;
        Ok(written)
    }
}
