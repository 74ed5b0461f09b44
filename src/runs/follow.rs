//! Following a run's events: replayed from the database, then live from the hub of this
//! process or, for a run another replica executes, by polling the database.

use std::sync::Arc;

use futures::{Stream, StreamExt};
use tokio::sync::watch;
use uuid::Uuid;

use super::error::Result;
use super::{Engine, Runs, Started};
use crate::model::{Run, RunEvent, RunEventKind, RunStatus, SessionId};
use crate::store::StoreError;

/// Where following a run starts.
pub(crate) enum From {
    /// After the event with this seq.
    After(i64),
    /// At a run this replica just created queued.
    Created(Created),
}

/// What the request that created a queued run knows of it without asking the database:
/// its one event, and how many starts the hub had announced before the run existed.
#[derive(Debug, Clone)]
pub(crate) struct Created {
    pub event: RunEvent,
    pub seen: u64,
}

/// The stream of a run's events from `from`, ending after the event that ends the
/// stream: a final status, or `run.requires_action` while the run still waits. It runs in
/// the task that reads it (the follower's connection), not in one of its own: a token
/// then wakes one task on its way out, not two, and an open stream holds no channel.
pub(crate) fn follow(
    engine: Arc<Engine>, tenant: String, session_id: SessionId, run_id: Uuid, from: From,
) -> impl Stream<Item = Result<RunEvent, StoreError>> {
    let (mut cursor, mut created) = match from {
        From::After(after) => (after, None),
        From::Created(created) => (0, Some(created)),
    };
    async_stream::try_stream! {
        // Whether the last event sent ends a stream: it is not sent again at the end.
        let mut sent_ending = false;
        loop {
            let mut starts = engine.hub.starts();
            let seen = *starts.borrow_and_update();
            if let Some(live) = engine.hub.get(run_id) {
                // Events before those kept here are stored: an earlier execution's, or
                // this one's that a follower this far behind missed.
                let kept_from = live.kept_from();
                if cursor < kept_from - 1 {
                    let (events, _) =
                        engine.store.run_events(&tenant, &session_id, run_id, cursor).await?;
                    for event in events.into_iter().filter(|e| e.seq < kept_from) {
                        cursor = event.seq;
                        yield event;
                    }
                }
                let mut changes = live.changes();
                loop {
                    changes.borrow_and_update();
                    // Fallen behind the kept events since: the database has them.
                    let Some((events, closed)) = live.shown_after(cursor) else {
                        break;
                    };
                    for event in events {
                        cursor = event.seq;
                        let ends = event.ends_stream();
                        sent_ending = ends;
                        yield event;
                        if ends {
                            return;
                        }
                    }
                    if closed || changes.changed().await.is_err() {
                        break;
                    }
                }
                // The execution ended without a final event here (its lease was lost,
                // say), or the follower fell behind: the database knows how the run went on.
                continue;
            }
            // A run created queued by the request that follows it has nothing else to tell
            // until it starts: with many runs queued, reading it now would be a read per
            // run for nothing. Should it start elsewhere or be stopped there, the poll
            // finds out.
            if let Some(created) = created.take() {
                if !engine.hub.may_have_started(run_id, created.seen) {
                    cursor = created.event.seq;
                    yield created.event;
                    wait_for_start(&engine, &mut starts, seen, run_id).await;
                    continue;
                }
            }
            let (events, status) =
                engine.store.run_events(&tenant, &session_id, run_id, cursor).await?;
            for event in events {
                cursor = event.seq;
                // A stored `run.requires_action` may be one the run has gone on from: only
                // a final status certainly ends the stream mid-way.
                let is_final =
                    matches!(&event.kind, RunEventKind::Status(run) if run.status.is_final());
                sent_ending = event.ends_stream();
                yield event;
                if is_final {
                    return;
                }
            }
            // A final or waiting status was committed with the event announcing it, and
            // the status was read first: that event has been sent, this round or an
            // earlier one (whose status said the run went on), unless the follower had
            // passed its seq already. That happens when another replica cancelled the run
            // (the store numbers `run.cancelled` after the events the worker had stored,
            // while followers of the worker had more from its memory), or when a client
            // that saw the end reconnects. Every stream ends with the event that ends it
            // all the same.
            if status.is_final() || status == RunStatus::RequiresAction {
                if !sent_ending {
                    let (all, _) = engine.store.run_events(&tenant, &session_id, run_id, 0).await?;
                    if let Some(last) = all.into_iter().last().filter(RunEvent::ends_stream) {
                        yield last;
                    }
                }
                return;
            }
            wait_for_start(&engine, &mut starts, seen, run_id).await;
        }
    }
}

/// Waits until `run_id` may have started here since the `seen` starts, or until the poll
/// is due (to learn how a run that another replica executes goes on); the starts of other
/// runs are no reason to read the database again: with many runs queued, each start
/// would make every waiting follower read. A follower that goes away drops the wait with
/// its stream, which stops the polling at once.
async fn wait_for_start(
    engine: &Engine, starts: &mut watch::Receiver<u64>, mut seen: u64, run_id: Uuid,
) {
    let poll = tokio::time::sleep(engine.settings.poll_interval);
    tokio::pin!(poll);
    loop {
        tokio::select! {
            changed = starts.changed() => {
                // Read before the check, so that a start between the two is checked.
                let now = *starts.borrow_and_update();
                if changed.is_err() || engine.hub.may_have_started(run_id, seen) {
                    return;
                }
                seen = now;
            }
            () = &mut poll => return,
        }
    }
}

impl Runs {
    /// The run's events after `after`, live while it executes; the stream ends after a
    /// final event or `run.requires_action`.
    pub fn events(
        &self, tenant: &str, session_id: &SessionId, run_id: Uuid, after: i64,
    ) -> impl Stream<Item = Result<RunEvent, StoreError>> + Send + 'static {
        let from = From::After(after);
        follow(self.engine.clone(), tenant.to_owned(), session_id.clone(), run_id, from)
    }

    /// A run's events from its first, as [`Runs::events`], for the request that started it.
    pub fn started_events(
        &self, tenant: &str, session_id: &SessionId, started: &Started,
    ) -> impl Stream<Item = Result<RunEvent, StoreError>> + Send + 'static {
        let from = match &started.created {
            Some(created) => From::Created(created.clone()),
            None => From::After(0),
        };
        let (engine, tenant, session_id) =
            (self.engine.clone(), tenant.to_owned(), session_id.clone());
        follow(engine, tenant, session_id, started.run.id, from)
    }

    /// Waits until the run finishes or needs the client, and returns it.
    pub async fn wait(
        &self, tenant: &str, session_id: &SessionId, run_id: Uuid, after: i64,
    ) -> Result<Run> {
        let events = self.events(tenant, session_id, run_id, after);
        self.wait_for(tenant, session_id, run_id, events).await
    }

    /// Waits as [`Runs::wait`] for the request that started the run.
    pub async fn wait_started(
        &self, tenant: &str, session_id: &SessionId, started: &Started,
    ) -> Result<Run> {
        let events = self.started_events(tenant, session_id, started);
        self.wait_for(tenant, session_id, started.run.id, events).await
    }

    async fn wait_for(
        &self, tenant: &str, session_id: &SessionId, run_id: Uuid,
        events: impl Stream<Item = Result<RunEvent, StoreError>>,
    ) -> Result<Run> {
        let mut events = std::pin::pin!(events);
        let mut last = None;
        while let Some(event) = events.next().await {
            last = Some(event?);
        }
        // The event that ended the stream carries the run as it was committed.
        match last.filter(RunEvent::ends_stream).map(|e| e.kind) {
            Some(RunEventKind::Status(run)) => Ok(*run),
            _ => self.get(tenant, session_id, run_id).await,
        }
    }
}
