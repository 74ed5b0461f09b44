//! Run overhead benchmark: what the service adds to an agent turn beyond the LLM.
//!
//! `cargo bench --bench runs -- [sqlite|postgres] [runs]`
//!
//! Sequential sync runs (`POST …/runs`, one text reply in 8 deltas) against the
//! in-process fake LLM, each on a fresh session, after a tenth as many runs and the
//! planner's statistics (`analyze`); the same completion requested
//! through the service's own LLM client is the baseline. Overhead = run latency −
//! baseline, p50/p99. The service, the fake and the client share this process and
//! machine.

mod database;
mod fake_llm;
mod post;
mod statistics;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_sessions::app::Application;
use agent_sessions::config::Cli;
use agent_sessions::llm::{ChatRequest, LlmClient, Message, Messages, OpenAiClient, Role};
use agent_sessions::store::{self, SessionStore};
use clap::Parser;
use fake_llm::{FakeLlm, Reply};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use database::BenchDatabase;
use post::post_json;
use statistics::analyze;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let backend = args.first().map_or("sqlite", String::as_str).to_owned();
    let runs: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(300);

    let database = BenchDatabase::create(&backend).await;
    let llm = FakeLlm::start().await;
    llm.set_default(Reply::text("The quick brown fox jumps over"));
    let mut config = Cli::parse_from(["agent-sessions"]).config;
    config.listen_addr = "127.0.0.1:0".into();
    config.llm_base_url = llm.base_url();
    config.llm_model = Some("bench".into());
    let store: Arc<dyn SessionStore> = store::connect(&database.url, 10).await.unwrap();
    let app = Application::with_store(&config, store).await.unwrap();
    let base = format!("http://{}", app.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    tokio::spawn(app.run(shutdown.clone()));
    let client = reqwest::Client::new();

    // The baseline is the same completion through the service's own LLM client, so the
    // difference is what the service adds: HTTP, the database, the worker, the events.
    let llm_client = OpenAiClient::new(config.llm_settings()).unwrap();
    let direct = ChatRequest {
        model: "bench".into(),
        messages: Messages::plain(vec![Message::text(Role::User, "hi")]),
        tools: Vec::new(),
        temperature: None,
        max_output_tokens: None,
        sampling: Default::default(),
    };
    // A first tenth of the runs fills the tables before their statistics are gathered;
    // the runs measured come after.
    for i in 0..runs / 10 {
        client
            .post(format!("{base}/v1/sessions/warm-{i}/runs"))
            .json(&json!({"input": "hi"}))
            .send()
            .await
            .unwrap();
    }
    analyze(&database.url).await;
    let mut baseline = Vec::new();
    let mut total = Vec::new();
    for i in 0..runs {
        let started = Instant::now();
        let (deltas, _received) = tokio::sync::mpsc::unbounded_channel();
        llm_client.complete(&direct, deltas).await.unwrap();
        baseline.push(started.elapsed());

        let started = Instant::now();
        let url = format!("{base}/v1/sessions/bench-{i}/runs");
        let run = post_json(&client, url, &json!({"input": "hi"})).await;
        total.push(started.elapsed());
        assert_eq!(run["status"], "completed", "{run}");
    }
    baseline.sort();
    total.sort();
    let pct = |v: &[Duration], p: f64| v[((v.len() as f64 * p) as usize).min(v.len() - 1)];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let overhead = |p: f64| ms(pct(&total, p)) - ms(pct(&baseline, p));
    println!("backend {backend}, {runs} sequential sync runs");
    println!(
        "run latency      p50 {:.2} ms  p99 {:.2} ms",
        ms(pct(&total, 0.5)),
        ms(pct(&total, 0.99))
    );
    println!(
        "fake LLM alone   p50 {:.2} ms  p99 {:.2} ms",
        ms(pct(&baseline, 0.5)),
        ms(pct(&baseline, 0.99))
    );
    println!("service overhead p50 {:.2} ms  p99 {:.2} ms", overhead(0.5), overhead(0.99));
    shutdown.cancel();
    database.drop().await;
}
