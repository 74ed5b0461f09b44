//! Where a run a protocol adapter starts goes: on a session as it is, on a fork of one,
//! or on a new session of its own; kept, or dropped once its answer was read. The
//! adapter names the place in its own terms (a conversation, a previous response) and
//! this makes it ready, undoes it when the start is refused, and cleans up after it.

use tokio::sync::oneshot;
use uuid::Uuid;

use super::Runs;
use crate::model::{
    Anchor, ExpiresAfter, ForkPoint, IfBusy, NewFork, NewSession, SessionId, SessionPatch,
};
use crate::store::StoreError;

/// How long the session of an ephemeral run may outlive its answer, should the process
/// die before deleting it.
const EPHEMERAL_SECS: u64 = 3600;

/// Where a new run continues from.
pub enum Placement {
    /// On this session as it is, which the run's start reads (and refuses if absent).
    On { session: SessionId, if_busy: IfBusy },
    /// On a fork of `source` as of `point`, made under the run's own session id.
    Fork { source: SessionId, point: ForkPoint },
    /// On a new, empty session of the run's own.
    Alone,
}

/// A place made ready for a run.
pub struct Placed {
    pub session: SessionId,
    pub if_busy: IfBusy,
    /// The session is the run's own, made for it.
    pub own: bool,
    /// The session goes once the run's answer was read.
    pub ephemeral: bool,
}

impl Runs {
    /// Makes `placement` ready for a run whose own session id is `own`. An `ephemeral`
    /// run's session (never one it runs `On`) expires within the hour should nobody
    /// delete it. A fork whose source or point is gone is `SessionNotFound` or
    /// `RunNotFound`.
    pub async fn place(
        &self, tenant: &str, own: SessionId, placement: Placement, ephemeral: bool,
    ) -> Result<Placed, StoreError> {
        let expiry = Some(ExpiresAfter { anchor: Anchor::CreatedAt, seconds: EPHEMERAL_SECS });
        let (source, point) = match placement {
            Placement::On { session, if_busy } => {
                return Ok(Placed { session, if_busy, own: false, ephemeral: false });
            }
            Placement::Fork { source, point } => (source, point),
            Placement::Alone => {
                if ephemeral {
                    let new = NewSession {
                        id: own.clone(),
                        metadata: Default::default(),
                        agent_id: None,
                        owners: Default::default(),
                        expires_after: Some(expiry),
                    };
                    self.store().create_session(tenant, new).await?;
                }
                // A session that does not exist yet is made by the run's start.
                return Ok(Placed { session: own, if_busy: IfBusy::Reject, own: true, ephemeral });
            }
        };
        let fork = NewFork { id: own.clone(), metadata: None, point, idempotency: None };
        self.store().fork_session(tenant, &source, fork).await?;
        if ephemeral {
            let patch = SessionPatch { expires_after: Some(expiry), ..SessionPatch::default() };
            self.store().update_session(tenant, &own, patch, None).await?;
        }
        Ok(Placed { session: own, if_busy: IfBusy::Reject, own: true, ephemeral })
    }

    /// Undoes a place whose run was refused: a session made for the run goes.
    pub async fn unplace(&self, tenant: &str, placed: &Placed) {
        if placed.own {
            let _ = self.store().delete_session(tenant, &placed.session, None).await;
        }
    }

    /// Deletes an ephemeral run's session once the run has finished and its answer was
    /// read (the returned sender dropped), whether the client stayed or not.
    pub fn forget_when_done(
        &self, tenant: &str, session: &SessionId, run: Uuid,
    ) -> oneshot::Sender<()> {
        let (reading, read) = oneshot::channel::<()>();
        let (runs, tenant, session) = (self.clone(), tenant.to_owned(), session.clone());
        tokio::spawn(async move {
            let _ = read.await;
            if let Err(error) = runs.wait(&tenant, &session, run, 0).await {
                tracing::warn!(%error, "cannot wait for an ephemeral run");
            }
            if let Err(error) = runs.store().delete_session(&tenant, &session, None).await {
                tracing::warn!(%error, "cannot delete an ephemeral run's session; it expires within the hour");
            }
        });
        reading
    }
}
