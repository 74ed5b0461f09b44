//! Input that joins a session's unfinished run (`if_busy: "steer"`): kept as rows of the
//! run, numbered from 1, until the run ends. Its worker takes the rows into its model
//! calls, and its record keeps the number it took through (`steered_through`); the rows
//! a run ended without are queued as runs of their own.

use chrono::{DateTime, Utc};
use serde_json::value::RawValue;

use super::backend::runs::insert_run;
use super::backend::{Db, FOR_UPDATE};
use super::binds::BindAll;
use super::Conn;
use crate::model::{IfBusy, NewRun, Run, SessionId, Steer};
use crate::store::payload::{Column, PayloadCodec};
use crate::store::rows::to_json;
use crate::store::run_rows::{self, NewRunRow, RunRow, FINISHED, RUN_COLUMNS, UNFINISHED};
use crate::store::timestamp::Timestamp;
use crate::store::{Claim, Result, StoreError};

/// Adds `run`'s input to the session's newest unfinished run and returns that run; None
/// when the session has none. Called under the session's row lock, which a run's final
/// write needs too: the run cannot end before the input is in, and then its worker takes
/// it or its end queues it. The run itself is not locked (its row's key is, by the
/// reference), so a worker that holds it and waits for the session is never waited for.
pub(super) async fn join(
    conn: &mut Conn, codec: &PayloadCodec, tenant: &str, session_pk: i64, run: &NewRun,
    now: Timestamp,
) -> Result<Option<Run>> {
    #[derive(sqlx::FromRow)]
    struct Active {
        pk: i64,
        #[sqlx(flatten)]
        run: RunRow,
    }
    let active: Option<Active> = sqlx::query_as(&format!(
        r"select r.pk, {RUN_COLUMNS} from runs r
          where r.session_pk = $1 and r.status in {UNFINISHED} order by r.pk desc limit 1"
    ))
    .bind(session_pk)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(active) = active else { return Ok(None) };
    let body = codec.seal(tenant, Column::SteeringBody, to_json(&Steer::from(run.clone()))?)?;
    sqlx::query(
        r"insert into run_steering (run_pk, n, body, created_at)
          select $1, coalesce(max(n), 0) + 1, $2, $3 from run_steering where run_pk = $1",
    )
    .bind_all((active.pk, body, now))
    .execute(&mut *conn)
    .await?;
    Ok(Some(active.run.into_record(codec, tenant)?.run))
}

/// The input steered into the claimed run after number `after`, each with its number.
pub(super) async fn take(
    pool: &sqlx::Pool<Db>, codec: &PayloadCodec, claim: &Claim, after: i64,
) -> Result<Vec<(i64, Steer)>> {
    let rows: Vec<(i64, String)> =
        sqlx::query_as("select n, body from run_steering where run_pk = $1 and n > $2 order by n")
            .bind_all((claim.run_pk, after))
            .fetch_all(pool)
            .await?;
    rows.into_iter().map(|(n, body)| Ok((n, open(codec, &claim.tenant, body)?))).collect()
}

/// The input items steered into a run after number `after`, oldest first, and the
/// number of the last.
pub(super) async fn steered_since(
    conn: &mut Conn, codec: &PayloadCodec, tenant: &str, run_pk: i64, after: i64,
) -> Result<(Vec<Box<RawValue>>, i64)> {
    let rows: Vec<(i64, String)> =
        sqlx::query_as("select n, body from run_steering where run_pk = $1 and n > $2 order by n")
            .bind_all((run_pk, after))
            .fetch_all(&mut *conn)
            .await?;
    let last = rows.last().map_or(after, |(n, _)| *n);
    let steers = rows.into_iter().map(|(_, body)| open(codec, tenant, body));
    let items = steers.map(|steer| steer.map(|s| s.input)).collect::<Result<Vec<_>>>()?;
    Ok((items.concat(), last))
}

/// Queues the input that runs ended without as runs of their own, in the order it came,
/// and forgets the input they took: the rows of `run_pk`, which has ended or is about to
/// go, or else of every ended run. Returns how many runs it queued.
pub(super) async fn release(
    conn: &mut Conn, codec: &PayloadCodec, run_pk: Option<i64>, now: DateTime<Utc>,
) -> Result<u64> {
    // Deleting the rows claims them: a release racing this one (another replica's
    // recovery) waits for this transaction and then finds them gone.
    let mut rows: Vec<(i64, i64, String)> = sqlx::query_as(&format!(
        r"delete from run_steering
          where run_pk = $1 or ($1 is null and run_pk in (select pk from runs where status in {FINISHED}))
          returning run_pk, n, body"
    ))
    .bind(run_pk)
    .fetch_all(&mut *conn)
    .await?;
    rows.sort_by_key(|(run, n, _)| (*run, *n));
    let mut queued = 0;
    let mut current: Option<(i64, Owner)> = None;
    for (run, n, body) in rows {
        if current.as_ref().map(|(pk, _)| *pk) != Some(run) {
            current = Some((run, owner(conn, codec, run).await?));
        }
        let (_, owner) = current.as_ref().expect("read above");
        if n <= owner.steered_through {
            continue;
        }
        let queue = NewRun::from(open(codec, &owner.tenant, body)?);
        let (record, created) = run_rows::new_run(&owner.session_id, queue, now);
        let row = NewRunRow {
            tenant: &owner.tenant,
            session_pk: owner.session_pk,
            record: &record,
            first_event: &created,
            start: None,
            if_busy: IfBusy::Enqueue,
            created_at: Timestamp(now),
            started_at: Timestamp(now),
        };
        insert_run(conn, codec, row).await?;
        queued += 1;
    }
    Ok(queued)
}

/// The run steered input was for, as far as its release needs it.
struct Owner {
    tenant: String,
    session_pk: i64,
    session_id: SessionId,
    steered_through: i64,
}

/// Reads the run `run_pk` and locks its session, which the runs queued there need (as
/// every run insert does: it orders the session's runs).
async fn owner(conn: &mut Conn, codec: &PayloadCodec, run_pk: i64) -> Result<Owner> {
    #[derive(sqlx::FromRow)]
    struct Row {
        tenant_id: String,
        session_pk: i64,
        #[sqlx(flatten)]
        run: RunRow,
    }
    let row: Row = sqlx::query_as(&format!(
        "select r.tenant_id, r.session_pk, {RUN_COLUMNS} from runs r where r.pk = $1"
    ))
    .bind(run_pk)
    .fetch_one(&mut *conn)
    .await?;
    sqlx::query(&format!("select pk from sessions where pk = $1{FOR_UPDATE}"))
        .bind(row.session_pk)
        .execute(&mut *conn)
        .await?;
    let record = row.run.into_record(codec, &row.tenant_id)?;
    let session_id = SessionId::parse("session_id", record.run.session_id.clone())?;
    Ok(Owner {
        tenant: row.tenant_id,
        session_pk: row.session_pk,
        session_id,
        steered_through: record.steered_through,
    })
}

fn open(codec: &PayloadCodec, tenant: &str, body: String) -> Result<Steer> {
    let body = codec.open(tenant, Column::SteeringBody, body)?;
    serde_json::from_str(&body).map_err(|e| StoreError::Corrupt(format!("steered input: {e}")))
}
