//! Runs on Postgres: what differs from SQLite. Workers of every replica claim from one
//! queue with `for update skip locked`; the session row lock orders a session's runs.
//! Writes that SQLite makes in several statements are one round trip here.

use std::collections::HashSet;
use std::sync::LazyLock;

use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::Query;
use sqlx::{PgConnection, PgPool, Postgres};
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

/// Inserts a new run and its first event in one round trip, unless the session is busy
/// and the run would not queue (see [`NewRunRow`]). Under the session's row lock, taken
/// by an earlier statement, this statement's snapshot holds every committed run.
pub(super) async fn insert_run(
    conn: &mut PgConnection, codec: &PayloadCodec, run: NewRunRow<'_>,
) -> Result<Option<InsertedRun>> {
    static INSERT: LazyLock<String> = LazyLock::new(|| {
        format!(
            r"with a as (
                  select 1 from runs where session_pk = $3 and status in {UNFINISHED} limit 1),
              d as (
                  select $7::uuid is not null and not exists (select from a) as go
                  where $11 or not exists (select from a)),
              r as (
                  insert into runs (tenant_id, id, session_pk, status, created_at, last_event_seq,
                      body, lease_owner, lease_expires_at, attempts, started_at)
                  select $1, $2, $3, case when d.go then 'running' else 'queued' end, $4, 1, $5,
                      case when d.go then $7::uuid end, case when d.go then $8::timestamptz end,
                      case when d.go then 1 else 0 end, case when d.go then $6::timestamptz end
                  from d returning pk, status),
              e as (
                  insert into run_events (run_pk, seq, event, data, created_at)
                  select r.pk, $9, $10, $12, $4 from r)
              select pk, status = 'running' from r"
        )
    });
    let body = codec.seal(run.tenant, Column::RunBody, to_json(run.record)?)?;
    let event_data = codec.seal(run.tenant, Column::RunEventData, run.first_event.data_json())?;
    let inserted: Option<(i64, bool)> = sqlx::query_as(&INSERT)
        .bind_new_run(&run, body)
        .bind_all((run.first_event.seq, run.first_event.name(), run.enqueue(), event_data))
        .fetch_optional(conn)
        .await?;
    Ok(inserted.map(|(pk, started)| InsertedRun { pk, started }))
}

/// Stores the record and its status, releasing any lease, and adds `events`; a run
/// that ended also settles its session: its usage is added and, if it completed, its
/// turn appended (the session's update reserves the items' seqs, the insert numbers
/// them). With `lease`, nothing is written unless that worker holds the run. One
/// statement, so one round trip, and atomic without a transaction of its own. False
/// when the lease was lost.
#[allow(clippy::too_many_arguments)]
pub(super) async fn write_run(
    conn: &mut PgConnection, codec: &PayloadCodec, tenant: &str, run_pk: i64, record: &RunRecord,
    events: &[RunEvent], lease: Option<Uuid>, now: Timestamp,
) -> Result<bool> {
    static WRITE: LazyLock<String> = LazyLock::new(|| format!("{} select 1 from r", *WRITE_RUN));
    let write = WriteRun { sql: &WRITE, codec, tenant, run_pk, record, events, lease, now };
    Ok(write.fetch(conn, |query| query).await?.is_some())
}

/// `write_run`'s statement up to its final select: its common table expressions, of which
/// `r` holds the run's session when the run was written. It binds `$1` to `$22`.
pub(super) static WRITE_RUN: LazyLock<String> = LazyLock::new(|| {
    format!(
        r"with r as (
              update runs set status = $2, finished_at = $3, body = $4,
                  last_event_seq = greatest(last_event_seq, $5), unsettled_llm_calls = 0,
                  lease_owner = null, lease_expires_at = null,
                  attempts = case when $2 = 'requires_action' then 0 else attempts end
              where pk = $1 and ($6::uuid is null or (lease_owner = $6 and status = 'running'))
              returning session_pk),
          e as (
              insert into run_events (run_pk, seq, event, data, created_at)
              select $1, t.seq, t.event, t.data, $10
              from r, unnest($7::bigint[], $8::text[], $9::text[]) as t (seq, event, data)
              on conflict do nothing),
          s as (
              update sessions set last_seq = last_seq + $12, item_count = item_count + $12,
                  input_tokens = input_tokens + $13, output_tokens = output_tokens + $14,
                  total_tokens = total_tokens + $15, llm_calls = llm_calls + $16,
                  revision = revision + 1, updated_at = $10, {touch}
              from r where $11 and sessions.pk = r.session_pk
              returning sessions.pk, sessions.last_seq),
          i as (
              insert into items (id, tenant_id, session_pk, seq, created_at, run_id, body)
              select t.id, $17, s.pk, s.last_seq - $12 + t.n, $10, $18, t.body
              from s, unnest($19::uuid[], $20::text[]) with ordinality as t (id, body, n)),
          w as (
              insert into webhook_deliveries
                  (id, tenant_id, run_pk, payload, status, attempts, next_attempt_at, created_at)
              select $21, $17, $1, $22, 'pending', 0, $10, $10 from r where $22::text is not null)",
        touch = touch("$10")
    )
});

/// A statement being bound.
pub(super) type PgQuery<'q> = Query<'q, Postgres, PgArguments>;

/// One run's write as a statement that begins with [`WRITE_RUN`].
pub(super) struct WriteRun<'a> {
    pub sql: &'a str,
    pub codec: &'a PayloadCodec,
    pub tenant: &'a str,
    pub run_pk: i64,
    pub record: &'a RunRecord,
    pub events: &'a [RunEvent],
    pub lease: Option<Uuid>,
    pub now: Timestamp,
}

impl WriteRun<'_> {
    /// Runs the statement with the write's parameters and those `more` binds after them;
    /// its row, if it returned one.
    pub(super) async fn fetch(
        self, conn: &mut PgConnection, more: impl for<'q> FnOnce(PgQuery<'q>) -> PgQuery<'q>,
    ) -> Result<Option<PgRow>> {
        let Self { sql, codec, tenant, run_pk, record, events, lease, now } = self;
        let body = codec.seal(tenant, Column::RunBody, to_json(record)?)?;
        let stored = stored_events(codec, tenant, events)?;
        let settles = record.run.status.is_final();
        let usage = record.run.usage;
        let items = run_rows::turn_items(record);
        let bodies = items
            .iter()
            .map(|(_, item)| codec.seal(tenant, Column::ItemBody, item.get()))
            .collect::<Result<Vec<_>>>()?;
        let delivery = run_rows::webhook_delivery(codec, tenant, record, now.0)?;
        let (delivery_id, delivery) = delivery.unzip();
        let query =
            sqlx::query(sql).bind_run_write(run_pk, record, body, events, lease).bind_all((
                stored.iter().map(|e| e.seq).collect::<Vec<_>>(),
                stored.iter().map(|e| e.name).collect::<Vec<_>>(),
                stored.iter().map(|e| &*e.data).collect::<Vec<_>>(),
                now,
                settles,
                items.len() as i64,
                usage.input_tokens,
                usage.output_tokens,
                usage.total_tokens,
                usage.llm_calls,
                tenant,
                record.run.id,
                items.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
                bodies.iter().map(|b| &**b).collect::<Vec<_>>(),
                delivery_id,
                delivery,
            ));
        Ok(more(query).fetch_optional(conn).await?)
    }
}

/// Records events of runs in progress in one statement: the select checks each run's
/// lease under a share lock, which a claim or a stop of the run waits for, and only the
/// events of runs whose lease held are inserted. The runs' rows are not updated for
/// their events (a new version of each executing run's row per flush cost more than its
/// events' insert): `last_event_seq` catches up when the run is written, and whoever
/// takes an executing run over reads the stored events' newest seq
/// (`shared::runs::stored_through`). Only a run that made LLM requests since the last
/// flush, about one flush in each model call, has its row updated, to count them.
pub(super) async fn save_events(
    pool: &PgPool, codec: &PayloadCodec, batches: &[RunFlush],
) -> Result<Vec<bool>> {
    let (mut pks, mut workers, mut calls) = (Vec::new(), Vec::new(), Vec::new());
    let (mut owners, mut seqs, mut names, mut sealed) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for RunFlush { lease, events, llm_calls } in batches.iter().filter(|b| !b.is_empty()) {
        pks.push(lease.run_pk);
        workers.push(lease.worker);
        calls.push(*llm_calls);
        let stored = stored_events(codec, &lease.tenant, events)?;
        owners.extend(std::iter::repeat_n(lease.run_pk, stored.len()));
        for event in stored {
            seqs.push(event.seq);
            names.push(event.name);
            sealed.push(event.data);
        }
    }
    let held: HashSet<i64> = sqlx::query_scalar(
        r"with r as (
              select r.pk, k.calls from runs r
              join unnest($1::bigint[], $2::uuid[], $8::bigint[]) as k (pk, worker, calls)
                  on r.pk = k.pk
              where r.lease_owner = k.worker and r.status = 'running'
              order by r.pk
              for share of r),
          c as (
              update runs set unsettled_llm_calls = unsettled_llm_calls + r.calls
              from r where runs.pk = r.pk and r.calls > 0),
          e as (
              insert into run_events (run_pk, seq, event, data, created_at)
              select t.pk, t.seq, t.event, t.data, $7
              from unnest($3::bigint[], $4::bigint[], $5::text[], $6::text[])
                  as t (pk, seq, event, data)
              where t.pk in (select pk from r)
              on conflict do nothing)
          select pk from r",
    )
    .bind_all((
        &pks,
        &workers,
        &owners,
        &seqs,
        &names,
        sealed.iter().map(|d| &**d).collect::<Vec<_>>(),
        Timestamp::now(),
        &calls,
    ))
    .fetch_all(pool)
    .await?
    .into_iter()
    .collect();
    Ok(batches.iter().map(|b| b.is_empty() || held.contains(&b.lease.run_pk)).collect())
}
