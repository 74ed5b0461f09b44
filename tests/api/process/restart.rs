//! A Postgres restart under append load: nothing acknowledged is lost or doubled, and
//! every failed request is a 503 `database_unavailable` a client knows to retry.
//!
//! The restart needs a server of its own (restarting the shared one would fail every
//! other test running at the time): a throwaway cluster made with initdb, skipped with a
//! message where the Postgres server binaries are not installed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tempfile::TempDir;

use super::{client, Server};
use crate::helpers::get_json;

/// A Postgres cluster in a temporary directory, run as the `postgres` OS user when the
/// tests run as root (Postgres refuses root).
struct Cluster {
    bin: PathBuf,
    dir: TempDir,
    port: u16,
}

impl Cluster {
    fn start() -> Option<Cluster> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|entry| Some(entry.ok()?.path().join("bin")))
            .filter(|bin| bin.join("initdb").exists())
            .max()?;
        let dir = TempDir::new_in("/tmp").unwrap();
        if is_root() {
            run("chown", &["postgres", path(dir.path())]);
        }
        let data = dir.path().join("data");
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let cluster = Cluster { bin, dir, port };
        cluster.pg("initdb", &["-D", path(&data), "-U", "postgres", "-A", "trust", "--no-sync"]);
        cluster.ctl("start");
        Some(cluster)
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn ctl(&self, action: &str) {
        let data = self.dir.path().join("data");
        let log = self.dir.path().join("postgres.log");
        let options =
            format!("-c listen_addresses=127.0.0.1 -p {} -k {}", self.port, path(self.dir.path()));
        self.pg(
            "pg_ctl",
            &["-D", path(&data), "-l", path(&log), "-w", "-m", "fast", "-o", &options, action],
        );
    }

    fn pg(&self, tool: &str, args: &[&str]) {
        let program = self.bin.join(tool);
        if is_root() {
            let mut full = vec!["-u", "postgres", "--", path(&program)];
            full.extend_from_slice(args);
            run("runuser", &full);
        } else {
            run(path(&program), args);
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        let _ = StdCommand::new(self.bin.join("pg_ctl"))
            .args(["-D", path(&data), "-m", "immediate", "stop"])
            .status();
        if is_root() {
            let _ = StdCommand::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(self.bin.join("pg_ctl"))
                .args(["-D", path(&data), "-m", "immediate", "stop"])
                .output();
        }
    }
}

fn is_root() -> bool {
    StdCommand::new("id").arg("-u").output().is_ok_and(|out| out.stdout.starts_with(b"0\n"))
}

fn path(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

fn run(program: &str, args: &[&str]) {
    let output = StdCommand::new(program).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A refused write: status, problem code and `Retry-After`.
type Failure = (u16, String, Option<String>);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_restart_loses_nothing_and_answers_503() {
    let Some(cluster) = Cluster::start() else {
        eprintln!("skipped: no Postgres server binaries under /usr/lib/postgresql");
        return;
    };
    let server = Server::start(&cluster.url()).await;
    let acknowledged: Arc<Mutex<HashMap<String, i64>>> = Arc::default();
    let failures: Arc<Mutex<Vec<Failure>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for writer in 0..8 {
        let url = server.url(&format!("/v1/sessions/restart-{writer}/items"));
        let (acknowledged, failures, stop) = (acknowledged.clone(), failures.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let http = client();
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mark = format!("{writer}-{n}");
                let body = json!({"items": [{"mark": mark}]});
                let response = http
                    .post(&url)
                    .header("idempotency-key", &mark)
                    .json(&body)
                    .send()
                    .await
                    .expect("the service answers while its database restarts");
                let status = response.status().as_u16();
                let retry_after =
                    response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
                let answer: Value = response.json().await.unwrap();
                if status == 201 {
                    let seq = answer["data"][0]["seq"].as_i64().unwrap();
                    acknowledged.lock().unwrap().insert(mark, seq);
                    n += 1;
                } else {
                    // The same request again, under the same key, until it lands.
                    let code = answer["code"].as_str().unwrap_or_default().to_owned();
                    failures.lock().unwrap().push((status, code, retry_after));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    let restart = tokio::task::spawn_blocking(move || {
        cluster.ctl("restart");
        cluster
    });
    let cluster = restart.await.unwrap();
    // Writes go on after the restart.
    let before = acknowledged.lock().unwrap().len();
    for _ in 0..200 {
        if acknowledged.lock().unwrap().len() > before + 40 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for writer in writers {
        writer.await.unwrap();
    }

    let failures = failures.lock().unwrap().clone();
    eprintln!(
        "restart: {} failed requests, {} acknowledged",
        failures.len(),
        acknowledged.lock().unwrap().len()
    );
    for (status, code, retry_after) in &failures {
        assert_eq!((*status, code.as_str()), (503, "database_unavailable"), "{failures:?}");
        assert_eq!(retry_after.as_deref(), Some("1"), "{failures:?}");
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(acknowledged.len() > before, "no writes after the restart");
    let http = client();
    for writer in 0..8 {
        let page: Value =
            get_json(&http, server.url(&format!("/v1/sessions/restart-{writer}/items?limit=1000")))
                .await;
        let marks: Vec<&str> = page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["item"]["mark"].as_str().unwrap())
            .collect();
        let mut unique = marks.clone();
        unique.dedup();
        assert_eq!(unique.len(), marks.len(), "a write was stored twice");
        let expected: Vec<String> = (0..marks.len()).map(|n| format!("{writer}-{n}")).collect();
        assert_eq!(marks, expected, "writes lost or out of order");
        for (mark, seq) in acknowledged.iter().filter(|(m, _)| m.starts_with(&format!("{writer}-")))
        {
            assert!(marks.contains(&mark.as_str()), "acknowledged {mark} (seq {seq}) is lost");
        }
    }
    drop(server);
    drop(cluster);
}
