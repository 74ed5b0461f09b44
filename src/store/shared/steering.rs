//! Input that joins a session's unfinished run (`if_busy: "steer"`): kept as rows of the
//! run until its worker takes it into a model call, or, should the run finish first,
//! queued as a run of its own.

use chrono::{DateTime, Utc};
use serde_json::value::RawValue;

use super::backend::runs::insert_run;
use super::backend::Db;
use super::runs::find_run;
use super::Conn;
use crate::model::{IfBusy, NewRun, Run, SessionId, Steer};
use crate::store::payload::{Column, PayloadCodec};
use crate::store::rows::to_json;
use crate::store::run_rows::{self, NewRunRow, FINISHED, UNFINISHED};
use crate::store::timestamp::Timestamp;
use crate::store::{Claim, Result, StoreError};

/// Adds `run`'s input to the session's newest unfinished run and returns that run; None
/// when the session has none. Called under the session's row lock, so the run cannot
/// finish before the input is in: its worker then takes it, or its end releases it.
pub(super) async fn join(
    conn: &mut Conn,
    codec: &PayloadCodec,
    tenant: &str,
    session: (i64, &SessionId),
    run: &NewRun,
    now: Timestamp,
) -> Result<Option<Run>> {
    let active: Option<uuid::Uuid> = sqlx::query_scalar(&format!(
        "select id from runs where session_pk = $1 and status in {UNFINISHED} order by pk desc limit 1"
    ))
    .bind(session.0)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(active) = active else { return Ok(None) };
    let locked = find_run(conn, tenant, session.1, active).await?;
    let body = codec.seal(tenant, Column::SteeringBody, to_json(&Steer::from(run.clone()))?)?;
    sqlx::query(
        r"insert into run_steering (run_pk, n, body, taken, created_at)
          select $1, coalesce(max(n), 0) + 1, $2, $3, $4 from run_steering where run_pk = $1",
    )
    .bind(locked.pk)
    .bind(body)
    .bind(false)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    Ok(Some(locked.run.into_record(codec, tenant)?.run))
}

/// The input steered into the claimed run after `after`, marked taken, each with its
/// number; none once the worker lost its lease.
pub(super) async fn take(
    pool: &sqlx::Pool<Db>,
    codec: &PayloadCodec,
    claim: &Claim,
    after: i64,
) -> Result<Vec<(i64, Steer)>> {
    let rows: Vec<(i64, String)> = sqlx::query_as(
        r"update run_steering set taken = $4
          where run_pk = $1 and n > $2
            and exists (select 1 from runs where pk = $1 and lease_owner = $3 and status = 'running')
          returning n, body",
    )
    .bind(claim.run_pk)
    .bind(after)
    .bind(claim.worker)
    .bind(true)
    .fetch_all(pool)
    .await?;
    let mut taken = rows
        .into_iter()
        .map(|(n, body)| Ok((n, open(codec, &claim.tenant, body)?)))
        .collect::<Result<Vec<_>>>()?;
    taken.sort_by_key(|(n, _)| *n);
    Ok(taken)
}

/// The input items a run's worker took after `after`, oldest first.
pub(super) async fn taken_items(
    conn: &mut Conn,
    codec: &PayloadCodec,
    tenant: &str,
    run_pk: i64,
    after: i64,
) -> Result<Vec<Box<RawValue>>> {
    let rows: Vec<String> = sqlx::query_scalar(
        "select body from run_steering where run_pk = $1 and n > $2 and taken = $3 order by n",
    )
    .bind(run_pk)
    .bind(after)
    .bind(true)
    .fetch_all(&mut *conn)
    .await?;
    let steers = rows.into_iter().map(|body| open(codec, tenant, body));
    Ok(steers.map(|steer| steer.map(|s| s.input)).collect::<Result<Vec<_>>>()?.concat())
}

/// Queues the input that runs never took as runs of their own, in the order it came,
/// and forgets the rest: the input of `run_pk`, which has finished or is about to go, or
/// else of every finished run. Returns how many runs it queued.
pub(super) async fn release(
    conn: &mut Conn,
    codec: &PayloadCodec,
    run_pk: Option<i64>,
    now: DateTime<Utc>,
) -> Result<u64> {
    // Deleting the rows first claims them: a release racing this one (another replica's
    // recovery) waits for this transaction and then finds them gone.
    let mut rows: Vec<(i64, i64, String, bool)> = sqlx::query_as(&format!(
        r"delete from run_steering
          where run_pk = $1 or ($1 is null and run_pk in (select pk from runs where status in {FINISHED}))
          returning run_pk, n, body, taken"
    ))
    .bind(run_pk)
    .fetch_all(&mut *conn)
    .await?;
    rows.retain(|(_, _, _, taken)| !taken);
    rows.sort_by_key(|(run, n, _, _)| (*run, *n));
    for (run, _, body, _) in &rows {
        let (tenant, session_pk, session_id): (String, i64, String) = sqlx::query_as(
            r"select r.tenant_id, r.session_pk, s.id from runs r join sessions s on s.pk = r.session_pk
              where r.pk = $1",
        )
        .bind(run)
        .fetch_one(&mut *conn)
        .await?;
        let run = NewRun::from(open(codec, &tenant, body.clone())?);
        let session_id = SessionId::parse("session_id", session_id)?;
        let (record, created) = run_rows::new_run(&session_id, run, now);
        let row = NewRunRow {
            tenant: &tenant,
            session_pk,
            record: &record,
            first_event: &created,
            start: None,
            if_busy: IfBusy::Enqueue,
            created_at: Timestamp(now),
            started_at: Timestamp(now),
        };
        insert_run(conn, codec, row).await?;
    }
    Ok(rows.len() as u64)
}

fn open(codec: &PayloadCodec, tenant: &str, body: String) -> Result<Steer> {
    let body = codec.open(tenant, Column::SteeringBody, body)?;
    serde_json::from_str(&body).map_err(|e| StoreError::Corrupt(format!("steered input: {e}")))
}
