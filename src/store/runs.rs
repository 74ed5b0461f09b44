use std::time::Duration;

use std::num::NonZeroU32;

use async_trait::async_trait;
use uuid::Uuid;

use super::Result;
use crate::model::{
    IdempotencyKey, IfBusy, NewRun, Page, PageRequest, Run, RunAnswer, RunEvent, RunRecord,
    RunStatus, SessionId, Steer, StopAction,
};

/// Runs, their events, and the queue the workers claim them from.
///
/// A run is executed by the worker holding its lease. Everything a worker writes is
/// conditional on still holding it, so a worker that lost its lease (it stalled, the run
/// was cancelled, another worker took over) can never commit.
#[async_trait]
pub trait RunStore: Send + Sync {
    /// Queues a run, creating the session if absent, and records its `run.created`
    /// event. While the session has an unfinished run, `Reject` fails with
    /// [`super::StoreError::SessionBusy`] and `Enqueue` queues behind it. With `start`,
    /// a run on an idle session is claimed for that worker in the same transaction and
    /// its claim returned. A run whose Idempotency-Key came with the same request before
    /// is not created again: the first request's run is returned, as it is now. With
    /// `agentless`, the run was configured for a session without an agent: one whose
    /// session has an agent is not created, [`super::StoreError::SessionHasAgent`] names
    /// the agent.
    async fn create_run(
        &self, tenant: &str, session_id: &SessionId, run: NewRun, if_busy: IfBusy,
        start: Option<StartNow>, agentless: bool,
    ) -> Result<CreatedRun>;

    async fn get_run(&self, tenant: &str, session_id: &SessionId, run_id: Uuid) -> Result<Run>;

    /// The run `run_id` of the tenant, whichever live session it is in, with what the
    /// engine keeps of it.
    async fn locate_run(&self, tenant: &str, run_id: Uuid) -> Result<RunRecord>;

    /// Deletes a finished run and its events; the items its turn appended stay in the
    /// session. Fails with [`super::StoreError::SessionBusy`] while the run is
    /// unfinished.
    async fn delete_run(&self, tenant: &str, session_id: &SessionId, run_id: Uuid) -> Result<()>;

    /// The id of the run that an earlier request with `key` created within the key's
    /// lifetime. Fails with [`super::StoreError::IdempotencyKeyReused`] when that
    /// request differed.
    async fn replayed_run_id(&self, tenant: &str, key: &IdempotencyKey) -> Result<Option<Uuid>>;

    /// Newest first unless the page asks otherwise.
    async fn list_runs(
        &self, tenant: &str, session_id: &SessionId, page: &PageRequest,
    ) -> Result<Page<Run>>;

    /// The run's events after `after`, oldest first, and its status when they were read.
    async fn run_events(
        &self, tenant: &str, session_id: &SessionId, run_id: Uuid, after: i64,
    ) -> Result<(Vec<RunEvent>, RunStatus)>;

    /// Stops an unfinished run that no worker of this process holds; a worker elsewhere
    /// loses its lease with it. `Interrupt` keeps what the run's stored events show it
    /// finished and the input steered into it. `Rollback` deletes the run, its events and
    /// its Idempotency-Key, and returns it as it was, cancelled. Fails with
    /// [`super::StoreError::RunFinished`].
    async fn stop_run(
        &self, tenant: &str, session_id: &SessionId, run_id: Uuid, action: StopAction,
    ) -> Result<Run>;

    /// Rolls back a run that a worker of this process has just cancelled for it, as
    /// `stop_run` rolls back an unfinished one. Fails with
    /// [`super::StoreError::RunFinished`] unless the run is cancelled.
    async fn forget_cancelled_run(
        &self, tenant: &str, session_id: &SessionId, run_id: Uuid,
    ) -> Result<Run>;

    /// Answers a `requires_action` run's tool calls (with their outputs or approvals) and
    /// hands it back to the workers. Returns the run and the seq of its last event: the
    /// continuation's events follow it.
    async fn answer_run(
        &self, tenant: &str, session_id: &SessionId, run_id: Uuid, answer: &RunAnswer,
        trace_parent: Option<String>,
    ) -> Result<(Run, i64)>;

    /// Leases to `worker` a claimable run whose session has no other run executing: of
    /// the tenants with the fewest runs executing (and fewer than `tenant_limit`), the
    /// oldest run. So tenants take turns, and one with many queued runs starves none.
    async fn claim_run(
        &self, worker: Uuid, lease: Duration, tenant_limit: Option<NonZeroU32>,
    ) -> Result<Option<Claim>>;

    /// Extends the lease; false when it was lost.
    async fn renew_lease(&self, claim: &Claim, lease: Duration) -> Result<bool>;

    /// Records events of runs in progress, and the LLM requests they made, all in one
    /// transaction (one statement on Postgres); for each batch, false when its run's
    /// lease was lost, and then nothing of it is stored. Events stored before (a batch
    /// saved twice) are left as they are; requests are counted in the run's usage from
    /// then on, whatever becomes of the execution that made them.
    async fn save_run_events(&self, batches: &[RunFlush]) -> Result<Vec<bool>>;

    /// Writes the run as `record` says, with its last events, in one transaction and
    /// releases the lease. A completed run appends its input and output to the session
    /// and a finished one adds its usage; a `requires_action` run waits for the client.
    /// `written` is false when the lease was lost, and then nothing is written. With
    /// `next_lease`, the same transaction (one statement on Postgres) also leases the
    /// claim's worker its next run, as `claim_run` without a tenant limit would, so that
    /// a worker draining the queue commits once per run. On Postgres that claim reads the
    /// queue as it was before the finish: it passes over a run queued behind the finished
    /// one on its session (which a claim of its own then finds) and counts the finished
    /// run as executing when it orders the tenants. A run it claimed that cannot be taken
    /// up goes back to the queue as it was.
    async fn finish_run(
        &self, claim: &Claim, record: &RunRecord, events: &[RunEvent], next_lease: Option<Duration>,
    ) -> Result<Finished>;

    /// The input steered into the claimed run after number `after` (see
    /// `RunRecord::steered_through`), each with its number.
    async fn take_steering(&self, claim: &Claim, after: i64) -> Result<Vec<(i64, Steer)>>;

    /// Which of the runs `run_pks` have input steered into them, taken or not.
    async fn steered_runs(&self, run_pks: &[i64]) -> Result<Vec<i64>>;

    /// Queues the input that finished runs (`run_pk`, or all of them) never took as runs
    /// of their own, as `enqueue` would have. Returns how many it queued.
    async fn release_steering(&self, run_pk: Option<i64>) -> Result<u64>;

    /// Re-queues runs whose worker let the lease lapse, or fails them with `worker_lost`
    /// after `max_attempts` claims. Returns (re-queued, failed).
    async fn recover_expired_runs(&self, max_attempts: u32) -> Result<(u64, u64)>;
}

/// What `create_run` did.
#[derive(Debug)]
pub struct CreatedRun {
    pub run: Run,
    /// The claim of a run started as it was created.
    pub claim: Option<Claim>,
    /// The request repeated an earlier one's Idempotency-Key: `run` is that run.
    pub replayed: bool,
}

/// What `finish_run` did.
#[derive(Debug)]
pub struct Finished {
    /// The run was written: its worker still held it.
    pub written: bool,
    /// The worker's next run, when the finish claimed one.
    pub next: Option<Claim>,
}

/// A worker of this process that is free to execute a new run at once: claiming the run
/// as it is created spares it a commit and a trip through the queue.
#[derive(Debug, Clone, Copy)]
pub struct StartNow {
    pub worker: Uuid,
    pub lease: Duration,
}

/// A run leased to a worker.
/// What names the lease of a claimed run: events are stored only while it holds.
#[derive(Debug, Clone)]
pub struct RunLease {
    pub tenant: String,
    pub run_pk: i64,
    pub worker: Uuid,
}

/// What a flush stores of one executing run.
#[derive(Debug, Clone)]
pub struct RunFlush {
    pub lease: RunLease,
    /// Its events not stored yet.
    pub events: Vec<RunEvent>,
    /// The requests to the LLM it made since the last flush.
    pub llm_calls: i64,
}

impl RunFlush {
    /// Nothing to store: no event, no request.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.llm_calls == 0
    }
}

#[derive(Debug, Clone)]
pub struct Claim {
    pub tenant: String,
    pub run_pk: i64,
    pub worker: Uuid,
    pub record: RunRecord,
    /// The seq of the newest event stored before the claim.
    pub last_event_seq: i64,
    pub attempts: i64,
    /// The run was claimed by the transaction that created it, on a session without
    /// items: its history is empty, as of its creation, and need not be read. A run that
    /// starts later reads the history its claim finds.
    pub history_empty: bool,
    /// Input had been steered into the run when it was claimed. When none had, the
    /// run's first model call need not look: input steered in after the claim is as
    /// late for it as input that comes during the call.
    pub steered: bool,
}

impl Claim {
    pub fn lease(&self) -> RunLease {
        RunLease { tenant: self.tenant.clone(), run_pk: self.run_pk, worker: self.worker }
    }
}
