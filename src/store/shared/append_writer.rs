//! The writer behind the append queue (`store::combiner`): what a commit of one append,
//! or of a combined batch of them, takes on this backend.

use std::sync::Arc;

use async_trait::async_trait;

use super::appends::append_in;
use super::backend::appends::append_many;
use super::backend::{Db, Store};
use crate::model::ExpiresAfter;
use crate::store::combined_writes::Append;
use crate::store::combiner::{BatchFailed, Combiner, Writer};
use crate::store::held::HeldConnections;
use crate::store::payload::PayloadCodec;
use crate::store::timestamp::Timestamp;
use crate::store::{Appended, Result, StoreError};

/// What the append queue's writer task writes with: the connection it keeps (or,
/// keeping none, the writer pool's), codec and default retention.
struct Writes {
    connection: Arc<HeldConnections<Db>>,
    codec: PayloadCodec,
    default_expiry: Option<ExpiresAfter>,
}

#[async_trait]
impl Writer for Writes {
    type Job = Append;
    type Done = Appended;

    async fn one(&self, append: &Append) -> Result<Appended> {
        let mut conn = self.connection.take().await?;
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        let appended =
            append_in(&mut tx, &self.codec, self.default_expiry, append, Timestamp::now()).await?;
        tx.commit().await?;
        conn.keep();
        Ok(appended)
    }

    async fn many(
        &self, appends: &[Append],
    ) -> std::result::Result<Vec<Option<Appended>>, BatchFailed> {
        let before = |e: StoreError| BatchFailed::BeforeCommit(e);
        let mut conn = self.connection.take().await.map_err(|e| before(e.into()))?;
        let mut tx = sqlx::Connection::begin(&mut *conn).await.map_err(|e| before(e.into()))?;
        let appended =
            append_many(&mut tx, &self.codec, self.default_expiry, appends, Timestamp::now())
                .await
                .map_err(before)?;
        tx.commit().await.map_err(|e| BatchFailed::AtCommit(e.into()))?;
        conn.keep();
        Ok(appended)
    }
}

impl Store {
    /// Makes an append, combined with those that wait with it.
    pub(super) async fn append(&self, append: Append) -> Result<Appended> {
        self.appends().submit(append).await
    }

    /// The queue that combines appends, started by the first one.
    pub(super) fn appends(&self) -> &Combiner<Append, Appended> {
        self.appends.get_or_init(|| {
            Combiner::start(
                Writes {
                    connection: self.append_writer.clone(),
                    codec: self.codec.clone(),
                    default_expiry: self.default_expiry,
                },
                self.deadline,
            )
        })
    }
}
