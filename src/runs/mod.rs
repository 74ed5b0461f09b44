//! The run engine: workers claim queued runs from the store, call the LLM, run webhook
//! tools and commit each finished turn atomically; followers stream the runs' events.

mod context;
mod follow;
mod hub;
mod tools;
mod turn;
mod worker;

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::sync::{oneshot, Notify, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

use crate::llm::LlmClient;
use crate::model::{IfBusy, NewRun, Run, RunEvent, SessionId, WebhookPolicy};
use crate::store::{SessionStore, StartNow, StoreError};
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
    webhook_client: reqwest::Client,
}

/// The handle the API and the application hold. Cheap to clone.
#[derive(Clone)]
pub struct Runs {
    engine: Arc<Engine>,
}

impl Runs {
    pub fn new(
        store: Arc<dyn SessionStore>,
        llm: Arc<dyn LlmClient>,
        settings: RunSettings,
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
                webhook_client,
            }),
        }
    }

    pub fn settings(&self) -> &RunSettings {
        &self.engine.settings
    }

    /// Tells the workers a run may be claimable.
    pub fn wake(&self) {
        self.engine.work.notify_one();
    }

    /// Creates a run (see [`SessionStore::create_run`]) and returns it, and whether it
    /// is the run of an earlier request with the same Idempotency-Key. With `start_now`
    /// and a worker slot free, a run on an idle session is claimed as it is created and
    /// executed at once; any other run is queued for the workers.
    pub async fn create(
        &self,
        tenant: &str,
        session_id: &SessionId,
        run: NewRun,
        if_busy: IfBusy,
        start_now: bool,
    ) -> Result<(Run, bool), StoreError> {
        let engine = self.engine.clone();
        let slot = start_now
            .then(|| engine.slots.clone().try_acquire_owned().ok())
            .flatten();
        let Some(slot) = slot else {
            let created = engine
                .store
                .create_run(tenant, session_id, run, if_busy, None)
                .await?;
            if !created.replayed {
                self.wake();
            }
            return Ok((created.run, created.replayed));
        };
        // Creation and the execution it may start run in a task of their own: a request
        // that goes away while its run is being committed must not leave the run claimed
        // by no one until the lease lapses.
        let (answer, answered) = oneshot::channel();
        let (tenant, session_id) = (tenant.to_owned(), session_id.clone());
        engine.started.clone().spawn(async move {
            let start = StartNow {
                worker: Uuid::now_v7(),
                lease: engine.settings.lease,
            };
            let created = match engine
                .store
                .create_run(&tenant, &session_id, run, if_busy, Some(start))
                .await
            {
                Ok(created) => created,
                Err(error) => {
                    let _ = answer.send(Err(error));
                    return;
                }
            };
            // Live before the request follows it, with the one event the store wrote.
            let execution = created.claim.map(|claim| {
                let event = RunEvent::for_status(1, &created.run);
                worker::execute_claimed(engine.clone(), claim, vec![event])
            });
            if execution.is_none() && !created.replayed {
                engine.work.notify_one();
            }
            let _ = answer.send(Ok((created.run, created.replayed)));
            if let Some(execution) = execution {
                if let Err(error) = execution.await {
                    tracing::warn!(%error, "cannot finish a run");
                }
                drop(slot);
                // A run queued behind this one may be claimable now.
                engine.work.notify_one();
            }
        });
        // Only a panic in the task drops the answer unsent.
        answered
            .await
            .unwrap_or(Err(StoreError::Database(sqlx::Error::WorkerCrashed)))
    }

    /// Waits for the runs started at creation; call after the requests have ended.
    pub async fn drain_started(&self) {
        self.engine.started.close();
        self.engine.started.wait().await;
    }

    /// Starts the workers and the recovery of lapsed leases; they stop when `shutdown`
    /// is cancelled, each after the run in hand.
    pub fn start(&self, shutdown: CancellationToken) -> JoinSet<()> {
        let mut tasks = JoinSet::new();
        for _ in 0..self.engine.settings.workers {
            tasks.spawn(worker::work(self.engine.clone(), shutdown.clone()));
        }
        tasks.spawn(worker::recover(self.engine.clone(), shutdown));
        tasks
    }

    /// Executes claimable runs until none is left; returns how many. Lets tests drain
    /// the queue deterministically.
    pub async fn run_pending(&self) -> Result<usize, StoreError> {
        let mut done = 0;
        while worker::claim_and_execute(&self.engine, Uuid::now_v7()).await? {
            done += 1;
        }
        Ok(done)
    }

    /// Re-queues or fails runs whose lease lapsed; returns (re-queued, failed).
    pub async fn recover_expired(&self) -> Result<(u64, u64), StoreError> {
        self.engine
            .store
            .recover_expired_runs(self.engine.settings.max_attempts)
            .await
    }

    /// The run's events after `after`, live while it executes; the stream ends after a
    /// final event or `run.requires_action`.
    pub fn events(
        &self,
        tenant: &str,
        session_id: &SessionId,
        run_id: Uuid,
        after: i64,
    ) -> impl Stream<Item = Result<RunEvent, StoreError>> + Send + 'static {
        follow::follow(
            self.engine.clone(),
            tenant.to_owned(),
            session_id.clone(),
            run_id,
            after,
        )
    }

    /// Waits until the run finishes or needs the client, and returns it.
    pub async fn wait(
        &self,
        tenant: &str,
        session_id: &SessionId,
        run_id: Uuid,
        after: i64,
    ) -> Result<Run, StoreError> {
        let mut events = std::pin::pin!(self.events(tenant, session_id, run_id, after));
        let mut last = None;
        while let Some(event) = events.next().await {
            last = Some(event?);
        }
        // The event that ended the stream carries the run as it was committed.
        match last.filter(RunEvent::ends_stream) {
            Some(event) => serde_json::from_str(event.data.get())
                .map_err(|e| StoreError::Corrupt(format!("run event: {e}"))),
            None => self.engine.store.get_run(tenant, session_id, run_id).await,
        }
    }

    /// Cancels the run: a worker of this process drops its LLM call and records the
    /// cancellation itself; otherwise the store does, and a worker elsewhere loses its
    /// lease.
    pub async fn cancel(
        &self,
        tenant: &str,
        session_id: &SessionId,
        run_id: Uuid,
    ) -> Result<Run, StoreError> {
        if let Some(live) = self.engine.hub.get(run_id) {
            live.cancel.cancel();
            let run = self
                .wait(tenant, session_id, run_id, live.first_seq - 1)
                .await?;
            if run.status.is_final() {
                return Ok(run);
            }
        }
        self.engine
            .store
            .cancel_run(tenant, session_id, run_id)
            .await
    }
}
