//! The service as a process of its own, and what processes cost: CPU ticks and resident
//! memory from /proc, for the service (with what it started) and for the Postgres
//! backends serving its database.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::process::{answers, free_port};

/// The service's release binary in a process of its own.
pub struct Service {
    pub process: Child,
    pub base: String,
}

impl Service {
    /// The service on the database, its runs calling `llm_url`, with `RUN_WORKERS` and
    /// any other settings given in `env`: this build's binary, or the one
    /// `AGENT_SESSIONS_BIN` names (another build, to compare with).
    pub async fn start(
        database_url: &str, llm_url: &str, workers: usize, env: &[(&str, &str)],
    ) -> Self {
        let port = free_port();
        let binary = std::env::var("AGENT_SESSIONS_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_agent-sessions").to_owned());
        let process = Command::new(binary)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("DATABASE_URL", database_url)
            .env("DATABASE_MAX_CONNECTIONS", "32")
            .env("LLM_BASE_URL", llm_url)
            .env("LLM_MODEL", "bench")
            .env("RUN_WORKERS", workers.to_string())
            .env("RUST_LOG", "warn")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .spawn()
            .expect("start the service");
        let base = format!("http://127.0.0.1:{port}");
        assert!(answers(&format!("{base}/readyz"), Duration::from_secs(60)).await);
        Self { process, base }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        stop(&mut self.process);
    }
}

fn stop(process: &mut Child) {
    let _ = Command::new("kill").arg(process.id().to_string()).status();
    let _ = process.wait();
}

/// The database's backends serving the scratch database, found by name.
pub struct Backends(Option<(sqlx::PgPool, String)>);

impl Backends {
    pub async fn of(backend: &str, url: &str) -> Self {
        if backend != "postgres" {
            return Self(None);
        }
        let name = url.rsplit('/').next().unwrap().to_owned();
        let admin = url.rsplit_once('/').unwrap().0.to_owned() + "/postgres";
        Self(Some((sqlx::PgPool::connect(&admin).await.unwrap(), name)))
    }

    /// CPU ticks so far of each backend of the scratch database.
    pub async fn cpu(&self) -> HashMap<u32, u64> {
        let Some((admin, name)) = &self.0 else { return HashMap::new() };
        let pids: Vec<i32> =
            // Client backends only: autovacuum's workers clean up after earlier writes.
            sqlx::query_scalar(
                "select pid from pg_stat_activity \
                 where datname = $1 and backend_type = 'client backend'",
            )
                .bind(name)
                .fetch_all(admin)
                .await
                .unwrap();
        pids.into_iter()
            .filter_map(|pid| u32::try_from(pid).ok())
            .map(|pid| (pid, cpu(&[pid])))
            .collect()
    }
}

/// `root` and every process below it.
pub fn tree(root: u32) -> Vec<u32> {
    let mut parents: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Some(ppid) = stat(pid).and_then(|f| f.get(1).and_then(|p| p.parse().ok())) {
            parents.entry(ppid).or_default().push(pid);
        }
    }
    let mut pids = vec![root];
    let mut next = 0;
    while next < pids.len() {
        pids.extend(parents.get(&pids[next]).into_iter().flatten());
        next += 1;
    }
    pids
}

/// The fields of /proc/<pid>/stat after the command's name (state first).
pub fn stat(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(text.rsplit_once(')')?.1.split_whitespace().map(String::from).collect())
}

/// User and system CPU ticks of `pids` so far.
pub fn cpu(pids: &[u32]) -> u64 {
    let ticks = |f: &[String], i: usize| f.get(i).and_then(|t| t.parse::<u64>().ok()).unwrap_or(0);
    pids.iter().filter_map(|pid| stat(*pid)).map(|f| ticks(&f, 11) + ticks(&f, 12)).sum()
}

pub fn clock_ticks() -> u64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(100)
}

/// Resident KiB of `pids`.
pub fn rss(pids: &[u32]) -> u64 {
    let kib = |pid: &u32| -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    pids.iter().filter_map(kib).sum()
}
