//! The writes the combiner (`store::combiner`) queues: appends and run creations, as
//! their requests left them, and what a batch needs to know of each.

use super::combiner::Job;
use super::StartNow;
use crate::model::{IdempotencyKey, IfBusy, IfMatch, ItemBody, NewRun, SessionId, StateChanges};

/// One append request, checked already and ready to be written.
pub(super) struct Append {
    pub tenant: String,
    pub session_id: SessionId,
    pub bodies: Vec<ItemBody>,
    pub idempotency: Option<IdempotencyKey>,
    /// Made only at this revision; such an append is written alone, not combined.
    pub if_match: Option<IfMatch>,
    /// Owners named and state documents changed with the items (also written alone).
    pub state: StateChanges,
    /// What of the history the items replace (also written alone).
    pub replacing: Replacing,
}

/// The items an append removes before it adds its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replacing {
    Nothing,
    /// The whole history.
    All,
    /// What follows this item.
    After(uuid::Uuid),
}

impl Append {
    /// Whether a batch can write it in bulk: items, a change of the session's state, or
    /// both, with no condition, owners or replacement.
    pub fn is_bulk(&self) -> bool {
        let StateChanges { owners, session, user, app } = &self.state;
        let only_session = owners.is_empty() && user.is_none() && app.is_none();
        self.if_match.is_none()
            && only_session
            && self.replacing == Replacing::Nothing
            && !(self.bodies.is_empty() && session.is_none())
    }

    /// Whether it changes nothing: no items, no owners or state, nothing replaced.
    pub fn is_empty(&self) -> bool {
        self.bodies.is_empty() && self.state.is_empty() && self.replacing == Replacing::Nothing
    }
}

/// A run's creation, of a kind a combined transaction makes: no Idempotency-Key to
/// replay and no input to steer into a running run.
pub(super) struct Creation {
    pub tenant: String,
    pub session_id: SessionId,
    pub run: NewRun,
    pub if_busy: IfBusy,
    pub start: Option<StartNow>,
}

impl Job for Append {
    fn bytes(&self) -> usize {
        self.bodies.iter().map(|b| b.as_str().len()).sum()
    }

    /// Two appends with one key: the second is the first's retry.
    fn exclusive(&self) -> Option<(&str, &str)> {
        self.idempotency.as_ref().map(|key| (self.tenant.as_str(), key.key.as_str()))
    }
}

impl Job for Creation {
    fn bytes(&self) -> usize {
        self.run.input.iter().map(|i| i.get().len()).sum()
    }

    /// Two runs of one session: the second's creation must see the first run.
    fn exclusive(&self) -> Option<(&str, &str)> {
        Some((self.tenant.as_str(), self.session_id.as_str()))
    }
}
