//! One feature off and on, compared in the same run on the same database: appends and
//! tail reads through two servers, alternating (off-on, then on-off, so that a machine's
//! drift weighs on both alike), and the ratio of their throughputs.

use agent_sessions::config::{Cli, Config};
use clap::Parser;
use serde_json::json;

use crate::phases::{report, run_phase};

/// A server to load: its base URL and the `Authorization` its requests carry.
pub struct Target<'a> {
    pub label: &'a str,
    pub base: &'a str,
    pub authorization: Option<String>,
}

/// What to load, from the command line: `[sqlite|postgres] [seconds] [clients] [rounds]`.
pub struct Shape {
    pub backend: String,
    pub seconds: u64,
    pub clients: usize,
    pub rounds: usize,
}

impl Shape {
    pub fn from_args() -> Self {
        let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
        let number =
            |n: usize, default: u64| args.get(n).and_then(|s| s.parse().ok()).unwrap_or(default);
        Self {
            backend: args.first().map_or("sqlite", String::as_str).to_owned(),
            seconds: number(1, 5),
            clients: number(2, 32) as usize,
            rounds: number(3, 4) as usize,
        }
    }
}

/// The configuration both servers start from: any free port, 20 connections.
pub fn server_config() -> Config {
    let mut config = Cli::parse_from(["agent-sessions"]).config;
    config.listen_addr = "127.0.0.1:0".into();
    config.database_max_connections = 20;
    config
}

/// Runs the rounds and prints each phase and the on/off ratios.
pub async fn compare(targets: [Target<'_>; 2], shape: &Shape) {
    let Shape { backend, clients, seconds, rounds } = shape;
    let (clients, seconds, rounds) = (*clients, *seconds, *rounds);
    let http = reqwest::Client::new();
    println!("backend {backend}, {clients} clients, {seconds} s per phase, {rounds} rounds of off and on");
    // (append, tail) requests per second, summed over the rounds, for off and on.
    let mut totals = [[0.0f64; 2]; 2];
    for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for mode in order {
            let target = &targets[mode];
            let (label, base) = (target.label, target.base);
            let authorization = target.authorization.as_deref();
            let append = run_phase(clients, seconds, |client, n| {
                let request = http
                    .post(format!("{base}/v1/sessions/ab-{mode}-{round}-{client}/items"))
                    .json(&json!({"items": [{"role": "user", "content": format!("message {n}")}]}));
                let request = with_key(request, authorization);
                async move { assert_eq!(request.send().await.unwrap().status(), 201) }
            })
            .await;
            totals[mode][0] += report(&format!("{label}: append 1 item"), &append, seconds);
            let tail = run_phase(clients, seconds, |client, _| {
                let request = http.get(format!(
                    "{base}/v1/sessions/ab-{mode}-{round}-{client}/items?order=desc&limit=20"
                ));
                let request = with_key(request, authorization);
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
    let (off, on) = (targets[0].label.trim(), targets[1].label.trim());
    for (name, op) in [("append", 0), ("tail read", 1)] {
        println!("{name:<10} {on} / {off} throughput: {:.3}", totals[1][op] / totals[0][op]);
    }
}

fn with_key(
    request: reqwest::RequestBuilder, authorization: Option<&str>,
) -> reqwest::RequestBuilder {
    match authorization {
        Some(value) => request.header("authorization", value),
        None => request,
    }
}
