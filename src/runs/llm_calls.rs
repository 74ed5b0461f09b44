//! The requests to the LLM an execution made that the database has not counted yet.

use std::sync::atomic::{AtomicI64, Ordering};

/// Requests to the LLM an execution made since the last flush: stored with its events,
/// they count even if the execution never gets to write the run.
#[derive(Default)]
pub(crate) struct UnflushedCalls(AtomicI64);

impl UnflushedCalls {
    pub(crate) fn count(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// The requests counted so far, counted no more here: the flush that takes them
    /// stores them or, if its write certainly stored nothing, gives them back.
    pub(crate) fn take(&self) -> i64 {
        self.0.swap(0, Ordering::Relaxed)
    }

    pub(crate) fn give_back(&self, calls: i64) {
        self.0.fetch_add(calls, Ordering::Relaxed);
    }
}
