//! Rows of `run_events`: how a run's events are written and read back. Consecutive text
//! deltas written together share a row, which readers expand.

use std::borrow::Cow;

use super::payload::{Column, PayloadCodec};
use super::StoreError;
use crate::model::{RunEvent, RunEventKind};

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
    rows: Vec<EventRow>, codec: &PayloadCodec, tenant: &str, after: i64,
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
    codec: &PayloadCodec, tenant: &str, events: &[RunEvent],
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

#[cfg(test)]
mod tests {
    use serde_json::value::RawValue;

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
