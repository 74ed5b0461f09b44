//! Failover: a primary and a synchronous streaming standby (two clusters the test makes
//! from the installed PostgreSQL binaries), one address in front of them (the proxy).
//! The primary is killed under append and run load, the standby promoted and the address
//! moved to it: writes succeed again within 10 s, and not one acknowledged append or run
//! is lost, nor any turn stored twice.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::json;
use tempfile::TempDir;
use tokio::process::Command;

use super::proxy::FaultProxy;
use super::{assert_stored_once, keyed_appends, DEADLINE};
use crate::fake_llm::{FakeLlm, Reply};
use crate::helpers::{test_config, TestApp, TestDb};

/// The newest installed PostgreSQL's programs: on PATH, or in /usr/lib/postgresql.
fn binaries() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>());
    let mut installed: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("bin"))
        .collect();
    installed.sort_by_key(|dir| {
        dir.parent().and_then(|v| v.file_name()?.to_str()?.parse::<u32>().ok()).unwrap_or(0)
    });
    let complete = |dir: &PathBuf| {
        ["initdb", "pg_ctl", "pg_basebackup"].iter().all(|name| dir.join(name).exists())
    };
    on_path.chain(installed.into_iter().rev()).find(complete)
}

/// Two clusters' directories and ports, and who runs them.
struct Pair {
    bin: PathBuf,
    dir: TempDir,
    /// Postgres refuses to run as root: then its programs run as `postgres`.
    as_postgres: bool,
    primary: u16,
    standby: u16,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Pair {
    async fn program(&self, name: &str, args: &[&str]) {
        let program = self.bin.join(name);
        let mut command = if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(&program);
            command
        } else {
            Command::new(&program)
        };
        let output = command.args(args).output().await.expect("the program runs");
        assert!(
            output.status.success(),
            "{name} {args:?}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    async fn start(&self, cluster: &str, port: u16, settings: &str) {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {port} -k {} -c fsync=off -c max_connections=60 {settings}",
            self.dir.path().display()
        );
        let log = self.path(&format!("{cluster}.log"));
        self.program(
            "pg_ctl",
            &["-D", &self.path(cluster), "-l", &log, "-w", "-o", &options, "start"],
        )
        .await;
    }

    /// A primary, and a standby streaming from it that every commit waits for.
    async fn start_pair(bin: PathBuf) -> Self {
        let dir = tempfile::Builder::new().tempdir_in("/tmp").unwrap();
        let as_postgres = std::fs::metadata("/proc/self").unwrap().uid() == 0;
        if as_postgres {
            let status = std::process::Command::new("chown")
                .args(["postgres", &dir.path().display().to_string()])
                .status()
                .unwrap();
            assert!(status.success());
        }
        let pair = Self { bin, dir, as_postgres, primary: free_port(), standby: free_port() };
        let primary = pair.path("primary");
        pair.program("initdb", &["-D", &primary, "-U", "postgres", "-A", "trust", "--no-sync"])
            .await;
        let settings = "-c wal_level=replica -c max_wal_senders=4 \
                        -c synchronous_standby_names=standby -c synchronous_commit=on";
        pair.start("primary", pair.primary, settings).await;
        let standby = pair.path("standby");
        let port = pair.primary.to_string();
        let connection =
            format!("application_name=standby host=127.0.0.1 port={port} user=postgres");
        pair.program(
            "pg_basebackup",
            &["-d", &connection, "-D", &standby, "-R", "--wal-method=stream", "--no-sync"],
        )
        .await;
        pair.start("standby", pair.standby, "-c hot_standby=on").await;
        pair.wait_for_sync().await;
        pair
    }

    async fn wait_for_sync(&self) {
        let url = format!("postgres://postgres@127.0.0.1:{}/postgres", self.primary);
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        for _ in 0..100 {
            let state: Option<String> =
                sqlx::query_scalar("select sync_state from pg_stat_replication")
                    .fetch_optional(&pool)
                    .await
                    .unwrap();
            if state.as_deref() == Some("sync") {
                pool.close().await;
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the standby never became synchronous");
    }

    async fn stop(&self, cluster: &str) {
        let data = self.path(cluster);
        if Path::new(&data).join("postmaster.pid").exists() {
            self.program("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]).await;
        }
    }
}

/// Creates background runs under Idempotency-Keys, each retried with its key on 503
/// until accepted, until `load_for` has passed; returns the ids of those accepted.
async fn keyed_runs(app: &TestApp, load_for: Duration) -> Vec<String> {
    let began = Instant::now();
    let mut accepted = Vec::new();
    for n in 0.. {
        if began.elapsed() > load_for {
            return accepted;
        }
        let key = format!("run-{n}");
        loop {
            let body = json!({"input": key, "background": true, "if_busy": "enqueue"});
            let request = Request::post("/v1/sessions/runs/runs")
                .header("content-type", "application/json")
                .header("idempotency-key", &key)
                .body(Body::from(body.to_string()))
                .unwrap();
            let answer = app.send(request).await;
            if answer.status == StatusCode::ACCEPTED {
                accepted.push(answer.json()["id"].as_str().unwrap().to_owned());
                break;
            }
            answer.expect_problem(StatusCode::SERVICE_UNAVAILABLE, "database_unavailable");
            assert!(began.elapsed() < load_for + Duration::from_secs(30), "{key} never landed");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    unreachable!()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_synchronous_standby_loses_no_acknowledged_write() {
    let Some(bin) = binaries() else {
        panic!("no PostgreSQL programs (initdb, pg_ctl, pg_basebackup) are installed");
    };
    let pair = Pair::start_pair(bin).await;
    let proxy = FaultProxy::start(format!("127.0.0.1:{}", pair.primary)).await;
    let llm = FakeLlm::start().await;
    llm.set_default(Reply::text("done"));
    let url = format!("postgres://postgres@127.0.0.1:{}/postgres", proxy.port);
    let options = agent_sessions::store::Options {
        timeout: DEADLINE,
        ..agent_sessions::store::Options::new(10)
    };
    let store = agent_sessions::store::connect_with(&url, options).await.unwrap();
    let raw = sqlx::postgres::PgPoolOptions::new().connect_lazy(&url).unwrap();
    let mut config = test_config();
    config.llm_base_url = llm.base_url();
    config.run_lease_secs = 2;
    let app = TestApp::new(TestDb::postgres_with(store, raw), &config);

    // When the primary is gone, counted as the clients count their answers.
    let began = Instant::now();
    let failover = async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        pair.stop("primary").await;
        let killed_at = began.elapsed();
        pair.program("pg_ctl", &["-D", &pair.path("standby"), "-w", "promote"]).await;
        proxy.move_to(format!("127.0.0.1:{}", pair.standby));
        killed_at
    };
    let load_for = Duration::from_secs(12);
    let appends = futures::future::join_all((0..3).map(|c| keyed_appends(&app, c, load_for)));
    let ((appended, runs), killed_at) =
        tokio::join!(async { tokio::join!(appends, keyed_runs(&app, load_for)) }, failover);

    let mut answers = Vec::new();
    for (client, (client_answers, acknowledged)) in appended.into_iter().enumerate() {
        assert_stored_once(&app, &format!("client-{client}"), &acknowledged).await;
        answers.extend(client_answers);
    }
    let failed: Vec<_> = answers.iter().filter(|a| a.status != StatusCode::CREATED).collect();
    assert!(!failed.is_empty(), "the failover failed no append");
    let recovered = answers
        .iter()
        .filter(|a| a.status == StatusCode::CREATED && a.sent > killed_at)
        .map(|a| a.sent + a.took)
        .min()
        .expect("appends succeed after the failover");
    assert!(recovered <= killed_at + Duration::from_secs(10), "recovered at {recovered:?}");

    // Every accepted run is there and completes once, its turn in the history once.
    for run in &runs {
        let path = format!("/v1/sessions/runs/runs/{run}");
        let mut status = String::new();
        for _ in 0..300 {
            let answer = app.get(&path).await.expect(StatusCode::OK);
            status = answer["status"].as_str().unwrap().to_owned();
            if status == "completed" || status == "failed" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(status, "completed", "run {run}");
    }
    let items = app.get("/v1/sessions/runs/items?limit=1000").await.expect(StatusCode::OK);
    let items = items["data"].as_array().unwrap();
    for run in &runs {
        let turn = items.iter().filter(|i| i["run_id"] == run.as_str()).count();
        assert_eq!(turn, 2, "run {run}'s input and answer, once each");
    }
    assert_eq!(items.len(), 2 * runs.len(), "no turn of a run that was never accepted");
    drop(app);
    pair.stop("standby").await;
}
