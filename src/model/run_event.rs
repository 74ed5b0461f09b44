//! What happens in a run, as the engine tells it: one stream of typed events, numbered,
//! that every wire protocol translates at the edge. The engine publishes them, the store
//! keeps them (each as its name and its data's JSON, the form the native stream sends),
//! and followers read the stored ones and the live ones alike.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

use super::compaction::Compaction;
use super::run::{Run, RunStatus};

/// One event of a run's stream. `seq` is consecutive from 1 within a run: what a
/// follower resumes after (the native stream's SSE `id`).
#[derive(Debug, Clone)]
pub struct RunEvent {
    pub seq: i64,
    pub kind: RunEventKind,
}

/// What happened.
#[derive(Debug, Clone)]
pub enum RunEventKind {
    /// The run is now in the status it carries: created (queued), started, waiting for
    /// the client, or finished. The run is as it was committed with that status.
    Status(Box<Run>),
    /// The next piece of the assistant's text, as the model streams it.
    TextDelta(String),
    /// An item the run generated (a function call, its output, the assistant's message),
    /// in the shape it will have in the session.
    ItemCreated(Box<RawValue>),
    /// The compaction the run made before calling the model.
    CompactionCreated(Box<Compaction>),
}

/// The `data` of a `message.delta` event: the next piece of the assistant's text.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct MessageDelta<'a> {
    #[serde(borrow)]
    pub delta: std::borrow::Cow<'a, str>,
}

/// The `data` of an `item.created` event: an item the run generated, in the shape it
/// will have in the session.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct ItemCreated {
    #[schema(value_type = Object)]
    pub item: Box<RawValue>,
}

/// The `data` of a `compaction.created` event: the compaction the run made before
/// calling the model.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct CompactionCreated {
    pub compaction: Compaction,
}

/// An event whose stored name or data is not one this version writes.
#[derive(Debug, thiserror::Error)]
#[error("run event `{name}`: {reason}")]
pub struct UnknownEvent {
    name: String,
    reason: String,
}

impl RunEvent {
    pub const CREATED: &'static str = "run.created";
    pub const STARTED: &'static str = "run.started";
    pub const MESSAGE_DELTA: &'static str = "message.delta";
    pub const ITEM_CREATED: &'static str = "item.created";
    pub const COMPACTION_CREATED: &'static str = "compaction.created";
    pub const REQUIRES_ACTION: &'static str = "run.requires_action";
    pub const COMPLETED: &'static str = "run.completed";
    pub const FAILED: &'static str = "run.failed";
    pub const CANCELLED: &'static str = "run.cancelled";
    pub const INTERRUPTED: &'static str = "run.interrupted";

    /// The event that carries the run in its status.
    pub fn for_status(seq: i64, run: &Run) -> Self {
        Self { seq, kind: RunEventKind::Status(Box::new(run.clone())) }
    }

    /// The event's name: `run.created`, `message.delta`, …
    pub fn name(&self) -> &'static str {
        match &self.kind {
            RunEventKind::Status(run) => match run.status {
                RunStatus::Queued => Self::CREATED,
                RunStatus::Running => Self::STARTED,
                RunStatus::RequiresAction => Self::REQUIRES_ACTION,
                RunStatus::Completed => Self::COMPLETED,
                RunStatus::Failed => Self::FAILED,
                RunStatus::Cancelled => Self::CANCELLED,
                RunStatus::Interrupted => Self::INTERRUPTED,
            },
            RunEventKind::TextDelta(_) => Self::MESSAGE_DELTA,
            RunEventKind::ItemCreated(_) => Self::ITEM_CREATED,
            RunEventKind::CompactionCreated(_) => Self::COMPACTION_CREATED,
        }
    }

    /// The event's data as JSON: the run, or the [`MessageDelta`], [`ItemCreated`] or
    /// [`CompactionCreated`] the name stands for.
    pub fn data_json(&self) -> String {
        let text = match &self.kind {
            RunEventKind::Status(run) => serde_json::to_string(run),
            RunEventKind::TextDelta(delta) => {
                serde_json::to_string(&MessageDelta { delta: delta.as_str().into() })
            }
            RunEventKind::ItemCreated(item) => {
                return format!(r#"{{"item":{}}}"#, item.get());
            }
            RunEventKind::CompactionCreated(compaction) => {
                serde_json::to_string(&CompactionCreated { compaction: (**compaction).clone() })
            }
        };
        text.expect("event data serializes")
    }

    /// The event a name and its data's JSON stand for, as [`Self::name`] and
    /// [`Self::data_json`] wrote them.
    pub fn parse(seq: i64, name: &str, data: &str) -> Result<Self, UnknownEvent> {
        let invalid =
            |e: serde_json::Error| UnknownEvent { name: name.to_owned(), reason: e.to_string() };
        let kind = match name {
            Self::MESSAGE_DELTA => {
                let delta: MessageDelta = serde_json::from_str(data).map_err(invalid)?;
                RunEventKind::TextDelta(delta.delta.into_owned())
            }
            Self::ITEM_CREATED => {
                let created: ItemCreated = serde_json::from_str(data).map_err(invalid)?;
                RunEventKind::ItemCreated(created.item)
            }
            Self::COMPACTION_CREATED => {
                let created: CompactionCreated = serde_json::from_str(data).map_err(invalid)?;
                RunEventKind::CompactionCreated(Box::new(created.compaction))
            }
            Self::CREATED
            | Self::STARTED
            | Self::REQUIRES_ACTION
            | Self::COMPLETED
            | Self::FAILED
            | Self::CANCELLED
            | Self::INTERRUPTED => {
                RunEventKind::Status(serde_json::from_str(data).map_err(invalid)?)
            }
            _ => {
                return Err(UnknownEvent {
                    name: name.to_owned(),
                    reason: "no such event".to_owned(),
                })
            }
        };
        Ok(Self { seq, kind })
    }

    /// The run this event carries, if it announces a status.
    pub fn run(&self) -> Option<&Run> {
        match &self.kind {
            RunEventKind::Status(run) => Some(run),
            _ => None,
        }
    }

    /// After this event nothing follows until the client acts, or ever.
    pub fn ends_stream(&self) -> bool {
        self.run()
            .is_some_and(|run| run.status.is_final() || run.status == RunStatus::RequiresAction)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_as_written() {
        let run: Run = serde_json::from_value(serde_json::json!({
            "id": "019a0000-0000-7000-8000-000000000000", "session_id": "s",
            "status": "requires_action", "created_at": "2026-11-22T10:00:00Z",
            "started_at": null, "finished_at": null, "model": "m", "input": [], "output": [],
            "required_action": null, "error": null, "incomplete_details": null,
            "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "llm_calls": 0},
            "metadata": {}
        }))
        .unwrap();
        let item = RawValue::from_string(r#"{"b":1,"a":"é"}"#.to_owned()).unwrap();
        let compaction = serde_json::from_value(serde_json::json!({
            "id": "019a0000-0000-7000-8000-000000000001", "session_id": "s",
            "created_at": "2026-11-22T10:00:00Z", "run_id": null,
            "through_item_id": "019a0000-0000-7000-8000-000000000002", "through_seq": 7,
            "items_compacted": 7, "summary": "Sum\"mary é", "model": "m",
            "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3, "llm_calls": 1}
        }))
        .unwrap();
        let kinds = [
            RunEventKind::Status(Box::new(run)),
            RunEventKind::CompactionCreated(Box::new(compaction)),
            RunEventKind::TextDelta("Hel\"lo".to_owned()),
            RunEventKind::ItemCreated(item),
        ];
        for (seq, kind) in (1..).zip(kinds) {
            let event = RunEvent { seq, kind };
            let (name, data) = (event.name(), event.data_json());
            let again = RunEvent::parse(seq, name, &data).unwrap();
            assert_eq!((again.name(), again.data_json()), (name, data.clone()));
        }
        assert_eq!(
            RunEvent::parse(1, "item.created", r#"{"item":{"b":1,"a":"é"}}"#).unwrap().data_json(),
            r#"{"item":{"b":1,"a":"é"}}"#,
            "an item's JSON is kept to the byte"
        );
        assert!(RunEvent::parse(1, "run.exploded", "{}").is_err());
    }
}
