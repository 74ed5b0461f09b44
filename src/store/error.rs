use uuid::Uuid;

use crate::model::{InvalidField, RunStatus};

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
    #[error("the session has an unfinished run")]
    SessionBusy(Uuid),
    #[error("the run has finished")]
    RunFinished(RunStatus),
    #[error("the run is not waiting for tool outputs")]
    RunNotWaiting(RunStatus),
    #[error("the cursor names no row of this listing")]
    UnknownCursor,
    #[error("the idempotency key was used with a different request")]
    IdempotencyKeyReused,
    #[error(transparent)]
    Invalid(#[from] InvalidField),
    #[error("DATABASE_URL must start with sqlite:, postgres: or postgresql:")]
    UnsupportedUrl,
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}
