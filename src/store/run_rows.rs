//! Rows of runs and their events as both backends return them, and the changes to a run
//! record that both backends make the same way.

use chrono::{DateTime, Utc};
use serde_json::value::RawValue;
use uuid::Uuid;

use super::payload::{Column, PayloadCodec};
use super::rows::to_json;
use super::timestamp::Timestamp;
use super::{Claim, StartNow, StoreError};
use crate::model::{
    turn_item_ids, DeliveryStatus, IfBusy, NewRun, Run, RunAnswer, RunError, RunEvent, RunRecord,
    RunStatus, SessionId, Usage, WebhookDelivery,
};

pub(super) const RUN_COLUMNS: &str =
    "r.status, r.started_at, r.finished_at, r.body, r.unsettled_llm_calls";

/// [`RUN_COLUMNS`] and the run's latest webhook delivery, as clients read a run.
pub(super) const RUN_VIEW_COLUMNS: &str = "r.status, r.started_at, r.finished_at, r.body, \
     r.unsettled_llm_calls, \
     (select d.status || ' ' || d.attempts || ' ' || coalesce(d.last_status_code, 0) \
      from webhook_deliveries d where d.run_pk = r.pk order by d.pk desc limit 1) as webhook";

/// The bookkeeping columns of [`LockedRunRow`].
pub(super) const LOCKED_COLUMNS: &str =
    "r.pk, r.tenant_id, r.last_event_seq, cast(r.attempts as bigint) as attempts";

/// Runs executing per tenant, for the fair order of the claim: a run whose lease was
/// given up (`lease_owner` null) waits to be claimed again and does not count.
pub(super) const EXECUTING_PER_TENANT: &str = "select tenant_id, count(*) as n from runs \
     where status = 'running' and lease_owner is not null group by tenant_id";

pub(super) use super::rows::UNFINISHED;

/// The final statuses, as an SQL list.
pub(super) const FINISHED: &str = "('completed', 'failed', 'cancelled', 'interrupted')";

/// A run's `webhook` from the summary [`RUN_VIEW_COLUMNS`] reads.
fn delivery_view(summary: &str) -> Result<WebhookDelivery, StoreError> {
    let corrupt = || StoreError::Corrupt(format!("webhook delivery `{summary}`"));
    let mut parts = summary.split(' ');
    let status = parts.next().and_then(DeliveryStatus::parse).ok_or_else(corrupt)?;
    let attempts = parts.next().and_then(|n| n.parse().ok()).ok_or_else(corrupt)?;
    let code: u16 = parts.next().and_then(|n| n.parse().ok()).ok_or_else(corrupt)?;
    Ok(WebhookDelivery { status, attempts, last_status_code: (code != 0).then_some(code) })
}

#[derive(sqlx::FromRow)]
pub(super) struct RunRow {
    pub status: String,
    started_at: Option<Timestamp>,
    finished_at: Option<Timestamp>,
    body: String,
    /// LLM requests stored since the document was last written, which it does not count.
    #[sqlx(default)]
    unsettled_llm_calls: i64,
    /// `status attempts last_status_code` (0 for none) of the latest webhook delivery,
    /// where the query reads it ([`RUN_VIEW_COLUMNS`]).
    #[sqlx(default)]
    webhook: Option<String>,
}

impl RunRow {
    /// The stored document, with the columns that change without it (status, times)
    /// taken from the columns.
    pub(super) fn into_record(
        self, codec: &PayloadCodec, tenant: &str,
    ) -> Result<RunRecord, StoreError> {
        let body = codec.open(tenant, Column::RunBody, self.body)?;
        let mut record: RunRecord = serde_json::from_str(&body)
            .map_err(|e| StoreError::Corrupt(format!("run document: {e}")))?;
        record.run.status = RunStatus::parse(&self.status)
            .ok_or_else(|| StoreError::Corrupt(format!("run status `{}`", self.status)))?;
        record.run.started_at = self.started_at.map(Timestamp::into_inner);
        record.run.finished_at = self.finished_at.map(Timestamp::into_inner);
        record.run.usage.llm_calls += self.unsettled_llm_calls;
        if let Some(webhook) = self.webhook {
            record.run.webhook = Some(delivery_view(&webhook)?);
        }
        Ok(record)
    }
}

/// A claimed or locked run with its bookkeeping columns.
#[derive(sqlx::FromRow)]
pub(super) struct LockedRunRow {
    pub pk: i64,
    pub tenant_id: String,
    pub last_event_seq: i64,
    pub attempts: i64,
    #[sqlx(flatten)]
    pub run: RunRow,
}

/// What a claim finds beside the run, so that the run need not read it again: whether
/// its session has no items (no history to read) and whether input has been steered
/// into it. For the `returning` of an update of `runs` named `runs`.
pub(super) fn claim_facts(runs: &str) -> String {
    format!(
        "not exists (select 1 from sessions s \
         where s.pk = {runs}.session_pk and s.item_count > 0) as history_empty, \
         exists (select 1 from run_steering t where t.run_pk = {runs}.pk) as steered"
    )
}

/// What a finish that also claims found of its worker's next run.
pub(super) enum NextRun {
    Unclaimed,
    Claimed(ClaimedRunRow),
    /// The statement that claimed may have committed unseen: a run may be leased to the
    /// worker.
    Unknown,
}

/// A run a worker claimed from the queue.
#[derive(sqlx::FromRow)]
pub(super) struct ClaimedRunRow {
    #[sqlx(flatten)]
    pub locked: LockedRunRow,
    pub history_empty: bool,
    pub steered: bool,
}

impl ClaimedRunRow {
    pub(super) fn into_claim(
        self, codec: &PayloadCodec, worker: Uuid,
    ) -> Result<Claim, StoreError> {
        let locked = self.locked;
        let record = locked.run.into_record(codec, &locked.tenant_id)?;
        Ok(Claim {
            tenant: locked.tenant_id,
            run_pk: locked.pk,
            worker,
            last_event_seq: locked.last_event_seq,
            attempts: locked.attempts,
            record,
            history_empty: self.history_empty,
            steered: self.steered,
        })
    }
}

/// A run about to be inserted with its first event. The insert itself looks for the
/// session's unfinished runs (under the session's lock): the new run is claimed only if
/// there are none, and with `IfBusy::Reject` inserted only then.
#[derive(Clone, Copy)]
pub(super) struct NewRunRow<'a> {
    pub tenant: &'a str,
    pub session_pk: i64,
    pub record: &'a RunRecord,
    pub first_event: &'a RunEvent,
    /// Claimed by its creating transaction for this worker, if the session is idle.
    pub start: Option<StartNow>,
    pub if_busy: IfBusy,
    pub created_at: Timestamp,
    pub started_at: Timestamp,
}

/// What inserting a [`NewRunRow`] did.
pub(super) struct InsertedRun {
    pub pk: i64,
    /// Claimed as it was inserted.
    pub started: bool,
}

impl NewRunRow<'_> {
    /// Whether a busy session takes the run into its queue.
    pub(super) fn enqueue(&self) -> bool {
        self.if_busy == IfBusy::Enqueue
    }

    /// The lease owner, should the run start.
    pub(super) fn lease_owner(&self) -> Option<Uuid> {
        self.start.map(|s| s.worker)
    }

    /// The lease's end, should the run start.
    pub(super) fn lease_expires_at(&self) -> Option<Timestamp> {
        self.start.map(|s| Timestamp(self.started_at.0 + s.lease))
    }
}

/// The record of a new, queued run and its `run.created` event.
pub(super) fn new_run(
    session_id: &SessionId, run: NewRun, now: DateTime<Utc>,
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
            incomplete_details: None,
            metadata: run.metadata,
            webhook: None,
        },
        config: run.config,
        turns: 0,
        request: run.request,
        idempotency_key: run.idempotency.map(|key| key.key),
        steered_through: 0,
        approved: Vec::new(),
        trace_parent: run.trace_parent,
    };
    let event = RunEvent::for_status(1, &record.run);
    (record, event)
}

/// The claim of a run that its creating transaction stored as running, leased to
/// `worker`: its one event so far is `run.created`. `history_empty` when its session
/// had no items then.
pub(super) fn claim_new(
    tenant: &str, run_pk: i64, worker: Uuid, mut record: RunRecord, now: DateTime<Utc>,
    history_empty: bool,
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
        history_empty,
        steered: false,
    }
}

/// Adds the client's answer to a `requires_action` run and sets it running again.
pub(super) fn resume(record: &mut RunRecord, answer: &RunAnswer) -> Result<(), StoreError> {
    let (status, asked) = (record.run.status, answer.kind());
    let waiting = match (&record.run.required_action, status) {
        (Some(action), RunStatus::RequiresAction) if action.kind == asked => action,
        (action, _) => {
            let waiting = action.as_ref().map(|action| action.kind);
            return Err(StoreError::RunNotWaiting { status, waiting, asked });
        }
    };
    let answered = waiting.answer(answer)?;
    record.run.output.extend(answered.items);
    record.approved.extend(answered.approved);
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

/// The items a finished run appends to its session, with the ids they are stored under:
/// its input, then its output, when it completed or was interrupted; nothing otherwise.
pub(super) fn turn_items(record: &RunRecord) -> Vec<(Uuid, &RawValue)> {
    let run = &record.run;
    if !run.status.keeps_turn() {
        return Vec::new();
    }
    let ids = turn_item_ids(run.id, run.input.len(), run.output.len());
    ids.into_iter().zip(run.input.iter().chain(&run.output).map(|item| &**item)).collect()
}

/// What a completion webhook delivery holds: where to post, and the body to sign and post.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct DeliveryPayload {
    pub url: String,
    pub body: String,
}

/// The delivery that writing `record` queues, sealed, with its id: when the run has a
/// completion webhook and the write finishes or pauses it.
pub(super) fn webhook_delivery(
    codec: &PayloadCodec, tenant: &str, record: &RunRecord, now: DateTime<Utc>,
) -> Result<Option<(Uuid, String)>, StoreError> {
    let status = record.run.status;
    let Some(webhook) = &record.config.webhook else { return Ok(None) };
    if !(status.is_final() || status == RunStatus::RequiresAction) {
        return Ok(None);
    }
    let event = RunEvent::for_status(0, &record.run);
    let body = serde_json::json!({
        "type": event.name(),
        "timestamp": now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "data": record.run,
    });
    let payload = DeliveryPayload { url: webhook.url.clone(), body: body.to_string() };
    let sealed = codec.seal(tenant, Column::WebhookPayload, to_json(&payload)?)?;
    Ok(Some((Uuid::now_v7(), sealed.into_owned())))
}
