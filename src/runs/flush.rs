//! Stores the events of every run executing here, all in one write per flush interval:
//! a write per run cost Postgres more per streamed token than the service spent on it.
//! Followers here have each event from memory at once; the database has it within a
//! flush interval, for followers of other replicas and for those that reconnect.
//!
//! The same task looks, in one read, whether the runs that ended since the last flush
//! had input steered into them: few runs are steered, and a look per run was a round
//! trip per run for nothing.

use std::sync::{Arc, PoisonError};

use tokio_util::sync::CancellationToken;

use super::hub::LiveRun;
use super::Engine;
use crate::store::RunFlush;

/// The most runs one write takes, so that one statement's row locks and size stay
/// bounded; more runs take more writes.
const RUNS_PER_WRITE: usize = 512;

/// Writes the runs' new events every `flush_interval`. After shutdown it goes on while
/// runs still execute here (a draining worker finishes the run in hand).
pub(super) async fn flush(engine: Arc<Engine>, shutdown: CancellationToken) {
    let mut interval = tokio::time::interval(engine.settings.flush_interval);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        let executing = engine.hub.executing();
        let done = executing.is_empty() && shutdown.is_cancelled();
        let mut pending: Vec<(Arc<LiveRun>, RunFlush)> = executing
            .into_iter()
            .filter_map(|live| {
                let (events, _) = live.after(live.saved());
                let llm_calls = live.llm_calls.take();
                let batch = RunFlush { lease: live.lease.clone(), events, llm_calls };
                (!batch.is_empty()).then_some((live, batch))
            })
            .collect();
        // Row locks taken in one order by every replica's writes.
        pending.sort_by_key(|(_, batch)| batch.lease.run_pk);
        let (runs, batches): (Vec<_>, Vec<_>) = pending.into_iter().unzip();
        for (runs, batches) in runs.chunks(RUNS_PER_WRITE).zip(batches.chunks(RUNS_PER_WRITE)) {
            write(&engine, runs, batches).await;
        }
        release_steering(&engine).await;
        if done {
            return;
        }
    }
}

/// Queues the input steered into the runs that ended since the last look and that they
/// never took. A run that ended takes no more input, so the look sees all there is.
/// Should this fail, or the process stop first, the recovery loop of any replica does it.
async fn release_steering(engine: &Engine) {
    let ended = std::mem::take(&mut *engine.ended.lock().unwrap_or_else(PoisonError::into_inner));
    for runs in ended.chunks(RUNS_PER_WRITE) {
        let steered = match engine.store.steered_runs(runs).await {
            Ok(steered) => steered,
            Err(error) => {
                tracing::warn!(%error, "cannot look for input steered into runs");
                continue;
            }
        };
        for run_pk in steered {
            match engine.store.release_steering(Some(run_pk)).await {
                Ok(0) => {}
                Ok(_) => engine.work.notify_one(),
                Err(error) => tracing::warn!(%error, "cannot queue the input steered into a run"),
            }
        }
    }
}

async fn write(engine: &Engine, runs: &[Arc<LiveRun>], batches: &[RunFlush]) {
    match engine.store.save_run_events(batches).await {
        Ok(held) => {
            for ((live, batch), held) in runs.iter().zip(batches).zip(held) {
                if !held {
                    live.lease_lost.cancel();
                } else if let Some(last) = batch.events.last() {
                    live.mark_saved(last.seq);
                }
            }
        }
        // The events stay unsaved and go with the next write (stored twice, an event is
        // kept once). The requests go with it only if this write certainly stored
        // nothing: counted twice they would stay so.
        Err(error) => {
            if error.committed_nothing() {
                for (live, batch) in runs.iter().zip(batches) {
                    live.llm_calls.give_back(batch.llm_calls);
                }
            }
            tracing::warn!(%error, runs = runs.len(), "cannot store run events");
        }
    }
}
