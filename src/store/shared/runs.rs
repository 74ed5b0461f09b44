//! Runs as their clients see them: read one, a page of them or a run's events; cancel a
//! run or answer its tool calls. And the lookup of a run of a session that the other
//! flows of runs share.

use std::borrow::Cow;

use uuid::Uuid;

use super::backend::runs::write_run;
use super::backend::{Db, Store, FOR_NO_KEY_UPDATE, FOR_UPDATE, NOW};
use super::binds::BindAll;
use super::sessions::session_pk;
use super::steering;
use super::Conn;
use crate::model::{
    Page, PageRequest, Run, RunAnswer, RunEvent, RunRecord, RunStatus, SessionId, StopAction,
};
use crate::store::event_rows::{self, EventRow};
use crate::store::idempotency::replayed_run_id;
use crate::store::pages::{beyond, direction, explain_empty_page, uuid_cursor};
use crate::store::payload::Column;
use crate::store::payload::PayloadCodec;
use crate::store::rows::live;
use crate::store::run_rows::{
    self, LockedRunRow, RunRow, LOCKED_COLUMNS, RUN_COLUMNS, RUN_VIEW_COLUMNS,
};
use crate::store::timestamp::Timestamp;
use crate::store::{Result, StoreError};

/// Binds a run write's first parameters as both backends' statements number them, `$1`
/// to `$6`: the run, its status, when it finished, its stored body, its newest event's
/// seq, and the lease that the write must hold (none: it writes whoever holds the run).
pub(in crate::store) trait BindRunWrite<'q> {
    fn bind_run_write(
        self, run_pk: i64, record: &'q RunRecord, body: Cow<'q, str>, events: &[RunEvent],
        lease: Option<Uuid>,
    ) -> Self;
}

impl<'q, S: BindAll<'q>> BindRunWrite<'q> for S {
    fn bind_run_write(
        self, run_pk: i64, record: &'q RunRecord, body: Cow<'q, str>, events: &[RunEvent],
        lease: Option<Uuid>,
    ) -> Self {
        self.bind_all((
            run_pk,
            record.run.status.as_str(),
            record.run.finished_at.map(Timestamp),
            body,
            events.last().map_or(0, |e| e.seq),
            lease,
        ))
    }
}

/// The run `run_id` of the live session `session_id`, read as `columns` of `runs r`,
/// taking `lock` (a row lock's SQL, or none) on it. Fails as `missing_run` finds when
/// there is none.
async fn select_run<R>(
    conn: &mut Conn, tenant: &str, session_id: &SessionId, run_id: Uuid, columns: &str, lock: &str,
) -> Result<R>
where
    R: for<'r> sqlx::FromRow<'r, <Db as sqlx::Database>::Row> + Send + Unpin,
{
    let row = sqlx::query_as(&format!(
        r"select {columns} from runs r
          where r.tenant_id = $1 and r.id = $3
            and r.session_pk = (select pk from sessions where tenant_id = $1 and id = $2 and {live}){lock}",
        live = live("sessions", NOW)
    ))
    .bind_all((tenant, session_id.as_str(), run_id))
    .fetch_optional(&mut *conn)
    .await?;
    match row {
        Some(row) => Ok(row),
        None => Err(missing_run(conn, tenant, session_id).await),
    }
}

/// The run with its bookkeeping, locked for the rest of the transaction where the
/// backend locks rows (but for its key: input may be steered into it meanwhile).
pub(super) async fn find_run(
    conn: &mut Conn, tenant: &str, session_id: &SessionId, run_id: Uuid,
) -> Result<LockedRunRow> {
    let columns = format!("{LOCKED_COLUMNS}, {RUN_COLUMNS}");
    let mut locked: LockedRunRow =
        select_run(conn, tenant, session_id, run_id, &columns, FOR_NO_KEY_UPDATE).await?;
    if locked.run.status == RunStatus::Running.as_str() {
        locked.last_event_seq = stored_through(conn, locked.pk, locked.last_event_seq).await?;
    }
    Ok(locked)
}

/// The seq of the newest stored event of the run `run_pk`, whose row says `recorded`. The
/// row lags while the run executes: its events are stored without updating it. Read in
/// a statement of its own once the run's row is locked, so that it sees every write of
/// events that committed before the lock (later ones wait for it, and then find the
/// lease gone or the run ended).
pub(super) async fn stored_through(conn: &mut Conn, run_pk: i64, recorded: i64) -> Result<i64> {
    let newest: Option<i64> =
        sqlx::query_scalar("select max(seq) from run_events where run_pk = $1")
            .bind(run_pk)
            .fetch_one(conn)
            .await?;
    Ok(newest.map_or(recorded, |newest| newest.max(recorded)))
}

/// Why a run lookup found nothing: the session or only the run is missing.
async fn missing_run(conn: &mut Conn, tenant: &str, session_id: &SessionId) -> StoreError {
    match session_pk(conn, tenant, session_id).await {
        Ok(_) => StoreError::RunNotFound,
        Err(error) => error,
    }
}

pub(super) async fn get(
    store: &Store, tenant: &str, session_id: &SessionId, run_id: Uuid,
) -> Result<Run> {
    let mut conn = store.reader().acquire().await?;
    let row: RunRow =
        select_run(&mut conn, tenant, session_id, run_id, RUN_VIEW_COLUMNS, "").await?;
    Ok(row.into_record(&store.codec, tenant)?.run)
}

pub(super) async fn locate(store: &Store, tenant: &str, run_id: Uuid) -> Result<RunRecord> {
    let row: Option<RunRow> = sqlx::query_as(&format!(
        r"select {RUN_COLUMNS} from runs r
          where r.tenant_id = $1 and r.id = $2
            and r.session_pk in (select pk from sessions where tenant_id = $1 and {live})",
        live = live("sessions", NOW)
    ))
    .bind_all((tenant, run_id))
    .fetch_optional(store.reader())
    .await?;
    row.ok_or(StoreError::RunNotFound)?.into_record(&store.codec, tenant)
}

pub(super) async fn delete(
    store: &Store, tenant: &str, session_id: &SessionId, run_id: Uuid,
) -> Result<()> {
    let mut tx = store.writer().begin().await?;
    let (pk, status): (i64, String) =
        select_run(&mut tx, tenant, session_id, run_id, "r.pk, r.status", FOR_UPDATE).await?;
    if !RunStatus::parse(&status).is_some_and(RunStatus::is_final) {
        return Err(StoreError::SessionBusy(run_id));
    }
    // Its events go with it (on delete cascade), as its input and output do.
    sqlx::query("delete from runs where pk = $1").bind(pk).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(())
}

pub(super) async fn list(
    store: &Store, tenant: &str, session_id: &SessionId, page: &PageRequest,
) -> Result<Page<Run>> {
    let cursor = uuid_cursor(page);
    let scan = page.scan_order();
    let rows: Vec<RunRow> = sqlx::query_as(&format!(
        r"select {RUN_VIEW_COLUMNS} from runs r
          where r.tenant_id = $1
            and r.session_pk = (select pk from sessions where tenant_id = $1 and id = $2 and {live})
            and ($3 is null or r.pk {} (select c.pk from runs c where c.tenant_id = $1 and c.id = $3
                                        and c.session_pk = r.session_pk))
          order by r.pk {} limit $4",
        beyond(scan),
        direction(scan),
        live = live("sessions", NOW)
    ))
    .bind_all((tenant, session_id.as_str(), cursor, page.fetch_limit()))
    .fetch_all(store.reader())
    .await?;
    if rows.is_empty() {
        let cursor_run = cursor.map(|id| get(store, tenant, session_id, id));
        explain_empty_page(store, tenant, session_id, cursor_run).await?;
    }
    let runs = rows
        .into_iter()
        .map(|row| row.into_record(&store.codec, tenant).map(|r| r.run))
        .collect::<Result<Vec<_>>>()?;
    Ok(page.finish(runs, false, |r| r.id.to_string()))
}

pub(super) async fn events(
    store: &Store, tenant: &str, session_id: &SessionId, run_id: Uuid, after: i64,
) -> Result<(Vec<RunEvent>, RunStatus)> {
    let mut conn = store.reader().acquire().await?;
    let (run_pk, status): (i64, String) =
        select_run(&mut conn, tenant, session_id, run_id, "r.pk, r.status", "").await?;
    // The status is read first: events committed with a final status are then certainly
    // among those read next.
    let status = RunStatus::parse(&status)
        .ok_or_else(|| StoreError::Corrupt(format!("run status `{status}`")))?;
    let events = stored_after(&mut conn, &store.codec, tenant, run_pk, after).await?;
    Ok((events, status))
}

/// The stored events of the run `run_pk` after `after`.
async fn stored_after(
    conn: &mut Conn, codec: &PayloadCodec, tenant: &str, run_pk: i64, after: i64,
) -> Result<Vec<RunEvent>> {
    let rows: Vec<EventRow> = sqlx::query_as(
        "select seq, event, data from run_events where run_pk = $1 and seq > $2 order by seq",
    )
    .bind_all((run_pk, after))
    .fetch_all(conn)
    .await?;
    event_rows::events(rows, codec, tenant, after)
}

pub(super) async fn stop(
    store: &Store, tenant: &str, session_id: &SessionId, run_id: Uuid, action: StopAction,
) -> Result<Run> {
    let now = Timestamp::now();
    let codec = &store.codec;
    let mut tx = store.writer().begin().await?;
    let locked = find_run(&mut tx, tenant, session_id, run_id).await?;
    let mut record = locked.run.into_record(codec, tenant)?;
    if record.run.status.is_final() {
        return Err(StoreError::RunFinished(record.run.status));
    }
    let (pk, seq) = (locked.pk, locked.last_event_seq);
    match action {
        StopAction::Rollback => {
            record.end(RunStatus::Cancelled, None, seq, now.0);
            forget(&mut tx, store, tenant, pk, &record).await?;
        }
        StopAction::Cancel => {
            let event = record.end(RunStatus::Cancelled, None, seq, now.0);
            write_run(&mut tx, codec, tenant, pk, &record, &[event], None, now).await?;
            steering::release(&mut tx, codec, Some(pk), now.0).await?;
        }
        StopAction::Interrupt => {
            let events = stored_after(&mut tx, codec, tenant, pk, 0).await?;
            let through = record.steered_through;
            let steered = steering::steered_since(&mut tx, codec, tenant, pk, through).await?;
            let event = record.interrupt(&events, steered, seq, now.0);
            write_run(&mut tx, codec, tenant, pk, &record, &[event], None, now).await?;
            steering::release(&mut tx, codec, Some(pk), now.0).await?;
        }
    }
    tx.commit().await?;
    Ok(record.run)
}

pub(super) async fn forget_cancelled(
    store: &Store, tenant: &str, session_id: &SessionId, run_id: Uuid,
) -> Result<Run> {
    let mut tx = store.writer().begin().await?;
    let locked = find_run(&mut tx, tenant, session_id, run_id).await?;
    let record = locked.run.into_record(&store.codec, tenant)?;
    if record.run.status != RunStatus::Cancelled {
        return Err(StoreError::RunFinished(record.run.status));
    }
    forget(&mut tx, store, tenant, locked.pk, &record).await?;
    tx.commit().await?;
    Ok(record.run)
}

/// Deletes a run rolled back, with its events (on delete cascade) and its Idempotency-Key
/// while the key still names it; input steered into it that it never took is queued.
async fn forget(
    conn: &mut Conn, store: &Store, tenant: &str, run_pk: i64, record: &RunRecord,
) -> Result<()> {
    steering::release(conn, &store.codec, Some(run_pk), crate::store::now()).await?;
    sqlx::query("delete from runs where pk = $1").bind(run_pk).execute(&mut *conn).await?;
    let Some(key) = &record.idempotency_key else { return Ok(()) };
    let kept: Option<Option<String>> = sqlx::query_scalar(
        "select response from idempotency_keys where tenant_id = $1 and key = $2",
    )
    .bind_all((tenant, key))
    .fetch_optional(&mut *conn)
    .await?;
    let Some(Some(response)) = kept else { return Ok(()) };
    let response = store.codec.open(tenant, Column::IdempotencyResponse, response)?;
    if replayed_run_id(&response)? == record.run.id {
        sqlx::query("delete from idempotency_keys where tenant_id = $1 and key = $2")
            .bind_all((tenant, key))
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

pub(super) async fn answer(
    store: &Store, tenant: &str, session_id: &SessionId, run_id: Uuid, answer: &RunAnswer,
    trace_parent: Option<String>,
) -> Result<(Run, i64)> {
    let mut tx = store.writer().begin().await?;
    let locked = find_run(&mut tx, tenant, session_id, run_id).await?;
    let mut record = locked.run.into_record(&store.codec, tenant)?;
    run_rows::resume(&mut record, answer)?;
    // The continuation belongs to the trace of the request that answered.
    if trace_parent.is_some() {
        record.trace_parent = trace_parent;
    }
    write_run(&mut tx, &store.codec, tenant, locked.pk, &record, &[], None, Timestamp::now())
        .await?;
    tx.commit().await?;
    Ok((record.run, locked.last_event_seq))
}
