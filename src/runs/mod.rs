//! The run engine: workers claim queued runs from the store, call the LLM, run webhook
//! tools and commit each finished turn atomically; followers stream the runs' events.

mod calls;
mod compact;
mod config;
mod context;
mod deliveries;
mod error;
mod execution;
mod flush;
mod follow;
mod history;
mod hub;
mod llm_calls;
mod mcp;
mod placement;
mod signature;
mod spans;
mod start;
mod tools;
mod turn;
mod worker;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

pub use compact::{CompactRequest, CONVERSATION_HEADING, SUMMARY_PROMPT};
pub use config::ConfigRequest;
pub use context::SUMMARY_HEADING;
pub use error::RunsError;
pub use placement::{Placed, Placement};
pub use start::{client_tools, StartRun, Started};

use crate::llm::LlmClient;
use crate::metrics::EngineMetrics;
use crate::model::{
    Page, PageRequest, Run, RunAnswer, RunRecord, RunStatus, SessionId, StopAction, WebhookPolicy,
};
use crate::store::{SessionStore, StoreError};
use error::Result;
use hub::Hub;

/// How the engine executes runs.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// Worker tasks of this process; 0 runs none (another replica executes the runs).
    pub workers: usize,
    /// How long a claim holds without renewal; a dead worker's runs are retried after it.
    pub lease: Duration,
    /// Claims of one run before a lapsed lease fails it with `worker_lost`.
    pub max_attempts: u32,
    /// How often idle workers and followers look for work another replica made.
    pub poll_interval: Duration,
    /// How often a running run's events are written to the database.
    pub flush_interval: Duration,
    pub webhooks: WebhookPolicy,
    /// The model of runs whose agents name none (`LLM_MODEL`).
    pub default_model: Option<String>,
    /// Runs of one tenant executing at once, across replicas (`TENANT_MAX_ACTIVE_RUNS`).
    pub tenant_max_active_runs: Option<std::num::NonZeroU32>,
    /// Signs completion webhooks (`WEBHOOK_SIGNING_SECRET`); none refuses them.
    pub webhook_signing_secret: Option<crate::secret::Secret>,
    /// How long one request to an MCP server may take (`MCP_CALL_TIMEOUT_SECS`).
    pub mcp_call_timeout: Duration,
    /// The bytes of memory histories kept prepared between runs may hold (`HISTORY_CACHE_MB`).
    pub history_cache_bytes: u64,
}

impl Default for RunSettings {
    fn default() -> Self {
        Self {
            workers: 4,
            lease: Duration::from_secs(30),
            max_attempts: 3,
            poll_interval: Duration::from_millis(500),
            flush_interval: Duration::from_millis(200),
            webhooks: WebhookPolicy::default(),
            default_model: None,
            tenant_max_active_runs: None,
            webhook_signing_secret: None,
            mcp_call_timeout: Duration::from_secs(60),
            history_cache_bytes: 64 << 20,
        }
    }
}

pub(crate) struct Engine {
    store: Arc<dyn SessionStore>,
    llm: Arc<dyn LlmClient>,
    settings: RunSettings,
    hub: Hub,
    /// Wakes an idle worker when a run becomes claimable.
    work: Notify,
    /// One per worker: held by a worker while it claims and executes, or by a run that
    /// its creation started at once.
    slots: Arc<Semaphore>,
    /// The runs started at creation, which shutdown waits for like a worker's run.
    started: TaskTracker,
    /// The `pk`s of runs that ended here since the flush last looked: it queues the
    /// input steered into them that they never took (see `flush::release_steering`).
    ended: std::sync::Mutex<Vec<i64>>,
    webhook_client: reqwest::Client,
    metrics: Arc<EngineMetrics>,
    histories: history::Histories,
}

/// The handle the API and the application hold. Cheap to clone.
#[derive(Clone)]
pub struct Runs {
    engine: Arc<Engine>,
}

impl Runs {
    pub fn new(
        store: Arc<dyn SessionStore>, llm: Arc<dyn LlmClient>, settings: RunSettings,
        metrics: Arc<EngineMetrics>,
    ) -> Self {
        let webhook_client = reqwest::Client::builder()
            // A redirect could lead past the allow-list.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .build()
            .expect("the TLS backend initialises");
        Self {
            engine: Arc::new(Engine {
                store,
                llm,
                settings: settings.clone(),
                hub: Hub::default(),
                work: Notify::new(),
                slots: Arc::new(Semaphore::new(settings.workers)),
                started: TaskTracker::new(),
                ended: std::sync::Mutex::default(),
                webhook_client,
                metrics,
                histories: history::Histories::new(settings.history_cache_bytes),
            }),
        }
    }

    fn store(&self) -> &dyn SessionStore {
        &*self.engine.store
    }

    pub fn settings(&self) -> &RunSettings {
        &self.engine.settings
    }

    /// Tells the workers a run may be claimable.
    pub fn wake(&self) {
        self.engine.work.notify_one();
    }

    /// Waits for the runs started at creation; call after the requests have ended.
    pub async fn drain_started(&self) {
        self.engine.started.close();
        self.engine.started.wait().await;
    }

    /// Starts the workers and the recovery of lapsed leases; they stop when `shutdown`
    /// is cancelled, each after the run in hand.
    pub fn start_workers(&self, shutdown: CancellationToken) -> JoinSet<()> {
        let mut tasks = JoinSet::new();
        for _ in 0..self.engine.settings.workers {
            tasks.spawn(worker::work(self.engine.clone(), shutdown.clone()));
        }
        if self.engine.settings.workers > 0 {
            tasks.spawn(worker::poll(self.engine.clone(), shutdown.clone()));
            tasks.spawn(flush::flush(self.engine.clone(), shutdown.clone()));
        }
        tasks.spawn(deliveries::deliver(self.engine.clone(), shutdown.clone()));
        tasks.spawn(worker::recover(self.engine.clone(), shutdown));
        tasks
    }

    /// Executes claimable runs until none is left; returns how many. Lets tests drain
    /// the queue deterministically.
    pub async fn run_pending(&self) -> Result<usize, StoreError> {
        let (mut done, never) = (0, CancellationToken::new());
        loop {
            match worker::claim_and_execute(&self.engine, Uuid::now_v7(), &never).await? {
                0 => return Ok(done),
                executed => done += executed,
            }
        }
    }

    /// Re-queues or fails runs whose lease lapsed; returns (re-queued, failed).
    pub async fn recover_expired(&self) -> Result<(u64, u64), StoreError> {
        let max_attempts = self.engine.settings.max_attempts;
        self.store().recover_expired_runs(max_attempts).await
    }

    /// Stops the run as `action` says: a worker of this process drops its LLM call and
    /// ends the run itself; otherwise the store does, and a worker elsewhere loses its
    /// lease. A rollback then deletes the cancelled run.
    pub async fn stop(
        &self, tenant: &str, session_id: &SessionId, run_id: Uuid, action: StopAction,
    ) -> Result<Run> {
        if let Some(live) = self.engine.hub.get(run_id) {
            let decided = live.stop(action);
            let run = self.wait(tenant, session_id, run_id, live.first_seq - 1).await?;
            let status = run.status;
            // Cancelled for this request, not an earlier one.
            if action == StopAction::Rollback && status == RunStatus::Cancelled && decided {
                return Ok(self.store().forget_cancelled_run(tenant, session_id, run_id).await?);
            }
            if status.is_final() {
                // Another request stopped it first, or it finished before a rollback
                // could: it had finished for this request. A run that finished as this
                // request stopped it is answered as it ended.
                if !decided || action == StopAction::Rollback {
                    return Err(StoreError::RunFinished(status).into());
                }
                return Ok(run);
            }
        }
        let run = self.store().stop_run(tenant, session_id, run_id, action).await?;
        // A request here waiting for the run to start learns now that it will not.
        self.engine.hub.announce(run_id);
        Ok(run)
    }

    /// The tenant's run `run_id`, whichever session it is in, with its configuration and
    /// what its protocol adapter kept of its request.
    pub async fn locate(&self, tenant: &str, run_id: Uuid) -> Result<RunRecord> {
        Ok(self.store().locate_run(tenant, run_id).await?)
    }

    /// Deletes a finished run and its events; its turn stays in the session.
    pub async fn delete(&self, tenant: &str, session_id: &SessionId, run_id: Uuid) -> Result<()> {
        Ok(self.store().delete_run(tenant, session_id, run_id).await?)
    }

    pub async fn get(&self, tenant: &str, session_id: &SessionId, run_id: Uuid) -> Result<Run> {
        Ok(self.store().get_run(tenant, session_id, run_id).await?)
    }

    /// The session's runs, newest first unless the page asks otherwise.
    pub async fn list(
        &self, tenant: &str, session_id: &SessionId, page: &PageRequest,
    ) -> Result<Page<Run>> {
        Ok(self.store().list_runs(tenant, session_id, page).await?)
    }

    /// Answers a `requires_action` run's tool calls, with their outputs or approvals, and
    /// hands it to the workers. Returns the seq of the run's last event: the
    /// continuation's events follow it.
    pub async fn answer(
        &self, tenant: &str, session_id: &SessionId, run_id: Uuid, answer: &RunAnswer,
    ) -> Result<i64> {
        let trace_parent = crate::telemetry::traceparent();
        let store = self.store();
        let (_, after) = store.answer_run(tenant, session_id, run_id, answer, trace_parent).await?;
        self.wake();
        Ok(after)
    }
}
