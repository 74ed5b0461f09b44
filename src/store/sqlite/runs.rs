//! Runs on SQLite. One process owns the database, and its single writer connection
//! serialises claims, so no row locks are needed.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{QueryBuilder, Sqlite, SqliteConnection};
use uuid::Uuid;

use super::{claim_key, keep_response, SqliteStore};
use crate::model::{
    IdempotencyKey, IfBusy, NewRun, Page, PageRequest, Run, RunEvent, RunRecord, RunStatus,
    SessionId, ToolOutput,
};
use crate::store::rows::{beyond, direction, to_json, uuid_cursor};
use crate::store::run_rows::{
    self, events, EventRow, LockedRunRow, RunRow, RUN_COLUMNS, UNFINISHED,
};
use crate::store::{
    explain_empty_run_page, now, Claim, CreatedRun, Result, RunStore, StartNow, StoreError,
};

const LOCKED_COLUMNS: &str = "r.pk, r.tenant_id, r.session_pk, r.last_event_seq, r.attempts";

fn micros(lease: Duration) -> i64 {
    i64::try_from(lease.as_micros()).unwrap_or(i64::MAX)
}

async fn find_run(
    conn: &mut SqliteConnection,
    tenant: &str,
    session_id: &SessionId,
    run_id: Uuid,
) -> Result<LockedRunRow> {
    let row = sqlx::query_as(&format!(
        r"select {LOCKED_COLUMNS}, {RUN_COLUMNS} from runs r
          where r.tenant_id = ?1 and r.id = ?3
            and r.session_pk = (select pk from sessions where tenant_id = ?1 and id = ?2)"
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

/// Why a run lookup found nothing: the session or only the run is missing.
async fn missing_run(
    conn: &mut SqliteConnection,
    tenant: &str,
    session_id: &SessionId,
) -> StoreError {
    match super::session_pk(conn, tenant, session_id).await {
        Ok(_) => StoreError::RunNotFound,
        Err(error) => error,
    }
}

/// Adds events of a run; one stored before (a batch saved twice) is left as it is.
async fn insert_events(
    conn: &mut SqliteConnection,
    run_pk: i64,
    events: &[RunEvent],
) -> Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    let now = now().timestamp_micros();
    let mut insert = QueryBuilder::<Sqlite>::new(
        "insert or ignore into run_events (run_pk, seq, event, data, created_at) ",
    );
    insert.push_values(events, |mut row, event| {
        row.push_bind(run_pk)
            .push_bind(event.seq)
            .push_bind(event.event.as_str())
            .push_bind(event.data.get())
            .push_bind(now);
    });
    insert.build().execute(conn).await?;
    Ok(())
}

/// Stores the record and its status, releasing any lease, and adds `events`; with
/// `lease`, only while that worker holds the run. Returns the run's session, or None when
/// the lease was lost.
async fn write_run(
    conn: &mut SqliteConnection,
    run_pk: i64,
    record: &RunRecord,
    events: &[RunEvent],
    lease: Option<Uuid>,
) -> Result<Option<i64>> {
    let session_pk: Option<i64> = sqlx::query_scalar(
        r"update runs set status = ?2, finished_at = ?3, body = ?4,
              last_event_seq = max(last_event_seq, ?5),
              lease_owner = null, lease_expires_at = null,
              attempts = case when ?2 = 'requires_action' then 0 else attempts end
          where pk = ?1 and (?6 is null or (lease_owner = ?6 and status = 'running'))
          returning session_pk",
    )
    .bind(run_pk)
    .bind(record.run.status.as_str())
    .bind(record.run.finished_at.map(|t| t.timestamp_micros()))
    .bind(to_json(record)?)
    .bind(events.last().map_or(0, |e| e.seq))
    .bind(lease)
    .fetch_optional(&mut *conn)
    .await?;
    if session_pk.is_some() {
        insert_events(conn, run_pk, events).await?;
    }
    Ok(session_pk)
}

/// Adds a finished run's usage to its session and appends its turn, if it completed.
/// A run that waits for the client leaves the session alone.
async fn settle_session(
    conn: &mut SqliteConnection,
    tenant: &str,
    session_pk: i64,
    record: &RunRecord,
) -> Result<()> {
    let now = now();
    let usage = record.run.usage;
    let items = run_rows::turn_items(record);
    let last_seq: i64 = sqlx::query_scalar(
        r"update sessions set last_seq = last_seq + ?2, item_count = item_count + ?2,
              input_tokens = input_tokens + ?3, output_tokens = output_tokens + ?4,
              total_tokens = total_tokens + ?5, llm_calls = llm_calls + ?6, updated_at = ?7
          where pk = ?1 returning last_seq",
    )
    .bind(session_pk)
    .bind(items.len() as i64)
    .bind(usage.input_tokens)
    .bind(usage.output_tokens)
    .bind(usage.total_tokens)
    .bind(usage.llm_calls)
    .bind(now.timestamp_micros())
    .fetch_one(&mut *conn)
    .await?;
    if items.is_empty() {
        return Ok(());
    }
    let first_seq = last_seq - items.len() as i64 + 1;
    let mut insert = QueryBuilder::<Sqlite>::new(
        "insert into items (id, tenant_id, session_pk, seq, created_at, run_id, body) ",
    );
    insert.push_values(items.iter().zip(first_seq..), |mut row, (item, seq)| {
        row.push_bind(Uuid::now_v7())
            .push_bind(tenant)
            .push_bind(session_pk)
            .push_bind(seq)
            .push_bind(now.timestamp_micros())
            .push_bind(record.run.id)
            .push_bind(item.get());
    });
    insert.build().execute(conn).await?;
    Ok(())
}

/// The run that an earlier request with `key` created, or None with the key claimed for
/// this request. A key whose run has been deleted since (with its session) is claimed
/// afresh, so that the retry creates the run again rather than failing for a day.
async fn replay_run(
    conn: &mut SqliteConnection,
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
        match find_run(conn, tenant, session_id, run_id).await {
            Ok(found) => return Ok(Some(found.run.into_record()?.run)),
            Err(StoreError::RunNotFound | StoreError::SessionNotFound) => {
                sqlx::query("delete from idempotency_keys where tenant_id = ? and key = ?")
                    .bind(tenant)
                    .bind(&key.key)
                    .execute(&mut *conn)
                    .await?;
            }
            Err(error) => return Err(error),
        }
    }
}

#[async_trait]
impl RunStore for SqliteStore {
    async fn create_run(
        &self,
        tenant: &str,
        session_id: &SessionId,
        run: NewRun,
        if_busy: IfBusy,
        start: Option<StartNow>,
    ) -> Result<CreatedRun> {
        let now = now();
        let mut tx = self.writer.begin().await?;
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
        let session_pk: i64 = sqlx::query_scalar(
            r"insert into sessions (tenant_id, id, created_at, updated_at) values (?1, ?2, ?3, ?3)
              on conflict (tenant_id, id) do update set updated_at = sessions.updated_at
              returning pk",
        )
        .bind(tenant)
        .bind(session_id.as_str())
        .bind(now.timestamp_micros())
        .fetch_one(&mut *tx)
        .await?;
        let active: Option<Uuid> = sqlx::query_scalar(&format!(
            "select id from runs where session_pk = ?1 and status in {UNFINISHED} order by pk limit 1"
        ))
        .bind(session_pk)
        .fetch_optional(&mut *tx)
        .await?;
        run_rows::admit(active, if_busy)?;
        let start = start.filter(|_| active.is_none());
        // The lease runs from now: the session lock may have kept this request waiting.
        let started = crate::store::now();
        let (record, created) = run_rows::new_run(session_id, run, now);
        let run_pk: i64 = sqlx::query_scalar(
            r"insert into runs (tenant_id, id, session_pk, status, created_at, last_event_seq, body,
                  lease_owner, lease_expires_at, attempts, started_at)
              values (?1, ?2, ?3, ?6, ?4, 1, ?5, ?7, ?8, ?9, ?10) returning pk",
        )
        .bind(tenant)
        .bind(record.run.id)
        .bind(session_pk)
        .bind(now.timestamp_micros())
        .bind(to_json(&record)?)
        .bind(if start.is_some() { "running" } else { "queued" })
        .bind(start.map(|s| s.worker))
        .bind(start.map(|s| started.timestamp_micros() + micros(s.lease)))
        .bind(i64::from(start.is_some()))
        .bind(start.map(|_| started.timestamp_micros()))
        .fetch_one(&mut *tx)
        .await?;
        insert_events(&mut tx, run_pk, &[created]).await?;
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
        let mut conn = self.reader.acquire().await?;
        Ok(find_run(&mut conn, tenant, session_id, run_id)
            .await?
            .run
            .into_record()?
            .run)
    }

    async fn list_runs(
        &self,
        tenant: &str,
        session_id: &SessionId,
        page: &PageRequest,
    ) -> Result<Page<Run>> {
        let cursor = uuid_cursor(page);
        let scan = page.scan_order();
        let rows: Vec<RunRow> = sqlx::query_as(&format!(
            r"select {RUN_COLUMNS} from runs r
              where r.tenant_id = ?1
                and r.session_pk = (select pk from sessions where tenant_id = ?1 and id = ?2)
                and (?3 is null or r.pk {} (select c.pk from runs c where c.tenant_id = ?1 and c.id = ?3
                                                     and c.session_pk = r.session_pk))
              order by r.pk {} limit ?4",
            beyond(scan),
            direction(scan)
        ))
        .bind(tenant)
        .bind(session_id.as_str())
        .bind(cursor)
        .bind(page.fetch_limit())
        .fetch_all(&self.reader)
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
        let mut conn = self.reader.acquire().await?;
        let run = find_run(&mut conn, tenant, session_id, run_id).await?;
        let status = run.run.into_record()?.run.status;
        // The status is read first: events committed with a final status are then
        // certainly among those read next.
        let rows: Vec<EventRow> = sqlx::query_as(
            "select seq, event, data from run_events where run_pk = ?1 and seq > ?2 order by seq",
        )
        .bind(run.pk)
        .bind(after)
        .fetch_all(&mut *conn)
        .await?;
        Ok((events(rows)?, status))
    }

    async fn cancel_run(&self, tenant: &str, session_id: &SessionId, run_id: Uuid) -> Result<Run> {
        let now = now();
        let mut tx = self.writer.begin().await?;
        let locked = find_run(&mut tx, tenant, session_id, run_id).await?;
        let mut record = locked.run.into_record()?;
        let event = run_rows::cancel(&mut record, locked.last_event_seq, now)?;
        write_run(&mut tx, locked.pk, &record, &[event], None).await?;
        settle_session(&mut tx, tenant, locked.session_pk, &record).await?;
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
        let mut tx = self.writer.begin().await?;
        let locked = find_run(&mut tx, tenant, session_id, run_id).await?;
        let mut record = locked.run.into_record()?;
        run_rows::resume(&mut record, outputs)?;
        write_run(&mut tx, locked.pk, &record, &[], None).await?;
        tx.commit().await?;
        Ok((record.run, locked.last_event_seq))
    }

    async fn claim_run(&self, worker: Uuid, lease: Duration) -> Result<Option<Claim>> {
        let now = now().timestamp_micros();
        let row: Option<LockedRunRow> = sqlx::query_as(
            r"update runs set status = 'running', lease_owner = ?1, lease_expires_at = ?2,
                  attempts = attempts + 1, started_at = coalesce(started_at, ?3)
              where pk = (
                  select q.pk from runs q
                  -- Spelled as in runs_active_idx, which SQLite uses only then.
                  where q.status in ('queued', 'running', 'requires_action')
                    and (q.status = 'queued' or (q.status = 'running' and q.lease_owner is null))
                    and not exists (select 1 from runs a where a.session_pk = q.session_pk
                                    and a.pk <> q.pk and a.status in ('running', 'requires_action'))
                    and not exists (select 1 from runs o where o.session_pk = q.session_pk
                                    and o.pk < q.pk and o.status = 'queued')
                  order by q.pk limit 1)
              returning pk, tenant_id, session_pk, last_event_seq, attempts,
                  status, started_at, finished_at, body",
        )
        .bind(worker)
        .bind(now + micros(lease))
        .bind(now)
        .fetch_optional(&self.writer)
        .await?;
        row.map(|row| row.into_claim(worker)).transpose()
    }

    async fn renew_lease(&self, claim: &Claim, lease: Duration) -> Result<bool> {
        let renewed = sqlx::query(
            r"update runs set lease_expires_at = ?3
              where pk = ?1 and lease_owner = ?2 and status = 'running'",
        )
        .bind(claim.run_pk)
        .bind(claim.worker)
        .bind(now().timestamp_micros() + micros(lease))
        .execute(&self.writer)
        .await?;
        Ok(renewed.rows_affected() == 1)
    }

    async fn save_run_events(&self, claim: &Claim, events: &[RunEvent]) -> Result<bool> {
        let mut tx = self.writer.begin().await?;
        // The update checks the lease.
        let held = sqlx::query(
            r"update runs set last_event_seq = max(last_event_seq, ?3)
              where pk = ?1 and lease_owner = ?2 and status = 'running'",
        )
        .bind(claim.run_pk)
        .bind(claim.worker)
        .bind(events.last().map_or(0, |e| e.seq))
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if !held {
            return Ok(false);
        }
        insert_events(&mut tx, claim.run_pk, events).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn finish_run(
        &self,
        claim: &Claim,
        record: &RunRecord,
        events: &[RunEvent],
    ) -> Result<bool> {
        let mut tx = self.writer.begin().await?;
        let Some(session_pk) =
            write_run(&mut tx, claim.run_pk, record, events, Some(claim.worker)).await?
        else {
            return Ok(false);
        };
        if record.run.status.is_final() {
            settle_session(&mut tx, &claim.tenant, session_pk, record).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn recover_expired_runs(&self, max_attempts: u32) -> Result<(u64, u64)> {
        let now = now();
        let mut tx = self.writer.begin().await?;
        let expired: Vec<LockedRunRow> = sqlx::query_as(&format!(
            r"select {LOCKED_COLUMNS}, {RUN_COLUMNS} from runs r
              where r.status in {UNFINISHED}
                and r.status = 'running' and r.lease_owner is not null and r.lease_expires_at < ?1"
        ))
        .bind(now.timestamp_micros())
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
                      where pk = ?1",
                )
                .bind(pk)
                .execute(&mut *tx)
                .await?;
                requeued += 1;
            } else {
                let mut record = row.run.into_record()?;
                let event = run_rows::lost(&mut record, seq, now);
                write_run(&mut tx, pk, &record, &[event], None).await?;
                settle_session(&mut tx, &tenant, session_pk, &record).await?;
                failed += 1;
            }
        }
        tx.commit().await?;
        Ok((requeued, failed))
    }
}
