//! Starting a run: a retry is answered with the run its first request created; a new
//! run is checked, configured and created, and executed at once when a worker is free.

use std::collections::{BTreeMap, HashSet};

use serde_json::value::RawValue;
use tokio::sync::oneshot;
use uuid::Uuid;

use super::config::{self, ConfigRequest};
use super::error::{Result, RunsError};
use super::follow::Created;
use super::{worker, Runs};
use crate::model::{
    json_error_message, run_items, IdempotencyKey, IfBusy, IfMatch, InvalidField, ItemBody,
    Metadata, NewRun, Run, RunConfig, RunEvent, RunStatus, SessionId, StopAction,
};
use crate::store::{SessionStore, StartNow, StoreError};

/// How many runs a request with `if_busy` `interrupt` or `rollback` stops before it
/// queues behind the rest.
const MAX_STOPS: usize = 8;

/// What a client asks of a new run.
#[derive(Debug)]
pub struct StartRun {
    /// A string (a user message), one item or a list of items, as the client sent it.
    pub input: Box<RawValue>,
    pub config: ConfigRequest,
    pub metadata: Option<BTreeMap<String, String>>,
    pub if_busy: IfBusy,
    /// Answered as queued, for the workers; otherwise started here when a worker is free.
    pub background: bool,
    pub idempotency: Option<IdempotencyKey>,
    /// See [`NewRun::if_match`].
    pub if_match: Option<IfMatch>,
    /// The run's id, when the caller named its session after it already.
    pub run_id: Option<Uuid>,
    /// See [`crate::model::RunRecord::request`].
    pub request: Option<Box<RawValue>>,
}

/// How a run is created: what it does on a busy session, whether it may start here at
/// once, and whether it was configured for a session without an agent (see
/// `RunStore::create_run`).
#[derive(Debug, Clone, Copy)]
struct Creation {
    if_busy: IfBusy,
    start_now: bool,
    agentless: bool,
}

/// A run as a start request left it.
#[derive(Debug)]
pub struct Started {
    pub run: Run,
    /// The run of an earlier request with the same Idempotency-Key.
    pub replayed: bool,
    /// The names of the function tools the client runs (those without a webhook), for a
    /// run this request created: an adapter that hands their calls to its client needs
    /// no read of the run for them.
    pub client_tools: Option<HashSet<String>>,
    /// Set when this request created the run queued: following it needs no read yet.
    pub(super) created: Option<Created>,
}

impl Started {
    /// A run this request did not create queued (a replay, a run started at once or
    /// the unfinished run steered input joined).
    fn found(run: Run, replayed: bool) -> Self {
        Self { run, replayed, created: None, client_tools: None }
    }

    /// The run a creation answered with, which is new if its id is `new_id`; `seen` is
    /// how many starts the hub had announced before the creation.
    fn of(run: Run, replayed: bool, new_id: Uuid, seen: u64) -> Self {
        let queued = run.status == RunStatus::Queued && run.id == new_id && !replayed;
        let created = queued.then(|| Created { event: RunEvent::for_status(1, &run), seen });
        Self { run, replayed, created, client_tools: None }
    }

    /// Names the client's tools if the run is the one this request created, as `id`.
    fn created_here(mut self, id: Uuid, client_tools: HashSet<String>) -> Self {
        if self.run.id == id && !self.replayed {
            self.client_tools = Some(client_tools);
        }
        self
    }
}

impl Runs {
    /// Starts a run on the session (created if absent), or finds the run an earlier
    /// request with the same Idempotency-Key started.
    pub async fn start(
        &self, tenant: &str, session_id: &SessionId, request: StartRun,
    ) -> Result<Started> {
        let store = &*self.engine.store;
        if let Some(key) = &request.idempotency {
            // Answered before anything of the request is looked up again: its agent may
            // be gone by now. `create_run` decides again, atomically, for racing retries.
            if let Some(run) = replayed_run(store, tenant, session_id, key).await? {
                return Ok(Started::found(run, true));
            }
        }
        let input = parse_input(&request.input)?;
        let metadata = Metadata::new(request.metadata.unwrap_or_default())?;
        let settings = &self.engine.settings;
        // Most sessions have no agent: the run is configured without one and its creation
        // refuses a session that has one, rather than a read of the session before every
        // run. A conversation's session must exist, which its read checks.
        let agentless = !request.config.existing_session;
        let session_agent = if agentless {
            None
        } else {
            config::existing_session_agent(store, tenant, session_id).await?
        };
        let config =
            config::resolve(store, settings, tenant, session_agent, &request.config).await?;
        let mut run = NewRun {
            id: request.run_id.unwrap_or_else(Uuid::now_v7),
            input,
            config,
            metadata,
            idempotency: request.idempotency,
            if_match: request.if_match,
            request: request.request,
            trace_parent: crate::telemetry::traceparent(),
        };
        let how = Creation { if_busy: request.if_busy, start_now: !request.background, agentless };
        let (id, tools) = (run.id, client_tools(&run.config));
        if !agentless {
            let started = self.stop_and_create(tenant, session_id, run, how).await?;
            return Ok(started.created_here(id, tools));
        }
        match self.stop_and_create(tenant, session_id, run.clone(), how).await {
            Err(RunsError::Store(StoreError::SessionHasAgent(agent))) => {
                run.config =
                    config::resolve(store, settings, tenant, Some(agent), &request.config).await?;
                let (how, tools) =
                    (Creation { agentless: false, ..how }, client_tools(&run.config));
                let started = self.stop_and_create(tenant, session_id, run, how).await?;
                Ok(started.created_here(id, tools))
            }
            started => Ok(started?.created_here(id, tools)),
        }
    }

    /// Creates the run as `how.if_busy` asks, stopping the session's unfinished runs first
    /// for `interrupt` and `rollback`.
    async fn stop_and_create(
        &self, tenant: &str, session_id: &SessionId, run: NewRun, how: Creation,
    ) -> Result<Started> {
        let action = match how.if_busy {
            IfBusy::Interrupt => StopAction::Interrupt,
            IfBusy::Rollback => StopAction::Rollback,
            _ => return self.create(tenant, session_id, run, how).await,
        };
        // Each unfinished run of the session is stopped in turn, oldest first; a run that
        // finishes meanwhile needs no stopping. Should other requests keep queueing runs,
        // the run queues behind them after a few rounds rather than racing forever.
        for _ in 0..MAX_STOPS {
            let attempt = Creation { if_busy: IfBusy::Reject, ..how };
            let busy = match self.create(tenant, session_id, run.clone(), attempt).await {
                Err(RunsError::Store(StoreError::SessionBusy(active))) => active,
                created => return created,
            };
            match self.stop(tenant, session_id, busy, action).await {
                Ok(_)
                | Err(RunsError::Store(StoreError::RunFinished(_) | StoreError::RunNotFound)) => {}
                Err(error) => return Err(error),
            }
        }
        self.create(tenant, session_id, run, Creation { if_busy: IfBusy::Enqueue, ..how }).await
    }

    /// Creates a run. With `start_now` and a worker slot free, a run on an idle session
    /// is claimed as it is created and executed at once; any other run is queued for the
    /// workers.
    async fn create(
        &self, tenant: &str, session_id: &SessionId, run: NewRun, how: Creation,
    ) -> Result<Started> {
        let Creation { if_busy, start_now, agentless } = how;
        let engine = self.engine.clone();
        // Under a tenant limit every run goes through the claim, which alone counts the
        // tenant's executing runs across replicas.
        let start_now = start_now && engine.settings.tenant_max_active_runs.is_none();
        let slot = start_now.then(|| engine.slots.clone().try_acquire_owned().ok()).flatten();
        // Before the run exists, so that its start cannot be missed.
        let seen = engine.hub.announced();
        let new_id = run.id;
        let Some(slot) = slot else {
            let created =
                engine.store.create_run(tenant, session_id, run, if_busy, None, agentless).await?;
            if !created.replayed {
                self.wake();
            }
            return Ok(Started::of(created.run, created.replayed, new_id, seen));
        };
        // Creation and the execution it may start run in a task of their own: a request
        // that goes away while its run is being committed must not leave the run claimed
        // by no one until the lease lapses.
        let (answer, answered) = oneshot::channel::<Result<Started, StoreError>>();
        let (tenant, session_id) = (tenant.to_owned(), session_id.clone());
        engine.started.clone().spawn(async move {
            let start = StartNow { worker: Uuid::now_v7(), lease: engine.settings.lease };
            let created = match engine
                .store
                .create_run(&tenant, &session_id, run, if_busy, Some(start), agentless)
                .await
            {
                Ok(created) => created,
                Err(error) => {
                    let _ = answer.send(Err(error));
                    return;
                }
            };
            // Live before the request follows it, with the one event the store wrote.
            // Boxed, the task holds a pointer while it runs the execution, rather than
            // room for the execution twice over (the value, and the value moved to be
            // awaited): 32 KB a run.
            let execution = created.claim.map(|claim| {
                let event = RunEvent::for_status(1, &created.run);
                Box::pin(worker::execute_claimed(engine.clone(), claim, vec![event], None))
            });
            if execution.is_none() && !created.replayed {
                engine.work.notify_one();
            }
            let started = Started::of(created.run, created.replayed, new_id, seen);
            let _ = answer.send(Ok(started));
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
        match answered.await {
            Ok(started) => Ok(started?),
            Err(_) => Err(RunsError::Stopped),
        }
    }
}

/// The names of the function tools of `config` that the client runs: those without a
/// webhook.
pub fn client_tools(config: &RunConfig) -> HashSet<String> {
    let tools = config.functions().filter(|tool| tool.webhook.is_none());
    tools.map(|tool| tool.name.clone()).collect()
}

/// The run that an earlier request with `key` created, if it still exists. One whose
/// run was deleted since (with its session) is created again by the retry.
async fn replayed_run(
    store: &dyn SessionStore, tenant: &str, session_id: &SessionId, key: &IdempotencyKey,
) -> Result<Option<Run>, StoreError> {
    let Some(run_id) = store.replayed_run_id(tenant, key).await? else {
        return Ok(None);
    };
    match store.get_run(tenant, session_id, run_id).await {
        Ok(run) => Ok(Some(run)),
        Err(StoreError::RunNotFound | StoreError::SessionNotFound) => Ok(None),
        Err(error) => Err(error),
    }
}

/// The items of a run's input.
fn parse_input(input: &RawValue) -> Result<Vec<Box<RawValue>>, InvalidField> {
    let invalid = |e: serde_json::Error| InvalidField::new("input", json_error_message(&e));
    let text = input.get().trim_start();
    if text.starts_with('"') {
        let message: String = serde_json::from_str(text).map_err(invalid)?;
        if message.is_empty() {
            return Err(InvalidField::new("input", "must not be empty"));
        }
        return Ok(vec![run_items::user_message(&message)]);
    }
    if text.starts_with('{') {
        return Ok(vec![ItemBody::new("input", input.to_owned())?.into_raw()]);
    }
    if text.starts_with('[') {
        let items: Vec<Box<RawValue>> = serde_json::from_str(text).map_err(invalid)?;
        if items.is_empty() {
            return Err(InvalidField::new("input", "must hold at least one item"));
        }
        return Ok(ItemBody::batch("input", items)?.into_iter().map(ItemBody::into_raw).collect());
    }
    Err(InvalidField::new("input", "must be a string, an item object or a list of items"))
}
