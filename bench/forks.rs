//! Fork and context benchmark: `cargo bench --bench forks -- [sqlite|postgres] [items]`
//!
//! Fills one session with `items` (default 100 000) small messages through the store,
//! compacting it over HTTP after every 20 000 (keeping the newest 20; the fake LLM writes
//! the summary), then forks it whole five times (each a new session made by the
//! database with `INSERT … SELECT`), and reads what a run would send, `GET …/context`
//! (the summary and 20 items), against a plain tail read of the same 20 items,
//! `GET …/items?order=desc&limit=20`.
//! The service, the fake LLM and the client share this process and machine.

mod database;
mod fake_llm;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_sessions::app::Application;
use agent_sessions::config::Cli;
use agent_sessions::model::{ItemBody, SessionId, DEFAULT_TENANT};
use agent_sessions::store::{self, SessionStore};
use clap::Parser;
use fake_llm::FakeLlm;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use database::BenchDatabase;

const FORKS: usize = 5;
const READS: usize = 200;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let backend = args.first().map_or("sqlite", String::as_str).to_owned();
    let count: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);

    let database = BenchDatabase::create(&backend).await;
    let llm = FakeLlm::start().await;
    let mut config = Cli::parse_from(["agent-sessions"]).config;
    config.listen_addr = "127.0.0.1:0".into();
    config.llm_base_url = llm.base_url();
    config.llm_model = Some("bench".into());
    let store: Arc<dyn SessionStore> = store::connect(&database.url, 10).await.unwrap();

    let app = Application::with_store(&config, store.clone()).await.unwrap();
    let base = format!("http://{}", app.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    tokio::spawn(app.run(shutdown.clone()));
    let client = reqwest::Client::new();

    let session = SessionId::parse("id", "long".into()).unwrap();
    let (mut appending, mut compacting) = (Duration::ZERO, Vec::new());
    for batch in 0..count.div_ceil(1000) {
        let bodies = (batch * 1000..((batch + 1) * 1000).min(count))
            .map(|i| {
                let text = json!({"role": "user", "content": format!("message number {i}")});
                let raw = serde_json::value::to_raw_value(&text).unwrap();
                ItemBody::new("items", raw).unwrap()
            })
            .collect();
        let started = Instant::now();
        (store.append_items(DEFAULT_TENANT, &session, bodies, None, None)).await.unwrap();
        appending += started.elapsed();
        if (batch + 1) % 20 == 0 || (batch + 1) * 1000 >= count {
            let started = Instant::now();
            let url = format!("{base}/v1/sessions/long/compact");
            post(&client, &url, json!({"keep_recent_items": 20})).await;
            compacting.push(started.elapsed());
        }
    }
    compacting.sort();
    println!(
        "backend {backend}: {count} items appended in {:.1} s; {} compactions of up to 20 000 \
         items, median {:.0} ms",
        appending.as_secs_f64(),
        compacting.len(),
        ms(compacting[compacting.len() / 2])
    );

    let mut forks = Vec::new();
    for i in 0..FORKS {
        let started = Instant::now();
        let fork = post(
            &client,
            &format!("{base}/v1/sessions/long/fork"),
            json!({"id": format!("fork-{i}")}),
        )
        .await;
        forks.push(started.elapsed());
        assert_eq!(fork["item_count"], count as i64, "{fork}");
    }
    forks.sort();
    println!(
        "fork of {count} items: median {:.0} ms, min {:.0} ms, max {:.0} ms ({FORKS} forks)",
        ms(forks[FORKS / 2]),
        ms(forks[0]),
        ms(forks[FORKS - 1])
    );

    let context = read(&client, &format!("{base}/v1/sessions/long/context"), 21).await;
    let tail =
        read(&client, &format!("{base}/v1/sessions/long/items?order=desc&limit=20"), 20).await;
    let pct = |v: &[Duration], p: f64| ms(v[((v.len() as f64 * p) as usize).min(v.len() - 1)]);
    println!(
        "GET …/context      p50 {:.2} ms  p99 {:.2} ms ({READS} reads)",
        pct(&context, 0.5),
        pct(&context, 0.99)
    );
    println!(
        "GET …/items tail   p50 {:.2} ms  p99 {:.2} ms ({READS} reads)",
        pct(&tail, 0.5),
        pct(&tail, 0.99)
    );
    shutdown.cancel();
    database.drop().await;
}

async fn post(client: &reqwest::Client, url: &str, body: Value) -> Value {
    let response = client.post(url).json(&body).send().await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    response.json().await.unwrap()
}

/// `READS` timed GETs of `url`, whose `data` must hold `expected` entries; sorted.
async fn read(client: &reqwest::Client, url: &str, expected: usize) -> Vec<Duration> {
    let mut times = Vec::new();
    for _ in 0..READS {
        let started = Instant::now();
        let body: Value = client.get(url).send().await.unwrap().json().await.unwrap();
        times.push(started.elapsed());
        assert_eq!(body["data"].as_array().unwrap().len(), expected);
    }
    times.sort();
    times
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
