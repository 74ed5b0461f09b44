//! Runs at the database's pace: how many one-turn sync runs a second the service
//! finishes when many clients create them at once.
//!
//! `cargo bench --bench run_rate -- [sqlite|postgres] [clients] [workers] [seconds]`
//!
//! `clients` tasks (default 64) each create sync runs (`POST …/runs`, one input item, an
//! instant one-delta reply from the in-process fake LLM) on fresh sessions, one after
//! another, for `seconds` (default 10) after a warm-up and `analyze`; the service has
//! `workers` workers (default 16) and 32 connections. Prints runs per second and, on
//! Postgres, the database's commits per run (`pg_stat_database`), which counts the
//! round trips that each end a transaction: statements outside one, and `COMMIT`s.
//! Then, on Postgres, pgbench runs a run's minimal statements as three transactions
//! (`bench/side_by_side/run.sql`) on the same database with as many clients, and the
//! ratio of the two rates is printed.

mod database;
mod fake_llm;
mod post;
mod statistics;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_sessions::app::Application;
use agent_sessions::config::Cli;
use agent_sessions::store::{self, SessionStore};
use clap::Parser;
use fake_llm::{FakeLlm, Reply};
use serde_json::json;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use database::BenchDatabase;
use post::post_json;
use statistics::analyze;

const CONNECTIONS: u32 = 32;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let arg = |i: usize, default: u64| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(default);
    let backend = args.first().map_or("postgres", String::as_str).to_owned();
    let (clients, workers, seconds) = (arg(1, 64), arg(2, 16), arg(3, 10));

    let database = BenchDatabase::create(&backend).await;
    let llm = FakeLlm::start().await;
    llm.set_default(Reply::Text {
        deltas: vec!["done".into()],
        usage: Some((12, 1)),
        delay: Duration::ZERO,
    });
    let mut config = Cli::parse_from(["agent-sessions"]).config;
    config.listen_addr = "127.0.0.1:0".into();
    config.llm_base_url = llm.base_url();
    config.llm_model = Some("bench".into());
    config.run_workers = usize::try_from(workers).unwrap();
    config.database_max_connections = CONNECTIONS;
    let store: Arc<dyn SessionStore> = store::connect(&database.url, CONNECTIONS).await.unwrap();
    let app = Application::with_store(&config, store).await.unwrap();
    let base = format!("http://{}", app.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    tokio::spawn(app.run(shutdown.clone()));
    let client = reqwest::Client::new();

    load(&client, &base, "warm", clients, Duration::from_secs(seconds.div_ceil(5))).await;
    analyze(&database.url).await;
    let commits = Commits::open(&backend, &database.url).await;
    let before = commits.read().await;
    let started = Instant::now();
    let runs = load(&client, &base, "bench", clients, Duration::from_secs(seconds)).await;
    let elapsed = started.elapsed().as_secs_f64();
    let after = commits.read().await;

    let rate = runs as f64 / elapsed;
    println!("backend {backend}, {clients} clients, {workers} workers, {seconds} s");
    println!("runs/s {rate:.0} ({runs} runs)");
    if let (Some(before), Some(after)) = (before, after) {
        println!("commits per run {:.1}", (after - before) as f64 / runs as f64);
    }
    shutdown.cancel();
    if backend == "postgres" {
        let raw = raw_runs(&database.url, clients, seconds).await;
        println!(
            "raw pgbench runs/s {raw:.0} (bench/side_by_side/run.sql); ratio {:.2}",
            rate / raw
        );
    }
    database.drop().await;
}

/// `clients` loops of sync runs on fresh sessions for `period`; the runs finished.
async fn load(
    client: &reqwest::Client, base: &str, prefix: &str, clients: u64, period: Duration,
) -> u64 {
    let finished = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let (client, finished, stop) = (client.clone(), finished.clone(), stop.clone());
            let url = format!("{base}/v1/sessions/{prefix}-{c}-");
            tokio::spawn(async move {
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let run =
                        post_json(&client, format!("{url}{i}/runs"), &json!({"input": "hi"})).await;
                    assert_eq!(run["status"], "completed", "{run}");
                    finished.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    tokio::time::sleep(period).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    finished.load(Ordering::Relaxed)
}

/// Runs per second of pgbench running a run's minimal statements (three transactions) on
/// the same database, with `clients` connections; its texts are as long as the service's
/// were on average.
async fn raw_runs(url: &str, clients: u64, seconds: u64) -> f64 {
    let pool = PgPool::connect(url).await.unwrap();
    let (run, item): (f64, f64) = sqlx::query_as(
        "select (select avg(length(body))::float8 from runs),
                (select avg(length(body))::float8 from items)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    sqlx::query("vacuum analyze").execute(&pool).await.unwrap();
    let text = |n: f64| "x".repeat(n as usize);
    let output = std::process::Command::new("pgbench")
        .args(["-n", "-M", "prepared", "-j", "2", "-f", "bench/side_by_side/run.sql"])
        .args(["-c", &clients.to_string(), "-T", &seconds.to_string()])
        .args(["-D", &format!("body={}", text(run)), "-D", &format!("item={}", text(item))])
        .arg(url)
        .output()
        .expect("pgbench runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let tps = stdout.lines().find_map(|l| l.strip_prefix("tps = "));
    let tps = tps.and_then(|rest| rest.split_whitespace().next()?.parse().ok());
    tps.unwrap_or_else(|| panic!("pgbench: {stdout}{}", String::from_utf8_lossy(&output.stderr)))
}

/// The scratch database's commit counter, on Postgres.
struct Commits(Option<(PgPool, String)>);

impl Commits {
    async fn open(backend: &str, url: &str) -> Self {
        if backend != "postgres" {
            return Self(None);
        }
        let name = url.rsplit('/').next().unwrap().to_owned();
        Self(Some((PgPool::connect(url).await.unwrap(), name)))
    }

    async fn read(&self) -> Option<i64> {
        let (pool, name) = self.0.as_ref()?;
        // Backends report their counters at most once a second.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        sqlx::query_scalar("select xact_commit from pg_stat_database where datname = $1")
            .bind(name)
            .fetch_one(pool)
            .await
            .ok()
    }
}
