//! The real binary as a child process: crash durability and graceful shutdown.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

use crate::helpers::{get_json, scratch_postgres, ScratchDatabase};

mod approvals;
mod auth;
mod container;
mod crashed_streams;
mod draining;
mod full_disk;
mod restart;
mod runs;
mod startup;
mod webhooks;

struct Server {
    child: Child,
    base: String,
    /// Every JSON log event the server wrote so far.
    events: Arc<Mutex<Vec<Value>>>,
}

impl Server {
    /// Starts the binary on `database_url` and waits until it listens.
    async fn start(database_url: &str) -> Server {
        Self::start_with(database_url, &[]).await
    }

    async fn start_with(database_url: &str, env: &[(&str, &str)]) -> Server {
        Self::start_as(Command::new(env!("CARGO_BIN_EXE_agent-sessions")), database_url, env).await
    }

    /// Starts `command`, which runs the binary, with the service's environment.
    async fn start_as(mut command: Command, database_url: &str, env: &[(&str, &str)]) -> Server {
        let mut child = command
            .env("SHUTDOWN_DELAY_SECS", "0")
            .envs(env.iter().copied())
            .env("DATABASE_URL", database_url)
            .env("LISTEN_ADDR", "127.0.0.1:0")
            .env("LOG_FORMAT", "json")
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("the binary starts");
        let (addr_tx, addr_rx) = oneshot::channel();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let events = Arc::new(Mutex::new(Vec::new()));
        let log = events.clone();
        tokio::spawn(async move {
            let mut addr_tx = Some(addr_tx);
            // Keep reading to the end, so the child never blocks on a full pipe.
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(event) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if event["message"] == "listening" {
                    if let Some(tx) = addr_tx.take() {
                        let _ = tx.send(event["addr"].as_str().unwrap_or_default().to_owned());
                    }
                }
                log.lock().unwrap().push(event);
            }
        });
        let addr = tokio::time::timeout(Duration::from_secs(30), addr_rx)
            .await
            .expect("the server listens within 30 s")
            .expect("the server logged its address");
        Server { child, base: format!("http://{addr}"), events }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.id().expect("the server runs").to_string();
        let status = std::process::Command::new("kill").args([signal, &pid]).status().unwrap();
        assert!(status.success());
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap()
}

/// Sessions the kill -9 test writes to, and clients writing to each at once: enough
/// that appends wait for each other's commits and are combined.
const CRASH_SESSIONS: usize = 8;
const CRASH_CLIENTS: usize = 48;

/// Appends 2-item batches from many clients to a few sessions, kills the server with
/// SIGKILL under that load (once /metrics shows appends combined into shared
/// transactions), restarts it and checks that every acknowledged batch is there exactly
/// once, none by half, in contiguous seqs.
async fn acknowledged_writes_survive_kill_9(database_url: &str) {
    let mut server = Server::start(database_url).await;
    let acknowledged: Arc<Mutex<HashMap<String, (i64, i64)>>> = Arc::default();
    let mut clients = Vec::new();
    for client_no in 0..CRASH_CLIENTS {
        let url = server.url(&format!("/v1/sessions/crash-{}/items", client_no % CRASH_SESSIONS));
        let acknowledged = acknowledged.clone();
        clients.push(tokio::spawn(async move {
            let http = client();
            for n in 0.. {
                let batch = format!("{client_no}-{n}");
                let body =
                    json!({"items": [{"batch": batch, "part": 0}, {"batch": batch, "part": 1}]});
                let Ok(response) = http.post(&url).json(&body).send().await else {
                    return;
                };
                if response.status() != 201 {
                    return;
                }
                let Ok(answer) = response.json::<Value>().await else {
                    return;
                };
                let seqs = (
                    answer["data"][0]["seq"].as_i64().unwrap(),
                    answer["data"][1]["seq"].as_i64().unwrap(),
                );
                acknowledged.lock().unwrap().insert(batch, seqs);
            }
        }));
    }
    // Kill once a good number of writes are in, while the clients keep writing.
    for _ in 0..200 {
        if acknowledged.lock().unwrap().len() >= 300 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let metrics = client().get(server.url("/metrics")).send().await.unwrap().text().await.unwrap();
    let counter = |name: &str| -> u64 {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{name} ")))
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("{name} in /metrics"))
    };
    let (appends, transactions) = (
        counter("agent_sessions_appends_total"),
        counter("agent_sessions_append_transactions_total"),
    );
    assert!(
        appends > transactions,
        "no appends were combined: {appends} appends in {transactions} transactions"
    );
    server.child.start_kill().unwrap();
    server.child.wait().await.unwrap();
    for client in clients {
        client.await.unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(acknowledged.len() >= 20, "too few writes before the kill: {}", acknowledged.len());

    let server = Server::start(database_url).await;
    let http = client();
    let mut found: HashMap<String, (i64, i64)> = HashMap::new();
    for session in 0..CRASH_SESSIONS {
        let mut stored = Vec::new();
        let mut after = None::<String>;
        loop {
            let mut url = server.url(&format!("/v1/sessions/crash-{session}/items?limit=1000"));
            if let Some(id) = &after {
                url.push_str(&format!("&after={id}"));
            }
            let page: Value = get_json(&http, url).await;
            stored.extend(page["data"].as_array().unwrap().iter().cloned());
            if page["has_more"] != true {
                break;
            }
            after = page["last_id"].as_str().map(String::from);
        }
        let seqs: Vec<i64> = stored.iter().map(|i| i["seq"].as_i64().unwrap()).collect();
        assert_eq!(
            seqs,
            (1..=stored.len() as i64).collect::<Vec<_>>(),
            "seqs of crash-{session} are not contiguous"
        );
        for pair in stored.chunks(2) {
            assert_eq!(pair.len(), 2, "half a batch was stored");
            let batch = pair[0]["item"]["batch"].as_str().unwrap().to_owned();
            assert_eq!(pair[1]["item"]["batch"], batch.as_str(), "batches interleaved");
            assert_eq!(
                (pair[0]["item"]["part"].as_i64(), pair[1]["item"]["part"].as_i64()),
                (Some(0), Some(1))
            );
            let seqs = (pair[0]["seq"].as_i64().unwrap(), pair[1]["seq"].as_i64().unwrap());
            assert!(found.insert(batch.clone(), seqs).is_none(), "batch {batch} stored twice");
        }
        let info: Value =
            get_json(&http, server.url(&format!("/v1/sessions/crash-{session}"))).await;
        assert_eq!(info["item_count"].as_u64(), Some(stored.len() as u64));
    }
    for (batch, seqs) in &acknowledged {
        assert_eq!(found.get(batch), Some(seqs), "acknowledged batch {batch} is lost");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9_on_sqlite() {
    let dir = TempDir::new().unwrap();
    let url = format!("sqlite://{}", dir.path().join("crash.db").display());
    acknowledged_writes_survive_kill_9(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9_on_postgres() {
    let database: ScratchDatabase = scratch_postgres().await;
    acknowledged_writes_survive_kill_9(&database.url).await;
    database.drop().await;
}

/// SIGTERM stops the server only after the request in flight is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_request_in_flight_finish() {
    let dir = TempDir::new().unwrap();
    let mut server =
        Server::start(&format!("sqlite://{}", dir.path().join("term.db").display())).await;
    let (body_tx, body_rx) = tokio::sync::mpsc::channel::<Result<&'static str, std::io::Error>>(4);
    let stream = tokio_stream_from(body_rx);
    let request = client()
        .post(server.url("/v1/sessions/slow/items"))
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(stream))
        .send();
    let in_flight = tokio::spawn(request);
    body_tx.send(Ok(r#"{"items": [{"role": "user", "#)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    server.signal("-TERM");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(server.child.try_wait().unwrap().is_none(), "the server quit with a request in flight");
    body_tx.send(Ok(r#""content": "finish me"}]}"#)).await.unwrap();
    drop(body_tx);

    let response = in_flight.await.unwrap().expect("the request in flight is answered");
    assert_eq!(response.status(), 201);
    let request_id = response.headers()["x-request-id"].to_str().unwrap().to_owned();
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["data"][0]["item"]["content"], "finish me");
    let status = tokio::time::timeout(Duration::from_secs(10), server.child.wait())
        .await
        .expect("the server stops after SIGTERM")
        .unwrap();
    assert!(status.success(), "{status:?}");

    // The request's log line carries its id, route and status.
    let events = server.events.lock().unwrap();
    let answered = events
        .iter()
        .find(|e| {
            e["message"] == "request answered" && e["span"]["request_id"] == request_id.as_str()
        })
        .unwrap_or_else(|| panic!("no log line carries request id {request_id}: {events:?}"));
    assert_eq!(answered["status"], 201);
    assert_eq!(answered["span"]["route"], "/v1/sessions/{session_id}/items");
    assert_eq!(answered["level"], "INFO");
}

/// A body stream fed from a channel, for a request that arrives slowly.
fn tokio_stream_from(
    mut rx: tokio::sync::mpsc::Receiver<Result<&'static str, std::io::Error>>,
) -> impl futures::Stream<Item = Result<&'static str, std::io::Error>> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

#[tokio::test]
async fn migrate_applies_the_schema_and_exits() {
    let dir = TempDir::new().unwrap();
    let url = format!("sqlite://{}", dir.path().join("migrated.db").display());
    let status = Command::new(env!("CARGO_BIN_EXE_agent-sessions"))
        .arg("migrate")
        .env("DATABASE_URL", &url)
        .env("LOG_FORMAT", "json")
        .stdout(Stdio::null())
        .status()
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let tables: Vec<String> =
        sqlx::query_scalar("select name from sqlite_master where type = 'table' and name not like '\\_%' escape '\\' order by name")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        tables,
        [
            "agents",
            "api_keys",
            "checkpoint_blobs",
            "checkpoint_writes",
            "checkpoints",
            "compactions",
            "idempotency_keys",
            "items",
            "owner_states",
            "run_events",
            "run_steering",
            "runs",
            "server_secrets",
            "session_metadata",
            "sessions",
            "webhook_deliveries"
        ]
    );
}

/// A client that never finishes its request headers holds neither the server nor its
/// shutdown: the connection is dropped after the request time limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_client_cannot_hold_the_server() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let dir = TempDir::new().unwrap();
    let url = format!("sqlite://{}", dir.path().join("slow.db").display());
    let mut server = Server::start_with(&url, &[("REQUEST_TIMEOUT_SECS", "2")]).await;
    let addr = server.base.trim_start_matches("http://").to_owned();

    // Headers that never end: the server hangs up after the time limit.
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), slow.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the server kept a connection without headers open");

    // And such a client does not keep a stopping server alive.
    let mut stuck = tokio::net::TcpStream::connect(&addr).await.unwrap();
    stuck.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.signal("-TERM");
    let status = tokio::time::timeout(Duration::from_secs(10), server.child.wait())
        .await
        .expect("the server stops despite the stuck client")
        .unwrap();
    assert!(status.success(), "{status:?}");
    drop(stuck);
}
