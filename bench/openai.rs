//! What `POST /v1/responses` on a conversation adds to an LLM call, against the same
//! call made directly and through LiteLLM's proxy, in one run on one fake LLM.
//!
//! `bench/openai.sh [sqlite|postgres] [calls]` (it installs LiteLLM and sets `LITELLM`),
//! or `LITELLM=… cargo bench --bench openai -- [sqlite|postgres] [calls]`.
//!
//! For histories of 20 and of 1,000 items, each round makes, in turn:
//! - the Chat Completions call the service itself makes (the history and the new user
//!   message, streamed), straight to the fake: the baseline;
//! - `POST /v1/responses` with `conversation` and the new message: the service reads the
//!   history, runs the turn and appends it, durably;
//! - `POST /v1/responses` to LiteLLM's proxy with the whole history as `input`: a
//!   stateless bridge to the fake's Chat Completions, which keeps nothing.
//!
//! each once answered whole and once streamed. Overhead is a route's latency minus the
//! baseline's, at p50 and p99; time to first token is until the first text delta. The
//! first tenth of the rounds warms up and is not counted.

mod database;
mod fake_llm;
mod litellm;
mod post;
mod process;
mod statistics;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_sessions::app::Application;
use agent_sessions::config::Cli;
use agent_sessions::store::{self, SessionStore};
use clap::Parser;
use fake_llm::{FakeLlm, Reply};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use database::BenchDatabase;
use post::post_json;
use statistics::analyze;

const ANSWER: &str = "The quick brown fox jumps over";
const SIZES: [usize; 2] = [20, 1000];

/// One of the three ways to the fake, with what it is sent and how its first token looks.
struct Route {
    url: String,
    body: Value,
    streamed_body: Value,
    bearer: Option<&'static str>,
    first_token: &'static str,
}

#[derive(Default)]
struct Timings {
    whole: Vec<Duration>,
    first_token: Vec<Duration>,
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let backend = args.first().map_or("postgres", String::as_str).to_owned();
    let rounds: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(200);
    let litellm = std::env::var("LITELLM").expect("LITELLM names LiteLLM's `litellm` command");

    let database = BenchDatabase::create(&backend).await;
    let llm = FakeLlm::start().await;
    llm.set_default(Reply::text(ANSWER));
    let mut config = Cli::parse_from(["agent-sessions"]).config;
    config.listen_addr = "127.0.0.1:0".into();
    config.llm_base_url = llm.base_url();
    config.llm_model = Some("bench".into());
    let store: Arc<dyn SessionStore> = store::connect(&database.url, 10).await.unwrap();
    let app = Application::with_store(&config, store).await.unwrap();
    let base = format!("http://{}", app.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    tokio::spawn(app.run(shutdown.clone()));
    let (_proxy, proxy_url) = litellm::start(&litellm, &llm.base_url()).await;
    let http = reqwest::Client::new();

    let mut report = Vec::new();
    for size in SIZES {
        let history = history(size);
        // A conversation per round at 20 items; at 1,000, twenty taken in turn (each
        // grows by a tenth of a percent a round).
        let conversations = if size == 20 { rounds } else { 20 };
        let mut ids = Vec::new();
        for _ in 0..conversations {
            ids.push(conversation(&http, &base, &history).await);
        }
        analyze(&database.url).await;
        let mut messages = history.clone();
        messages.push(json!({"role": "user", "content": "hi"}));
        let direct = Route {
            url: format!("{}/chat/completions", llm.base_url()),
            body: json!({"model": "bench", "messages": messages, "stream": true,
                         "stream_options": {"include_usage": true}}),
            streamed_body: Value::Null,
            bearer: None,
            first_token: "\"content\":\"The\"",
        };
        let proxied = json!({"model": "bench", "input": messages});
        let litellm = Route {
            url: format!("{proxy_url}/v1/responses"),
            streamed_body: with_stream(&proxied),
            body: proxied,
            bearer: Some(litellm::KEY),
            first_token: "response.output_text.delta",
        };
        let mut timings: [Timings; 3] = Default::default();
        let warm = rounds / 10;
        for round in 0..warm + rounds {
            let ours_body = json!({"conversation": ids[round % ids.len()], "input": "hi"});
            let ours = Route {
                url: format!("{base}/v1/responses"),
                streamed_body: with_stream(&ours_body),
                body: ours_body,
                bearer: None,
                first_token: "response.output_text.delta",
            };
            for (route, timing) in [&direct, &ours, &litellm].into_iter().zip(&mut timings) {
                let whole = call(&http, route, &route.body).await.0;
                let streamed =
                    if route.streamed_body.is_null() { &route.body } else { &route.streamed_body };
                let first = call(&http, route, streamed).await.1;
                if round >= warm {
                    timing.whole.push(whole);
                    timing.first_token.push(first);
                }
            }
        }
        report.push((size, timings));
    }
    print(&backend, rounds, &report);
    shutdown.cancel();
    database.drop().await;
}

fn with_stream(body: &Value) -> Value {
    let mut body = body.clone();
    body["stream"] = true.into();
    body
}

/// `size` items of an alternating user/assistant history, about 60 characters each.
fn history(size: usize) -> Vec<Value> {
    (0..size)
        .map(|n| {
            let role = if n % 2 == 0 { "user" } else { "assistant" };
            json!({"role": role, "content": format!("message {n:04} of the conversation, about sixty chars.")})
        })
        .collect()
}

/// A new conversation holding `history`: created, then filled through the native
/// append, which takes up to 1,000 items at once.
async fn conversation(http: &reqwest::Client, base: &str, history: &[Value]) -> String {
    let created = post_json(http, format!("{base}/v1/conversations"), &json!({})).await;
    let id = created["id"].as_str().unwrap().to_owned();
    let appended = http
        .post(format!("{base}/v1/sessions/{id}/items"))
        .json(&json!({"items": history}))
        .send()
        .await
        .unwrap();
    assert!(appended.status().is_success(), "{}", appended.text().await.unwrap());
    id
}

/// The time to the whole answer, and to the first token's marker in it.
async fn call(http: &reqwest::Client, route: &Route, body: &Value) -> (Duration, Duration) {
    let mut request = http.post(&route.url).json(body);
    if let Some(key) = route.bearer {
        request = request.bearer_auth(key);
    }
    let started = Instant::now();
    let mut response = request.send().await.unwrap();
    assert!(response.status().is_success(), "{}: {}", route.url, response.status());
    let mut seen = Vec::new();
    let mut first = None;
    while let Some(chunk) = response.chunk().await.unwrap() {
        seen.extend_from_slice(&chunk);
        if first.is_none() && contains(&seen, route.first_token.as_bytes()) {
            first = Some(started.elapsed());
        }
    }
    let whole = started.elapsed();
    let text = String::from_utf8_lossy(&seen);
    // The answer whole, or a stream that ran to its end.
    let answered = [ANSWER, "response.completed", "[DONE]"].iter().any(|end| text.contains(end));
    assert!(answered && !text.contains("failed"), "{}: not the answer: {text:.300}", route.url);
    (whole, first.unwrap_or(whole))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle)
}

fn print(backend: &str, rounds: usize, report: &[(usize, [Timings; 3])]) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let pct = |v: &[Duration], p: f64| {
        let mut v = v.to_vec();
        v.sort();
        ms(v[((v.len() as f64 * p) as usize).min(v.len() - 1)])
    };
    println!(
        "backend {backend}, {rounds} rounds per history size, one call of each kind a round\n"
    );
    println!("| history | direct Chat Completions p50 / p99 | /v1/responses overhead p50 / p99 | LiteLLM overhead p50 / p99 | first token: direct | added by /v1/responses | added by LiteLLM |");
    println!("|---|---|---|---|---|---|---|");
    for (size, [direct, ours, litellm]) in report {
        let over = |t: &Timings, p: f64| pct(&t.whole, p) - pct(&direct.whole, p);
        let first = |t: &Timings| pct(&t.first_token, 0.5) - pct(&direct.first_token, 0.5);
        println!(
            "| {size} items | {:.2} / {:.2} ms | **{:.2}** / {:.2} ms | {:.2} / {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms |",
            pct(&direct.whole, 0.5),
            pct(&direct.whole, 0.99),
            over(ours, 0.5),
            over(ours, 0.99),
            over(litellm, 0.5),
            over(litellm, 0.99),
            pct(&direct.first_token, 0.5),
            first(ours),
            first(litellm),
        );
    }
}
