use uuid::Uuid;

use crate::model::{InvalidField, RequiredActionKind, RunStatus, StateTooLarge};

/// What can go wrong in the store, in domain terms. Database failures stay opaque.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("session not found")]
    SessionNotFound,
    #[error("a session with this id already exists")]
    SessionExists,
    #[error("item not found")]
    ItemNotFound,
    #[error("the session has no items")]
    SessionEmpty,
    #[error("agent not found")]
    AgentNotFound,
    #[error("run not found")]
    RunNotFound,
    #[error("API key not found")]
    ApiKeyNotFound,
    #[error("the session has an unfinished run")]
    SessionBusy(Uuid),
    /// A run configured for a session without an agent met this agent on its session.
    #[error("the session has the agent `{0}`")]
    SessionHasAgent(String),
    #[error("the run has finished")]
    RunFinished(RunStatus),
    /// The run does not wait for the answer `asked`: it is in `status`, or waits for the
    /// answer `waiting`.
    #[error("the run is not waiting for {}", asked.answers())]
    RunNotWaiting {
        status: RunStatus,
        waiting: Option<RequiredActionKind>,
        asked: RequiredActionKind,
    },
    #[error("the session's history changed while it was being compacted")]
    HistoryChanged,
    #[error("the cursor names no row of this listing")]
    UnknownCursor,
    #[error("the idempotency key was used with a different request")]
    IdempotencyKeyReused,
    /// `If-Match` named another revision than the session's (`current`; none: the
    /// session does not exist). Nothing was written.
    #[error("the session is not at the revision of If-Match")]
    RevisionMismatch { current: Option<i64> },
    #[error(transparent)]
    StateTooLarge(#[from] StateTooLarge),
    /// A write named an owner (`field`: `app_id` or `user_id`) other than the one the
    /// session has (`stored`).
    #[error("the session's {field} is `{stored}`")]
    OwnerMismatch { field: &'static str, stored: String },
    /// A delta for an owner's document on a session without that owner (`field`
    /// names the delta, `owner` the missing owner).
    #[error("{field}: the session has no {owner}")]
    NoOwner { field: &'static str, owner: &'static str },
    #[error("no such state document")]
    StateNotFound,
    #[error("checkpoint not found")]
    CheckpointNotFound,
    #[error(transparent)]
    Invalid(#[from] InvalidField),
    #[error("DATABASE_URL must start with sqlite:, postgres: or postgresql:")]
    UnsupportedUrl,
    /// The database's disk (or its size cap) is full: nothing of the write was kept.
    #[error("the database's storage is full")]
    StorageFull,
    /// The database did not answer within `DATABASE_TIMEOUT_SECS`; whether a write that
    /// was under way took effect is unknown.
    #[error("the database did not answer within {} s", .0.as_secs_f64())]
    TimedOut(std::time::Duration),
    #[error("database error: {0}")]
    Database(sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("a stored value is encrypted under key id `{0}`, which ENCRYPTION_KEYS does not hold")]
    EncryptionKeyMissing(String),
}

/// Every database error of the store passes here, so a lost connection is noted for
/// the checks of the others (`outage`).
impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        super::outage::note(&error);
        let full = match &error {
            // SQLite: SQLITE_FULL (the disk, or `max_page_count`). Postgres: disk_full.
            sqlx::Error::Database(error) => {
                error.code().is_some_and(|code| code == "13" || code == "53100")
            }
            _ => false,
        };
        if full {
            Self::StorageFull
        } else {
            Self::Database(error)
        }
    }
}

impl StoreError {
    /// The same failure, for each of the writes of a transaction it failed: its kind
    /// (and so its answer) is kept; a database error's source becomes its text.
    pub(super) fn for_each_write(&self) -> Self {
        match self {
            Self::StorageFull => Self::StorageFull,
            Self::TimedOut(deadline) => Self::TimedOut(*deadline),
            other => Self::Database(sqlx::Error::Io(std::io::Error::other(other.to_string()))),
        }
    }

    /// A failure after which the write certainly committed nothing: the database refused
    /// a statement (or the commit), or no connection was had. A lost connection or a
    /// missed deadline may have come after the commit.
    pub fn committed_nothing(&self) -> bool {
        matches!(
            self,
            Self::StorageFull
                | Self::Database(
                    sqlx::Error::Database(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed
                )
        )
    }

    /// A failure that a retry of the same request may not meet: the database was out of
    /// reach, restarting, overloaded, or chose this transaction to break a conflict.
    pub fn is_transient(&self) -> bool {
        let error = match self {
            Self::Database(error) => error,
            Self::TimedOut(_) => return true,
            _ => return false,
        };
        match error {
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::WorkerCrashed => true,
            sqlx::Error::Database(error) => error.code().is_some_and(|code| {
                // Postgres: 08 connection exception, 57 operator intervention (a server
                // shutting down or starting), 53 insufficient resources, 40001/40P01
                // serialization failure and deadlock. SQLite: 5 busy, 6 locked.
                code.starts_with("08")
                    || code.starts_with("57")
                    || code.starts_with("53")
                    || code == "40001"
                    || code == "40P01"
                    || code == "5"
                    || code == "6"
            }),
            _ => false,
        }
    }
}
