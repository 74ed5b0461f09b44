//! Stores the events of every run executing here, all in one write per flush interval:
//! a write per run cost Postgres more per streamed token than the service spent on it.
//! Followers here have each event from memory at once; the database has it within a
//! flush interval, for followers of other replicas and for those that reconnect.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::hub::LiveRun;
use super::Engine;
use crate::model::RunEvent;
use crate::store::RunLease;

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
        if executing.is_empty() && shutdown.is_cancelled() {
            return;
        }
        let mut pending: Vec<(Arc<LiveRun>, Batch)> = executing
            .into_iter()
            .filter_map(|live| {
                let (events, _) = live.after(live.saved());
                let batch = (live.lease.clone(), events);
                (!batch.1.is_empty()).then_some((live, batch))
            })
            .collect();
        // Row locks taken in one order by every replica's writes.
        pending.sort_by_key(|(_, (lease, _))| lease.run_pk);
        let (runs, batches): (Vec<_>, Vec<_>) = pending.into_iter().unzip();
        for (runs, batches) in runs.chunks(RUNS_PER_WRITE).zip(batches.chunks(RUNS_PER_WRITE)) {
            write(&engine, runs, batches).await;
        }
    }
}

/// A run's events to store, under its lease.
type Batch = (RunLease, Vec<RunEvent>);

async fn write(engine: &Engine, runs: &[Arc<LiveRun>], batches: &[Batch]) {
    match engine.store.save_run_events(batches).await {
        Ok(held) => {
            for ((live, (_, events)), held) in runs.iter().zip(batches).zip(held) {
                match events.last() {
                    Some(last) if held => live.mark_saved(last.seq),
                    _ => live.lease_lost.cancel(),
                }
            }
        }
        // The events stay unsaved and go with the next write.
        Err(error) => tracing::warn!(%error, runs = runs.len(), "cannot store run events"),
    }
}
