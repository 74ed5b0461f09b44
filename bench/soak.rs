//! Soak: a long mixed load on the real binary, watching whether anything grows.
//!
//! `cargo bench --bench soak -- [sqlite|postgres] [minutes]` (default: sqlite, 30)
//!
//! The service runs as a process of its own (so that its memory and descriptors are its
//! own); this process holds the load and the fake LLM. For `minutes`: four clients
//! append 2-item batches under Idempotency-Keys to 200 sessions, two read tails and
//! sessions, one forks a session and deletes the fork, two count in the state of 20
//! sessions (read, then a state delta with `If-Match` and an Idempotency-Key, again on
//! 412), and one streams runs one after another, every second one calling a client tool
//! it answers. Every 10 s it samples
//! the service's RSS, open file descriptors and database connections (`/metrics`).
//! At the end it checks that every acknowledged append, count and run is there, and prints,
//! for each series after the first third (the warm-up), its least, median and most,
//! and whether every sample is within ±10% of the median.

mod database;
mod fake_llm;
mod post;
mod process;

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fake_llm::{FakeLlm, Reply};
use serde_json::{json, Value};
use tokio::process::Command;

use database::BenchDatabase;
use post::post_json;
use process::{answers, free_port};

const SESSIONS: usize = 200;
const COUNTERS: usize = 20;
const SAMPLE_EVERY: Duration = Duration::from_secs(10);

struct Load {
    http: reqwest::Client,
    base: String,
    stop: AtomicBool,
    /// Items acknowledged per session.
    appended: Mutex<HashMap<String, u64>>,
    /// Increments of each counter session's state acknowledged.
    counted: Mutex<HashMap<String, u64>>,
    runs_completed: AtomicU64,
    /// `<session>/runs/<id>` of each run told completed.
    run_ids: Mutex<Vec<String>>,
    requests: AtomicU64,
}

impl Load {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn going(&self) -> bool {
        !self.stop.load(Ordering::Relaxed)
    }

    async fn append(&self, client: usize) {
        for n in 0.. {
            if !self.going() {
                return;
            }
            let session = format!("soak-{}", (n * 7 + client) % SESSIONS);
            let key = format!("{client}-{n}");
            let body = json!({"items": [{"n": n, "role": "user"}, {"n": n, "role": "assistant"}]});
            // Retried with its key until acknowledged: a 503 may have committed.
            loop {
                let answer = self
                    .http
                    .post(self.url(&format!("/v1/sessions/{session}/items")))
                    .header("idempotency-key", &key)
                    .json(&body)
                    .send()
                    .await;
                self.requests.fetch_add(1, Ordering::Relaxed);
                match answer.map(|a| a.status().as_u16()) {
                    Ok(201) => break,
                    Ok(503) | Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                    Ok(status) => panic!("append: {status}"),
                }
            }
            *self.appended.lock().unwrap().entry(session).or_default() += 2;
        }
    }

    /// Read a counter, write it one higher at the revision read; a 412 means another
    /// writer came first, a 503 is sent again as it was (its key makes it once).
    async fn count(&self, client: usize) {
        for n in 0.. {
            if !self.going() {
                return;
            }
            let session = format!("counter-{}", (n * 3 + client) % COUNTERS);
            let state = self.http.get(self.url(&format!("/v1/sessions/{session}/state")));
            let state = state.send().await.unwrap();
            self.requests.fetch_add(1, Ordering::Relaxed);
            if state.status() != 200 {
                // A read that timed out under load: read again.
                assert_eq!(state.status(), 503, "state read");
                continue;
            }
            let tag = state.headers()["etag"].to_str().unwrap().to_owned();
            let counter = state.json::<Value>().await.unwrap()["state"]["n"].as_u64().unwrap();
            let body = json!({"items": [], "state_delta": {"n": counter + 1}});
            let url = self.url(&format!("/v1/sessions/{session}/items"));
            loop {
                let request = self.http.post(&url).header("if-match", &tag);
                let request = request.header("idempotency-key", format!("c{client}-{n}"));
                let answer = request.json(&body).send().await;
                self.requests.fetch_add(1, Ordering::Relaxed);
                match answer.map(|a| a.status().as_u16()) {
                    Ok(201) => {
                        *self.counted.lock().unwrap().entry(session).or_default() += 1;
                        break;
                    }
                    Ok(412) => break,
                    Ok(503) | Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                    Ok(status) => panic!("count: {status}"),
                }
            }
        }
    }

    async fn read(&self, client: usize) {
        for n in 0.. {
            if !self.going() {
                return;
            }
            let session = format!("soak-{}", (n + client * 13) % SESSIONS);
            let path = if n % 2 == 0 {
                format!("/v1/sessions/{session}/items?limit=20&order=desc")
            } else {
                format!("/v1/sessions/{session}")
            };
            let status = self.http.get(self.url(&path)).send().await.unwrap().status();
            self.requests.fetch_add(1, Ordering::Relaxed);
            assert!(matches!(status.as_u16(), 200 | 404), "read: {status}");
        }
    }

    async fn fork(&self) {
        for n in 0.. {
            if !self.going() {
                return;
            }
            let source = format!("soak-{}", n % SESSIONS);
            let fork = format!("fork-{n}");
            let answer = self
                .http
                .post(self.url(&format!("/v1/sessions/{source}/fork")))
                .json(&json!({"id": fork}))
                .send()
                .await
                .unwrap();
            self.requests.fetch_add(1, Ordering::Relaxed);
            if answer.status() == 201 {
                let url = self.url(&format!("/v1/sessions/{fork}"));
                let deleted = self.http.delete(url).send().await.unwrap().status();
                assert_eq!(deleted, 204, "delete of a fork");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Streamed runs, one at a time (the fake LLM answers in the order it was told),
    /// every second one pausing for a client tool that this client then answers. Each
    /// on a session of its own: the fake keeps every request it gets, history and all.
    async fn runs(&self, llm: &FakeLlm, agent: &str) {
        for n in 0u64.. {
            if !self.going() {
                return;
            }
            let session = format!("runs-{n}");
            let tool = n % 2 == 0;
            if tool {
                llm.push(Reply::tool_call("call_1", "lookup", r#"{"q":"soak"}"#));
                llm.push(Reply::text("found it, and that is all"));
            }
            let body = json!({"agent_id": agent, "input": format!("run {n}"), "stream": true});
            let url = self.url(&format!("/v1/sessions/{session}/runs"));
            let answer = self.http.post(url).json(&body).send().await.unwrap();
            self.requests.fetch_add(1, Ordering::Relaxed);
            if answer.status() == 503 {
                // Not created: the fake's replies for it wait for the next run.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            let events = answer.text().await.unwrap();
            let run_id = events
                .lines()
                .filter_map(|line| line.strip_prefix("data: "))
                .filter_map(|data| serde_json::from_str::<Value>(data).ok())
                .find_map(|event| event["id"].as_str().map(String::from))
                .unwrap_or_else(|| panic!("no run in the stream: {events}"));
            if tool {
                assert!(events.contains("run.requires_action"), "{events}");
                let outputs = json!({"outputs": [{"call_id": "call_1", "output": "42"}]});
                let url = self.url(&format!("/v1/sessions/{session}/runs/{run_id}/tool_outputs"));
                // A 503 may have been taken: then the answer is refused as given already.
                let mut run = post_json(&self.http, url.clone(), &outputs).await;
                while run["status"] == 503 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    run = post_json(&self.http, url.clone(), &outputs).await;
                }
                if run["code"] == "run_not_requires_action" {
                    let path = format!("/v1/sessions/{session}/runs/{run_id}");
                    run = get_json(&self.http, self.url(&path)).await;
                }
                assert_eq!(run["status"], "completed", "{run}");
            } else {
                assert!(events.contains("run.completed"), "{events}");
            }
            self.runs_completed.fetch_add(1, Ordering::Relaxed);
            self.run_ids.lock().unwrap().push(format!("{session}/runs/{run_id}"));
        }
    }
}

async fn get_json(http: &reqwest::Client, url: String) -> Value {
    http.get(url).send().await.unwrap().json().await.unwrap()
}

/// The service's resident memory (MB) and open descriptors.
fn rss_and_fds(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count();
    (kb / 1024.0, fds as f64)
}

/// The database connections the service holds, in use or idle.
async fn connections(http: &reqwest::Client, base: &str) -> f64 {
    let metrics = http.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    metrics
        .lines()
        .filter(|line| line.starts_with("agent_sessions_db_pool_connections{"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Least, median and most of the samples, and whether all are within ±10% of the median.
fn flat(samples: &[f64]) -> (f64, f64, f64, bool) {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let (least, most) = (sorted[0], sorted[sorted.len() - 1]);
    let median = sorted[sorted.len() / 2];
    (least, median, most, least >= median * 0.9 && most <= median * 1.1)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let backend = args.first().map_or("sqlite", String::as_str).to_owned();
    let minutes: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(30.0);
    let database = BenchDatabase::create(&backend).await;
    let llm = FakeLlm::start().await;
    llm.set_default(Reply::text("a streamed answer of a few words"));
    let port = free_port();
    let mut service = Command::new(env!("CARGO_BIN_EXE_agent-sessions"))
        .env("DATABASE_URL", &database.url)
        .env("LISTEN_ADDR", format!("127.0.0.1:{port}"))
        .env("LLM_BASE_URL", llm.base_url())
        .env("LLM_MODEL", "soak")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    assert!(
        answers(&format!("{base}/readyz"), Duration::from_secs(60)).await,
        "the service starts"
    );
    let pid = service.id().unwrap();
    let http = reqwest::Client::new();
    let tool = json!({"type": "function", "name": "lookup", "description": "Looks up",
                      "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}});
    let agent = json!({"name": "soak", "model": "soak", "tools": [tool]});
    let agent = post_json(&http, format!("{base}/v1/agents"), &agent).await;
    let agent = agent["id"].as_str().unwrap().to_owned();

    let load = Arc::new(Load {
        http: http.clone(),
        base: base.clone(),
        stop: AtomicBool::new(false),
        appended: Mutex::default(),
        counted: Mutex::default(),
        runs_completed: AtomicU64::new(0),
        run_ids: Mutex::default(),
        requests: AtomicU64::new(0),
    });
    for counter in 0..COUNTERS {
        let url = format!("{base}/v1/sessions/counter-{counter}/state");
        let made = http.put(url).json(&json!({"state": {"n": 0}})).send().await.unwrap();
        assert_eq!(made.status(), 200, "a counter");
    }
    let mut tasks = Vec::new();
    for client in 0..4 {
        let load = load.clone();
        tasks.push(tokio::spawn(async move { load.append(client).await }));
    }
    for client in 0..2 {
        let load = load.clone();
        tasks.push(tokio::spawn(async move { load.read(client).await }));
    }
    for client in 0..2 {
        let load = load.clone();
        tasks.push(tokio::spawn(async move { load.count(client).await }));
    }
    let forks = load.clone();
    tasks.push(tokio::spawn(async move { forks.fork().await }));
    let runs = load.clone();
    let runner = tokio::spawn(async move { runs.runs(&llm, &agent).await });

    let started = Instant::now();
    let length = Duration::from_secs_f64(minutes * 60.0);
    let (mut rss, mut fds, mut conns) = (Vec::new(), Vec::new(), Vec::new());
    println!(
        "{:>6} {:>9} {:>5} {:>6} {:>10} {:>6}",
        "s", "RSS MB", "fds", "conns", "requests", "runs"
    );
    while started.elapsed() < length {
        tokio::time::sleep(SAMPLE_EVERY).await;
        let (memory, open) = rss_and_fds(pid);
        let held = connections(&http, &base).await;
        println!(
            "{:>6.0} {memory:>9.1} {open:>5} {held:>6} {:>10} {:>6}",
            started.elapsed().as_secs_f64(),
            load.requests.load(Ordering::Relaxed),
            load.runs_completed.load(Ordering::Relaxed)
        );
        rss.push(memory);
        fds.push(open);
        conns.push(held);
    }
    load.stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    runner.await.unwrap();

    // Every acknowledged append is there, and every run it was told completed.
    let appended = load.appended.lock().unwrap().clone();
    let mut missing = 0;
    for (session, items) in &appended {
        let info = get_json(&http, format!("{base}/v1/sessions/{session}")).await;
        missing += items.abs_diff(info["item_count"].as_u64().unwrap());
    }
    let counted = load.counted.lock().unwrap().clone();
    for (session, increments) in &counted {
        let state = get_json(&http, format!("{base}/v1/sessions/{session}/state")).await;
        missing += increments.abs_diff(state["state"]["n"].as_u64().unwrap());
    }
    let mut completed = 0;
    let run_ids = load.run_ids.lock().unwrap().clone();
    for run in run_ids {
        let run = get_json(&http, format!("{base}/v1/sessions/{run}")).await;
        completed += u64::from(run["status"] == "completed");
    }
    // SQLite's page caches fill as the file grows past them: ten minutes of this load.
    let warm = rss.len() / 3;
    println!("\n{backend}, {minutes} min, after {warm} warm-up samples of {}:", rss.len());
    println!("| series | least | median | most | within ±10% |");
    println!("|---|---|---|---|---|");
    for (name, samples) in [("RSS (MB)", &rss), ("open fds", &fds), ("DB connections", &conns)] {
        let (least, median, most, ok) = flat(&samples[warm..]);
        println!(
            "| {name} | {least:.1} | {median:.1} | {most:.1} | {} |",
            if ok { "yes" } else { "NO" }
        );
    }
    let acknowledged: u64 = appended.values().sum();
    let increments: u64 = counted.values().sum();
    let runs = load.runs_completed.load(Ordering::Relaxed);
    println!(
        "acknowledged items {acknowledged} and state increments {increments}, missing or extra {missing}; runs completed {runs}, stored completed {completed}"
    );
    let _ = service.start_kill();
    let _ = service.wait().await;
    database.drop().await;
    assert_eq!(missing, 0, "acknowledged appends or state increments are missing");
    assert_eq!(completed, runs, "completed runs are missing");
}
