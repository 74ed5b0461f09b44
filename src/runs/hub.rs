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

/// How many of its newest stored events a live run keeps for its followers, besides
/// those not yet stored: a follower that falls further behind reads the rest from the
/// database. Keeping every event held a copy of each run's whole stream in memory.
const STORED_KEPT: usize = 8;

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
        &self, run_id: Uuid, first_seq: i64, lease: RunLease, saved: i64,
    ) -> Arc<LiveRun> {
        let live = Arc::new(LiveRun {
            first_seq,
            lease,
            saved: AtomicI64::new(saved),
            llm_calls: Default::default(),
            lease_lost: CancellationToken::new(),
            events: Mutex::new(Events { kept: VecDeque::new(), from: first_seq, closed: false }),
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
    pub llm_calls: super::llm_calls::UnflushedCalls,
    /// Cancelled when a write of the events found the lease gone.
    pub lease_lost: CancellationToken,
    events: Mutex<Events>,
    changed: watch::Sender<usize>,
    /// Cancelled when a client stops the run.
    pub stop: CancellationToken,
    /// How the first client to stop the run asked to stop it.
    action: OnceLock<StopAction>,
}

/// The events a live run keeps, in seq order, and whether the execution is over.
struct Events {
    kept: VecDeque<RunEvent>,
    /// The seq of the first kept event: earlier ones are in the database.
    from: i64,
    closed: bool,
}

impl Events {
    /// The kept events from `start` (an index) up to `end`.
    fn slice(&self, start: usize, end: usize) -> Vec<RunEvent> {
        let end = end.min(self.kept.len());
        self.kept.range(start.min(end)..end).cloned().collect()
    }

    /// The index of the event after `seq`.
    fn index_after(&self, seq: i64) -> usize {
        usize::try_from(seq + 1 - self.from).unwrap_or(0)
    }
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
        lock(&self.events).kept.push_back(event);
        self.changed.send_modify(|n| *n += 1);
    }

    /// No more events will come from this execution.
    pub(crate) fn close(&self) {
        lock(&self.events).closed = true;
        self.changed.send_modify(|n| *n += 1);
    }

    /// The kept events after `seq`, and whether the execution is over. Seqs are
    /// consecutive, so a follower's position is an index: no scan of a long stream.
    pub(crate) fn after(&self, seq: i64) -> (Vec<RunEvent>, bool) {
        let events = lock(&self.events);
        (events.slice(events.index_after(seq), usize::MAX), events.closed)
    }

    /// The seq of the first event kept here: the earlier ones are stored.
    pub(crate) fn kept_from(&self) -> i64 {
        lock(&self.events).from
    }

    pub(crate) fn changes(&self) -> watch::Receiver<usize> {
        self.changed.subscribe()
    }

    pub(crate) fn saved(&self) -> i64 {
        self.saved.load(Ordering::Acquire)
    }

    /// The events through `seq` are stored: beyond the newest few, they are no longer
    /// kept here.
    pub(crate) fn mark_saved(&self, seq: i64) {
        let before = self.saved.fetch_max(seq, Ordering::AcqRel);
        let saved = before.max(seq);
        let mut events = lock(&self.events);
        let newest = events.from + events.kept.len() as i64 - 1;
        while events.kept.len() > STORED_KEPT && events.kept.front().is_some_and(|e| e.seq <= saved)
        {
            events.kept.pop_front();
            events.from += 1;
        }
        drop(events);
        if newest > before + UNSTORED_SHOWN {
            // Followers held back at the limit may go on.
            self.changed.send_modify(|n| *n += 1);
        }
    }

    /// What a follower may be shown after `seq`: no event more than [`UNSTORED_SHOWN`]
    /// past the stored ones, and whether the execution is over. None when the follower
    /// is behind events no longer kept: those are in the database. One short of this
    /// execution's first event is shown them all: the seqs a lost execution may have
    /// shown and never stored lie before it, and the database has none of them.
    pub(crate) fn shown_after(&self, seq: i64) -> Option<(Vec<RunEvent>, bool)> {
        let limit = self.saved() + UNSTORED_SHOWN;
        let events = lock(&self.events);
        if events.from > self.first_seq && seq + 1 < events.from {
            return None;
        }
        let end = usize::try_from(limit + 1 - events.from).unwrap_or(0);
        Some((events.slice(events.index_after(seq), end), events.closed))
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
        let (shown, _) = live.shown_after(0).unwrap();
        assert_eq!(shown.last().map(|e| e.seq), Some(UNSTORED_SHOWN));
        let mut changes = live.changes();
        changes.borrow_and_update();
        live.mark_saved(3);
        assert!(changes.has_changed().unwrap(), "held-back followers are woken");
        let (shown, _) = live.shown_after(UNSTORED_SHOWN).unwrap();
        assert_eq!(
            shown.iter().map(|e| e.seq).collect::<Vec<_>>(),
            (UNSTORED_SHOWN + 1..=UNSTORED_SHOWN + 3).collect::<Vec<_>>()
        );
        assert_eq!(live.after(3).0.len() as i64, UNSTORED_SHOWN + 2, "the writer takes them all");
    }

    #[test]
    fn stored_events_beyond_the_newest_few_are_left_to_the_database() {
        let live = Hub::default().register(Uuid::now_v7(), 11, lease(), 10);
        let delta = |seq| RunEvent { seq, kind: RunEventKind::TextDelta("a".into()) };
        let newest = 10 + STORED_KEPT as i64 + 20;
        for seq in 11..=newest {
            live.publish(delta(seq));
        }
        live.mark_saved(newest - 5);
        assert_eq!(live.kept_from(), newest - STORED_KEPT as i64 + 1);
        assert!(live.shown_after(10).is_none(), "a follower behind the kept events reads them");
        let seqs = |events: Vec<RunEvent>| events.iter().map(|e| e.seq).collect::<Vec<_>>();
        let (shown, closed) = live.shown_after(live.kept_from() - 1).unwrap();
        assert_eq!(seqs(shown), (live.kept_from()..=newest).collect::<Vec<_>>());
        assert!(!closed);
        assert_eq!(seqs(live.after(newest - 5).0), (newest - 4..=newest).collect::<Vec<_>>());
        assert!(
            live.shown_after(newest + 3).unwrap().0.is_empty(),
            "a follower ahead sees nothing"
        );
    }

    #[test]
    fn a_follower_in_the_gap_before_an_execution_again_is_shown_all_it_keeps() {
        // Executed again after a lost worker had stored through 6: numbered past the
        // seqs the lost execution may have shown.
        let first = 6 + UNSTORED_SHOWN + 1;
        let live = Hub::default().register(Uuid::now_v7(), first, lease(), first - 1);
        let delta = |seq| RunEvent { seq, kind: RunEventKind::TextDelta("a".into()) };
        for seq in first..first + 3 {
            live.publish(delta(seq));
        }
        for cursor in [0, 6, 9] {
            let (shown, _) = live.shown_after(cursor).expect("nothing was left to the database");
            assert_eq!(
                shown.iter().map(|e| e.seq).collect::<Vec<_>>(),
                [first, first + 1, first + 2]
            );
        }
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
