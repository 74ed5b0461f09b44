//! The session states a combined append batch changes: read with the sessions' seqs,
//! merged here in queue order, and written back in one statement.

use std::collections::HashMap;

use sqlx::PgConnection;

use super::shared::binds::BindAll;
use super::shared::documents::open_state;
use crate::model::{StateDocument, StateWrite};
use crate::store::payload::{Column, PayloadCodec};
use crate::store::Result;

/// The state of each session whose appends change it, as the batch leaves it so far.
#[derive(Default)]
pub(super) struct States<'a> {
    documents: HashMap<(&'a str, &'a str), (i64, StateDocument)>,
}

impl<'a> States<'a> {
    /// Takes the state a session is at when the batch begins (sealed; none: empty).
    pub fn begin(
        &mut self, codec: &PayloadCodec, session: (&'a str, &'a str), session_pk: i64,
        stored: Option<String>,
    ) -> Result<()> {
        let document = open_state(codec, session.0, Column::SessionState, stored)?;
        self.documents.insert(session, (session_pk, document));
        Ok(())
    }

    /// Applies one append's write to its session's state; answers the state after it.
    pub fn apply(
        &mut self, session: (&'a str, &'a str), write: &StateWrite,
    ) -> Result<StateDocument> {
        let (_, document) = self.documents.get_mut(&session).expect("a session begun");
        *document = write.apply(document)?;
        Ok(document.clone())
    }

    /// Writes every changed state back, sealed, in one statement.
    pub async fn write(self, conn: &mut PgConnection, codec: &PayloadCodec) -> Result<()> {
        if self.documents.is_empty() {
            return Ok(());
        }
        let mut pks = Vec::with_capacity(self.documents.len());
        let mut sealed = Vec::with_capacity(self.documents.len());
        for ((tenant, _), (pk, document)) in &self.documents {
            pks.push(*pk);
            sealed.push(codec.seal(tenant, Column::SessionState, document.as_str())?.into_owned());
        }
        sqlx::query(
            r"update sessions set state = u.state
              from unnest($1::bigint[], $2::text[]) as u (pk, state) where sessions.pk = u.pk",
        )
        .bind_all((&pks, &sealed))
        .execute(conn)
        .await?;
        Ok(())
    }
}
