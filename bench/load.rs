//! Load benchmark: append and tail-read throughput and latency over real HTTP.
//!
//! `cargo bench --bench load -- [sqlite|postgres] [seconds] [clients]`
//!
//! The service runs in this process on a loopback port (release build), the clients are
//! reqwest tasks in the same runtime, so client and server share the machine; numbers
//! are for comparing changes on one machine, not for capacity planning.
//! `postgres` uses a scratch database on the server named by `DATABASE_URL`.

mod database;
mod phases;

use std::sync::Arc;

use agent_sessions::app::Application;
use agent_sessions::config::Cli;
use agent_sessions::store::{self, SessionStore};
use clap::Parser;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use database::BenchDatabase;
use phases::{report, run_phase};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let backend = args.first().map_or("sqlite", String::as_str).to_owned();
    let seconds: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10);
    let clients: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(16);

    let database = BenchDatabase::create(&backend).await;
    let url = database.url.clone();
    let mut config = Cli::parse_from(["agent-sessions"]).config;
    config.listen_addr = "127.0.0.1:0".into();
    config.database_max_connections = 20;
    let store: Arc<dyn SessionStore> =
        store::connect(&url, config.database_max_connections).await.unwrap();
    let app = Application::with_store(&config, store).await.unwrap();
    let base = format!("http://{}", app.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(app.run(shutdown.clone()));
    let http = reqwest::Client::new();

    println!("backend {backend}, {clients} clients, {seconds} s per phase");
    let append = run_phase(clients, seconds, |client, n| {
        let http = http.clone();
        let url = format!("{base}/v1/sessions/bench-{client}/items");
        async move {
            let body = json!({"items": [{"role": "user", "content": format!("message {n} of client {client}")}]});
            let response = http.post(url).json(&body).send().await.unwrap();
            assert_eq!(response.status(), 201);
        }
    })
    .await;
    let plain = report("append 1 item (own session)", &append, seconds);

    // The same append with a merge patch of the session's state in its transaction.
    let with_state = run_phase(clients, seconds, |client, n| {
        let http = http.clone();
        let url = format!("{base}/v1/sessions/bench-{client}/items");
        async move {
            let body = json!({
                "items": [{"role": "user", "content": format!("message {n} of client {client}")}],
                "state_delta": {"turn": n, "last": format!("message {n}")},
            });
            let response = http.post(url).json(&body).send().await.unwrap();
            assert_eq!(response.status(), 201);
        }
    })
    .await;
    let delta = report("append 1 item with a state_delta", &with_state, seconds);
    println!("{:<40} {:>8.2}x the plain append's throughput", "  ratio", delta / plain);

    let shared = run_phase(clients, seconds, |client, n| {
        let http = http.clone();
        let url = format!("{base}/v1/sessions/bench-shared/items");
        async move {
            let body = json!({"items": [{"role": "user", "content": format!("message {n} of client {client}")}]});
            let response = http.post(url).json(&body).send().await.unwrap();
            assert_eq!(response.status(), 201);
        }
    })
    .await;
    report("append 1 item (one shared session)", &shared, seconds);

    if backend == "postgres" {
        // Autovacuum would analyze the tables after a load like this; without statistics
        // the planner sorts a whole session instead of walking its (session_pk, seq) index.
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        sqlx::query("analyze").execute(&pool).await.unwrap();
        pool.close().await;
    }
    let tail = run_phase(clients, seconds, |client, _| {
        let http = http.clone();
        let url = format!("{base}/v1/sessions/bench-{client}/items?order=desc&limit=20");
        async move {
            let response = http.get(url).send().await.unwrap();
            assert_eq!(response.status(), 200);
            response.bytes().await.unwrap();
        }
    })
    .await;
    report("tail read, newest 20 items", &tail, seconds);

    shutdown.cancel();
    server.await.unwrap().unwrap();
    database.drop().await;
}
