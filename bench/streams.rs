//! Concurrent streamed runs: many slow turns at once on one replica, each followed by its
//! client over SSE, and what each delivered token costs.
//!
//! `cargo bench --bench streams -- [runs] [tokens] [per_second] [sqlite|postgres]`
//!
//! The release binary runs as a process of its own (`RUN_WORKERS` = runs + 8) on a
//! scratch database; the in-process fake LLM streams `tokens` deltas (default 200) at
//! `per_second` (default 25) per run, each delta the time it was sent. `runs` clients
//! (default 500) start a streamed run each at once (a burst) and read its events. Printed:
//! runs and tokens that arrived (each once, in order), the delay each token added on its
//! way (arrival − sent), time to first token and what the service added to it (− one
//! token interval, the fake's own wait), RSS idle → peak, and CPU per delivered token of
//! the service and of its Postgres backends (from /proc; backends from
//! `pg_stat_activity`).
//!
//! With `LITELLM=<path of the litellm command>` the same burst then goes through
//! LiteLLM's proxy (`/v1/chat/completions`, streamed) to the same fake, and a second row
//! is printed; LiteLLM stores nothing, so its row has no database. Measured with
//! `pip install 'litellm[proxy]==1.108.7'` in a virtualenv of its own.

mod cpu;
mod database;
mod fake_llm;
mod forwarder;
mod litellm;
mod process;

use std::collections::HashMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_llm::{micros_now, FakeLlm, Reply};
use futures::StreamExt;
use serde_json::{json, Value};

use cpu::{clock_ticks, cpu, rss, tree, Backends, Service};
use database::BenchDatabase;
use process::{answers, free_port};

#[tokio::main]
async fn main() {
    if let Ok(spec) = std::env::var(forwarder::VARIABLE) {
        return forwarder::serve(&spec).await;
    }
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let arg = |i: usize, default: u64| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(default);
    let (runs, tokens, per_second) = (arg(0, 500), arg(1, 200), arg(2, 25));
    let backend = args.get(3).map_or("postgres", String::as_str).to_owned();
    let load = Load {
        runs: usize::try_from(runs).unwrap(),
        tokens: usize::try_from(tokens).unwrap(),
        interval: Duration::from_secs(1) / u32::try_from(per_second).unwrap(),
    };

    let llm = FakeLlm::start().await;
    llm.set_default(Reply::Clock { count: load.tokens, interval: load.interval });
    println!("{runs} runs at once, {tokens} tokens each at {per_second}/s, {backend}");
    println!(
        "| server | runs / tokens ok | added delay p50 / p99 | first token p50 / p99 \
         (added p99) | RSS idle → peak | CPU per token: server + database |"
    );
    println!("|---|---|---|---|---|---|");

    let database = BenchDatabase::create(&backend).await;
    let service = Service::start(&database.url, &llm.base_url(), load.runs + 8, &[]).await;
    let backends = Backends::of(&backend, &database.url).await;
    let row = measure(&load, service.process.id(), Some(&backends), |http, n| {
        let url = format!("{}/v1/sessions/bench-{n}/runs", service.base);
        let request = http.post(url).json(&json!({"input": "hi", "stream": true}));
        (request, Protocol::Runs)
    })
    .await;
    println!("| agent-sessions | {}", row.0);
    drop(service);
    database.drop().await;

    let (mut bare, base) = start_forwarder(&llm.base_url()).await;
    let forwarded = measure(&load, bare.id(), None, |http, n| {
        let url = format!("{base}/v1/sessions/bench-{n}/runs");
        (http.post(url).json(&json!({"input": "hi", "stream": true})), Protocol::Runs)
    })
    .await;
    println!("| bare forwarder | {}", forwarded.0);
    let _ = Command::new("kill").arg(bare.id().to_string()).status();
    let _ = bare.wait();
    println!(
        "CPU per token, agent-sessions / bare forwarder: {:.2}",
        row.1 / forwarded.1.max(f64::MIN_POSITIVE)
    );

    if let Ok(litellm) = std::env::var("LITELLM") {
        let (proxy, base) = litellm::start(&litellm, &llm.base_url()).await;
        let pid = proxy.id().expect("LiteLLM's proxy runs");
        let row = measure(&load, pid, None, |http, _| {
            let url = format!("{base}/v1/chat/completions");
            let body = json!({
                "model": "bench",
                "stream": true,
                "messages": [{"role": "user", "content": "hi"}],
            });
            (http.post(url).bearer_auth(litellm::KEY).json(&body), Protocol::ChatCompletions)
        })
        .await;
        println!("| LiteLLM proxy | {}", row.0);
    }
}

struct Load {
    runs: usize,
    tokens: usize,
    interval: Duration,
}

#[derive(Clone, Copy)]
enum Protocol {
    /// The service's run events: `event: message.delta` with `{"delta": …}`.
    Runs,
    /// OpenAI's chunks: `choices[0].delta.content`.
    ChatCompletions,
}

/// What one client saw of its stream.
#[derive(Default)]
struct Seen {
    first_token: Option<Duration>,
    /// Microseconds from each token's sending to its arrival.
    delays: Vec<u64>,
    /// Whether each token arrived once and in order.
    in_order: bool,
}

async fn measure(
    load: &Load, server: u32, backends: Option<&Backends>,
    request: impl Fn(&reqwest::Client, usize) -> (reqwest::RequestBuilder, Protocol),
) -> (String, f64) {
    let http = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pids = tree(server);
    let rss_idle = rss(&pids);
    let peak = Arc::new(AtomicU64::new(rss_idle));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn({
        let (peak, done, root) = (peak.clone(), done.clone(), server);
        async move {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(rss(&tree(root)), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    });
    let database_before = match backends {
        Some(backends) => backends.cpu().await,
        None => HashMap::new(),
    };
    let server_before = cpu(&tree(server));

    let clients: Vec<_> = (0..load.runs)
        .map(|n| {
            let (builder, protocol) = request(&http, n);
            tokio::spawn(follow(builder, protocol))
        })
        .collect();
    let mut seen = Vec::with_capacity(load.runs);
    for client in clients {
        seen.push(client.await.unwrap());
    }

    let server_cpu = cpu(&tree(server)).saturating_sub(server_before);
    let database_cpu = match backends {
        Some(backends) => {
            let after = backends.cpu().await;
            after
                .iter()
                .map(|(pid, t)| t.saturating_sub(*database_before.get(pid).unwrap_or(&0)))
                .sum()
        }
        None => 0,
    };
    done.store(true, Ordering::Relaxed);
    sampler.await.unwrap();

    let whole = seen.iter().filter(|s| s.in_order && s.delays.len() == load.tokens).count();
    let delivered: usize = seen.iter().map(|s| s.delays.len()).sum();
    let mut delays: Vec<u64> = seen.iter().flat_map(|s| s.delays.iter().copied()).collect();
    delays.sort_unstable();
    let mut firsts: Vec<Duration> = seen.iter().filter_map(|s| s.first_token).collect();
    firsts.sort_unstable();
    let per_token = |ticks: u64| {
        let micros = ticks as f64 * 1e6 / clock_ticks() as f64;
        micros / delivered.max(1) as f64
    };
    let row = format!(
        "{whole}/{} runs, {delivered}/{} tokens | {} / {} ms | {:.2} / {:.2} s ({} ms) \
         | {} → {} MB | {:.0} + {:.0} µs |",
        load.runs,
        load.runs * load.tokens,
        percentile(&delays, 0.5) / 1000,
        percentile(&delays, 0.99) / 1000,
        percentile(&firsts, 0.5).as_secs_f64(),
        percentile(&firsts, 0.99).as_secs_f64(),
        percentile(&firsts, 0.99).saturating_sub(load.interval).as_millis(),
        rss_idle / 1024,
        peak.load(Ordering::Relaxed) / 1024,
        per_token(server_cpu),
        per_token(database_cpu),
    );
    (row, per_token(server_cpu))
}

/// The bare forwarder in a process of its own (this binary again), relaying to `llm_url`;
/// the process and its base URL.
async fn start_forwarder(llm_url: &str) -> (std::process::Child, String) {
    let port = free_port();
    let process = Command::new(std::env::current_exe().unwrap())
        .env(forwarder::VARIABLE, format!("{port} {llm_url}"))
        .spawn()
        .expect("start the forwarder");
    let base = format!("http://127.0.0.1:{port}");
    assert!(answers(&format!("{base}/readyz"), Duration::from_secs(30)).await);
    (process, base)
}

/// Sends the request and reads its SSE answer to the end.
async fn follow(request: reqwest::RequestBuilder, protocol: Protocol) -> Seen {
    let started = Instant::now();
    let response = request.send().await.expect("the stream's request");
    assert!(response.status().is_success(), "{}", response.status());
    let mut seen = Seen { in_order: true, ..Seen::default() };
    let mut last_sent = 0;
    let mut event = String::new();
    let mut buffer = Vec::new();
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        buffer.extend_from_slice(&chunk.expect("the stream's body"));
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            let line = std::str::from_utf8(&line).unwrap().trim_end();
            if let Some(name) = line.strip_prefix("event: ") {
                event = name.to_owned();
            }
            let Some(data) = line.strip_prefix("data: ") else { continue };
            let Some(sent) = token(protocol, &event, data) else { continue };
            let arrived = micros_now();
            seen.first_token.get_or_insert_with(|| started.elapsed());
            seen.delays.push(arrived.saturating_sub(sent));
            seen.in_order &= sent > last_sent;
            last_sent = sent;
        }
    }
    seen
}

/// The send time a data line carries, if it is a token.
fn token(protocol: Protocol, event: &str, data: &str) -> Option<u64> {
    let text = match protocol {
        Protocol::Runs if event == "message.delta" => {
            serde_json::from_str::<Value>(data).ok()?["delta"].as_str()?.to_owned()
        }
        Protocol::ChatCompletions if data != "[DONE]" => {
            let chunk: Value = serde_json::from_str(data).ok()?;
            chunk["choices"][0]["delta"]["content"].as_str()?.to_owned()
        }
        _ => return None,
    };
    text.trim().parse().ok()
}

fn percentile<T: Copy + Default>(sorted: &[T], p: f64) -> T {
    if sorted.is_empty() {
        return T::default();
    }
    let index = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}
