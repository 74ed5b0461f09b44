//! Runs executing in this process, so that their followers see each event the moment
//! it happens rather than when it reaches the database.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::model::{RunEvent, StopAction};

#[derive(Default)]
pub(crate) struct Hub {
    live: Mutex<HashMap<Uuid, Arc<LiveRun>>>,
    /// Bumped whenever a run starts here, to wake followers waiting for it.
    started: watch::Sender<u64>,
}

impl Hub {
    pub(crate) fn register(&self, run_id: Uuid, first_seq: i64) -> Arc<LiveRun> {
        let live = Arc::new(LiveRun {
            first_seq,
            events: Mutex::new((Vec::new(), false)),
            changed: watch::Sender::new(0),
            stop: CancellationToken::new(),
            action: OnceLock::new(),
        });
        lock(&self.live).insert(run_id, live.clone());
        self.started.send_modify(|n| *n += 1);
        live
    }

    pub(crate) fn remove(&self, run_id: Uuid) {
        lock(&self.live).remove(&run_id);
    }

    pub(crate) fn get(&self, run_id: Uuid) -> Option<Arc<LiveRun>> {
        lock(&self.live).get(&run_id).cloned()
    }

    pub(crate) fn starts(&self) -> watch::Receiver<u64> {
        self.started.subscribe()
    }
}

/// One executing run: its events since the claim, and a way to stop it.
pub(crate) struct LiveRun {
    /// The seq of the first event of this execution; earlier ones are in the database.
    pub first_seq: i64,
    /// The events in seq order, and whether the execution is over.
    events: Mutex<(Vec<RunEvent>, bool)>,
    changed: watch::Sender<usize>,
    /// Cancelled when a client stops the run.
    pub stop: CancellationToken,
    /// How the first client to stop the run asked to stop it.
    action: OnceLock<StopAction>,
}

impl LiveRun {
    /// Stops the execution; the first request's action decides how the run ends. True
    /// when that is this one's.
    pub(crate) fn stop(&self, action: StopAction) -> bool {
        let decided = self.action.set(action).is_ok();
        self.stop.cancel();
        decided
    }

    pub(crate) fn stopped_by(&self) -> StopAction {
        self.action.get().copied().unwrap_or_default()
    }

    pub(crate) fn publish(&self, event: RunEvent) {
        lock(&self.events).0.push(event);
        self.changed.send_modify(|n| *n += 1);
    }

    /// No more events will come from this execution.
    pub(crate) fn close(&self) {
        lock(&self.events).1 = true;
        self.changed.send_modify(|n| *n += 1);
    }

    /// Events after `seq`, and whether the execution is over. Seqs are consecutive from
    /// `first_seq`, so a follower's position is an index: no scan of a long stream.
    pub(crate) fn after(&self, seq: i64) -> (Vec<RunEvent>, bool) {
        let guard = lock(&self.events);
        let start = usize::try_from(seq + 1 - self.first_seq).unwrap_or(0);
        let fresh = guard.0.get(start..).unwrap_or_default().to_vec();
        (fresh, guard.1)
    }

    pub(crate) fn changes(&self) -> watch::Receiver<usize> {
        self.changed.subscribe()
    }
}

/// The maps are never left half-updated, so a poisoned lock is still consistent.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
