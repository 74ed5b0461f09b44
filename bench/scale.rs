//! Flat at scale: the same operations on an empty database and on one holding many
//! sessions and items across many tenants.
//!
//! `cargo bench --bench scale -- [postgres|sqlite] [sessions] [items_per_session] [requests]`
//!
//! Defaults: Postgres 1,000,000 sessions of 10 items (10M items), SQLite 100,000 of 10;
//! 100 tenants, the unauthenticated tenant (`default`) holding a hundredth of them, each
//! session with `user` and `team` metadata. The loader generates the rows inside the
//! database (`generate_series` on Postgres, a recursive CTE on SQLite), then `analyze`.
//! On each database the service (in process, over loopback HTTP) gets 100 probe sessions
//! of 10 items and one of 1,000, then one client times `requests` of each operation: get
//! a session, read its newest 20 items, list the tenant's sessions with a metadata
//! filter that a tenth of its sessions match and with one that one in a thousand match
//! (ten of the tenant's, and ten probes; pages of ten), append an item, fork the
//! 1,000-item session (a tenth as many). Printed: p50 and p99 on each and their ratios.

mod database;
mod statistics;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_sessions::app::Application;
use agent_sessions::config::Cli;
use agent_sessions::store::{self, SessionStore};
use clap::Parser;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use database::BenchDatabase;
use statistics::analyze;

const TENANTS: u64 = 100;
const PROBES: usize = 100;
const OPERATIONS: [&str; 6] = [
    "get session",
    "tail read (20)",
    "list, a filter a tenth match",
    "list, a filter one in a thousand match",
    "append",
    "fork 1,000 items",
];

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let backend = args.first().map_or("postgres", String::as_str).to_owned();
    let arg = |i: usize, default: u64| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(default);
    let sessions = arg(1, if backend == "postgres" { 1_000_000 } else { 100_000 });
    let (items, requests) = (arg(2, 10), usize::try_from(arg(3, 1000)).unwrap());

    let empty = measure(&backend, 0, items, requests).await;
    let loaded = measure(&backend, sessions, items, requests).await;

    println!(
        "{backend}: empty against {sessions} sessions of {items} items in {TENANTS} tenants; \
         {requests} requests each"
    );
    println!("| operation | empty p50 | p99 | loaded p50 | p99 | ratio p50 | p99 |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for ((name, (e50, e99)), (l50, l99)) in OPERATIONS.iter().zip(&empty).zip(&loaded) {
        let ms = |d: &Duration| format!("{:.2} ms", d.as_secs_f64() * 1000.0);
        let ratio = |a: &Duration, b: &Duration| a.as_secs_f64() / b.as_secs_f64();
        println!(
            "| {name} | {} | {} | {} | {} | {:.2} | {:.2} |",
            ms(e50),
            ms(e99),
            ms(l50),
            ms(l99),
            ratio(l50, e50),
            ratio(l99, e99)
        );
    }
}

/// p50 and p99 of each operation on a database loaded with `sessions` sessions.
async fn measure(
    backend: &str, sessions: u64, items: u64, requests: usize,
) -> Vec<(Duration, Duration)> {
    let database = BenchDatabase::create(backend).await;
    let store: Arc<dyn SessionStore> = store::connect(&database.url, 10).await.unwrap();
    if sessions > 0 {
        let started = Instant::now();
        load(&database.url, sessions, items).await;
        eprintln!("loaded {sessions} sessions in {:.0} s", started.elapsed().as_secs_f64());
    }
    let mut config = Cli::parse_from(["agent-sessions"]).config;
    config.listen_addr = "127.0.0.1:0".into();
    let app = Application::with_store(&config, store).await.unwrap();
    let base = format!("http://{}", app.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    tokio::spawn(app.run(shutdown.clone()));
    let http = reqwest::Client::new();

    let item = json!({"role": "user", "content": "x".repeat(150)});
    let probe = |n: usize| format!("{base}/v1/sessions/probe-{n}");
    for n in 0..PROBES {
        let metadata = json!({"user": format!("user-{}", 40 + n % 10), "team": "team-3"});
        send(
            http.post(format!("{base}/v1/sessions"))
                .json(&json!({"id": format!("probe-{n}"), "metadata": metadata})),
        )
        .await;
        let body = json!({"items": vec![item.clone(); 10]});
        send(http.post(format!("{}/items", probe(n))).json(&body)).await;
    }
    for _ in 0..10 {
        let body = json!({"items": vec![item.clone(); 100]});
        send(http.post(format!("{base}/v1/sessions/big/items")).json(&body)).await;
    }
    analyze(&database.url).await;

    let common = format!("{base}/v1/sessions?metadata[team]=team-3&limit=20");
    // A page of ten: as many as the empty database holds, so that both answer as much.
    let rare = format!("{base}/v1/sessions?metadata[user]=user-42&limit=10");
    let append = json!({"items": [item]});
    let mut timings = Vec::new();
    for operation in 0..OPERATIONS.len() {
        let count = if operation == 5 { requests / 10 } else { requests };
        let mut took = Vec::with_capacity(count);
        for n in 0..count {
            let request = match operation {
                0 => http.get(probe(n % PROBES)),
                1 => http.get(format!("{}/items?order=desc&limit=20", probe(n % PROBES))),
                2 => http.get(&common),
                3 => http.get(&rare),
                4 => http.post(format!("{}/items", probe(n % PROBES))).json(&append),
                _ => http.post(format!("{base}/v1/sessions/big/fork")).json(&json!({})),
            };
            let started = Instant::now();
            send(request).await;
            took.push(started.elapsed());
        }
        took.sort_unstable();
        timings.push((took[took.len() / 2], took[(took.len() * 99).div_ceil(100) - 1]));
    }
    shutdown.cancel();
    database.drop().await;
    timings
}

async fn send(request: reqwest::RequestBuilder) -> Value {
    let response = request.send().await.unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert!(status.is_success(), "{status}: {body}");
    body
}

/// Fills the database with `sessions` sessions of `items` items each, spread over
/// [`TENANTS`] tenants, generated inside the database.
async fn load(url: &str, sessions: u64, items: u64) {
    let body = format!(r#"{{"role":"user","content":"{}"}}"#, "x".repeat(150));
    if url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        sqlx::query(
            r"insert into sessions (tenant_id, id, created_at, updated_at, last_active_at,
                  metadata, item_count, last_seq)
              select case when g % $3 = 0 then 'default' else 'tenant-' || (g % $3) end,
                  'load-' || g, now() - g * interval '1 ms', now(), now(),
                  jsonb_build_object('user', 'user-' || (g / 1000 % 1000),
                      'team', 'team-' || (g / 100 % 10)),
                  $2, $2
              from generate_series(1, $1::bigint) g",
        )
        .bind(i64::try_from(sessions).unwrap())
        .bind(i64::try_from(items).unwrap())
        .bind(i64::try_from(TENANTS).unwrap())
        .execute(&pool)
        .await
        .unwrap();
        sqlx::query(
            r"insert into items (id, tenant_id, session_pk, seq, created_at, body)
              select gen_random_uuid(), s.tenant_id, s.pk, i, s.created_at, $2
              from sessions s, generate_series(1, $1::bigint) i",
        )
        .bind(i64::try_from(items).unwrap())
        .bind(&body)
        .execute(&pool)
        .await
        .unwrap();
        // What the load left dirty is written now, not during the measurement.
        for statement in ["vacuum analyze", "checkpoint"] {
            sqlx::query(statement).execute(&pool).await.unwrap();
        }
        pool.close().await;
        return;
    }
    let pool = sqlx::SqlitePool::connect(url).await.unwrap();
    let now = chrono::Utc::now().timestamp_micros();
    sqlx::query(
        r"with recursive g(n) as (select 1 union all select n + 1 from g where n < $1)
          insert into sessions (tenant_id, id, created_at, updated_at, last_active_at,
              metadata, item_count, last_seq)
          select case when n % $4 = 0 then 'default' else 'tenant-' || (n % $4) end,
              'load-' || n, $3 - n * 1000, $3, $3,
              json_object('user', 'user-' || (n / 1000 % 1000), 'team', 'team-' || (n / 100 % 10)),
              $2, $2
          from g",
    )
    .bind(i64::try_from(sessions).unwrap())
    .bind(i64::try_from(items).unwrap())
    .bind(now)
    .bind(i64::try_from(TENANTS).unwrap())
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        r"with recursive i(n) as (select 1 union all select n + 1 from i where n < $1)
          insert into items (id, tenant_id, session_pk, seq, created_at, body)
          select randomblob(16), s.tenant_id, s.pk, i.n, s.created_at, $2
          from sessions s, i",
    )
    .bind(i64::try_from(items).unwrap())
    .bind(&body)
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("analyze").execute(&pool).await.unwrap();
    pool.close().await;
}
