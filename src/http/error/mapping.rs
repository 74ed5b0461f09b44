//! How the errors of the layers below become the API's: the detail names the session,
//! item, run or agent the request was about where the request knows it.

use super::ApiError;
use crate::model::{ConfigError, InvalidField};
use crate::runs::RunsError;
use crate::store::StoreError;

impl ApiError {
    /// Maps a store error of a request about one session (and one of its items or runs),
    /// so the detail can name them.
    pub fn from_store(error: StoreError, session_id: &str, child_id: Option<&str>) -> Self {
        match (error, child_id) {
            (StoreError::SessionNotFound, _) => {
                Self::SessionNotFound(format!("no session with id `{session_id}`"))
            }
            (StoreError::SessionExists, _) => {
                Self::SessionExists(format!("a session with id `{session_id}` already exists"))
            }
            (StoreError::ItemNotFound, Some(item_id)) => Self::ItemNotFound(format!(
                "no item with id `{item_id}` in session `{session_id}`"
            )),
            (StoreError::RunNotFound, Some(run_id)) => Self::RunNotFound(format!(
                "no run with id `{run_id}` in session `{session_id}`"
            )),
            (StoreError::SessionEmpty, _) => {
                Self::SessionEmpty(format!("session `{session_id}` has no items"))
            }
            (StoreError::RevisionMismatch { current: None }, _) => Self::RevisionMismatch(
                format!("session `{session_id}` does not exist, and If-Match asks that it does"),
            ),
            (StoreError::RevisionMismatch { current: Some(current) }, _) => {
                Self::RevisionMismatch(format!(
                    "session `{session_id}` is at revision {current}, not the one If-Match names; nothing was written"
                ))
            }
            (StoreError::SessionBusy(active), _) => Self::SessionBusy(format!(
                "session `{session_id}` has an unfinished run `{active}`; wait for it, cancel it or pass if_busy: \"enqueue\""
            )),
            (other, _) => other.into(),
        }
    }

    /// Maps a store error of a request about one agent, so the detail can name it.
    pub fn from_agent_store(error: StoreError, agent_id: &str) -> Self {
        match error {
            StoreError::AgentNotFound => {
                Self::AgentNotFound(format!("no agent with id `{agent_id}`"))
            }
            other => other.into(),
        }
    }

    /// Maps a run use case's error about one session (and one of its runs).
    pub fn from_runs(error: RunsError, session_id: &str, run_id: Option<&str>) -> Self {
        match error {
            RunsError::Store(error) => Self::from_store(error, session_id, run_id),
            RunsError::Config(error) => error.into(),
            RunsError::AgentNotFound { agent_id, by_session: true } => Self::AgentNotFound(
                format!("session `{session_id}` names agent `{agent_id}`, which does not exist"),
            ),
            RunsError::AgentNotFound { agent_id, .. } => {
                Self::AgentNotFound(format!("no agent with id `{agent_id}`"))
            }
            RunsError::NothingToCompact { .. } => Self::NothingToCompact(error.to_string()),
            RunsError::Llm(error) => Self::Llm(error.code, error.message),
            RunsError::Stopped => Self::Internal(error.to_string()),
        }
    }
}

impl From<ConfigError> for ApiError {
    fn from(error: ConfigError) -> Self {
        match error {
            ConfigError::Invalid(field) => field.into(),
        }
    }
}

impl From<InvalidField> for ApiError {
    fn from(error: InvalidField) -> Self {
        Self::InvalidRequest { field: error.field, message: error.message }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::SessionNotFound => Self::SessionNotFound("session not found".into()),
            StoreError::SessionExists => Self::SessionExists("the session already exists".into()),
            StoreError::ItemNotFound => Self::ItemNotFound("item not found".into()),
            StoreError::SessionEmpty => Self::SessionEmpty("the session has no items".into()),
            StoreError::UnknownCursor => {
                Self::invalid("after/before", "the cursor names no row of this listing")
            }
            StoreError::IdempotencyKeyReused => Self::IdempotencyKeyReused,
            StoreError::RevisionMismatch { current } => Self::RevisionMismatch(match current {
                Some(current) => format!("the session is at revision {current}"),
                None => "the session does not exist".into(),
            }),
            StoreError::StateTooLarge(too_large) => Self::StateTooLarge(too_large.to_string()),
            StoreError::OwnerMismatch { field, stored } => Self::OwnerMismatch {
                field,
                message: format!(
                    "the session's {field} is `{stored}`; a session's owners never change"
                ),
            },
            StoreError::NoOwner { field, owner } => {
                Self::invalid(field, format!("the session has no {owner}"))
            }
            StoreError::StateNotFound => Self::StateNotFound("no such state document".into()),
            StoreError::CheckpointNotFound => {
                Self::CheckpointNotFound("no such checkpoint in this namespace".into())
            }
            StoreError::HistoryChanged => Self::HistoryChanged(
                "the session's history changed while it was being compacted; try again".into(),
            ),
            StoreError::AgentNotFound => Self::AgentNotFound("agent not found".into()),
            StoreError::RunNotFound => Self::RunNotFound("run not found".into()),
            StoreError::ApiKeyNotFound => Self::ApiKeyNotFound("API key not found".into()),
            StoreError::SessionBusy(active) => {
                Self::SessionBusy(format!("the session has an unfinished run `{active}`"))
            }
            StoreError::RunFinished(status) => {
                Self::RunFinished(format!("the run has finished as `{status}`"))
            }
            StoreError::RunNotWaiting { status, waiting, asked } => {
                let asked = asked.answers();
                Self::RunNotWaiting(match waiting {
                    Some(waiting) => format!(
                        "the run is `{status}` waiting for {}, not for {asked}",
                        waiting.answers()
                    ),
                    None => format!("the run is `{status}`, not waiting for {asked}"),
                })
            }
            StoreError::Invalid(field) => field.into(),
            StoreError::EncryptionKeyMissing(_) => Self::EncryptionKeyMissing(error.to_string()),
            StoreError::StorageFull => Self::StorageFull,
            error if error.is_transient() => Self::DatabaseUnavailable(error),
            other => Self::Internal(other.to_string()),
        }
    }
}
