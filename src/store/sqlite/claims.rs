//! The queue's claims on SQLite, and the finish of a run that claims its worker's next
//! run in the same transaction.

use sqlx::{SqliteExecutor, SqlitePool};
use uuid::Uuid;

use super::runs::write_run;
use super::shared::binds::BindAll;
use crate::model::{RunEvent, RunRecord};
use crate::store::payload::PayloadCodec;
use crate::store::run_rows::{claim_facts, ClaimedRunRow, NextRun, EXECUTING_PER_TENANT};
use crate::store::timestamp::Timestamp;
use crate::store::{Claim, Result};

/// Writes a run its worker finished (see `write_run`) in one transaction. With `next`
/// (when the worker's next lease would lapse, and when its run starts), the same
/// transaction then claims the worker's next run as a claim without a tenant limit does.
pub(super) async fn finish(
    pool: &SqlitePool, codec: &PayloadCodec, claim: &Claim, record: &RunRecord,
    events: &[RunEvent], now: Timestamp, next: Option<(Timestamp, Timestamp)>,
) -> Result<(bool, NextRun)> {
    let mut tx = pool.begin().await?;
    let lease = Some(claim.worker);
    let written =
        write_run(&mut tx, codec, &claim.tenant, claim.run_pk, record, events, lease, now).await?;
    let next = match next {
        Some((expires, starts)) => {
            claim_next(&mut *tx, claim.worker, expires, starts, None).await?
        }
        None => None,
    };
    // A write that found its lease lost wrote nothing; a claim may still commit.
    tx.commit().await?;
    Ok((written, next.map_or(NextRun::Unclaimed, NextRun::Claimed)))
}

/// Leases the oldest claimable run whose session has no other run executing.
pub(super) async fn claim_next(
    executor: impl SqliteExecutor<'_>, worker: Uuid, lease_expires_at: Timestamp, now: Timestamp,
    tenant_limit: Option<i64>,
) -> Result<Option<ClaimedRunRow>> {
    // One statement under SQLite's single writer: no other claim counts in between.
    Ok(sqlx::query_as(&format!(
        r"update runs set status = 'running', lease_owner = $1, lease_expires_at = $2,
              attempts = attempts + 1, started_at = coalesce(started_at, $3)
          where pk = (
              select q.pk from runs q
              left join ({EXECUTING_PER_TENANT}) e on e.tenant_id = q.tenant_id
              -- Spelled as in runs_active_idx, which SQLite uses only then.
              where q.status in ('queued', 'running', 'requires_action')
                and (q.status = 'queued' or (q.status = 'running' and q.lease_owner is null))
                and not exists (select 1 from runs a where a.session_pk = q.session_pk
                                and a.pk <> q.pk and a.status in ('running', 'requires_action'))
                and not exists (select 1 from runs o where o.session_pk = q.session_pk
                                and o.pk < q.pk and o.status = 'queued')
                and ($4 is null or coalesce(e.n, 0) < $4)
              order by coalesce(e.n, 0), q.pk limit 1)
          returning pk, tenant_id, last_event_seq, attempts,
              status, started_at, finished_at, body, unsettled_llm_calls, {claim_facts}",
        claim_facts = claim_facts("runs"),
    ))
    .bind_all((worker, lease_expires_at, now, tenant_limit))
    .fetch_optional(executor)
    .await?)
}
