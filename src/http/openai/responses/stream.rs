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
        echo: Map<String, Value>,
        starting_after: Option<i64>,
        reading: Option<oneshot::Sender<()>>,
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

    fn emit(&mut self, out: &mut Vec<Event>, kind: &str, fields: Value) {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        if sequence <= self.starting_after {
            return;
        }
        let mut data = Map::new();
        data.insert("type".into(), kind.into());
        data.insert("sequence_number".into(), sequence.into());
        if let Value::Object(fields) = fields {
            data.extend(fields);
        }
        out.push(Event::default().event(kind).data(Value::Object(data).to_string()));
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
        self.emit(
            out,
            "response.output_item.added",
            json!({"output_index": output_index, "item": item}),
        );
        let part = json!({"type": "output_text", "text": "", "annotations": [], "logprobs": []});
        self.emit(
            out,
            "response.content_part.added",
            json!({"item_id": id, "output_index": output_index, "content_index": 0, "part": part}),
        );
        self.open = Some((id, String::new()));
    }

    fn status(&mut self, out: &mut Vec<Event>, run: &Run) {
        let first = self.run.is_none();
        self.run = Some(run.clone());
        if first {
            let created = response(run, &self.echo, false);
            self.emit(out, "response.created", json!({"response": created}));
        }
        let kind = match run.status {
            RunStatus::Queued | RunStatus::RequiresAction => return,
            RunStatus::Running if self.in_progress => return,
            RunStatus::Running => {
                self.in_progress = true;
                let now = response(run, &self.echo, false);
                self.emit(out, "response.in_progress", json!({"response": now}));
                return;
            }
            RunStatus::Completed if run.incomplete_details.is_some() => "response.incomplete",
            RunStatus::Interrupted => "response.incomplete",
            RunStatus::Completed => "response.completed",
            RunStatus::Failed | RunStatus::Cancelled => "response.failed",
        };
        let whole = response(run, &self.echo, true);
        self.emit(out, kind, json!({"response": whole}));
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
                let at = json!({"item_id": id, "output_index": output_index, "content_index": 0});
                let mut done = at.clone();
                done["text"] = text.clone().into();
                done["logprobs"] = json!([]);
                self.emit(out, "response.output_text.done", done);
                let mut part = at;
                part["part"] =
                    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []});
                self.emit(out, "response.content_part.done", part);
            }
            "function_call" => {
                let mut added = item.clone();
                added["arguments"] = "".into();
                added["status"] = "in_progress".into();
                let at = json!({"output_index": output_index, "item": added});
                self.emit(out, "response.output_item.added", at);
                let arguments = item["arguments"].clone();
                let call = json!({"item_id": id, "output_index": output_index});
                let mut delta = call.clone();
                delta["delta"] = arguments.clone();
                self.emit(out, "response.function_call_arguments.delta", delta);
                let mut done = call;
                done["arguments"] = arguments;
                done["name"] = item["name"].clone();
                self.emit(out, "response.function_call_arguments.done", done);
            }
            _ => {
                let at = json!({"output_index": output_index, "item": item.clone()});
                self.emit(out, "response.output_item.added", at);
            }
        }
        self.emit(
            out,
            "response.output_item.done",
            json!({"output_index": output_index, "item": item}),
        );
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
                let id = id.clone();
                let fields = json!({"item_id": id, "output_index": self.output_index,
                                    "content_index": 0, "delta": delta, "logprobs": []});
                self.emit(&mut out, "response.output_text.delta", fields);
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
            self.emit(
                &mut out,
                "error",
                json!({"code": "server_error", "message": message, "param": null}),
            );
        }
        out
    }
}
