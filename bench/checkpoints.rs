//! Checkpoint benchmark: `cargo bench --bench checkpoints -- [sqlite|postgres] [checkpoints]`
//!
//! Two sessions of 100-channel checkpoints, each checkpoint after the first changing one
//! channel (LangGraph's usual step): a short one of 10 and a long one of `checkpoints`
//! (default 10 000), written through the store. It counts the blobs each put wrote
//! (expected: 100 for the first, then 1), then reads the newest checkpoint of each over
//! HTTP (`GET …/checkpoints?namespace=&limit=1`, whole: 100 blobs), the two sessions in
//! turn, and reports the median read of each and their ratio (the goal: the long one
//! within 1.5× of the short one). The service and the client share this process.

mod database;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_sessions::app::Application;
use agent_sessions::config::Cli;
use agent_sessions::model::{ChannelBlob, NewCheckpoint, SessionId, TypedValue, DEFAULT_TENANT};
use agent_sessions::store::{self, SessionStore};
use clap::Parser;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use database::BenchDatabase;

const CHANNELS: usize = 100;
const SHORT: usize = 10;
const READS: usize = 300;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let backend = args.first().map_or("sqlite", String::as_str).to_owned();
    let long: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10_000);

    let database = BenchDatabase::create(&backend).await;
    let mut config = Cli::parse_from(["agent-sessions"]).config;
    config.listen_addr = "127.0.0.1:0".into();
    let store: Arc<dyn SessionStore> = store::connect(&database.url, 10).await.unwrap();
    let app = Application::with_store(&config, store.clone()).await.unwrap();
    let base = format!("http://{}", app.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    tokio::spawn(app.run(shutdown.clone()));

    let started = Instant::now();
    let mut written = Vec::new();
    for (session, count) in [("short", SHORT), ("long", long)] {
        written.push(fill(&*store, &database.url, session, count).await);
    }
    println!(
        "{backend}: wrote {SHORT} + {long} checkpoints of {CHANNELS} channels in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let (first, rest) = &written[1];
    println!("blobs written: {first} by the first put, {rest:.2} per put after it");

    let client = reqwest::Client::new();
    let mut times: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
    for _ in 0..READS {
        for session in ["short", "long"] {
            let url = format!("{base}/v1/sessions/{session}/checkpoints?namespace=&limit=1");
            let start = Instant::now();
            let page: Value = client.get(&url).send().await.unwrap().json().await.unwrap();
            times.entry(session).or_default().push(start.elapsed());
            assert_eq!(page["data"][0]["blobs"].as_array().map(Vec::len), Some(CHANNELS));
        }
    }
    let median = |session: &str| {
        let mut all = times[session].clone();
        all.sort();
        all[all.len() / 2]
    };
    let (short, long_read) = (median("short"), median("long"));
    println!(
        "newest checkpoint, median of {READS}: {SHORT} checkpoints {:.2} ms, {long} checkpoints {:.2} ms, ratio {:.2}",
        short.as_secs_f64() * 1e3,
        long_read.as_secs_f64() * 1e3,
        long_read.as_secs_f64() / short.as_secs_f64()
    );
    shutdown.cancel();
    database.drop().await;
}

/// Puts `count` checkpoints into `session`; returns the blobs the first put wrote and
/// the mean the others wrote.
async fn fill(store: &dyn SessionStore, url: &str, session: &str, count: usize) -> (i64, f64) {
    let id = SessionId::parse("id", session.to_owned()).unwrap();
    let mut versions: BTreeMap<String, String> =
        (0..CHANNELS).map(|c| (format!("channel-{c:03}"), "1".to_owned())).collect();
    let mut first = 0;
    for n in 0..count {
        let changed: Vec<String> = match n {
            0 => versions.keys().cloned().collect(),
            _ => {
                let channel = format!("channel-{:03}", n % CHANNELS);
                versions.insert(channel.clone(), (n + 1).to_string());
                vec![channel]
            }
        };
        let blobs = changed
            .iter()
            .map(|channel| ChannelBlob {
                channel: channel.clone(),
                version: versions[channel].clone(),
                value: TypedValue {
                    kind: "json".into(),
                    data: Some("eyJ2YWx1ZSI6IDQyfQ==".into()),
                },
            })
            .collect();
        let checkpoint = NewCheckpoint {
            namespace: String::new(),
            id: format!("{n:08}"),
            parent_id: n.checked_sub(1).map(|p| format!("{p:08}")),
            payload: TypedValue { kind: "json".into(), data: Some("eyJ2IjogMX0=".into()) },
            metadata: serde_json::Map::from_iter([("step".into(), Value::from(n))]),
            channel_versions: versions.clone(),
            blobs,
        };
        store.put_checkpoint(DEFAULT_TENANT, &id, checkpoint, None, None).await.unwrap();
        if n == 0 {
            first = blob_rows(url, session).await;
        }
    }
    let rest = (blob_rows(url, session).await - first) as f64 / (count - 1).max(1) as f64;
    (first, rest)
}

/// The blob rows of `session`, counted in the database.
async fn blob_rows(url: &str, session: &str) -> i64 {
    let sql = "select count(*) from checkpoint_blobs b join sessions s on s.pk = b.session_pk \
               where s.id = $1";
    if url.starts_with("sqlite") {
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        let rows = sqlx::query_scalar(sql).bind(session).fetch_one(&pool).await.unwrap();
        pool.close().await;
        rows
    } else {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        let rows = sqlx::query_scalar(sql).bind(session).fetch_one(&pool).await.unwrap();
        pool.close().await;
        rows
    }
}
