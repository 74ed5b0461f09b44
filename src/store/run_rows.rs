//! Rows of runs and their events as both backends return them, and the changes to a run
//! record that both backends make the same way.

use chrono::{DateTime, Utc};
use serde_json::value::RawValue;
use uuid::Uuid;

use super::rows::Timestamp;
use super::{Claim, StoreError};
use crate::model::{
    Agent, IfBusy, NewRun, Run, RunError, RunEvent, RunRecord, RunStatus, SessionId, ToolOutput,
    Usage,
};

pub(super) const RUN_COLUMNS: &str = "r.status, r.started_at, r.finished_at, r.body";

/// The statuses of a session's unfinished runs, as an SQL list.
pub(super) const UNFINISHED: &str = "('queued', 'running', 'requires_action')";

#[derive(sqlx::FromRow)]
pub(super) struct RunRow {
    status: String,
    started_at: Option<Timestamp>,
    finished_at: Option<Timestamp>,
    body: String,
}

impl RunRow {
    /// The stored document, with the columns that change without it (status, times)
    /// taken from the columns.
    pub(super) fn into_record(self) -> Result<RunRecord, StoreError> {
        let mut record: RunRecord = serde_json::from_str(&self.body)
            .map_err(|e| StoreError::Corrupt(format!("run document: {e}")))?;
        record.run.status = RunStatus::parse(&self.status)
            .ok_or_else(|| StoreError::Corrupt(format!("run status `{}`", self.status)))?;
        record.run.started_at = self.started_at.map(Timestamp::into_inner);
        record.run.finished_at = self.finished_at.map(Timestamp::into_inner);
        Ok(record)
    }
}

/// A claimed or locked run with its bookkeeping columns.
#[derive(sqlx::FromRow)]
pub(super) struct LockedRunRow {
    pub pk: i64,
    pub tenant_id: String,
    pub session_pk: i64,
    pub last_event_seq: i64,
    pub attempts: i64,
    #[sqlx(flatten)]
    pub run: RunRow,
}

impl LockedRunRow {
    pub(super) fn into_claim(self, worker: Uuid) -> Result<Claim, StoreError> {
        Ok(Claim {
            tenant: self.tenant_id,
            run_pk: self.pk,
            worker,
            last_event_seq: self.last_event_seq,
            attempts: self.attempts,
            record: self.run.into_record()?,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct EventRow {
    seq: i64,
    event: String,
    data: String,
}

pub(super) fn events(rows: Vec<EventRow>) -> Result<Vec<RunEvent>, StoreError> {
    rows.into_iter()
        .map(|row| {
            Ok(RunEvent {
                seq: row.seq,
                event: row.event,
                data: RawValue::from_string(row.data)
                    .map_err(|e| StoreError::Corrupt(format!("run event: {e}")))?,
            })
        })
        .collect()
}

#[derive(sqlx::FromRow)]
pub(super) struct AgentRow {
    body: String,
}

impl TryFrom<AgentRow> for Agent {
    type Error = StoreError;

    fn try_from(row: AgentRow) -> Result<Self, StoreError> {
        serde_json::from_str(&row.body).map_err(|e| StoreError::Corrupt(format!("agent: {e}")))
    }
}

/// The record of a new, queued run and its `run.created` event.
pub(super) fn new_run(
    session_id: &SessionId,
    run: NewRun,
    now: DateTime<Utc>,
) -> (RunRecord, RunEvent) {
    let record = RunRecord {
        run: Run {
            id: run.id,
            session_id: session_id.as_str().to_owned(),
            status: RunStatus::Queued,
            created_at: now,
            started_at: None,
            finished_at: None,
            model: run.config.model.clone(),
            input: run.input,
            output: Vec::new(),
            required_action: None,
            usage: Usage::default(),
            error: None,
            metadata: run.metadata,
        },
        config: run.config,
        turns: 0,
    };
    let event = RunEvent::for_status(1, &record.run);
    (record, event)
}

/// Whether a new run may be queued next to the session's oldest unfinished run.
pub(super) fn admit(active: Option<Uuid>, if_busy: IfBusy) -> Result<(), StoreError> {
    match (active, if_busy) {
        (Some(active), IfBusy::Reject) => Err(StoreError::SessionBusy(active)),
        _ => Ok(()),
    }
}

/// The claim of a run that its creating transaction stored as running, leased to
/// `worker`: its one event so far is `run.created`.
pub(super) fn claim_new(
    tenant: &str,
    run_pk: i64,
    worker: Uuid,
    mut record: RunRecord,
    now: DateTime<Utc>,
) -> Claim {
    record.run.status = RunStatus::Running;
    record.run.started_at = Some(now);
    Claim {
        tenant: tenant.to_owned(),
        run_pk,
        worker,
        record,
        last_event_seq: 1,
        attempts: 1,
    }
}

/// The run a request with an Idempotency-Key created, from the key's stored response.
pub(super) fn replayed_run_id(response: &str) -> Result<Uuid, StoreError> {
    serde_json::from_str::<serde_json::Value>(response)
        .ok()
        .and_then(|first| {
            first["run_id"]
                .as_str()
                .and_then(|id| Uuid::parse_str(id).ok())
        })
        .ok_or_else(|| StoreError::Corrupt(format!("idempotency response `{response}`")))
}

/// What a key's response records of the run its request created.
pub(super) fn run_response(run_id: Uuid) -> String {
    serde_json::json!({ "run_id": run_id }).to_string()
}

/// Cancels a run a client asked to cancel; fails when it has finished already.
pub(super) fn cancel(
    record: &mut RunRecord,
    last_event_seq: i64,
    now: DateTime<Utc>,
) -> Result<RunEvent, StoreError> {
    if record.run.status.is_final() {
        return Err(StoreError::RunFinished(record.run.status));
    }
    Ok(record.end(RunStatus::Cancelled, None, last_event_seq, now))
}

/// Adds the client's tool outputs to a `requires_action` run and sets it running again.
pub(super) fn resume(record: &mut RunRecord, outputs: &[ToolOutput]) -> Result<(), StoreError> {
    let waiting = match (&record.run.required_action, record.run.status) {
        (Some(action), RunStatus::RequiresAction) => action,
        (_, status) => return Err(StoreError::RunNotWaiting(status)),
    };
    let answers = waiting.answer(outputs)?;
    record.run.output.extend(answers);
    record.run.required_action = None;
    record.run.status = RunStatus::Running;
    Ok(())
}

/// The run a lapsed lease leaves behind after its last attempt.
pub(super) fn lost(record: &mut RunRecord, last_event_seq: i64, now: DateTime<Utc>) -> RunEvent {
    let error = RunError::new(
        "worker_lost",
        "the worker executing the run stopped responding too many times",
    );
    record.end(RunStatus::Failed, Some(error), last_event_seq, now)
}

/// The items a finished run appends to its session: its input, then its output, when it
/// completed; nothing otherwise.
pub(super) fn turn_items(record: &RunRecord) -> Vec<&RawValue> {
    if record.run.status != RunStatus::Completed {
        return Vec::new();
    }
    record
        .run
        .input
        .iter()
        .chain(&record.run.output)
        .map(|item| &**item)
        .collect()
}
