//! Checkpoints: stored with the blobs of the channels they changed and the writes of
//! their tasks. Reads are in `checkpoint_reads`, deletes in `checkpoint_deletes`.

use async_trait::async_trait;
use sqlx::QueryBuilder;

use super::backend::{Db, Store};
use super::binds::BindAll;
use super::idempotency_keys::{claim_key, keep_response};
use super::sessions::{forget_expired, read_session_pk, session_pk_at, BindExpiry};
use super::Conn;
use super::{checkpoint_deletes, checkpoint_reads};
use crate::model::{
    Checkpoint, CheckpointFilter, IdempotencyKey, IfMatch, NewCheckpoint, PendingWrite, SessionId,
};
use crate::store::payload::{Column, PayloadCodec};
use crate::store::rows::expiry_columns;
use crate::store::timestamp::Timestamp;
use crate::store::{CheckpointRef, CheckpointStore, Keep, Result, StoreError};

#[async_trait]
impl CheckpointStore for Store {
    async fn put_checkpoint(
        &self, tenant: &str, session_id: &SessionId, checkpoint: NewCheckpoint,
        idempotency: Option<IdempotencyKey>, if_match: Option<IfMatch>,
    ) -> Result<bool> {
        let write = Write::Checkpoint(checkpoint);
        self.keyed(tenant, session_id, idempotency.as_ref(), if_match, write).await
    }

    async fn put_writes(
        &self, tenant: &str, at: CheckpointRef<'_>, writes: Vec<PendingWrite>,
        idempotency: Option<IdempotencyKey>, if_match: Option<IfMatch>,
    ) -> Result<bool> {
        let write = Write::Pending(at.namespace, at.id, writes);
        self.keyed(tenant, at.session_id, idempotency.as_ref(), if_match, write).await
    }

    async fn get_checkpoint(&self, tenant: &str, at: CheckpointRef<'_>) -> Result<Checkpoint> {
        checkpoint_reads::get(self, tenant, at).await
    }

    async fn list_checkpoints(
        &self, tenant: &str, session_id: Option<&SessionId>, filter: &CheckpointFilter,
    ) -> Result<Vec<Checkpoint>> {
        checkpoint_reads::list(self, tenant, session_id, filter).await
    }

    async fn delete_checkpoints(
        &self, tenant: &str, session_id: &SessionId, if_match: Option<IfMatch>,
    ) -> Result<u64> {
        let mut tx = self.writer().begin().await?;
        let pk = match if_match {
            Some(_) => session_pk_at(&mut tx, tenant, session_id, if_match).await?,
            None => read_session_pk(&mut tx, tenant, session_id).await?,
        };
        let deleted = checkpoint_deletes::prune_session(&mut tx, pk, Keep::Nothing).await?;
        tx.commit().await?;
        Ok(deleted)
    }

    async fn delete_checkpoints_of_runs(&self, tenant: &str, run_ids: &[String]) -> Result<u64> {
        checkpoint_deletes::of_runs(self, tenant, run_ids).await
    }

    async fn prune_checkpoints(
        &self, tenant: &str, session_ids: &[SessionId], keep: Keep,
    ) -> Result<u64> {
        let mut tx = self.writer().begin().await?;
        let mut deleted = 0;
        for id in session_ids {
            match read_session_pk(&mut tx, tenant, id).await {
                Ok(pk) => deleted += checkpoint_deletes::prune_session(&mut tx, pk, keep).await?,
                Err(StoreError::SessionNotFound) => {}
                Err(other) => return Err(other),
            }
        }
        tx.commit().await?;
        Ok(deleted)
    }
}

/// What `keyed` writes.
enum Write<'a> {
    Checkpoint(NewCheckpoint),
    /// Writes pending on the checkpoint of this namespace and id.
    Pending(&'a str, &'a str, Vec<PendingWrite>),
}

impl Store {
    /// Makes `write` in a transaction that finds (or makes) the session, checks
    /// `if_match` and records the Idempotency-Key; true when the key answers a replay.
    async fn keyed(
        &self, tenant: &str, session_id: &SessionId, key: Option<&IdempotencyKey>,
        if_match: Option<IfMatch>, write: Write<'_>,
    ) -> Result<bool> {
        let now = Timestamp::now();
        let mut tx = self.writer().begin().await?;
        if let Some(key) = key {
            if claim_key(&mut tx, &self.codec, tenant, key, now).await?.is_some() {
                return Ok(true);
            }
        }
        let pk = match if_match {
            Some(_) => session_pk_at(&mut tx, tenant, session_id, if_match).await?,
            None => self.session_made(&mut tx, tenant, session_id, now).await?,
        };
        let session = (tenant, pk);
        match write {
            Write::Checkpoint(checkpoint) => {
                insert_checkpoint(&mut tx, &self.codec, session, checkpoint, now).await?
            }
            Write::Pending(namespace, id, writes) => {
                insert_writes(&mut tx, &self.codec, session, (namespace, id), writes).await?
            }
        }
        if let Some(key) = key {
            keep_response(&mut tx, &self.codec, tenant, key, "{}").await?;
        }
        tx.commit().await?;
        Ok(false)
    }

    /// The session's key, the session made (at revision 1, with the default retention)
    /// if absent: a framework's first checkpoint of a thread makes it.
    async fn session_made(
        &self, conn: &mut Conn, tenant: &str, id: &SessionId, now: Timestamp,
    ) -> Result<i64> {
        loop {
            match read_session_pk(conn, tenant, id).await {
                Err(StoreError::SessionNotFound) => {}
                found => return found,
            }
            let made: Option<(i64,)> = sqlx::query_as(
                r"insert into sessions (tenant_id, id, created_at, updated_at, last_active_at,
                                        expires_anchor, expires_seconds, expires_at)
                  values ($1, $2, $3, $3, $3, $4, $5, $6)
                  on conflict (tenant_id, id) do nothing returning pk",
            )
            .bind_all((tenant, id.as_str(), now))
            .bind_expiry(expiry_columns(self.default_expiry, now, now))
            .fetch_optional(&mut *conn)
            .await?;
            if let Some((pk,)) = made {
                return Ok(pk);
            }
            forget_expired(conn, tenant, id).await?;
        }
    }
}

async fn insert_checkpoint(
    conn: &mut Conn, codec: &PayloadCodec, (tenant, session_pk): (&str, i64),
    checkpoint: NewCheckpoint, now: Timestamp,
) -> Result<()> {
    let payload = checkpoint.payload.data.as_deref().unwrap_or_default();
    let run_id = checkpoint.metadata.get("run_id").and_then(|id| id.as_str()).map(str::to_owned);
    sqlx::query(
        r"insert into checkpoints (tenant_id, session_pk, namespace, id, parent_id, payload_type, payload,
                                   metadata, channel_versions, run_id, created_at)
          values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
          on conflict (session_pk, namespace, id) do update set
              parent_id = excluded.parent_id, payload_type = excluded.payload_type,
              payload = excluded.payload, metadata = excluded.metadata,
              channel_versions = excluded.channel_versions, run_id = excluded.run_id",
    )
    .bind_all((tenant, session_pk, &checkpoint.namespace, &checkpoint.id, &checkpoint.parent_id, &checkpoint.payload.kind, codec.seal(tenant, Column::CheckpointPayload, payload)?, serde_json::Value::Object(checkpoint.metadata).to_string(), serde_json::to_string(&checkpoint.channel_versions).expect("a map of strings"), run_id, now))
    .execute(&mut *conn)
    .await?;
    if checkpoint.blobs.is_empty() {
        return Ok(());
    }
    // A version written again takes the newer value, as the framework's own stores do.
    let mut query = QueryBuilder::<Db>::new(
        "insert into checkpoint_blobs (tenant_id, session_pk, namespace, channel, version, value_type, data) ",
    );
    let mut sealed = Vec::with_capacity(checkpoint.blobs.len());
    for blob in &checkpoint.blobs {
        let data = blob.value.data.as_deref();
        sealed.push(data.map(|d| codec.seal(tenant, Column::CheckpointBlob, d)).transpose()?);
    }
    query.push_values(checkpoint.blobs.iter().zip(sealed), |mut row, (blob, data)| {
        row.push_bind(tenant)
            .push_bind(session_pk)
            .push_bind(&checkpoint.namespace)
            .push_bind(&blob.channel)
            .push_bind(&blob.version)
            .push_bind(&blob.value.kind)
            .push_bind(data.map(|d| d.into_owned()));
    });
    query.push(
        " on conflict (session_pk, namespace, channel, version) do update set \
         value_type = excluded.value_type, data = excluded.data",
    );
    query.build().execute(conn).await?;
    Ok(())
}

async fn insert_writes(
    conn: &mut Conn, codec: &PayloadCodec, (tenant, session_pk): (&str, i64),
    (namespace, checkpoint_id): (&str, &str), writes: Vec<PendingWrite>,
) -> Result<()> {
    // A negative place (an error, an interrupt) is written again; any other keeps the first.
    let (replacing, keeping): (Vec<_>, Vec<_>) = writes.into_iter().partition(|w| w.idx < 0);
    for (writes, conflict) in [
        (replacing, "do update set task_path = excluded.task_path, channel = excluded.channel, value_type = excluded.value_type, data = excluded.data"),
        (keeping, "do nothing"),
    ] {
        if writes.is_empty() {
            continue;
        }
        let mut sealed = Vec::with_capacity(writes.len());
        for write in &writes {
            let data = write.value.data.as_deref();
            sealed.push(data.map(|d| codec.seal(tenant, Column::CheckpointWrite, d)).transpose()?);
        }
        let mut query = QueryBuilder::<Db>::new(
            "insert into checkpoint_writes (tenant_id, session_pk, namespace, checkpoint_id, task_id, \
             task_path, idx, channel, value_type, data) ",
        );
        query.push_values(writes.iter().zip(sealed), |mut row, (write, data)| {
            row.push_bind(tenant)
                .push_bind(session_pk)
                .push_bind(namespace)
                .push_bind(checkpoint_id)
                .push_bind(&write.task_id)
                .push_bind(&write.task_path)
                .push_bind(write.idx)
                .push_bind(&write.channel)
                .push_bind(&write.value.kind)
                .push_bind(data.map(|d| d.into_owned()));
        });
        query.push(format!(
            " on conflict (session_pk, namespace, checkpoint_id, task_id, idx) {conflict}"
        ));
        query.build().execute(&mut *conn).await?;
    }
    Ok(())
}
