//! Rows of runs and their events as both backends return them, and the changes to a run
//! record that both backends make the same way.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde_json::value::RawValue;
use uuid::Uuid;

use super::payload::{Column, PayloadCodec};
use super::rows::to_json;
use super::timestamp::Timestamp;
use super::{Claim, StartNow, StoreError};
use crate::model::{
    DeliveryStatus, IfBusy, NewRun, Run, RunAnswer, RunError, RunEvent, RunEventKind, RunRecord,
    RunStatus, SessionId, Usage, WebhookDelivery,
};

pub(super) const RUN_COLUMNS: &str = "r.status, r.started_at, r.finished_at, r.body";

/// [`RUN_COLUMNS`] and the run's latest webhook delivery, as clients read a run.
pub(super) const RUN_VIEW_COLUMNS: &str = "r.status, r.started_at, r.finished_at, r.body, \
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
    /// `status attempts last_status_code` (0 for none) of the latest webhook delivery,
    /// where the query reads it ([`RUN_VIEW_COLUMNS`]).
    #[sqlx(default)]
    webhook: Option<String>,
}

impl RunRow {
    /// The stored document, with the columns that change without it (status, times)
    /// taken from the columns.
    pub(super) fn into_record(
        self,
        codec: &PayloadCodec,
        tenant: &str,
    ) -> Result<RunRecord, StoreError> {
        let body = codec.open(tenant, Column::RunBody, self.body)?;
        let mut record: RunRecord = serde_json::from_str(&body)
            .map_err(|e| StoreError::Corrupt(format!("run document: {e}")))?;
        record.run.status = RunStatus::parse(&self.status)
            .ok_or_else(|| StoreError::Corrupt(format!("run status `{}`", self.status)))?;
        record.run.started_at = self.started_at.map(Timestamp::into_inner);
        record.run.finished_at = self.finished_at.map(Timestamp::into_inner);
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
        self,
        codec: &PayloadCodec,
        worker: Uuid,
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

#[derive(sqlx::FromRow)]
pub(super) struct EventRow {
    seq: i64,
    event: String,
    data: String,
}

/// The storage name of a row that holds consecutive text deltas (see [`stored_events`]).
const DELTAS: &str = "message.deltas";

/// What a row of consecutive text deltas holds: the seq of the first, and each text.
#[derive(serde::Serialize, serde::Deserialize)]
struct Deltas<'a> {
    first: i64,
    #[serde(borrow)]
    deltas: Vec<Cow<'a, str>>,
}

/// The events after `after` that `rows` hold, in seq order, each once, their payloads
/// opened. A row of deltas is numbered by its last; one saved twice, the second time
/// with more deltas (a write whose commit was not confirmed), repeats the first's.
pub(super) fn events(
    rows: Vec<EventRow>,
    codec: &PayloadCodec,
    tenant: &str,
    after: i64,
) -> Result<Vec<RunEvent>, StoreError> {
    let corrupt = |e: &dyn std::fmt::Display| StoreError::Corrupt(e.to_string());
    let mut events = Vec::with_capacity(rows.len());
    let mut last = after;
    for row in rows {
        let data = codec.open(tenant, Column::RunEventData, row.data)?;
        if row.event == DELTAS {
            let deltas: Deltas = serde_json::from_str(&data).map_err(|e| corrupt(&e))?;
            for (seq, delta) in (deltas.first..).zip(deltas.deltas) {
                if seq > last {
                    last = seq;
                    events
                        .push(RunEvent { seq, kind: RunEventKind::TextDelta(delta.into_owned()) });
                }
            }
        } else if row.seq > last {
            last = row.seq;
            events.push(RunEvent::parse(row.seq, &row.event, &data).map_err(|e| corrupt(&e))?);
        }
    }
    Ok(events)
}

/// A row of `run_events` to write, its data sealed.
pub(super) struct StoredEvent {
    pub seq: i64,
    pub name: &'static str,
    pub data: Cow<'static, str>,
}

/// The rows that store `events`: each its own row, but consecutive text deltas, most of
/// a streamed run's events, share one, numbered by the last of them. A row per token
/// cost Postgres more per streamed token than the service spent on it.
pub(super) fn stored_events(
    codec: &PayloadCodec,
    tenant: &str,
    events: &[RunEvent],
) -> Result<Vec<StoredEvent>, StoreError> {
    let mut rows = Vec::new();
    let mut rest = events;
    while let Some(first) = rest.first() {
        let deltas = rest
            .iter()
            .zip(first.seq..)
            .take_while(|(e, seq)| e.seq == *seq && matches!(e.kind, RunEventKind::TextDelta(_)))
            .count();
        let (seq, name, data) = if deltas > 1 {
            let texts = rest[..deltas].iter().map(|e| match &e.kind {
                RunEventKind::TextDelta(text) => Cow::Borrowed(text.as_str()),
                _ => unreachable!("only deltas are counted"),
            });
            let row = Deltas { first: first.seq, deltas: texts.collect() };
            let data = serde_json::to_string(&row).expect("deltas serialize");
            (rest[deltas - 1].seq, DELTAS, data)
        } else {
            (first.seq, first.name(), first.data_json())
        };
        let data = codec.seal(tenant, Column::RunEventData, data)?;
        rows.push(StoredEvent { seq, name, data });
        rest = &rest[deltas.max(1)..];
    }
    Ok(rows)
}

/// A run about to be inserted with its first event. The insert itself looks for the
/// session's unfinished runs (under the session's lock): the new run is claimed only if
/// there are none, and with `IfBusy::Reject` inserted only then.
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
    tenant: &str,
    run_pk: i64,
    worker: Uuid,
    mut record: RunRecord,
    now: DateTime<Utc>,
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

/// The items a finished run appends to its session: its input, then its output, when it
/// completed or was interrupted; nothing otherwise.
pub(super) fn turn_items(record: &RunRecord) -> Vec<&RawValue> {
    if !record.run.status.keeps_turn() {
        return Vec::new();
    }
    record.run.input.iter().chain(&record.run.output).map(|item| &**item).collect()
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
    codec: &PayloadCodec,
    tenant: &str,
    record: &RunRecord,
    now: DateTime<Utc>,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(seq: i64, text: &str) -> RunEvent {
        RunEvent { seq, kind: RunEventKind::TextDelta(text.to_owned()) }
    }

    fn item(seq: i64) -> RunEvent {
        let item = RawValue::from_string(r#"{"type":"message"}"#.to_owned()).unwrap();
        RunEvent { seq, kind: RunEventKind::ItemCreated(item) }
    }

    fn rows(events: &[RunEvent]) -> Vec<EventRow> {
        let stored = stored_events(&PayloadCodec::new(None), "t", events).unwrap();
        stored
            .into_iter()
            .map(|e| EventRow { seq: e.seq, event: e.name.to_owned(), data: e.data.into_owned() })
            .collect()
    }

    fn shown(events: &[RunEvent]) -> Vec<(i64, String)> {
        events.iter().map(|e| (e.seq, e.data_json())).collect()
    }

    #[test]
    fn consecutive_deltas_share_a_row_and_read_back_one_by_one() {
        let events = [delta(2, "a"), delta(3, "b\""), delta(4, "c"), item(5), delta(6, "d")];
        let stored = rows(&events);
        let kept: Vec<_> = stored.iter().map(|r| (r.seq, r.event.as_str())).collect();
        assert_eq!(kept, [(4, DELTAS), (5, "item.created"), (6, "message.delta")]);
        let read = events_of(rows(&events), 0);
        assert_eq!(shown(&read), shown(&events));
        let after_some = events_of(rows(&events), 2);
        assert_eq!(shown(&after_some), shown(&events[1..]), "from the middle of a row");
    }

    #[test]
    fn deltas_with_a_gap_between_them_are_rows_of_their_own() {
        let events = [delta(2, "a"), delta(10_003, "b"), delta(10_004, "c")];
        let kept: Vec<_> = rows(&events).iter().map(|r| r.seq).collect();
        assert_eq!(kept, [2, 10_004]);
        assert_eq!(shown(&events_of(rows(&events), 0)), shown(&events));
    }

    #[test]
    fn a_row_saved_again_with_more_deltas_shows_each_delta_once() {
        let first = [delta(2, "a"), delta(3, "b")];
        let again = [delta(2, "a"), delta(3, "b"), delta(4, "c"), delta(5, "d")];
        let mut stored = rows(&first);
        stored.extend(rows(&again));
        assert_eq!(shown(&events_of(stored, 0)), shown(&again));
    }

    fn events_of(rows: Vec<EventRow>, after: i64) -> Vec<RunEvent> {
        events(rows, &PayloadCodec::new(None), "t", after).unwrap()
    }
}
