//! Reading checkpoints: one by id, or a listing newest first, each with the blobs of the
//! channels it names and its pending writes.

use std::collections::BTreeMap;

use futures::TryStreamExt;
use serde_json::{Map, Value};
use sqlx::QueryBuilder;

use super::backend::{json_members, Db, Store, NOW};
use super::binds::BindAll;
use super::Conn;
use crate::model::{
    ChannelBlob, Checkpoint, CheckpointFilter, PendingWrite, SessionId, TypedValue,
};
use crate::store::payload::{Column, PayloadCodec};
use crate::store::rows::live;
use crate::store::timestamp::Timestamp;
use crate::store::{CheckpointRef, Result, StoreError};

const CHECKPOINT_COLUMNS: &str =
    "c.session_pk, s.id as session_id, c.tenant_id, c.namespace, c.id, \
     c.parent_id, c.payload_type, c.payload, c.metadata, c.channel_versions, c.created_at";

#[derive(sqlx::FromRow)]
struct CheckpointRow {
    session_pk: i64,
    session_id: String,
    tenant_id: String,
    namespace: String,
    id: String,
    parent_id: Option<String>,
    payload_type: String,
    payload: String,
    metadata: String,
    channel_versions: String,
    created_at: Timestamp,
}

pub(super) async fn get(store: &Store, tenant: &str, at: CheckpointRef<'_>) -> Result<Checkpoint> {
    let mut conn = store.reader().acquire().await?;
    let row: Option<CheckpointRow> = sqlx::query_as(&format!(
        "select {CHECKPOINT_COLUMNS} from checkpoints c join sessions s on s.pk = c.session_pk \
         where s.tenant_id = $1 and s.id = $2 and {} and c.namespace = $3 and c.id = $4",
        live("s", NOW)
    ))
    .bind_all((tenant, at.session_id.as_str(), at.namespace, at.id))
    .fetch_optional(&mut *conn)
    .await?;
    match row {
        Some(row) => whole(&mut conn, &store.codec, row).await,
        None => {
            // Which is missing: the session (404 session_not_found) or the checkpoint.
            super::sessions::read_session_pk(&mut conn, tenant, at.session_id).await?;
            Err(StoreError::CheckpointNotFound)
        }
    }
}

pub(super) async fn list(
    store: &Store, tenant: &str, session_id: Option<&SessionId>, filter: &CheckpointFilter,
) -> Result<Vec<Checkpoint>> {
    let mut conn = store.reader().acquire().await?;
    let mut query = QueryBuilder::<Db>::new(format!(
        "select {CHECKPOINT_COLUMNS} from checkpoints c join sessions s on s.pk = c.session_pk \
         where {}",
        live("s", NOW)
    ));
    // One session's checkpoints are found by its key alone, so that the newest of a long
    // session is one step down its (session, namespace, id) or (session, id) index.
    match session_id {
        Some(id) => {
            let pk = super::sessions::read_session_pk(&mut conn, tenant, id).await?;
            query.push(" and c.session_pk = ").push_bind(pk);
        }
        None => {
            query.push(" and c.tenant_id = ").push_bind(tenant.to_owned());
        }
    }
    if let Some(namespace) = &filter.namespace {
        query.push(" and c.namespace = ").push_bind(namespace);
    }
    if let Some(before) = &filter.before {
        query.push(" and c.id < ").push_bind(before);
    }
    query.push(" order by c.id desc");
    // A metadata filter is applied here, so the database's limit is only for none.
    let limit = filter.limit.map_or(usize::MAX, |n| n as usize);
    if filter.metadata.is_empty() && filter.limit.is_some() {
        query.push(" limit ").push_bind(limit as i64);
    }
    let rows: Vec<CheckpointRow> = {
        let mut kept = Vec::new();
        let mut rows = query.build_query_as::<CheckpointRow>().fetch(&mut *conn);
        while kept.len() < limit {
            let Some(row) = rows.try_next().await? else { break };
            if filter.admits(&metadata(&row.metadata)?) {
                kept.push(row);
            }
        }
        kept
    };
    let mut listed = Vec::with_capacity(rows.len());
    for row in rows {
        listed.push(whole(&mut conn, &store.codec, row).await?);
    }
    Ok(listed)
}

fn metadata(text: &str) -> Result<Map<String, Value>> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("checkpoint metadata: {e}")))
}

/// The checkpoint of `row` with its blobs and writes.
async fn whole(conn: &mut Conn, codec: &PayloadCodec, row: CheckpointRow) -> Result<Checkpoint> {
    let tenant = row.tenant_id.as_str();
    let channel_versions: BTreeMap<String, String> = serde_json::from_str(&row.channel_versions)
        .map_err(|e| StoreError::Corrupt(format!("checkpoint channel versions: {e}")))?;
    // Each channel's blob is looked up by the key it is stored under, one index probe
    // per channel: the read costs the checkpoint's channels, however many versions the
    // session has stored. A channel without a blob is left out (a value never written).
    let blob = |column: &str| {
        format!(
            "(select b.{column} from checkpoint_blobs b where b.session_pk = $1 \
             and b.namespace = $2 and b.channel = v.key and b.version = v.value)"
        )
    };
    let blob_rows: Vec<(String, String, Option<String>, Option<String>)> =
        sqlx::query_as(&format!(
            "select v.key, v.value, {}, {} from {} v order by v.key",
            blob("value_type"),
            blob("data"),
            json_members("$3")
        ))
        .bind_all((row.session_pk, &row.namespace, &row.channel_versions))
        .fetch_all(&mut *conn)
        .await?;
    let open =
        |column, data: Option<String>| data.map(|d| codec.open(tenant, column, d)).transpose();
    let mut blobs = Vec::with_capacity(blob_rows.len());
    for (channel, version, kind, data) in blob_rows {
        let Some(kind) = kind else { continue };
        let value = TypedValue { kind, data: open(Column::CheckpointBlob, data)? };
        blobs.push(ChannelBlob { channel, version, value });
    }
    let write_rows: Vec<(String, String, i64, String, String, Option<String>)> = sqlx::query_as(
        "select task_id, task_path, idx, channel, value_type, data from checkpoint_writes \
         where session_pk = $1 and namespace = $2 and checkpoint_id = $3 \
         order by task_path, task_id, idx",
    )
    .bind_all((row.session_pk, &row.namespace, &row.id))
    .fetch_all(&mut *conn)
    .await?;
    let mut writes = Vec::with_capacity(write_rows.len());
    for (task_id, task_path, idx, channel, kind, data) in write_rows {
        let value = TypedValue { kind, data: open(Column::CheckpointWrite, data)? };
        writes.push(PendingWrite { task_id, task_path, idx, channel, value });
    }
    let payload = codec.open(tenant, Column::CheckpointPayload, row.payload)?;
    Ok(Checkpoint {
        session_id: row.session_id,
        namespace: row.namespace,
        id: row.id,
        parent_id: row.parent_id,
        checkpoint: TypedValue { kind: row.payload_type, data: Some(payload) },
        metadata: metadata(&row.metadata)?,
        channel_versions,
        blobs,
        writes,
        created_at: row.created_at.0,
    })
}
