//! The queue's claims on Postgres, and the finish of a run that claims its worker's next
//! run in the same statement.

use std::sync::LazyLock;

use sqlx::pool::PoolConnection;
use sqlx::postgres::PgRow;
use sqlx::{Connection, FromRow, PgPool, Postgres, Row};
use uuid::Uuid;

use super::runs::{write_run, WriteRun, WRITE_RUN};
use super::shared::binds::BindAll;
use crate::model::{RunEvent, RunRecord};
use crate::store::payload::PayloadCodec;
use crate::store::run_rows::{
    claim_facts, ClaimedRunRow, NextRun, EXECUTING_PER_TENANT, LOCKED_COLUMNS, RUN_COLUMNS,
    UNFINISHED,
};
use crate::store::timestamp::Timestamp;
use crate::store::{Claim, Result, StoreError};

/// The common table expressions of a claim, ending in `claimed`, the run it leased, if
/// any. `worker`, `expires`, `now` and `limit` are the SQL of its parameters.
///
/// A run is claimable when it is the oldest unfinished run of its session (an executing
/// or waiting run is always its session's oldest, and `runs_one_executing_per_session`
/// refuses a second should that ever not hold). The heads of all sessions are found in
/// one pass and looked up by key: checked per queued run with `not exists`, or joined,
/// the planner, whose statistics expect few unfinished runs, scanned every unfinished
/// run for each queued one (4–8 ms a claim with 40 queued, most of Postgres's time at
/// 64 clients).
fn claim_ctes(worker: &str, expires: &str, now: &str, limit: &str) -> String {
    format!(
        r"executing as materialized ({EXECUTING_PER_TENANT}),
          heads as materialized (
              select distinct on (session_pk) pk, status, lease_owner from runs
              where status in {UNFINISHED} order by session_pk, pk),
          next as (
              select q.pk from runs q
              left join executing e on e.tenant_id = q.tenant_id
              where q.pk = any (array (
                      select pk from heads
                      where status = 'queued' or (status = 'running' and lease_owner is null)))
                and (q.status = 'queued' or (q.status = 'running' and q.lease_owner is null))
                and ({limit} is null or coalesce(e.n, 0) < {limit})
              order by coalesce(e.n, 0), q.pk limit 1
              for update of q skip locked),
          claimed as (
              update runs r set status = 'running', lease_owner = {worker},
                  lease_expires_at = {expires}, attempts = r.attempts + 1,
                  started_at = coalesce(r.started_at, {now})
              from next where r.pk = next.pk
              returning {LOCKED_COLUMNS}, {RUN_COLUMNS}, {claim_facts})",
        claim_facts = claim_facts("r"),
    )
}

/// Leases a claimable run (see `RunStore::claim_run`). With a tenant limit, claims take
/// turns on an advisory lock: two replicas counting a tenant's executing runs at once
/// could both see room for one more.
pub(super) async fn claim_next(
    pool: &PgPool, worker: Uuid, lease_expires_at: Timestamp, now: Timestamp,
    tenant_limit: Option<i64>,
) -> Result<Option<ClaimedRunRow>> {
    static CLAIM: LazyLock<String> = LazyLock::new(|| {
        format!("with {} select * from claimed", claim_ctes("$1", "$2", "$3", "$4::bigint"))
    });
    let claim = || sqlx::query_as(&CLAIM).bind_all((worker, lease_expires_at, now, tenant_limit));
    // Without a limit the claim is one statement: an idle worker's poll costs one round
    // trip, not a transaction's three.
    let claimed = match tenant_limit {
        None => claim().fetch_optional(pool).await,
        Some(_) => {
            let mut tx = pool.begin().await?;
            sqlx::query("select pg_advisory_xact_lock($1)")
                .bind(CLAIM_LOCK)
                .execute(&mut *tx)
                .await?;
            let claimed = claim().fetch_optional(&mut *tx).await;
            if claimed.is_ok() {
                tx.commit().await?;
            }
            claimed
        }
    };
    match claimed {
        Ok(row) => Ok(row),
        // Two workers raced for runs of one session: the loser tries again later.
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// The advisory lock that claims under a tenant limit take turns on.
const CLAIM_LOCK: i64 = 0x6167_656e_7473;

/// Writes a run its worker finished (see `write_run`) in one statement. With `next`
/// (when the worker's next lease would lapse, and when its run starts), the same
/// statement claims the worker's next run as a claim without a tenant limit does, so
/// that a worker draining the queue commits once per run. That claim reads the queue as
/// it was before the finish: a run queued behind the finished one on its session is left
/// to a claim of its own, and the finished run still counts as executing.
pub(super) async fn finish(
    pool: &PgPool, codec: &PayloadCodec, claim: &Claim, record: &RunRecord, events: &[RunEvent],
    now: Timestamp, next: Option<(Timestamp, Timestamp)>,
) -> Result<(bool, NextRun)> {
    let lease = Some(claim.worker);
    let write = |mut conn: PoolConnection<Postgres>| async move {
        let tenant = &claim.tenant;
        write_run(&mut conn, codec, tenant, claim.run_pk, record, events, lease, now).await
    };
    let mut next_run = NextRun::Unclaimed;
    if let Some((expires, starts)) = next {
        let mut conn = pool.acquire().await?;
        let finished = WriteRun {
            sql: &FINISH_AND_CLAIM,
            codec,
            tenant: &claim.tenant,
            run_pk: claim.run_pk,
            record,
            events,
            lease,
            now,
        };
        let worker = claim.worker;
        let claimed = finished.fetch(&mut conn, |q| q.bind_all((worker, expires, starts)));
        match claimed.await {
            Ok(Some(row)) => return finished_and_claimed(&row),
            Ok(None) => return Err(sqlx::Error::RowNotFound.into()),
            // The claim raced another for a run of one session: nothing was written.
            Err(error) if is_unique_violation(&error) => {}
            // The connection broke (checked below) and the run is written alone. Should
            // it have hidden a commit, that write finds its lease gone, and a run may be
            // leased to the worker unseen.
            Err(error) if error.is_transient() => next_run = NextRun::Unknown,
            Err(error) => return Err(error),
        }
    }
    // A connection in steady use is not checked before use (see `PgStore::connect`), so
    // one broken since its last use (a database restart) fails this statement, which
    // would lose the run's outcome to a re-execution. It is written again once, on a
    // connection checked first: the lease check lets only one of the two write, should
    // the first have committed.
    let written = match write(pool.acquire().await?).await {
        Err(error) if error.is_transient() => {
            let mut conn = pool.acquire().await?;
            conn.ping().await?;
            write(conn).await
        }
        written => written,
    };
    Ok((written?, next_run))
}

/// `write_run`'s statement and a claim (`$23` to `$25`) in one: whether the run was
/// written, and the run claimed, if any.
static FINISH_AND_CLAIM: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{}, {} select exists (select from r) as finished, claimed.*
         from (values (1)) as one (x) left join claimed on true",
        *WRITE_RUN,
        claim_ctes("$23", "$24", "$25", "null::bigint"),
    )
});

fn is_unique_violation(error: &StoreError) -> bool {
    matches!(error, StoreError::Database(sqlx::Error::Database(e)) if e.is_unique_violation())
}

fn finished_and_claimed(row: &PgRow) -> Result<(bool, NextRun)> {
    let finished = row.try_get("finished")?;
    let next = match row.try_get::<Option<i64>, _>("pk") {
        Ok(Some(_)) => ClaimedRunRow::from_row(row).map_or(NextRun::Unknown, NextRun::Claimed),
        Ok(None) => NextRun::Unclaimed,
        Err(_) => NextRun::Unknown,
    };
    Ok((finished, next))
}
