//! What traces cost: two processes of the service on one database, one exporting every
//! span over OTLP to a receiver in this process and one with traces off, alternating in
//! the same run (off-on, then on-off) over appends, tail reads and sync runs against the
//! in-process fake LLM, and the ratio of the two.
//!
//! `cargo bench --bench tracing -- [sqlite|postgres] [seconds] [clients] [rounds]`

mod database;
mod fake_llm;
// Its in-process server configuration is for the other on/off benchmarks.
#[allow(dead_code)]
mod on_off;
mod phases;
mod process;
mod statistics;

use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::routing::post;
use axum::Router;
use serde_json::json;
use tokio::process::{Child, Command};

use database::BenchDatabase;
use fake_llm::{FakeLlm, Reply};
use on_off::{compare, Shape, Target};
use phases::{report, run_phase};

/// What the receiver got: exports and their bytes.
#[derive(Default)]
struct Received {
    exports: AtomicU64,
    bytes: AtomicU64,
}

#[tokio::main]
async fn main() {
    let shape = Shape::from_args();
    let database = BenchDatabase::create(&shape.backend).await;
    let llm = FakeLlm::start().await;
    llm.set_default(Reply::text("The quick brown fox jumps over"));
    let received = Arc::new(Received::default());
    let receiver = receive_traces(received.clone()).await;

    let mut servers = Vec::new();
    for traced in [false, true] {
        let mut env = vec![
            ("DATABASE_URL", database.url.clone()),
            ("LLM_BASE_URL", llm.base_url()),
            ("LLM_MODEL", "bench".to_owned()),
            ("DATABASE_MAX_CONNECTIONS", "20".to_owned()),
            ("RUST_LOG", "warn".to_owned()),
            ("SHUTDOWN_DELAY_SECS", "0".to_owned()),
        ];
        if traced {
            env.push(("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.clone()));
        }
        servers.push(Server::start(&env).await);
    }
    // The tables get rows and statistics before the measures, as in production: else each
    // process's connections may keep plans made for empty tables, and the two differ.
    for server in &servers {
        warm(&server.base).await;
    }
    statistics::analyze(&database.url).await;
    let [off, on] = [&servers[0].base, &servers[1].base];
    let targets = [
        Target { label: "traces off", base: off, authorization: None },
        Target { label: "traces on ", base: on, authorization: None },
    ];
    compare(targets, &shape).await;
    compare_runs([("traces off", off), ("traces on ", on)], &shape).await;

    for server in &mut servers {
        server.stop().await;
    }
    let (exports, bytes) =
        (received.exports.load(Ordering::Relaxed), received.bytes.load(Ordering::Relaxed));
    println!("the receiver got {exports} exports, {} KiB of spans", bytes / 1024);
    assert!(exports > 0, "the traced server exported nothing");
    database.drop().await;
}

/// A second of appends and tail reads, and a few runs.
async fn warm(base: &str) {
    let http = reqwest::Client::new();
    run_phase(8, 1, |client, n| {
        let session = format!("{base}/v1/sessions/warm-{client}");
        let append = http.post(format!("{session}/items"));
        let append = append.json(&json!({"items": [{"role": "user", "content": format!("{n}")}]}));
        let tail = http.get(format!("{session}/items?order=desc&limit=20"));
        let run = http.post(format!("{session}-{n}/runs")).json(&json!({"input": "hi"}));
        async move {
            assert_eq!(append.send().await.unwrap().status(), 201);
            assert_eq!(tail.send().await.unwrap().status(), 200);
            assert!(run.send().await.unwrap().status().is_success());
        }
    })
    .await;
}

/// Sync runs, each on a session of its own, through both servers in turn.
async fn compare_runs(targets: [(&str, &String); 2], shape: &Shape) {
    let http = reqwest::Client::new();
    let Shape { clients, seconds, rounds, .. } = *shape;
    let mut totals = [0.0f64; 2];
    for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for mode in order {
            let (label, base) = targets[mode];
            let runs = run_phase(clients, seconds, |client, n| {
                let url = format!("{base}/v1/sessions/run-{mode}-{round}-{client}-{n}/runs");
                let request = http.post(url).json(&json!({"input": "hi"}));
                async move {
                    let run: serde_json::Value =
                        request.send().await.unwrap().json().await.unwrap();
                    assert_eq!(run["status"], "completed", "{run}");
                }
            })
            .await;
            totals[mode] += report(&format!("{label}: sync run"), &runs, seconds);
        }
    }
    let (off, on) = (targets[0].0.trim(), targets[1].0.trim());
    println!("{:<10} {on} / {off} throughput: {:.3}", "sync run", totals[1] / totals[0]);
}

/// An OTLP/HTTP receiver of traces that counts what it gets; its base URL.
async fn receive_traces(received: Arc<Received>) -> String {
    let app = Router::new().route(
        "/v1/traces",
        post(move |body: Bytes| async move {
            received.exports.fetch_add(1, Ordering::Relaxed);
            received.bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// A process of the service, built by `cargo bench` with the benchmark.
struct Server {
    child: Child,
    base: String,
}

impl Server {
    async fn start(env: &[(&str, String)]) -> Self {
        let port = process::free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_agent-sessions"))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("LISTEN_ADDR", format!("127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("the service starts");
        let base = format!("http://127.0.0.1:{port}");
        let ready = process::answers(&format!("{base}/readyz"), Duration::from_secs(30)).await;
        assert!(ready, "the service at {base} never got ready");
        Self { child, base }
    }

    /// SIGTERM, so the traced one sends its last spans.
    async fn stop(&mut self) {
        let pid = self.child.id().expect("the service runs").to_string();
        Command::new("kill").args(["-TERM", &pid]).status().await.unwrap();
        self.child.wait().await.unwrap();
    }
}
