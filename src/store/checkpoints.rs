//! Checkpoints kept beside sessions (LangGraph's model).

use async_trait::async_trait;

use super::Result;
use crate::model::{
    Checkpoint, CheckpointFilter, IdempotencyKey, IfMatch, NewCheckpoint, PendingWrite, SessionId,
};

/// Where a checkpoint's writes go: its session, namespace and id.
#[derive(Debug, Clone, Copy)]
pub struct CheckpointRef<'a> {
    pub session_id: &'a SessionId,
    pub namespace: &'a str,
    pub id: &'a str,
}

/// What `prune` keeps of each namespace of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    Latest,
    Nothing,
}

#[async_trait]
pub trait CheckpointStore {
    /// Stores a checkpoint (again: the same id replaces it) and the blobs it brings,
    /// creating the session if absent (unless `if_match`). Checkpoints change no
    /// session's revision. True when an Idempotency-Key made this answer a replay.
    async fn put_checkpoint(
        &self, tenant: &str, session_id: &SessionId, checkpoint: NewCheckpoint,
        idempotency: Option<IdempotencyKey>, if_match: Option<IfMatch>,
    ) -> Result<bool>;

    /// Stores a task's writes on a checkpoint: a write at a place the task already
    /// wrote keeps the first, but a negative place replaces it.
    async fn put_writes(
        &self, tenant: &str, at: CheckpointRef<'_>, writes: Vec<PendingWrite>,
        idempotency: Option<IdempotencyKey>, if_match: Option<IfMatch>,
    ) -> Result<bool>;

    async fn get_checkpoint(&self, tenant: &str, at: CheckpointRef<'_>) -> Result<Checkpoint>;

    /// Checkpoints of the session (or of all the tenant's sessions), newest id first.
    async fn list_checkpoints(
        &self, tenant: &str, session_id: Option<&SessionId>, filter: &CheckpointFilter,
    ) -> Result<Vec<Checkpoint>>;

    /// Deletes a session's checkpoints, blobs and writes; returns how many checkpoints.
    async fn delete_checkpoints(
        &self, tenant: &str, session_id: &SessionId, if_match: Option<IfMatch>,
    ) -> Result<u64>;

    /// Deletes the tenant's checkpoints whose `metadata.run_id` is one of `run_ids`,
    /// with their writes and the blobs no other checkpoint names.
    async fn delete_checkpoints_of_runs(&self, tenant: &str, run_ids: &[String]) -> Result<u64>;

    /// Keeps of each namespace of these sessions the newest checkpoint or none, with
    /// what the kept ones name; returns how many checkpoints went.
    async fn prune_checkpoints(
        &self, tenant: &str, session_ids: &[SessionId], keep: Keep,
    ) -> Result<u64>;
}
