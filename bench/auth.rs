//! What authentication costs on the hot paths: appends and tail reads through a server
//! with auth off and one with auth on (a tenant's key, looked up through the cache),
//! alternating in the same run on the same database (off-on, then on-off, so that a
//! machine's drift weighs on both alike), and the ratio of the two.
//!
//! `cargo bench --bench auth -- [sqlite|postgres] [seconds] [clients] [rounds]`

mod database;
mod phases;

use std::sync::Arc;

use agent_sessions::app::Application;
use agent_sessions::config::Cli;
use agent_sessions::http::api_keys::issue_key;
use agent_sessions::store::{self, SessionStore};
use clap::Parser;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use database::BenchDatabase;
use phases::{report, run_phase};

const ADMIN_KEY: &str = "bench-admin-key-0123456789abcdefghijkl";

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let backend = args.first().map_or("sqlite", String::as_str).to_owned();
    let seconds: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(5);
    let clients: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(32);
    let rounds: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(4);

    let database = BenchDatabase::create(&backend).await;
    let mut config = Cli::parse_from(["agent-sessions"]).config;
    config.listen_addr = "127.0.0.1:0".into();
    config.database_max_connections = 20;
    let store: Arc<dyn SessionStore> =
        store::connect(&database.url, config.database_max_connections)
            .await
            .unwrap();
    let shutdown = CancellationToken::new();
    let mut servers = Vec::new();
    let mut targets = Vec::new();
    for auth in [false, true] {
        let mut config = config.clone();
        config.admin_api_key = auth.then(|| ADMIN_KEY.to_owned());
        let app = Application::with_store(&config, store.clone())
            .await
            .unwrap();
        let base = format!("http://{}", app.local_addr().unwrap());
        servers.push(tokio::spawn(app.run(shutdown.clone())));
        let key = match auth {
            true => Some(
                issue_key(&*store, "bench".into(), "bench".into(), None, None)
                    .await
                    .unwrap()
                    .1,
            ),
            false => None,
        };
        targets.push((if auth { "auth on " } else { "auth off" }, base, key));
    }
    let http = reqwest::Client::new();

    println!("backend {backend}, {clients} clients, {seconds} s per phase, {rounds} rounds of off and on");
    // (append, tail) requests per second, summed over the rounds, for off and on.
    let mut totals = [[0.0f64; 2]; 2];
    for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for mode in order {
            let (label, base, key) = &targets[mode];
            let authorization = key.as_ref().map(|k| format!("Bearer {k}"));
            let append = run_phase(clients, seconds, |client, n| {
                let request = http
                    .post(format!("{base}/v1/sessions/auth-{round}-{client}/items"))
                    .json(&json!({"items": [{"role": "user", "content": format!("message {n}")}]}));
                let request = with_key(request, authorization.as_deref());
                async move { assert_eq!(request.send().await.unwrap().status(), 201) }
            })
            .await;
            totals[mode][0] += report(&format!("{label}: append 1 item"), &append, seconds);
            let tail = run_phase(clients, seconds, |client, _| {
                let request = http.get(format!(
                    "{base}/v1/sessions/auth-{round}-{client}/items?order=desc&limit=20"
                ));
                let request = with_key(request, authorization.as_deref());
                async move {
                    let response = request.send().await.unwrap();
                    assert_eq!(response.status(), 200);
                    response.bytes().await.unwrap();
                }
            })
            .await;
            totals[mode][1] += report(&format!("{label}: tail read, newest 20"), &tail, seconds);
        }
    }
    for (name, op) in [("append", 0), ("tail read", 1)] {
        println!(
            "{name:<10} auth on / auth off throughput: {:.3}",
            totals[1][op] / totals[0][op]
        );
    }

    shutdown.cancel();
    for server in servers {
        server.await.unwrap().unwrap();
    }
    database.drop().await;
}

fn with_key(
    request: reqwest::RequestBuilder,
    authorization: Option<&str>,
) -> reqwest::RequestBuilder {
    match authorization {
        Some(value) => request.header("authorization", value),
        None => request,
    }
}
