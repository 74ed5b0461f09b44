//! An in-process OpenAI-compatible server that answers from a script.
//!
//! Shared by the integration tests and the benchmarks (`bench/fake_llm.rs` mounts it), so
//! it depends on nothing but axum, tokio, serde_json, futures and bytes.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use axum::Router;
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// A running fake; the server stops with the runtime that started it.
pub struct FakeLlm {
    base_url: String,
    state: Arc<Mutex<Script>>,
}

struct Script {
    replies: VecDeque<Reply>,
    /// Answers to summarising requests (see [`is_summary_request`]), which never take
    /// from `replies`; when empty, `summary N` for the Nth of them.
    summaries: VecDeque<Reply>,
    summarised: usize,
    default: Reply,
    requests: Vec<Value>,
    /// The last request's body as it came, byte for byte.
    last_body: Bytes,
    authorizations: Vec<Option<String>>,
}

#[derive(Clone, Debug)]
pub enum Reply {
    /// Streams the deltas one chunk each (waiting `delay` before each), then a
    /// finish_reason "stop" chunk, a usage chunk (empty choices) and [DONE].
    Text { deltas: Vec<String>, usage: Option<(u64, u64)>, delay: Duration },
    /// Streams tool calls, each split across several chunks (id+name first, then the
    /// arguments in three pieces), interleaving the calls' pieces; finish_reason
    /// "tool_calls", usage, [DONE].
    ToolCalls {
        /// (call_id, name, arguments)
        calls: Vec<(String, String, String)>,
        usage: Option<(u64, u64)>,
    },
    /// Streams `text` in one delta, then finishes with `reason` (`length`,
    /// `content_filter`): an answer the model stopped early.
    Cut { text: String, reason: String },
    /// A non-streamed error answer.
    Status { status: u16, retry_after: Option<String>, body: String },
    /// A 200 stream whose second data line is not JSON.
    Malformed,
    /// A 200 stream with a few text deltas that ends without finish_reason or [DONE].
    Truncated,
    /// Never sends response headers.
    Hang,
    /// Sends one text delta, then holds the connection open without sending more.
    HangMidStream,
    /// Streams `count` deltas `interval` apart on a fixed schedule, each the time it was
    /// sent (` <microseconds since the Unix epoch>`), so a reader can tell each token's
    /// delay on the way; then finishes as `Text` does, with usage (12, `count`).
    Clock { count: usize, interval: Duration },
}

impl Reply {
    /// `text` in deltas of at most three characters, with usage (12, number of deltas).
    pub fn text(text: &str) -> Reply {
        let chars: Vec<char> = text.chars().collect();
        let deltas: Vec<String> = chars.chunks(3).map(|c| c.iter().collect()).collect();
        let usage = Some((12, deltas.len() as u64));
        Reply::Text { deltas, usage, delay: Duration::ZERO }
    }

    pub fn tool_call(call_id: &str, name: &str, arguments: &str) -> Reply {
        Reply::ToolCalls {
            calls: vec![(call_id.into(), name.into(), arguments.into())],
            usage: Some((20, 10)),
        }
    }

    /// `status` with an OpenAI-style error body.
    pub fn status(status: u16) -> Reply {
        Reply::Status {
            status,
            retry_after: None,
            body: json!({"error": {"message": format!("fake {status}"), "type": "fake"}})
                .to_string(),
        }
    }
}

impl FakeLlm {
    pub async fn start() -> FakeLlm {
        let state = Arc::new(Mutex::new(Script {
            replies: VecDeque::new(),
            summaries: VecDeque::new(),
            summarised: 0,
            default: Reply::text("ok"),
            requests: Vec::new(),
            last_body: Bytes::new(),
            authorizations: Vec::new(),
        }));
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .with_state(state.clone());
        let listener =
            tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the fake LLM");
        let port = listener.local_addr().expect("the fake LLM's address").port();
        // Without TCP_NODELAY a chunk can wait for the client's delayed ACK (40 ms on
        // Linux): the fake's latency must be the script's, not the kernel's.
        let listener = listener.tap_io(|stream| {
            let _ = stream.set_nodelay(true);
        });
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeLlm { base_url: format!("http://127.0.0.1:{port}/v1"), state }
    }

    pub fn base_url(&self) -> String {
        self.base_url.clone()
    }

    pub fn push(&self, reply: Reply) {
        self.script().replies.push_back(reply);
    }

    /// The answer to the next summarising request.
    pub fn push_summary(&self, reply: Reply) {
        self.script().summaries.push_back(reply);
    }

    pub fn set_default(&self, reply: Reply) {
        self.script().default = reply;
    }

    pub fn requests(&self) -> Vec<Value> {
        self.script().requests.clone()
    }

    pub fn last_body(&self) -> Bytes {
        self.script().last_body.clone()
    }

    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.script().authorizations.clone()
    }

    fn script(&self) -> MutexGuard<'_, Script> {
        lock(&self.state)
    }
}

/// The first line of the text the service asks the LLM to summarise.
pub const CONVERSATION_HEADING: &str = "The conversation to summarise:";

/// Whether a recorded request asks for a compaction's summary rather than a run's turn.
pub fn is_summary_request(request: &Value) -> bool {
    let messages = request["messages"].as_array();
    let last = messages.and_then(|m| m.last()).map(|m| &m["content"]);
    last.and_then(Value::as_str).is_some_and(|text| text.starts_with(CONVERSATION_HEADING))
}

/// A test that panicked while holding the lock must not hide the fake's record.
fn lock(state: &Mutex<Script>) -> MutexGuard<'_, Script> {
    state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn chat_completions(
    State(state): State<Arc<Mutex<Script>>>, headers: HeaderMap, body: Bytes,
) -> Response {
    let (reply, streamed) = {
        let mut script = lock(&state);
        let request: Value = serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
        let streamed = request["stream"] == true;
        script.requests.push(request);
        script.last_body = body.clone();
        let authorization =
            headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(String::from);
        script.authorizations.push(authorization);
        let reply = if is_summary_request(script.requests.last().expect("pushed above")) {
            script.summarised += 1;
            let n = script.summarised;
            script.summaries.pop_front().unwrap_or_else(|| Reply::text(&format!("summary {n}")))
        } else {
            script.replies.pop_front().unwrap_or_else(|| script.default.clone())
        };
        (reply, streamed)
    };
    match reply {
        // Other clients than the service's (a proxy measured against it) may not stream.
        Reply::Text { deltas, usage, .. } if !streamed => completion(&deltas.concat(), usage),
        Reply::Text { deltas, usage, delay } => {
            let mut events = vec![(Duration::ZERO, role_chunk())];
            events.extend(deltas.iter().map(|d| (delay, text_chunk(d))));
            events.extend(now(finish("stop", usage)));
            stream(events, false)
        }
        Reply::Cut { text, reason } => {
            let events = [role_chunk(), text_chunk(&text)];
            stream(now(events.into_iter().chain(finish(&reason, None))), false)
        }
        Reply::ToolCalls { calls, usage } => {
            let pieces = interleave(tool_call_pieces(&calls));
            let events = std::iter::once(role_chunk()).chain(pieces);
            stream(now(events.chain(finish("tool_calls", usage))), false)
        }
        Reply::Status { status, retry_after, body } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response =
                (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
            if let Some(value) = retry_after.and_then(|v| v.parse().ok()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            response
        }
        Reply::Malformed => {
            let garbage = "{\"choices\": [{\"delta\": not json".to_owned();
            stream(now([role_chunk(), garbage, "[DONE]".to_owned()]), false)
        }
        Reply::Truncated => stream(now(["Once ", "upon ", "a "].map(text_chunk)), false),
        Reply::Hang => std::future::pending().await,
        Reply::HangMidStream => stream(now([text_chunk("Hel")]), true),
        Reply::Clock { count, interval } => clock(count, interval),
    }
}

/// Microseconds since the Unix epoch: the clock of [`Reply::Clock`]'s deltas.
pub fn micros_now() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    u64::try_from(since.unwrap_or_default().as_micros()).unwrap_or(u64::MAX)
}

fn clock(count: usize, interval: Duration) -> Response {
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    tokio::spawn(async move {
        let send = |data: String| tx.send(Bytes::from(format!("data: {data}\n\n")));
        if send(role_chunk()).await.is_err() {
            return;
        }
        let start = tokio::time::Instant::now();
        for due in (1..=count).map(|n| start + interval * u32::try_from(n).unwrap_or(u32::MAX)) {
            tokio::time::sleep_until(due).await;
            if send(text_chunk(&format!(" {}", micros_now()))).await.is_err() {
                return;
            }
        }
        for data in finish("stop", Some((12, count as u64))) {
            if send(data).await.is_err() {
                return;
            }
        }
    });
    sse(rx)
}

/// Each call as pieces: id and name first, then its arguments in three parts.
fn tool_call_pieces(calls: &[(String, String, String)]) -> Vec<Vec<String>> {
    calls
        .iter()
        .enumerate()
        .map(|(index, (id, name, arguments))| {
            let first = json!({"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}});
            let chars: Vec<char> = arguments.chars().collect();
            let third = chars.len().div_ceil(3).max(1);
            let rest = chars.chunks(third).map(|part| {
                let part: String = part.iter().collect();
                json!({"index": index, "function": {"arguments": part}})
            });
            std::iter::once(first)
                .chain(rest)
                .map(|piece| chunk(json!({"tool_calls": [piece]}), None))
                .collect()
        })
        .collect()
}

/// Round-robin, so a client that keys pieces by order instead of `index` fails.
fn interleave(mut lists: Vec<Vec<String>>) -> Vec<String> {
    let mut out = Vec::new();
    let longest = lists.iter().map(Vec::len).max().unwrap_or(0);
    for position in 0..longest {
        for list in &mut lists {
            if let Some(item) = list.get_mut(position) {
                out.push(std::mem::take(item));
            }
        }
    }
    out
}

fn role_chunk() -> String {
    chunk(json!({"role": "assistant", "content": ""}), None)
}

/// A whole, non-streamed `chat.completion`.
fn completion(text: &str, usage: Option<(u64, u64)>) -> Response {
    let (prompt, completion) = usage.unwrap_or_default();
    let body = json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop",
        }],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    });
    axum::Json(body).into_response()
}

fn text_chunk(text: &str) -> String {
    chunk(json!({"content": text}), None)
}

/// The finish_reason chunk, the usage chunk (with no choices, as OpenAI sends it) and [DONE].
fn finish(reason: &str, usage: Option<(u64, u64)>) -> Vec<String> {
    let mut events = vec![chunk(json!({}), Some(reason))];
    events.extend(usage.map(|(prompt, completion)| {
        envelope(
            json!([]),
            json!({
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }),
        )
    }));
    events.push("[DONE]".to_owned());
    events
}

fn chunk(delta: Value, finish_reason: Option<&str>) -> String {
    let choice = json!({"index": 0, "delta": delta, "finish_reason": finish_reason});
    envelope(json!([choice]), Value::Null)
}

fn envelope(choices: Value, usage: Value) -> String {
    let mut chunk = json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": choices,
    });
    if !usage.is_null() {
        chunk["usage"] = usage;
    }
    chunk.to_string()
}

fn now(events: impl IntoIterator<Item = String>) -> Vec<(Duration, String)> {
    events.into_iter().map(|e| (Duration::ZERO, e)).collect()
}

/// An SSE response sending each data payload after its delay; `hold_open` keeps the
/// body open afterwards until the client goes away.
fn stream(events: Vec<(Duration, String)>, hold_open: bool) -> Response {
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    tokio::spawn(async move {
        for (delay, data) in events {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if tx.send(Bytes::from(format!("data: {data}\n\n"))).await.is_err() {
                return;
            }
        }
        if hold_open {
            tx.closed().await;
        }
    });
    sse(rx)
}

fn sse(rx: mpsc::Receiver<Bytes>) -> Response {
    let body = futures::stream::unfold(rx, |mut rx| async move {
        let bytes = rx.recv().await?;
        Some((Ok::<_, Infallible>(bytes), rx))
    });
    (
        [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")],
        Body::from_stream(body),
    )
        .into_response()
}
