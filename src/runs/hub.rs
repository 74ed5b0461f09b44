//! Runs executing in this process, so that their followers see each event the moment
//! it happens rather than when it reaches the database.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::model::{RunEvent, StopAction};
use crate::store::RunLease;

/// How many recent starts the hub remembers, so that a follower woken by a start can
/// tell whether it was its run's without asking the database.
const RECENT_STARTS: usize = 4096;

/// How far the events shown to followers may run ahead of those stored. A run executed
/// again after its worker was lost numbers its events from this far past the stored
/// ones, so that a follower of the lost execution that reconnects with the id of an event
/// never stored still gets every event of the new one, each once.
pub(crate) const UNSTORED_SHOWN: i64 = 10_000;

#[derive(Default)]
pub(crate) struct Hub {
    live: Mutex<HashMap<Uuid, Arc<LiveRun>>>,
    /// How many runs have started here (or were stopped here while queued), bumped at
    /// each to wake followers.
    started: watch::Sender<u64>,
    /// The newest starts: each one's number and run.
    recent: Mutex<VecDeque<(u64, Uuid)>>,
}

impl Hub {
    /// Makes `run_id` live here under `lease`; its events through `saved` are stored.
    pub(crate) fn register(
        &self,
        run_id: Uuid,
        first_seq: i64,
        lease: RunLease,
        saved: i64,
    ) -> Arc<LiveRun> {
        let live = Arc::new(LiveRun {
            first_seq,
            lease,
            saved: AtomicI64::new(saved),
            lease_lost: CancellationToken::new(),
            events: Mutex::new((Vec::new(), false)),
            changed: watch::Sender::new(0),
            stop: CancellationToken::new(),
            action: OnceLock::new(),
        });
        lock(&self.live).insert(run_id, live.clone());
        self.announce(run_id);
        live
    }

    /// Wakes the followers waiting here for `run_id` to start or change: it started here,
    /// or this process stopped it while it was queued.
    pub(crate) fn announce(&self, run_id: Uuid) {
        let mut recent = lock(&self.recent);
        if recent.len() == RECENT_STARTS {
            recent.pop_front();
        }
        self.started.send_modify(|n| {
            *n += 1;
            recent.push_back((*n, run_id));
        });
    }

    pub(crate) fn remove(&self, run_id: Uuid) {
        lock(&self.live).remove(&run_id);
    }

    pub(crate) fn get(&self, run_id: Uuid) -> Option<Arc<LiveRun>> {
        lock(&self.live).get(&run_id).cloned()
    }

    /// The runs executing here now.
    pub(crate) fn executing(&self) -> Vec<Arc<LiveRun>> {
        lock(&self.live).values().cloned().collect()
    }

    pub(crate) fn starts(&self) -> watch::Receiver<u64> {
        self.started.subscribe()
    }

    /// How many starts have been announced so far.
    pub(crate) fn announced(&self) -> u64 {
        *self.started.borrow()
    }

    /// Whether `run_id` may have been announced here (it started, or was stopped while
    /// queued) after the first `seen` announcements: false only when the hub remembers
    /// every one since and none was this run's.
    pub(crate) fn may_have_started(&self, run_id: Uuid, seen: u64) -> bool {
        let recent = lock(&self.recent);
        let remembered = recent.front().is_none_or(|&(first, _)| first <= seen + 1);
        !remembered
            || recent.iter().rev().take_while(|&&(n, _)| n > seen).any(|&(_, id)| id == run_id)
    }
}

/// One executing run: its events since the claim, and a way to stop it.
pub(crate) struct LiveRun {
    /// The seq of the first event of this execution; earlier ones are in the database.
    pub first_seq: i64,
    /// The claim the events are stored under.
    pub lease: RunLease,
    /// The seq through which the events are stored.
    saved: AtomicI64,
    /// Cancelled when a write of the events found the lease gone.
    pub lease_lost: CancellationToken,
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

    pub(crate) fn saved(&self) -> i64 {
        self.saved.load(Ordering::Acquire)
    }

    /// The events through `seq` are stored.
    pub(crate) fn mark_saved(&self, seq: i64) {
        let before = self.saved.fetch_max(seq, Ordering::AcqRel);
        let newest = self.first_seq + lock(&self.events).0.len() as i64 - 1;
        if newest > before + UNSTORED_SHOWN {
            // Followers held back at the limit may go on.
            self.changed.send_modify(|n| *n += 1);
        }
    }

    /// What a follower may be shown after `seq`: no event more than [`UNSTORED_SHOWN`]
    /// past the stored ones, and whether the execution is over.
    pub(crate) fn shown_after(&self, seq: i64) -> (Vec<RunEvent>, bool) {
        let limit = self.saved() + UNSTORED_SHOWN;
        let guard = lock(&self.events);
        let start = usize::try_from(seq + 1 - self.first_seq).unwrap_or(0);
        let end = usize::try_from(limit + 1 - self.first_seq).unwrap_or(0);
        let end = end.clamp(start, guard.0.len().max(start));
        let fresh = guard.0.get(start..end).unwrap_or_default().to_vec();
        (fresh, guard.1)
    }
}

/// The maps are never left half-updated, so a poisoned lock is still consistent.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RunEventKind;

    fn lease() -> RunLease {
        RunLease { tenant: "t".into(), run_pk: 1, worker: Uuid::now_v7() }
    }

    #[test]
    fn a_start_is_told_from_the_starts_of_other_runs() {
        let hub = Hub::default();
        let (mine, other) = (Uuid::now_v7(), Uuid::now_v7());
        hub.register(other, 1, lease(), 0);
        let seen = *hub.starts().borrow();
        hub.register(Uuid::now_v7(), 1, lease(), 0);
        assert!(!hub.may_have_started(mine, seen));
        assert!(!hub.may_have_started(other, seen), "its start came before `seen`");
        hub.register(mine, 1, lease(), 0);
        assert!(hub.may_have_started(mine, seen));
        assert!(!hub.may_have_started(mine, *hub.starts().borrow()));
    }

    #[test]
    fn followers_are_shown_no_further_than_the_limit_past_the_stored_events() {
        let live = Hub::default().register(Uuid::now_v7(), 1, lease(), 0);
        let delta = |seq| RunEvent { seq, kind: RunEventKind::TextDelta("a".into()) };
        for seq in 1..=UNSTORED_SHOWN + 5 {
            live.publish(delta(seq));
        }
        let (shown, _) = live.shown_after(0);
        assert_eq!(shown.last().map(|e| e.seq), Some(UNSTORED_SHOWN));
        let mut changes = live.changes();
        changes.borrow_and_update();
        live.mark_saved(3);
        assert!(changes.has_changed().unwrap(), "held-back followers are woken");
        let (shown, _) = live.shown_after(UNSTORED_SHOWN);
        assert_eq!(
            shown.iter().map(|e| e.seq).collect::<Vec<_>>(),
            (UNSTORED_SHOWN + 1..=UNSTORED_SHOWN + 3).collect::<Vec<_>>()
        );
        assert_eq!(live.after(0).0.len() as i64, UNSTORED_SHOWN + 5, "the writer takes them all");
    }

    #[test]
    fn starts_it_no_longer_remembers_may_have_been_any_run() {
        let hub = Hub::default();
        let seen = *hub.starts().borrow();
        for _ in 0..=RECENT_STARTS {
            hub.register(Uuid::now_v7(), 1, lease(), 0);
        }
        assert!(hub.may_have_started(Uuid::now_v7(), seen));
        assert!(!hub.may_have_started(Uuid::now_v7(), seen + 1));
    }
}
