//! A deadline on every database operation. A database that is out of reach, or a
//! connection whose peer went silent behind an open socket (which TCP keepalive cannot
//! tell from a quiet one), would otherwise hold a request until its own time limit, and
//! a background worker for good: each operation of the store fails after
//! `DATABASE_TIMEOUT_SECS` with [`StoreError::TimedOut`], a 503 `database_unavailable`.
//! The connection it abandoned is checked before reuse (`outage`).
//!
//! It also keeps whether the last write failed for want of storage or time, so that
//! readiness can tell a database that answers reads but cannot commit.

use std::collections::BTreeMap;
use std::future::Future;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{
    outage, AgentStore, ApiKeyStore, AppendStats, Appended, AtRestStore, Attempt, CheckpointRef,
    CheckpointStore, Claim, CompactionStore, Context, CreatedRun, Delivery, DeliveryStore,
    Finished, Forked, HistoryMark, Keep, PoolStats, Progress, Result, RunFlush, RunStore,
    SessionStore, StartNow, StateSnapshot, StateStore, StoreError, Swept,
};
use crate::model::{
    Agent, AgentPatch, ApiKey, Checkpoint, CheckpointFilter, Compaction, IdempotencyKey, IfBusy,
    IfMatch, Item, ItemBody, KeyHash, NewCheckpoint, NewFork, NewRun, NewSession, OwnerDocument,
    Page, PageRequest, PendingWrite, Run, RunAnswer, RunEvent, RunRecord, RunStatus, Session,
    SessionFilter, SessionId, SessionPatch, StateChanges, StateDocument, StateWrite, Steer,
    StopAction,
};

/// A store whose operations each fail after `limit`.
pub struct Deadline {
    inner: Arc<dyn SessionStore>,
    limit: Duration,
    /// A write failed for a full disk or a missed deadline, and no readiness probe has
    /// committed since. Other writes never clear it: one that stores nothing (a claim
    /// finding no run, a sweep finding nothing) commits on a full disk too.
    writes_failing: AtomicBool,
}

impl Deadline {
    pub fn new(inner: Arc<dyn SessionStore>, limit: Duration) -> Self {
        Self { inner, limit, writes_failing: AtomicBool::new(false) }
    }

    async fn read<T>(&self, operation: impl Future<Output = Result<T>>) -> Result<T> {
        within(self.limit, operation).await
    }

    async fn write<T>(&self, operation: impl Future<Output = Result<T>>) -> Result<T> {
        let result = self.read(operation).await;
        self.note_write(&result);
        result
    }

    /// A write whose size grows with what it touches (a whole session, a sweep): a
    /// longer deadline, so that a large session can still be forked or deleted.
    async fn bulk<T>(&self, operation: impl Future<Output = Result<T>>) -> Result<T> {
        let result = within(self.limit * BULK, operation).await;
        self.note_write(&result);
        result
    }

    fn note_write<T>(&self, result: &Result<T>) {
        if let Err(StoreError::StorageFull | StoreError::TimedOut(_)) = result {
            self.writes_failing.store(true, Ordering::Relaxed);
        }
    }
}

/// How many deadlines a bulk write may take.
const BULK: u32 = 6;

/// A ping's deadline, shorter than the others where they are longer: a balancer asking
/// `/readyz` wants to know soon.
const PING_LIMIT: Duration = Duration::from_secs(2);

/// Runs `operation` for at most `limit`. The miss is noted before the operation (and
/// the connection it holds) is dropped, so that the pool checks that connection.
pub(super) async fn within<T>(
    limit: Duration, operation: impl Future<Output = Result<T>>,
) -> Result<T> {
    let mut operation = std::pin::pin!(operation);
    match tokio::time::timeout(limit, &mut operation).await {
        Ok(result) => result,
        Err(_) => {
            outage::missed_deadline();
            Err(StoreError::TimedOut(limit))
        }
    }
}

/// Implements a store trait for [`Deadline`]: each method calls the inner store's
/// within the deadline, as a read or as a write.
macro_rules! within_deadline {
    ($trait:ident {
        $($kind:ident fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $out:ty;)*
    } $($rest:tt)*) => {
        #[async_trait]
        impl $trait for Deadline {
            $(async fn $name(&self $(, $arg: $ty)*) -> Result<$out> {
                self.$kind(self.inner.$name($($arg),*)).await
            })*
            $($rest)*
        }
    };
}

within_deadline!(StateStore {
    read fn session_state(&self, tenant: &str, id: &SessionId, owners: bool) -> StateSnapshot;
    write fn append_with_state(
        &self, tenant: &str, session_id: &SessionId, items: Vec<ItemBody>,
        changes: StateChanges, idempotency: Option<IdempotencyKey>, if_match: Option<IfMatch>
    ) -> Appended;
    read fn owner_state(&self, tenant: &str, document: &OwnerDocument) -> (StateDocument, i64);
    write fn write_owner_state(
        &self, tenant: &str, document: &OwnerDocument, write: StateWrite, if_match: Option<IfMatch>
    ) -> (StateDocument, i64);
});

within_deadline!(CheckpointStore {
    write fn put_checkpoint(
        &self, tenant: &str, session_id: &SessionId, checkpoint: NewCheckpoint,
        idempotency: Option<IdempotencyKey>, if_match: Option<IfMatch>
    ) -> bool;
    write fn put_writes(
        &self, tenant: &str, at: CheckpointRef<'_>, writes: Vec<PendingWrite>,
        idempotency: Option<IdempotencyKey>, if_match: Option<IfMatch>
    ) -> bool;
    read fn get_checkpoint(&self, tenant: &str, at: CheckpointRef<'_>) -> Checkpoint;
    read fn list_checkpoints(
        &self, tenant: &str, session_id: Option<&SessionId>, filter: &CheckpointFilter
    ) -> Vec<Checkpoint>;
    write fn delete_checkpoints(
        &self, tenant: &str, session_id: &SessionId, if_match: Option<IfMatch>
    ) -> u64;
    bulk fn delete_checkpoints_of_runs(&self, tenant: &str, run_ids: &[String]) -> u64;
    bulk fn prune_checkpoints(&self, tenant: &str, session_ids: &[SessionId], keep: Keep) -> u64;
});

within_deadline!(SessionStore {
    write fn create_session(&self, tenant: &str, session: NewSession) -> Session;
    read fn get_session(&self, tenant: &str, id: &SessionId) -> Session;
    read fn list_sessions(
        &self, tenant: &str, filter: &SessionFilter, page: &PageRequest
    ) -> Page<Session>;
    write fn update_session(
        &self, tenant: &str, id: &SessionId, patch: SessionPatch, if_match: Option<IfMatch>
    ) -> Session;
    bulk fn delete_session(&self, tenant: &str, id: &SessionId, if_match: Option<IfMatch>) -> ();
    write fn append_items(
        &self, tenant: &str, session_id: &SessionId, items: Vec<ItemBody>,
        idempotency: Option<IdempotencyKey>, if_match: Option<IfMatch>
    ) -> Appended;
    read fn list_items(&self, tenant: &str, session_id: &SessionId, page: &PageRequest) -> Page<Item>;
    read fn get_item(&self, tenant: &str, session_id: &SessionId, item_id: Uuid) -> Item;
    write fn delete_item(
        &self, tenant: &str, session_id: &SessionId, item_id: Uuid,
        idempotency: Option<IdempotencyKey>, if_match: Option<IfMatch>
    ) -> ();
    write fn pop_last_item(
        &self, tenant: &str, session_id: &SessionId, idempotency: Option<IdempotencyKey>,
        if_match: Option<IfMatch>
    ) -> Item;
    write fn replace_item(
        &self, tenant: &str, session_id: &SessionId, item_id: Uuid, body: ItemBody,
        idempotency: Option<IdempotencyKey>, if_match: Option<IfMatch>
    ) -> (Item, i64);
    bulk fn replace_items(
        &self, tenant: &str, session_id: &SessionId, items: Vec<ItemBody>, after: Option<Uuid>,
        idempotency: Option<IdempotencyKey>, if_match: Option<IfMatch>
    ) -> Appended;
    bulk fn clear_items(
        &self, tenant: &str, session_id: &SessionId, idempotency: Option<IdempotencyKey>,
        if_match: Option<IfMatch>
    ) -> ();
    bulk fn purge_idempotency_keys(&self, cutoff: DateTime<Utc>) -> u64;
    bulk fn sweep_expired(&self, batch: i64) -> Swept;
    read fn server_secret(&self, name: &str) -> String;
}

    /// Answers when the database does; once a write has failed for space or time, only
    /// when a write of its own commits again.
    async fn ping(&self) -> Result<()> {
        within(self.limit.min(PING_LIMIT), self.inner.ping()).await?;
        if self.writes_failing.load(Ordering::Relaxed) {
            self.write(self.inner.check_writes()).await?;
            self.writes_failing.store(false, Ordering::Relaxed);
        }
        Ok(())
    }

    async fn check_writes(&self) -> Result<()> {
        self.write(self.inner.check_writes()).await
    }

    fn pool_stats(&self) -> PoolStats {
        self.inner.pool_stats()
    }

    fn append_stats(&self) -> AppendStats {
        self.inner.append_stats()
    }
);

within_deadline!(AgentStore {
    write fn create_agent(&self, tenant: &str, agent: &Agent) -> ();
    read fn get_agent(&self, tenant: &str, id: &str) -> Agent;
    read fn list_agents(&self, tenant: &str, page: &PageRequest) -> Page<Agent>;
    write fn update_agent(&self, tenant: &str, id: &str, patch: AgentPatch) -> Agent;
    write fn delete_agent(&self, tenant: &str, id: &str) -> ();
});

within_deadline!(ApiKeyStore {
    write fn create_api_key(&self, key: &ApiKey, hash: &KeyHash) -> ();
    read fn list_api_keys(&self, tenant: Option<&str>, page: &PageRequest) -> Page<ApiKey>;
    write fn delete_api_key(&self, id: Uuid) -> ();
    read fn find_api_key(&self, hash: &KeyHash) -> Option<ApiKey>;
    write fn touch_api_key(&self, id: Uuid, at: DateTime<Utc>) -> ();
});

// Scans of every stored value, in batches of their own: no one deadline fits them.
#[async_trait]
impl AtRestStore for Deadline {
    async fn count_values_by_key(&self) -> Result<BTreeMap<Option<String>, u64>> {
        self.inner.count_values_by_key().await
    }

    fn key_ids(&self) -> Vec<String> {
        self.inner.key_ids()
    }

    async fn reencrypt(
        &self, batch: usize, progress: &(dyn Fn(Progress) + Send + Sync),
    ) -> Result<u64> {
        self.inner.reencrypt(batch, progress).await
    }
}

within_deadline!(RunStore {
    write fn create_run(
        &self, tenant: &str, session_id: &SessionId, run: NewRun, if_busy: IfBusy,
        start: Option<StartNow>, agentless: bool
    ) -> CreatedRun;
    read fn get_run(&self, tenant: &str, session_id: &SessionId, run_id: Uuid) -> Run;
    read fn locate_run(&self, tenant: &str, run_id: Uuid) -> RunRecord;
    write fn delete_run(&self, tenant: &str, session_id: &SessionId, run_id: Uuid) -> ();
    read fn replayed_run_id(&self, tenant: &str, key: &IdempotencyKey) -> Option<Uuid>;
    read fn list_runs(&self, tenant: &str, session_id: &SessionId, page: &PageRequest) -> Page<Run>;
    read fn run_events(
        &self, tenant: &str, session_id: &SessionId, run_id: Uuid, after: i64
    ) -> (Vec<RunEvent>, RunStatus);
    write fn stop_run(
        &self, tenant: &str, session_id: &SessionId, run_id: Uuid, action: StopAction
    ) -> Run;
    write fn forget_cancelled_run(
        &self, tenant: &str, session_id: &SessionId, run_id: Uuid
    ) -> Run;
    write fn answer_run(
        &self, tenant: &str, session_id: &SessionId, run_id: Uuid, answer: &RunAnswer,
        trace_parent: Option<String>
    ) -> (Run, i64);
    write fn claim_run(
        &self, worker: Uuid, lease: Duration, tenant_limit: Option<NonZeroU32>
    ) -> Option<Claim>;
    write fn renew_lease(&self, claim: &Claim, lease: Duration) -> bool;
    write fn save_run_events(&self, batches: &[RunFlush]) -> Vec<bool>;
    write fn finish_run(
        &self, claim: &Claim, record: &RunRecord, events: &[RunEvent],
        next_lease: Option<Duration>
    ) -> Finished;
    write fn take_steering(&self, claim: &Claim, after: i64) -> Vec<(i64, Steer)>;
    read fn steered_runs(&self, run_pks: &[i64]) -> Vec<i64>;
    write fn release_steering(&self, run_pk: Option<i64>) -> u64;
    bulk fn recover_expired_runs(&self, max_attempts: u32) -> (u64, u64);
});

within_deadline!(CompactionStore {
    read fn latest_compaction(&self, tenant: &str, session_id: &SessionId) -> Option<Compaction>;
    read fn context(&self, tenant: &str, session_id: &SessionId, idle: bool) -> Context;
    read fn appended_since(
        &self, tenant: &str, session_id: &SessionId, seq: i64
    ) -> (HistoryMark, Vec<Item>);
    write fn add_compaction(
        &self, tenant: &str, session_id: &SessionId, base: Option<&Compaction>,
        summarised: i64, compaction: &Compaction, if_match: Option<IfMatch>
    ) -> ();
    read fn list_compactions(
        &self, tenant: &str, session_id: &SessionId, page: &PageRequest
    ) -> Page<Compaction>;
    bulk fn fork_session(&self, tenant: &str, source: &SessionId, fork: NewFork) -> Forked;
});

within_deadline!(DeliveryStore {
    write fn claim_deliveries(&self, limit: i64, hold: Duration) -> Vec<Delivery>;
    write fn record_delivery(&self, delivery: &Delivery, attempt: &Attempt) -> ();
});
