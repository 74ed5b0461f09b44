//! Runs on SQLite: what differs from Postgres. One process owns the database, and its
//! single writer connection serialises claims, so no row locks are needed.

use std::sync::LazyLock;

use sqlx::{QueryBuilder, Sqlite, SqliteConnection, SqlitePool};
use uuid::Uuid;

use super::shared::binds::BindAll;
use super::shared::run_creation::BindNewRun;
use super::shared::runs::BindRunWrite;
use super::touch;
use crate::model::{RunEvent, RunRecord};
use crate::store::event_rows::stored_events;
use crate::store::payload::{Column, PayloadCodec};
use crate::store::rows::to_json;
use crate::store::run_rows::{self, InsertedRun, NewRunRow, UNFINISHED};
use crate::store::timestamp::Timestamp;
use crate::store::{Result, RunFlush};

/// Adds events of a run; one stored before (a batch saved twice) is left as it is.
async fn insert_events(
    conn: &mut SqliteConnection, codec: &PayloadCodec, tenant: &str, run_pk: i64,
    events: &[RunEvent],
) -> Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    let stored = stored_events(codec, tenant, events)?;
    let now = Timestamp::now();
    let mut insert = QueryBuilder::<Sqlite>::new(
        "insert or ignore into run_events (run_pk, seq, event, data, created_at) ",
    );
    insert.push_values(&stored, |mut row, event| {
        row.push_bind(run_pk)
            .push_bind(event.seq)
            .push_bind(event.name)
            .push_bind(&*event.data)
            .push_bind(now);
    });
    insert.build().execute(conn).await?;
    Ok(())
}

/// Inserts a new run and its first event, unless the session is busy and the run would
/// not queue (see [`NewRunRow`]).
pub(super) async fn insert_run(
    conn: &mut SqliteConnection, codec: &PayloadCodec, run: NewRunRow<'_>,
) -> Result<Option<InsertedRun>> {
    static INSERT: LazyLock<String> = LazyLock::new(|| {
        format!(
            r"insert into runs (tenant_id, id, session_pk, status, created_at, last_event_seq, body,
                  lease_owner, lease_expires_at, attempts, started_at)
              select $1, $2, $3, case when go then 'running' else 'queued' end, $4, 1, $5,
                  case when go then $7 end, case when go then $8 end, go, case when go then $6 end
              from (select busy, $7 is not null and not busy as go
                    from (select exists (select 1 from runs where session_pk = $3
                                         and status in {UNFINISHED}) as busy))
              where $9 or not busy
              returning pk, status = 'running'"
        )
    });
    let body = codec.seal(run.tenant, Column::RunBody, to_json(run.record)?)?;
    let inserted: Option<(i64, bool)> = sqlx::query_as(&INSERT)
        .bind_new_run(&run, body)
        .bind(run.enqueue())
        .fetch_optional(&mut *conn)
        .await?;
    let Some((pk, started)) = inserted else {
        return Ok(None);
    };
    let first = std::slice::from_ref(run.first_event);
    insert_events(conn, codec, run.tenant, pk, first).await?;
    Ok(Some(InsertedRun { pk, started }))
}

/// Stores the record and its status, releasing any lease, and adds `events`; a run
/// that ended also settles its session (`settle_session`). With `lease`, nothing is
/// written unless that worker holds the run. False when the lease was lost.
#[allow(clippy::too_many_arguments)]
pub(super) async fn write_run(
    conn: &mut SqliteConnection, codec: &PayloadCodec, tenant: &str, run_pk: i64,
    record: &RunRecord, events: &[RunEvent], lease: Option<Uuid>, now: Timestamp,
) -> Result<bool> {
    let body = codec.seal(tenant, Column::RunBody, to_json(record)?)?;
    let session_pk: Option<i64> = sqlx::query_scalar(
        r"update runs set status = $2, finished_at = $3, body = $4,
              last_event_seq = max(last_event_seq, $5), unsettled_llm_calls = 0,
              lease_owner = null, lease_expires_at = null,
              attempts = case when $2 = 'requires_action' then 0 else attempts end
          where pk = $1 and ($6 is null or (lease_owner = $6 and status = 'running'))
          returning session_pk",
    )
    .bind_run_write(run_pk, record, body, events, lease)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(session_pk) = session_pk else {
        return Ok(false);
    };
    insert_events(conn, codec, tenant, run_pk, events).await?;
    if let Some((id, payload)) = run_rows::webhook_delivery(codec, tenant, record, now.0)? {
        sqlx::query(
            r"insert into webhook_deliveries
                  (id, tenant_id, run_pk, payload, status, attempts, next_attempt_at, created_at)
              values ($1, $2, $3, $4, 'pending', 0, $5, $5)",
        )
        .bind_all((id, tenant, run_pk, payload, now))
        .execute(&mut *conn)
        .await?;
    }
    if record.run.status.is_final() {
        settle_session(conn, codec, tenant, session_pk, record, now).await?;
    }
    Ok(true)
}

/// Adds an ended run's usage to its session and appends its turn, if it completed.
async fn settle_session(
    conn: &mut SqliteConnection, codec: &PayloadCodec, tenant: &str, session_pk: i64,
    record: &RunRecord, now: Timestamp,
) -> Result<()> {
    let usage = record.run.usage;
    let items = run_rows::turn_items(record);
    let last_seq: i64 = sqlx::query_scalar(&format!(
        r"update sessions set last_seq = last_seq + $2, item_count = item_count + $2,
              input_tokens = input_tokens + $3, output_tokens = output_tokens + $4,
              total_tokens = total_tokens + $5, llm_calls = llm_calls + $6, updated_at = $7,
              revision = revision + 1, {touch}
          where pk = $1 returning last_seq",
        touch = touch("$7")
    ))
    .bind_all((
        session_pk,
        items.len() as i64,
        usage.input_tokens,
        usage.output_tokens,
        usage.total_tokens,
        usage.llm_calls,
        now,
    ))
    .fetch_one(&mut *conn)
    .await?;
    if items.is_empty() {
        return Ok(());
    }
    let bodies = items
        .iter()
        .map(|(id, item)| Ok((*id, codec.seal(tenant, Column::ItemBody, item.get())?)))
        .collect::<Result<Vec<_>>>()?;
    let first_seq = last_seq - items.len() as i64 + 1;
    let mut insert = QueryBuilder::<Sqlite>::new(
        "insert into items (id, tenant_id, session_pk, seq, created_at, run_id, body) ",
    );
    insert.push_values(bodies.iter().zip(first_seq..), |mut row, ((id, body), seq)| {
        row.push_bind(*id)
            .push_bind(tenant)
            .push_bind(session_pk)
            .push_bind(seq)
            .push_bind(now)
            .push_bind(record.run.id)
            .push_bind(&**body);
    });
    insert.build().execute(conn).await?;
    Ok(())
}

/// Records events of runs in progress, and their LLM requests, in one transaction; for
/// each batch, false when its run's lease was lost.
pub(super) async fn save_events(
    pool: &SqlitePool, codec: &PayloadCodec, batches: &[RunFlush],
) -> Result<Vec<bool>> {
    let mut tx = pool.begin().await?;
    let mut held = Vec::with_capacity(batches.len());
    for batch in batches {
        let RunFlush { lease, events, llm_calls } = batch;
        if batch.is_empty() {
            held.push(true);
            continue;
        }
        // The update checks the lease.
        let holds = sqlx::query(
            r"update runs set last_event_seq = max(last_event_seq, $3),
                  unsettled_llm_calls = unsettled_llm_calls + $4
              where pk = $1 and lease_owner = $2 and status = 'running'",
        )
        .bind_all((lease.run_pk, lease.worker, events.last().map_or(0, |e| e.seq), llm_calls))
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if holds {
            insert_events(&mut tx, codec, &lease.tenant, lease.run_pk, events).await?;
        }
        held.push(holds);
    }
    tx.commit().await?;
    Ok(held)
}
