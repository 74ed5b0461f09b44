//! The worker loop: claim a run, execute it while holding its lease, commit the outcome.

use std::sync::{Arc, PoisonError};
use std::time::SystemTime;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::execution::Execution;
use super::execution::Outcome;
use super::hub::{LiveRun, UNSTORED_SHOWN};
use super::spans;
use super::turn::{drive, take_steering};
use super::Engine;
use crate::model::{run_items, RunEvent, RunEventKind, RunStatus, StopAction};
use crate::store::{Claim, StoreError};
use crate::telemetry;

/// The `error.type` of an execution whose outcome another worker's claim voided.
const LEASE_LOST: &str = "lease_lost";

/// One worker: claims and executes runs until shutdown, finishing the run in hand. It
/// holds one of the engine's slots while it does, so that it and the runs started at
/// creation never execute more than `workers` runs at once.
pub(super) async fn work(engine: Arc<Engine>, shutdown: CancellationToken) {
    let worker = Uuid::now_v7();
    while !shutdown.is_cancelled() {
        let claimed = {
            let _slot = tokio::select! {
                slot = engine.slots.acquire() => slot.expect("the slots are never closed"),
                _ = shutdown.cancelled() => break,
            };
            // Boxed, an idle worker's task holds a pointer rather than room for a run's
            // whole execution (5 KB a worker).
            Box::pin(claim_and_execute(&engine, worker, &shutdown)).await
        };
        match claimed {
            Ok(0) => {}
            Ok(_) => continue,
            Err(error) => tracing::warn!(%error, "cannot claim or finish a run"),
        }
        tokio::select! {
            _ = engine.work.notified() => {}
            _ = shutdown.cancelled() => {}
        }
    }
}

/// Sends one idle worker to look for runs every `poll_interval`: runs another replica
/// queued are found without each worker polling, so an idle replica's cost does not grow
/// with `RUN_WORKERS`.
pub(super) async fn poll(engine: Arc<Engine>, shutdown: CancellationToken) {
    let mut interval = tokio::time::interval(engine.settings.poll_interval);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => engine.work.notify_one(),
            _ = shutdown.cancelled() => return,
        }
    }
}

/// Re-queues the runs of dead workers, at start and then twice per lease.
pub(super) async fn recover(engine: Arc<Engine>, shutdown: CancellationToken) {
    let mut interval = tokio::time::interval(engine.settings.lease / 2);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = shutdown.cancelled() => return,
        }
        match engine.store.recover_expired_runs(engine.settings.max_attempts).await {
            Ok((0, 0)) => {}
            Ok((requeued, failed)) => {
                tracing::warn!(requeued, failed, "recovered runs whose worker stopped");
                engine.metrics.runs_lost(failed);
                engine.work.notify_one();
            }
            Err(error) => tracing::warn!(%error, "cannot recover runs with lapsed leases"),
        }
        match engine.store.release_steering(None).await {
            Ok(0) => {}
            Ok(queued) => {
                tracing::warn!(queued, "queued input steered into runs that finished without it");
                engine.work.notify_one();
            }
            Err(error) => tracing::warn!(%error, "cannot queue the input steered into runs"),
        }
    }
}

/// Claims a run and executes it, then each run its finish claimed (until `shutdown`);
/// how many it executed.
pub(super) async fn claim_and_execute(
    engine: &Arc<Engine>, worker: Uuid, shutdown: &CancellationToken,
) -> Result<usize, StoreError> {
    let began = SystemTime::now();
    let Some(claim) = engine
        .store
        .claim_run(worker, engine.settings.lease, engine.settings.tenant_max_active_runs)
        .await?
    else {
        return Ok(0);
    };
    spans::record_claim(&claim, began);
    let (mut claim, mut executed) = (claim, 1);
    loop {
        // More runs may wait: another idle worker looks too, so that a backlog drains
        // with every worker at once while an empty queue costs one look.
        engine.work.notify_one();
        // A run from the queue: the queue may hold more, so its finish claims the next.
        match execute_claimed(engine.clone(), claim, Vec::new(), Some(shutdown.clone())).await? {
            Some(next) => (claim, executed) = (next, executed + 1),
            None => return Ok(executed),
        }
    }
}

/// Executes a run claimed for this process and commits its outcome. The run is live here
/// from the call on, before the future first runs, so a follower that starts right after
/// finds it in the hub rather than in the database; `stored` are events of the run already
/// in the database that followers may take from the hub too. With `claim_next`, the
/// commit also claims the worker's next run (see `RunStore::finish_run`) unless that
/// shutdown has begun, and returns it.
pub(super) fn execute_claimed(
    engine: Arc<Engine>, claim: Claim, stored: Vec<RunEvent>, claim_next: Option<CancellationToken>,
) -> impl std::future::Future<Output = Result<Option<Claim>, StoreError>> {
    let run_id = claim.record.run.id;
    // Attempts count the claims since the run last waited for its client: a later one
    // follows a worker lost with events it may have shown and never stored.
    let numbered_from = match claim.attempts {
        ..=1 => claim.last_event_seq,
        _ => claim.last_event_seq + UNSTORED_SHOWN,
    };
    let first_seq = stored.first().map_or(numbered_from + 1, |e| e.seq);
    let live = engine.hub.register(run_id, first_seq, claim.lease(), numbered_from);
    for event in stored {
        live.publish(event);
    }
    let registered = Registered { engine: engine.clone(), run_id, live: live.clone() };
    async move {
        let _registered = registered;
        let engine = &*engine;
        let mut exec = Execution {
            record: claim.record.clone(),
            seq: numbered_from,
            live: live.clone(),
            partial: String::new(),
        };
        let run = Box::new(exec.record.run.clone());
        exec.emit(RunEventKind::Status(run));
        let span = spans::invoke_agent(&claim);
        // Boxed for the reason the execution is (see `Runs::create`).
        let executed = Box::pin(execute(engine, &claim, &mut exec, &span, claim_next.as_ref()));
        let result = tracing::Instrument::instrument(executed, span.clone()).await;
        if result.is_err() {
            telemetry::failed(&span, "store_error");
        }
        result
    }
}

/// A run live in the hub; dropping it ends the execution there, also when the execution
/// panics or is dropped, so that no follower waits for it forever.
struct Registered {
    engine: Arc<Engine>,
    run_id: Uuid,
    live: Arc<LiveRun>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.live.close();
        self.engine.hub.remove(self.run_id);
    }
}

async fn execute(
    engine: &Engine, claim: &Claim, exec: &mut Execution, span: &tracing::Span,
    claim_next: Option<&CancellationToken>,
) -> Result<Option<Claim>, StoreError> {
    let live = exec.live.clone();
    let outcome = tokio::select! {
        outcome = drive(engine, claim, exec) => Some(outcome?),
        () = live.stop.cancelled() => None,
        () = keep_lease(engine, claim, &live) => {
            tracing::warn!("the run's lease was lost; its outcome is discarded");
            telemetry::failed(span, LEASE_LOST);
            return Ok(None);
        }
    };
    let (status, error, action) = match outcome {
        None if live.stopped_by() == StopAction::Interrupt => {
            run_items::keep_interrupted(&mut exec.record.run.output, &exec.partial);
            // Input steered in is kept with the turn, also what the run had yet to take
            // (or was taking when it stopped); should this fail, the input is queued.
            if let Err(error) = take_steering(engine, claim, exec).await {
                tracing::warn!(%error, "cannot read the input steered into the run");
            }
            (RunStatus::Interrupted, None, None)
        }
        // A rollback deletes the run once it is cancelled.
        None => (RunStatus::Cancelled, None, None),
        Some(Outcome::Failed(error)) => (RunStatus::Failed, Some(error), None),
        Some(Outcome::RequiresAction(action)) => (RunStatus::RequiresAction, None, Some(action)),
        Some(Outcome::Completed) => (RunStatus::Completed, None, None),
    };
    if let Some(error) = &error {
        tracing::warn!(code = %error.code, message = %error.message, "run failed");
    }
    exec.record.run.required_action = action;
    let last = exec.record.end(status, error, exec.seq, crate::store::now());
    // A save abandoned halfway may have stored some of these: they are skipped.
    let (mut events, _) = live.after(live.saved());
    events.push(last.clone());
    // Under a tenant limit, claims take turns (see `RunStore::claim_run`).
    let settings = &engine.settings;
    let claim_next = claim_next.is_some_and(|shutdown| !shutdown.is_cancelled());
    let next_lease =
        (claim_next && settings.tenant_max_active_runs.is_none()).then_some(settings.lease);
    let began = SystemTime::now();
    let finished = engine.store.finish_run(claim, &exec.record, &events, next_lease).await?;
    if let Some(next) = &finished.next {
        spans::record_claim(next, began);
    }
    if finished.written {
        exec.seq = last.seq;
        exec.live.mark_saved(last.seq);
        exec.live.publish(last);
        tracing::info!(status = %status, "run finished");
        spans::record_outcome(span, &exec.record.run, &claim.record.run.usage);
        let code = exec.record.run.error.as_ref().map(|e| e.code.as_str());
        engine.metrics.run_ended(status.as_str(), code);
        if status.is_final() {
            engine.ended.lock().unwrap_or_else(PoisonError::into_inner).push(claim.run_pk);
        }
    } else {
        tracing::warn!("the run's lease was lost before it finished; its outcome is discarded");
        telemetry::failed(span, LEASE_LOST);
    }
    Ok(finished.next)
}

/// Renews the run's lease (its events are written by the flush task); returns only when
/// the lease is lost.
async fn keep_lease(engine: &Engine, claim: &Claim, live: &LiveRun) {
    let settings = &engine.settings;
    let mut wait = settings.lease / 3;
    loop {
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = live.lease_lost.cancelled() => return,
        }
        wait = match engine.store.renew_lease(claim, settings.lease).await {
            Ok(true) => settings.lease / 3,
            Ok(false) => return,
            Err(error) => {
                tracing::warn!(%error, "cannot renew the run's lease; retrying");
                settings.poll_interval
            }
        };
    }
}
