//! The `RunStore` of the backend. What a client asks of runs hands over to
//! `run_creation` and `runs`; what a worker does under its lease is here, each write
//! conditional on the lease (`store/runs.rs` states the contract).

use std::num::NonZeroU32;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::QueryBuilder;
use uuid::Uuid;

use super::backend::claims::{claim_next, finish};
use super::backend::runs::{save_events, write_run};
use super::backend::{Db, Store, SKIP_LOCKED};
use super::binds::BindAll;
use super::idempotency_keys::kept_response;
use super::{run_creation, runs, steering};
use crate::model::{
    IdempotencyKey, IfBusy, NewRun, Page, PageRequest, Run, RunAnswer, RunEvent, RunRecord,
    RunStatus, SessionId, Steer, StopAction,
};
use crate::store::idempotency::replayed_run_id;
use crate::store::run_rows::{
    self, ClaimedRunRow, LockedRunRow, NextRun, LOCKED_COLUMNS, RUN_COLUMNS, UNFINISHED,
};
use crate::store::timestamp::Timestamp;
use crate::store::{Claim, CreatedRun, Finished, Result, RunFlush, RunStore, StartNow};

#[async_trait]
impl RunStore for Store {
    async fn create_run(
        &self, tenant: &str, session_id: &SessionId, run: NewRun, if_busy: IfBusy,
        start: Option<StartNow>, agentless: bool,
    ) -> Result<CreatedRun> {
        run_creation::create(self, tenant, session_id, run, if_busy, start, agentless).await
    }

    async fn get_run(&self, tenant: &str, session_id: &SessionId, run_id: Uuid) -> Result<Run> {
        runs::get(self, tenant, session_id, run_id).await
    }

    async fn locate_run(&self, tenant: &str, run_id: Uuid) -> Result<RunRecord> {
        runs::locate(self, tenant, run_id).await
    }

    async fn delete_run(&self, tenant: &str, session_id: &SessionId, run_id: Uuid) -> Result<()> {
        runs::delete(self, tenant, session_id, run_id).await
    }

    async fn replayed_run_id(&self, tenant: &str, key: &IdempotencyKey) -> Result<Option<Uuid>> {
        kept_response(self.reader(), &self.codec, tenant, key)
            .await?
            .map(|response| replayed_run_id(&response))
            .transpose()
    }

    async fn list_runs(
        &self, tenant: &str, session_id: &SessionId, page: &PageRequest,
    ) -> Result<Page<Run>> {
        runs::list(self, tenant, session_id, page).await
    }

    async fn run_events(
        &self, tenant: &str, session_id: &SessionId, run_id: Uuid, after: i64,
    ) -> Result<(Vec<RunEvent>, RunStatus)> {
        runs::events(self, tenant, session_id, run_id, after).await
    }

    async fn stop_run(
        &self, tenant: &str, session_id: &SessionId, run_id: Uuid, action: StopAction,
    ) -> Result<Run> {
        runs::stop(self, tenant, session_id, run_id, action).await
    }

    async fn forget_cancelled_run(
        &self, tenant: &str, session_id: &SessionId, run_id: Uuid,
    ) -> Result<Run> {
        runs::forget_cancelled(self, tenant, session_id, run_id).await
    }

    async fn answer_run(
        &self, tenant: &str, session_id: &SessionId, run_id: Uuid, answer: &RunAnswer,
        trace_parent: Option<String>,
    ) -> Result<(Run, i64)> {
        runs::answer(self, tenant, session_id, run_id, answer, trace_parent).await
    }

    async fn claim_run(
        &self, worker: Uuid, lease: Duration, tenant_limit: Option<NonZeroU32>,
    ) -> Result<Option<Claim>> {
        let now = Timestamp::now();
        let limit = tenant_limit.map(|n| i64::from(n.get()));
        match claim_next(self.writer(), worker, Timestamp(now.0 + lease), now, limit).await? {
            Some(row) => self.claimed(row, worker).await.map(Some),
            None => Ok(None),
        }
    }

    async fn renew_lease(&self, claim: &Claim, lease: Duration) -> Result<bool> {
        let renewed = sqlx::query(
            r"update runs set lease_expires_at = $3
              where pk = $1 and lease_owner = $2 and status = 'running'",
        )
        .bind_all((claim.run_pk, claim.worker, Timestamp(crate::store::now() + lease)))
        .execute(self.writer())
        .await?;
        Ok(renewed.rows_affected() == 1)
    }

    async fn save_run_events(&self, batches: &[RunFlush]) -> Result<Vec<bool>> {
        save_events(self.writer(), &self.codec, batches).await
    }

    async fn finish_run(
        &self, claim: &Claim, record: &RunRecord, events: &[RunEvent], next_lease: Option<Duration>,
    ) -> Result<Finished> {
        let now = Timestamp::now();
        // The next run starts as this one finished.
        let starts = record.run.finished_at.map_or(now, Timestamp);
        let next = next_lease.map(|lease| (Timestamp(now.0 + lease), starts));
        let (written, next) =
            finish(self.writer(), &self.codec, claim, record, events, now, next).await?;
        // The finish has committed: a claim that cannot be taken up goes back to the queue
        // rather than wait for its lease to lapse.
        let next = match next {
            NextRun::Unclaimed => None,
            NextRun::Claimed(row) => match self.claimed(row, claim.worker).await {
                Ok(next) => Some(next),
                Err(error) => {
                    tracing::warn!(%error, "cannot take up the run claimed with a finish");
                    self.unclaim(claim.worker, claim.run_pk).await?;
                    None
                }
            },
            NextRun::Unknown => {
                tracing::warn!("the answer of a finish that claims was lost");
                self.unclaim(claim.worker, claim.run_pk).await?;
                None
            }
        };
        Ok(Finished { written, next })
    }

    async fn take_steering(&self, claim: &Claim, after: i64) -> Result<Vec<(i64, Steer)>> {
        steering::take(self.writer(), &self.codec, claim, after).await
    }

    async fn steered_runs(&self, run_pks: &[i64]) -> Result<Vec<i64>> {
        if run_pks.is_empty() {
            return Ok(Vec::new());
        }
        let mut query =
            QueryBuilder::<Db>::new("select distinct run_pk from run_steering where run_pk in (");
        let mut pks = query.separated(", ");
        for pk in run_pks {
            pks.push_bind(*pk);
        }
        query.push(")");
        Ok(query.build_query_scalar().fetch_all(self.writer()).await?)
    }

    async fn release_steering(&self, run_pk: Option<i64>) -> Result<u64> {
        let mut tx = self.writer().begin().await?;
        let queued = steering::release(&mut tx, &self.codec, run_pk, crate::store::now()).await?;
        tx.commit().await?;
        Ok(queued)
    }

    async fn recover_expired_runs(&self, max_attempts: u32) -> Result<(u64, u64)> {
        let now = Timestamp::now();
        let mut tx = self.writer().begin().await?;
        // `status in …` is spelled as in runs_active_idx, which SQLite uses only then.
        let expired: Vec<LockedRunRow> = sqlx::query_as(&format!(
            r"select {LOCKED_COLUMNS}, {RUN_COLUMNS} from runs r
              where r.status in {UNFINISHED} and r.status = 'running'
                and r.lease_owner is not null and r.lease_expires_at < $1{SKIP_LOCKED}"
        ))
        .bind(now)
        .fetch_all(&mut *tx)
        .await?;
        let (mut requeued, mut failed) = (0, 0);
        for row in expired {
            if row.attempts < i64::from(max_attempts) {
                sqlx::query(
                    r"update runs set status = 'queued', lease_owner = null, lease_expires_at = null
                      where pk = $1",
                )
                .bind(row.pk)
                .execute(&mut *tx)
                .await?;
                requeued += 1;
            } else {
                let pk = row.pk;
                let seq = runs::stored_through(&mut tx, pk, row.last_event_seq).await?;
                let tenant = row.tenant_id.clone();
                let mut record = row.run.into_record(&self.codec, &tenant)?;
                let event = run_rows::lost(&mut record, seq, now.0);
                write_run(&mut tx, &self.codec, &tenant, pk, &record, &[event], None, now).await?;
                failed += 1;
            }
        }
        tx.commit().await?;
        Ok((requeued, failed))
    }
}

impl Store {
    /// Puts back in the queue the run that a finish of `finished` claimed for `worker`,
    /// if one was, as it was before: the worker holds no other lease.
    async fn unclaim(&self, worker: Uuid, finished: i64) -> Result<()> {
        sqlx::query(
            r"update runs set status = 'queued', lease_owner = null, lease_expires_at = null,
                  attempts = attempts - 1,
                  started_at = case when attempts = 1 then null else started_at end
              where lease_owner = $1 and status = 'running' and pk <> $2",
        )
        .bind_all((worker, finished))
        .execute(self.writer())
        .await?;
        Ok(())
    }

    /// The claim of a run claimed for `worker`.
    async fn claimed(&self, row: ClaimedRunRow, worker: Uuid) -> Result<Claim> {
        let mut claim = row.into_claim(&self.codec, worker)?;
        // A run executed again: its lost execution's stored events are past its row's
        // count, and the claim has committed, so no more of them can come.
        if claim.attempts > 1 {
            let mut conn = self.writer().acquire().await?;
            let (pk, recorded) = (claim.run_pk, claim.last_event_seq);
            claim.last_event_seq = runs::stored_through(&mut conn, pk, recorded).await?;
        }
        Ok(claim)
    }
}
