//! The run's events as OpenAI's Responses stream: `response.created`,
//! `response.in_progress`, per output item `output_item.added` → content part and text
//! deltas, or function-call arguments → `output_item.done`, and last the whole Response
//! in `response.completed`, `response.incomplete` or `response.failed`. Every event has
//! its `event:` line and a `sequence_number` counted from 0 over the run's events from
//! the first, so a stream read again from `starting_after` continues the same numbering.

use axum::response::sse::Event;
use serde_json::{json, Map, Value};
use tokio::sync::oneshot;

use super::super::ids;
use super::events::{Numbered, OutputText, ResponseEvent};
use super::view::{output_item, output_kind, response};
use crate::http::event_stream::Translator;
use crate::model::{Run, RunEvent, RunEventKind, RunStatus};

pub struct ResponseStream {
    echo: Map<String, Value>,
    /// Events numbered up to here were sent before: they are counted, not sent.
    starting_after: i64,
    next_sequence: i64,
    run: Option<Run>,
    /// The run-output position and the Response-output index of the next item.
    position: usize,
    output_index: usize,
    /// The assistant message whose text is streaming: its id and text so far.
    open: Option<(String, String)>,
    in_progress: bool,
    /// Dropped with the stream: tells whoever waits that the client is done with it.
    _reading: Option<oneshot::Sender<()>>,
}

impl ResponseStream {
    pub fn new(
        echo: Map<String, Value>, starting_after: Option<i64>, reading: Option<oneshot::Sender<()>>,
    ) -> Self {
        Self {
            echo,
            starting_after: starting_after.unwrap_or(-1),
            next_sequence: 0,
            run: None,
            position: 0,
            output_index: 0,
            open: None,
            in_progress: false,
            _reading: reading,
        }
    }

    fn emit(&mut self, out: &mut Vec<Event>, event: ResponseEvent) {
        let sequence_number = self.next_sequence;
        self.next_sequence += 1;
        if sequence_number <= self.starting_after {
            return;
        }
        let data = Numbered { event: &event, sequence_number };
        let data = serde_json::to_string(&data).expect("an event serializes");
        out.push(Event::default().event(event.event_name()).data(data));
    }

    fn run_id(&self) -> uuid::Uuid {
        self.run.as_ref().map(|r| r.id).unwrap_or_default()
    }

    /// Opens the assistant message that streams next, unless it is open.
    fn open_message(&mut self, out: &mut Vec<Event>) {
        if self.open.is_some() {
            return;
        }
        let id = ids::output_item(self.run_id(), self.position);
        let output_index = self.output_index;
        let item = json!({"id": id, "type": "message", "status": "in_progress",
                          "role": "assistant", "content": []});
        self.emit(out, ResponseEvent::OutputItemAdded { output_index, item });
        let part = OutputText::new(String::new());
        let item_id = id.clone();
        self.emit(
            out,
            ResponseEvent::ContentPartAdded { item_id, output_index, content_index: 0, part },
        );
        self.open = Some((id, String::new()));
    }

    fn status(&mut self, out: &mut Vec<Event>, run: &Run) {
        let first = self.run.is_none();
        self.run = Some(run.clone());
        if first {
            let response = response(run, &self.echo, false);
            self.emit(out, ResponseEvent::Created { response });
        }
        let ended: fn(Value) -> ResponseEvent = match run.status {
            RunStatus::Queued | RunStatus::RequiresAction => return,
            RunStatus::Running if self.in_progress => return,
            RunStatus::Running => {
                self.in_progress = true;
                let response = response(run, &self.echo, false);
                self.emit(out, ResponseEvent::InProgress { response });
                return;
            }
            RunStatus::Completed if run.incomplete_details.is_some() => {
                |response| ResponseEvent::Incomplete { response }
            }
            RunStatus::Interrupted => |response| ResponseEvent::Incomplete { response },
            RunStatus::Completed => |response| ResponseEvent::Completed { response },
            RunStatus::Failed | RunStatus::Cancelled => {
                |response| ResponseEvent::Failed { response }
            }
        };
        self.emit(out, ended(response(run, &self.echo, true)));
    }

    fn item(&mut self, out: &mut Vec<Event>, raw: &serde_json::value::RawValue) {
        let position = self.position;
        let output_index = self.output_index;
        let shown = self.run.clone().and_then(|run| {
            let kind = output_kind(raw)?;
            Some((kind, output_item(&run, position, raw)?))
        });
        let Some((kind, item)) = shown else {
            self.position += 1;
            return;
        };
        let id = item["id"].as_str().unwrap_or_default().to_owned();
        match kind.as_str() {
            "message" => {
                self.open_message(out);
                self.open = None;
                let text: String = (item["content"].as_array().into_iter().flatten())
                    .filter_map(|part| part["text"].as_str())
                    .collect();
                let (item_id, content_index) = (id.clone(), 0);
                let done = ResponseEvent::OutputTextDone {
                    item_id: item_id.clone(),
                    output_index,
                    content_index,
                    text: text.clone(),
                    logprobs: Vec::new(),
                };
                self.emit(out, done);
                let part = OutputText::new(text);
                let done =
                    ResponseEvent::ContentPartDone { item_id, output_index, content_index, part };
                self.emit(out, done);
            }
            "function_call" => {
                let mut added = item.clone();
                added["arguments"] = "".into();
                added["status"] = "in_progress".into();
                self.emit(out, ResponseEvent::OutputItemAdded { output_index, item: added });
                let arguments = item["arguments"].clone();
                let item_id = id.clone();
                let delta = arguments.clone();
                self.emit(
                    out,
                    ResponseEvent::FunctionCallArgumentsDelta { item_id, output_index, delta },
                );
                let name = item["name"].clone();
                let done = ResponseEvent::FunctionCallArgumentsDone {
                    item_id: id,
                    output_index,
                    arguments,
                    name,
                };
                self.emit(out, done);
            }
            _ => {
                let item = item.clone();
                self.emit(out, ResponseEvent::OutputItemAdded { output_index, item });
            }
        }
        self.emit(out, ResponseEvent::OutputItemDone { output_index, item });
        self.position += 1;
        self.output_index += 1;
    }
}

impl Translator for ResponseStream {
    fn translate(&mut self, event: &RunEvent) -> Vec<Event> {
        let mut out = Vec::new();
        match &event.kind {
            RunEventKind::Status(run) => self.status(&mut out, run),
            RunEventKind::TextDelta(delta) => {
                self.open_message(&mut out);
                let Some((id, text)) = &mut self.open else { return out };
                text.push_str(delta);
                let delta = ResponseEvent::OutputTextDelta {
                    item_id: id.clone(),
                    output_index: self.output_index,
                    content_index: 0,
                    delta: delta.clone(),
                    logprobs: Vec::new(),
                };
                self.emit(&mut out, delta);
            }
            RunEventKind::ItemCreated(item) => self.item(&mut out, item),
            RunEventKind::CompactionCreated(_) => {}
        }
        out
    }

    fn finish(&mut self, broke: bool) -> Vec<Event> {
        let mut out = Vec::new();
        if broke {
            let message = format!(
                "the stream broke off; read on with GET /v1/responses/{}?stream=true&starting_after={}",
                ids::response_id(self.run_id()),
                self.next_sequence - 1
            );
            let error = ResponseEvent::Error { code: "server_error", message, param: None };
            self.emit(&mut out, error);
        }
        out
    }
}
