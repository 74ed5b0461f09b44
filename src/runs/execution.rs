//! The run a worker is executing: its record as it grows, and where its events are
//! numbered and published while it runs (the final status event is numbered by
//! `RunRecord::end` and published by the worker once its turn is committed).

use std::sync::Arc;

use serde_json::value::RawValue;

use super::hub::LiveRun;
use crate::llm::Progress;
use crate::model::{RequiredAction, RunError, RunEvent, RunEventKind, RunRecord};

/// The run being executed; its events go to the hub, which the worker stores from.
pub(super) struct Execution {
    pub record: RunRecord,
    pub seq: i64,
    pub live: Arc<LiveRun>,
    /// The text the model has streamed since the last item: what an interruption keeps
    /// of the message it was writing.
    pub partial: String,
}

impl Execution {
    /// Numbers the event after the last one and publishes it to the run's followers.
    pub(super) fn emit(&mut self, kind: RunEventKind) {
        self.seq += 1;
        self.live.publish(RunEvent { seq: self.seq, kind });
    }

    /// Counts a request to the provider as it is made (so a call that fails or is cut
    /// off by a cancel counts too) and publishes text as it streams.
    pub(super) fn progress(&mut self, progress: Progress) {
        match progress {
            Progress::Request => {
                self.record.run.usage.llm_calls += 1;
                self.live.llm_calls.count();
            }
            Progress::Delta(delta) => {
                self.partial.push_str(&delta);
                self.emit(RunEventKind::TextDelta(delta));
            }
        }
    }

    /// Adds an item to the run's output and tells the followers.
    pub(super) fn push_item(&mut self, item: Box<RawValue>) {
        self.emit(RunEventKind::ItemCreated(item.clone()));
        self.record.run.output.push(item);
        self.partial.clear();
    }
}

/// How an execution ends.
pub(super) enum Outcome {
    Completed,
    Failed(RunError),
    RequiresAction(RequiredAction),
}
