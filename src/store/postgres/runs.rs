//! Runs on Postgres. Workers of every replica claim from one queue with
//! `for update skip locked`; the session row lock orders the runs of a session.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::{claim_key, keep_response, PgStore};
use crate::model::{
    IdempotencyKey, IfBusy, NewRun, Page, PageRequest, Run, RunEvent, RunRecord, RunStatus,
    SessionId, ToolOutput,
};
use crate::store::rows::{direction, to_json, uuid_cursor};
use crate::store::run_rows::{
    self, events, EventRow, LockedRunRow, RunRow, RUN_COLUMNS, UNFINISHED,
};
use crate::store::{
    explain_empty_run_page, now, Claim, CreatedRun, Result, RunStore, StartNow, StoreError,
};

const LOCKED_COLUMNS: &str =
    "r.pk, r.tenant_id, r.session_pk, r.last_event_seq, r.attempts::bigint as attempts";

impl PgStore {
    /// Locks the run row for the rest of the transaction.
    async fn lock_run(
        conn: &mut PgConnection,
        tenant: &str,
        session_id: &SessionId,
        run_id: Uuid,
    ) -> Result<LockedRunRow> {
        let row = sqlx::query_as(&format!(
            r"select {LOCKED_COLUMNS}, {RUN_COLUMNS} from runs r
              where r.tenant_id = $1 and r.id = $3
                and r.session_pk = (select pk from sessions where tenant_id = $1 and id = $2)
              for update"
        ))
        .bind(tenant)
        .bind(session_id.as_str())
        .bind(run_id)
        .fetch_optional(&mut *conn)
        .await?;
        match row {
            Some(row) => Ok(row),
            None => Err(missing_run(conn, tenant, session_id).await),
        }
    }
}

/// Why a run lookup found nothing: the session or only the run is missing.
async fn missing_run(conn: &mut PgConnection, tenant: &str, session_id: &SessionId) -> StoreError {
    match super::session_pk(conn, tenant, session_id).await {
        Ok(_) => StoreError::RunNotFound,
        Err(error) => error,
    }
}

/// Stores the record and its status, releasing any lease, and adds `events`, in one
/// round trip; with `lease`, only while that worker holds the run. Returns the run's
/// session, or None when the lease was lost.
async fn write_run(
    conn: &mut PgConnection,
    run_pk: i64,
    record: &RunRecord,
    events: &[RunEvent],
    lease: Option<Uuid>,
) -> Result<Option<i64>> {
    Ok(sqlx::query_scalar(
        r"with r as (
              update runs set status = $2, finished_at = $3, body = $4,
                  last_event_seq = greatest(last_event_seq, $5),
                  lease_owner = null, lease_expires_at = null,
                  attempts = case when $2 = 'requires_action' then 0 else attempts end
              where pk = $1 and ($6::uuid is null or (lease_owner = $6 and status = 'running'))
              returning session_pk),
          e as (
              insert into run_events (run_pk, seq, event, data, created_at)
              select $1, t.seq, t.event, t.data, $10
              from r, unnest($7::bigint[], $8::text[], $9::text[]) as t (seq, event, data)
              on conflict do nothing)
          select session_pk from r",
    )
    .bind(run_pk)
    .bind(record.run.status.as_str())
    .bind(record.run.finished_at)
    .bind(to_json(record)?)
    .bind(events.last().map_or(0, |e| e.seq))
    .bind(lease)
    .bind(events.iter().map(|e| e.seq).collect::<Vec<_>>())
    .bind(events.iter().map(|e| e.event.as_str()).collect::<Vec<_>>())
    .bind(events.iter().map(|e| e.data.get()).collect::<Vec<_>>())
    .bind(now())
    .fetch_optional(conn)
    .await?)
}

/// Adds a finished run's usage to its session and appends its turn, if it completed.
/// A run that waits for the client leaves the session alone.
async fn settle_session(
    conn: &mut PgConnection,
    tenant: &str,
    session_pk: i64,
    record: &RunRecord,
    now: DateTime<Utc>,
) -> Result<()> {
    let usage = record.run.usage;
    let items = run_rows::turn_items(record);
    // One round trip: the update reserves the items' seqs, the insert numbers them.
    sqlx::query(
        r"with s as (
              update sessions set last_seq = last_seq + $2, item_count = item_count + $2,
                  input_tokens = input_tokens + $3, output_tokens = output_tokens + $4,
                  total_tokens = total_tokens + $5, llm_calls = llm_calls + $6, updated_at = $7
              where pk = $1 returning last_seq)
          insert into items (id, tenant_id, session_pk, seq, created_at, run_id, body)
          select t.id, $8, $1, s.last_seq - $2 + t.n, $7, $9, t.body
          from s, unnest($10::uuid[], $11::text[]) with ordinality as t (id, body, n)",
    )
    .bind(session_pk)
    .bind(items.len() as i64)
    .bind(usage.input_tokens)
    .bind(usage.output_tokens)
    .bind(usage.total_tokens)
    .bind(usage.llm_calls)
    .bind(now)
    .bind(tenant)
    .bind(record.run.id)
    .bind(items.iter().map(|_| Uuid::now_v7()).collect::<Vec<_>>())
    .bind(items.iter().map(|i| i.get()).collect::<Vec<_>>())
    .execute(conn)
    .await?;
    Ok(())
}

/// The run that an earlier request with `key` created, or None with the key claimed for
/// this request. A key whose run has been deleted since (with its session) is claimed
/// afresh, so that the retry creates the run again rather than failing for a day.
async fn replay_run(
    conn: &mut PgConnection,
    tenant: &str,
    session_id: &SessionId,
    key: &IdempotencyKey,
    now: DateTime<Utc>,
) -> Result<Option<Run>> {
    loop {
        let Some(first) = claim_key(conn, tenant, key, now).await? else {
            return Ok(None);
        };
        let run_id = run_rows::replayed_run_id(&first)?;
        match PgStore::lock_run(conn, tenant, session_id, run_id).await {
            Ok(found) => return Ok(Some(found.run.into_record()?.run)),
            Err(StoreError::RunNotFound | StoreError::SessionNotFound) => {
                // Only the claim that named the missing run: a concurrent retry that
                // claimed the key afresh already is replayed on the next turn.
                sqlx::query(
                    "delete from idempotency_keys where tenant_id = $1 and key = $2 and response = $3",
                )
                .bind(tenant)
                .bind(&key.key)
                .bind(&first)
                .execute(&mut *conn)
                .await?;
            }
            Err(error) => return Err(error),
        }
    }
}

#[async_trait]
impl RunStore for PgStore {
    async fn create_run(
        &self,
        tenant: &str,
        session_id: &SessionId,
        run: NewRun,
        if_busy: IfBusy,
        start: Option<StartNow>,
    ) -> Result<CreatedRun> {
        let now = now();
        let mut tx = self.pool.begin().await?;
        let key = run.idempotency.clone();
        if let Some(key) = &key {
            if let Some(run) = replay_run(&mut tx, tenant, session_id, key, now).await? {
                return Ok(CreatedRun {
                    run,
                    claim: None,
                    replayed: true,
                });
            }
        }
        // The upsert takes the session's row lock, which orders concurrent run creation.
        let session_pk: i64 = sqlx::query_scalar(
            r"insert into sessions (tenant_id, id, created_at, updated_at) values ($1, $2, $3, $3)
              on conflict (tenant_id, id) do update set updated_at = sessions.updated_at
              returning pk",
        )
        .bind(tenant)
        .bind(session_id.as_str())
        .bind(now)
        .fetch_one(&mut *tx)
        .await?;
        let active: Option<Uuid> = sqlx::query_scalar(&format!(
            "select id from runs where session_pk = $1 and status in {UNFINISHED} order by pk limit 1"
        ))
        .bind(session_pk)
        .fetch_optional(&mut *tx)
        .await?;
        run_rows::admit(active, if_busy)?;
        let start = start.filter(|_| active.is_none());
        // The lease runs from now: the session lock may have kept this request waiting.
        let started = crate::store::now();
        let (record, created) = run_rows::new_run(session_id, run, now);
        // The run and its first event in one round trip.
        let run_pk: i64 = sqlx::query_scalar(
            r"with r as (
                  insert into runs (tenant_id, id, session_pk, status, created_at, last_event_seq,
                      body, lease_owner, lease_expires_at, attempts, started_at)
                  values ($1, $2, $3, $6, $4, 1, $5, $7, $8, $9, $10) returning pk)
              insert into run_events (run_pk, seq, event, data, created_at)
              select r.pk, $11, $12, $13, $4 from r returning run_pk",
        )
        .bind(tenant)
        .bind(record.run.id)
        .bind(session_pk)
        .bind(now)
        .bind(to_json(&record)?)
        .bind(if start.is_some() { "running" } else { "queued" })
        .bind(start.map(|s| s.worker))
        .bind(start.map(|s| started + s.lease))
        .bind(i32::from(start.is_some()))
        .bind(start.map(|_| started))
        .bind(created.seq)
        .bind(&created.event)
        .bind(created.data.get())
        .fetch_one(&mut *tx)
        .await?;
        if let Some(key) = &key {
            keep_response(&mut tx, tenant, key, &run_rows::run_response(record.run.id)).await?;
        }
        tx.commit().await?;
        let claim =
            start.map(|s| run_rows::claim_new(tenant, run_pk, s.worker, record.clone(), started));
        Ok(CreatedRun {
            run: record.run,
            claim,
            replayed: false,
        })
    }

    async fn get_run(&self, tenant: &str, session_id: &SessionId, run_id: Uuid) -> Result<Run> {
        let mut conn = self.pool.acquire().await?;
        let row: Option<RunRow> = sqlx::query_as(&format!(
            r"select {RUN_COLUMNS} from runs r
              where r.tenant_id = $1 and r.id = $3
                and r.session_pk = (select pk from sessions where tenant_id = $1 and id = $2)"
        ))
        .bind(tenant)
        .bind(session_id.as_str())
        .bind(run_id)
        .fetch_optional(&mut *conn)
        .await?;
        match row {
            Some(row) => Ok(row.into_record()?.run),
            None => Err(missing_run(&mut conn, tenant, session_id).await),
        }
    }

    async fn list_runs(
        &self,
        tenant: &str,
        session_id: &SessionId,
        page: &PageRequest,
    ) -> Result<Page<Run>> {
        let cursor = uuid_cursor(page);
        let scan = page.scan_order();
        let beyond = crate::store::rows::beyond(scan);
        let rows: Vec<RunRow> = sqlx::query_as(&format!(
            r"select {RUN_COLUMNS} from runs r
              where r.tenant_id = $1
                and r.session_pk = (select pk from sessions where tenant_id = $1 and id = $2)
                and ($3::uuid is null or r.pk {beyond} (select c.pk from runs c where c.tenant_id = $1 and c.id = $3
                                                           and c.session_pk = r.session_pk))
              order by r.pk {} limit $4",
            direction(scan)
        ))
        .bind(tenant)
        .bind(session_id.as_str())
        .bind(cursor)
        .bind(page.fetch_limit())
        .fetch_all(&self.pool)
        .await?;
        if rows.is_empty() {
            explain_empty_run_page(self, tenant, session_id, cursor).await?;
        }
        let runs = rows
            .into_iter()
            .map(|row| row.into_record().map(|r| r.run))
            .collect::<Result<Vec<_>>>()?;
        Ok(page.finish(runs, false, |r| r.id.to_string()))
    }

    async fn run_events(
        &self,
        tenant: &str,
        session_id: &SessionId,
        run_id: Uuid,
        after: i64,
    ) -> Result<(Vec<RunEvent>, RunStatus)> {
        let mut conn = self.pool.acquire().await?;
        let run: Option<(i64, String)> = sqlx::query_as(
            r"select r.pk, r.status from runs r
              where r.tenant_id = $1 and r.id = $3
                and r.session_pk = (select pk from sessions where tenant_id = $1 and id = $2)",
        )
        .bind(tenant)
        .bind(session_id.as_str())
        .bind(run_id)
        .fetch_optional(&mut *conn)
        .await?;
        let Some((run_pk, status)) = run else {
            return Err(missing_run(&mut conn, tenant, session_id).await);
        };
        // The status is read first: events committed with a final status are then
        // certainly among those read next.
        let status = RunStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("run status `{status}`")))?;
        let rows: Vec<EventRow> = sqlx::query_as(
            "select seq, event, data from run_events where run_pk = $1 and seq > $2 order by seq",
        )
        .bind(run_pk)
        .bind(after)
        .fetch_all(&mut *conn)
        .await?;
        Ok((events(rows)?, status))
    }

    async fn cancel_run(&self, tenant: &str, session_id: &SessionId, run_id: Uuid) -> Result<Run> {
        let now = now();
        let mut tx = self.pool.begin().await?;
        let locked = Self::lock_run(&mut tx, tenant, session_id, run_id).await?;
        let mut record = locked.run.into_record()?;
        let event = run_rows::cancel(&mut record, locked.last_event_seq, now)?;
        write_run(&mut tx, locked.pk, &record, &[event], None).await?;
        settle_session(&mut tx, tenant, locked.session_pk, &record, now).await?;
        tx.commit().await?;
        Ok(record.run)
    }

    async fn submit_tool_outputs(
        &self,
        tenant: &str,
        session_id: &SessionId,
        run_id: Uuid,
        outputs: &[ToolOutput],
    ) -> Result<(Run, i64)> {
        let mut tx = self.pool.begin().await?;
        let locked = Self::lock_run(&mut tx, tenant, session_id, run_id).await?;
        let mut record = locked.run.into_record()?;
        run_rows::resume(&mut record, outputs)?;
        write_run(&mut tx, locked.pk, &record, &[], None).await?;
        tx.commit().await?;
        Ok((record.run, locked.last_event_seq))
    }

    async fn claim_run(&self, worker: Uuid, lease: Duration) -> Result<Option<Claim>> {
        let now = now();
        let claimed: std::result::Result<Option<LockedRunRow>, sqlx::Error> =
            sqlx::query_as(&format!(
                r"with next as (
                  select q.pk from runs q
                  where (q.status = 'queued' or (q.status = 'running' and q.lease_owner is null))
                    and not exists (select 1 from runs a where a.session_pk = q.session_pk
                                    and a.pk <> q.pk and a.status in ('running', 'requires_action'))
                    and not exists (select 1 from runs o where o.session_pk = q.session_pk
                                    and o.pk < q.pk and o.status = 'queued')
                  order by q.pk limit 1
                  for update skip locked
              )
              update runs r set status = 'running', lease_owner = $1, lease_expires_at = $2,
                  attempts = r.attempts + 1, started_at = coalesce(r.started_at, $3)
              from next where r.pk = next.pk
              returning {LOCKED_COLUMNS}, {RUN_COLUMNS}"
            ))
            .bind(worker)
            .bind(now + lease)
            .bind(now)
            .fetch_optional(&self.pool)
            .await;
        match claimed {
            Ok(row) => row.map(|row| row.into_claim(worker)).transpose(),
            // Two workers raced for runs of one session: the loser tries again later.
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    async fn renew_lease(&self, claim: &Claim, lease: Duration) -> Result<bool> {
        let renewed = sqlx::query(
            r"update runs set lease_expires_at = $3
              where pk = $1 and lease_owner = $2 and status = 'running'",
        )
        .bind(claim.run_pk)
        .bind(claim.worker)
        .bind(now() + lease)
        .execute(&self.pool)
        .await?;
        Ok(renewed.rows_affected() == 1)
    }

    async fn save_run_events(&self, claim: &Claim, events: &[RunEvent]) -> Result<bool> {
        // One statement: the update checks the lease, the insert follows only if it held.
        let held: Option<i64> = sqlx::query_scalar(
            r"with r as (
                  update runs set last_event_seq = greatest(last_event_seq, $3)
                  where pk = $1 and lease_owner = $2 and status = 'running'
                  returning pk),
              e as (
                  insert into run_events (run_pk, seq, event, data, created_at)
                  select r.pk, t.seq, t.event, t.data, $7
                  from r, unnest($4::bigint[], $5::text[], $6::text[]) as t (seq, event, data)
                  on conflict do nothing)
              select pk from r",
        )
        .bind(claim.run_pk)
        .bind(claim.worker)
        .bind(events.last().map_or(0, |e| e.seq))
        .bind(events.iter().map(|e| e.seq).collect::<Vec<_>>())
        .bind(events.iter().map(|e| e.event.as_str()).collect::<Vec<_>>())
        .bind(events.iter().map(|e| e.data.get()).collect::<Vec<_>>())
        .bind(now())
        .fetch_optional(&self.pool)
        .await?;
        Ok(held.is_some())
    }

    async fn finish_run(
        &self,
        claim: &Claim,
        record: &RunRecord,
        events: &[RunEvent],
    ) -> Result<bool> {
        let now = now();
        let mut tx = self.pool.begin().await?;
        // The update checks the lease and locks the run in the same round trip.
        let Some(session_pk) =
            write_run(&mut tx, claim.run_pk, record, events, Some(claim.worker)).await?
        else {
            return Ok(false);
        };
        if record.run.status.is_final() {
            settle_session(&mut tx, &claim.tenant, session_pk, record, now).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn recover_expired_runs(&self, max_attempts: u32) -> Result<(u64, u64)> {
        let now = now();
        let mut tx = self.pool.begin().await?;
        let expired: Vec<LockedRunRow> = sqlx::query_as(&format!(
            r"select {LOCKED_COLUMNS}, {RUN_COLUMNS} from runs r
              where r.status = 'running' and r.lease_owner is not null and r.lease_expires_at < $1
              for update skip locked"
        ))
        .bind(now)
        .fetch_all(&mut *tx)
        .await?;
        let (mut requeued, mut failed) = (0, 0);
        for row in expired {
            let (pk, tenant, session_pk, seq) = (
                row.pk,
                row.tenant_id.clone(),
                row.session_pk,
                row.last_event_seq,
            );
            if row.attempts < i64::from(max_attempts) {
                sqlx::query(
                    r"update runs set status = 'queued', lease_owner = null, lease_expires_at = null
                      where pk = $1",
                )
                .bind(pk)
                .execute(&mut *tx)
                .await?;
                requeued += 1;
            } else {
                let mut record = row.run.into_record()?;
                let event = run_rows::lost(&mut record, seq, now);
                write_run(&mut tx, pk, &record, &[event], None).await?;
                settle_session(&mut tx, &tenant, session_pk, &record, now).await?;
                failed += 1;
            }
        }
        tx.commit().await?;
        Ok((requeued, failed))
    }
}
