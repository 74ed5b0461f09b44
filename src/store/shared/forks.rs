//! Forks: a new session made of copies of another's items up to a point, and of the
//! compactions within them, written by the database in one transaction.

use sqlx::types::Json;
use uuid::Uuid;

use super::backend::{new_id, Store, NOW, SNAPSHOT};
use super::binds::BindAll;
use super::idempotency_keys::{claim_key, keep_response};
use super::sessions::{forget_expired, row_value, BindExpiry};
use super::Conn;
use crate::model::{ForkPoint, Metadata, NewFork, SessionId};
use crate::store::compactions::{fork_response, replayed_fork};
use crate::store::rows::{
    expiry_columns, id_prefix, live, stored_expiry, SessionRow, SESSION_COLUMNS,
};
use crate::store::timestamp::Timestamp;
use crate::store::{Forked, Result, SessionStore, StoreError};

/// The seq of the newest item a fork copies.
async fn fork_through(
    conn: &mut Conn, tenant: &str, source_pk: i64, point: ForkPoint,
) -> Result<i64> {
    match point {
        ForkPoint::All => Ok(i64::MAX),
        ForkPoint::ThroughItem(item) => {
            let seq = row_value(conn, "select seq from items", "id", (tenant, source_pk), item);
            seq.await?.ok_or(StoreError::ItemNotFound)
        }
        ForkPoint::BeforeRun(run) => {
            let session = (tenant, source_pk);
            let found: Option<i64> =
                row_value(&mut *conn, "select pk from runs", "id", session, run).await?;
            found.ok_or(StoreError::RunNotFound)?;
            // A turn is appended whole, so its first item marks where it began.
            let first: Option<Option<i64>> =
                row_value(conn, "select min(seq) from items", "run_id", session, run).await?;
            Ok(first.flatten().map_or(i64::MAX, |seq| seq - 1))
        }
        ForkPoint::AfterRun(run) => {
            // A run whose turn is not in the session (unfinished, failed, or its items
            // removed since) marks no point in it.
            let last: Option<Option<i64>> =
                row_value(conn, "select max(seq) from items", "run_id", (tenant, source_pk), run)
                    .await?;
            last.flatten().ok_or(StoreError::RunNotFound)
        }
    }
}

pub(super) async fn fork(
    store: &Store, tenant: &str, source: &SessionId, fork: NewFork,
) -> Result<Forked> {
    let now = Timestamp::now();
    let mut tx = store.writer().begin().await?;
    if let Some(snapshot) = SNAPSHOT {
        sqlx::query(snapshot).execute(&mut *tx).await?;
    }
    if let Some(key) = &fork.idempotency {
        if let Some((first, _)) = claim_key(&mut tx, &store.codec, tenant, key, now).await? {
            drop(tx);
            let id = SessionId::parse("id", replayed_fork(&first)?)?;
            let session = store.get_session(tenant, &id).await?;
            return Ok(Forked { session, replayed: true });
        }
    }
    type Source = (i64, Json<Metadata>, Option<String>, Option<String>, Option<i64>);
    let found: Option<Source> = sqlx::query_as(&format!(
        r"select pk, metadata, agent_id, expires_anchor, expires_seconds
          from sessions where tenant_id = $1 and id = $2 and {}",
        live("sessions", NOW)
    ))
    .bind_all((tenant, source.as_str()))
    .fetch_optional(&mut *tx)
    .await?;
    let (source_pk, Json(metadata), agent_id, anchor, seconds) =
        found.ok_or(StoreError::SessionNotFound)?;
    // The fork keeps its source's retention, counted from now.
    let retention = expiry_columns(stored_expiry(anchor.as_deref(), seconds), now, now);
    // An expired session under the fork's id frees it.
    forget_expired(&mut tx, tenant, &fork.id).await?;
    let through = fork_through(&mut tx, tenant, source_pk, fork.point).await?;
    let (copied, newest): (i64, Option<i64>) = sqlx::query_as(
        "select count(*), max(seq) from items where tenant_id = $1 and session_pk = $2 and seq <= $3",
    )
    .bind_all((tenant, source_pk, through))
    .fetch_one(&mut *tx)
    .await?;
    let newest_id: Option<Uuid> = match newest {
        Some(seq) => {
            row_value(&mut tx, "select id from items", "seq", (tenant, source_pk), seq).await?
        }
        None => None,
    };
    let created: Option<SessionRow> = sqlx::query_as(&format!(
        r"insert into sessions (tenant_id, id, created_at, updated_at, last_active_at, metadata, agent_id,
              item_count, last_seq, forked_from_session_id, forked_from_item_id,
              expires_anchor, expires_seconds, expires_at, state, app_id, user_id)
          select $1, $2, $3, $3, $3, $4, $5, $6, $6, $7, $8, $9, $10, $11, state, app_id, user_id
          from sessions where pk = $12
          on conflict (tenant_id, id) do nothing
          returning pk, {SESSION_COLUMNS}"
    ))
    .bind_all((tenant, fork.id.as_str(), now, Json(fork.metadata.as_ref().unwrap_or(&metadata)), agent_id, copied, source.as_str(), newest_id))
    .bind_expiry(retention)
    // The state and owners go with the items, the state sealed as it is: both sessions
    // are the tenant's.
    .bind(source_pk)
    .fetch_optional(&mut *tx)
    .await?;
    let created = created.ok_or(StoreError::SessionExists)?;
    let fork_pk =
        created.pk.ok_or_else(|| StoreError::Corrupt("a new session without pk".into()))?;
    // Copies are made by the database: no row passes through the service. A copied
    // compaction ends at the copy of its item: the item's rank among the source's items
    // is its seq in the fork, so the items are copied first.
    let copies = [
        format!(
            r"insert into items (id, tenant_id, session_pk, seq, created_at, run_id, body)
              select {}, tenant_id, $3, n, created_at, null, body
              from (select row_number() over (order by seq) as n, tenant_id, created_at, body
                    from items where tenant_id = $1 and session_pk = $2 and seq <= $4) as copied",
            new_id("$5", "n")
        ),
        format!(
            r"insert into compactions (tenant_id, id, session_pk, created_at, run_id,
                  through_item_id, through_seq, items_compacted, model,
                  input_tokens, output_tokens, total_tokens, llm_calls, summary)
              select c.tenant_id, {}, $3, c.created_at, null, n.id, n.seq,
                  c.items_compacted, c.model, c.input_tokens, c.output_tokens,
                  c.total_tokens, c.llm_calls, c.summary
              from compactions c join items n on n.tenant_id = $1 and n.session_pk = $3
                  and n.seq = (select count(*) from items o where o.tenant_id = $1
                                 and o.session_pk = $2 and o.seq <= c.through_seq)
              where c.tenant_id = $1 and c.session_pk = $2 and c.through_seq <= $4
              order by c.pk",
            new_id("$5", "row_number() over (order by c.pk)")
        ),
    ];
    for copy in &copies {
        let copy = sqlx::query(copy).bind_all((tenant, source_pk, fork_pk, through));
        copy.bind(id_prefix()).execute(&mut *tx).await?;
    }
    // Checkpoints go whole, with their ids: they are the framework's, not the history's.
    for copy in CHECKPOINT_COPIES {
        let copy = sqlx::query(copy).bind_all((tenant, source_pk, fork_pk));
        copy.execute(&mut *tx).await?;
    }
    if let Some(key) = &fork.idempotency {
        let response = fork_response(fork.id.as_str());
        keep_response(&mut tx, &store.codec, tenant, key, &response).await?;
    }
    tx.commit().await?;
    Ok(Forked { session: created.into(), replayed: false })
}

/// The statements that copy the checkpoints, blobs and writes of the session `$2` of
/// tenant `$1` into the session `$3`.
const CHECKPOINT_COPIES: [&str; 3] = [
    r"insert into checkpoints (tenant_id, session_pk, namespace, id, parent_id, payload_type, payload,
                               metadata, channel_versions, run_id, created_at)
      select tenant_id, $3, namespace, id, parent_id, payload_type, payload, metadata,
             channel_versions, run_id, created_at
      from checkpoints where tenant_id = $1 and session_pk = $2 order by pk",
    r"insert into checkpoint_blobs (tenant_id, session_pk, namespace, channel, version, value_type, data)
      select tenant_id, $3, namespace, channel, version, value_type, data
      from checkpoint_blobs where tenant_id = $1 and session_pk = $2",
    r"insert into checkpoint_writes (tenant_id, session_pk, namespace, checkpoint_id, task_id, task_path,
                                     idx, channel, value_type, data)
      select tenant_id, $3, namespace, checkpoint_id, task_id, task_path, idx, channel, value_type, data
      from checkpoint_writes where tenant_id = $1 and session_pk = $2",
];
