//! A full disk over HTTP: appends and run creations (both written by queues that
//! combine them into shared transactions), and items added to a conversation, answer
//! 507 `storage_full` with `Retry-After` (in OpenAI's error shape on the OpenAI route)
//! for what was not stored, everything answered 201 or 202 is there, and writes succeed
//! again once space returns, without a restart.

use axum::http::StatusCode;
use futures::future::join_all;
use futures::FutureExt;
use serde_json::json;

use super::RunsApp;
use crate::helpers::{TestApp, TestDb};

/// What one client got stored before `failures` of its writes were refused: the
/// numbers of its items and the ids of its runs.
async fn write_until_full(
    app: &TestApp, client: usize, failures: usize,
) -> (Vec<u64>, Vec<String>) {
    let (mut items, mut runs, mut refused) = (Vec::new(), Vec::new(), 0);
    let pad = "x".repeat(2048);
    let conversation = app.post("/v1/conversations", json!({})).await.expect(StatusCode::OK);
    let conversation = conversation["id"].as_str().unwrap().to_owned();
    for n in 0..5_000u64 {
        let session = format!("/v1/sessions/client-{client}");
        if n % 4 == 1 {
            let item = json!({"type": "message", "role": "user", "content": format!("{n} {pad}")});
            let path = format!("/v1/conversations/{conversation}/items");
            let answer = app.post(&path, json!({"items": [item]})).await;
            if answer.status != StatusCode::OK {
                assert_eq!(answer.status, StatusCode::INSUFFICIENT_STORAGE, "{answer:?}");
                assert_eq!(answer.header("content-type"), Some("application/json"));
                assert_eq!(answer.json()["error"]["code"], "storage_full", "{answer:?}");
                assert!(answer.header("retry-after").is_some(), "{answer:?}");
            }
            continue;
        }
        let answer = if n % 4 == 3 {
            let body =
                json!({"input": format!("{n} {pad}"), "background": true, "if_busy": "enqueue"});
            app.post(&format!("{session}/runs"), body).await
        } else {
            app.post(&format!("{session}/items"), json!({"items": [{"n": n, "pad": pad}]})).await
        };
        match answer.status {
            StatusCode::CREATED => items.push(n),
            StatusCode::ACCEPTED => runs.push(answer.json()["id"].as_str().unwrap().to_owned()),
            _ => {
                answer.expect_problem(StatusCode::INSUFFICIENT_STORAGE, "storage_full");
                assert!(answer.header("retry-after").is_some(), "{answer:?}");
                refused += 1;
                if refused == failures {
                    return (items, runs);
                }
            }
        }
    }
    panic!("client {client}: the cap never filled the file");
}

/// Eight clients write until the disk refuses them; everything they were told is stored
/// is there.
async fn fill(app: &TestApp) {
    let clients = join_all((0..8).map(|client| write_until_full(app, client, 10))).await;
    for (client, (items, runs)) in clients.iter().enumerate() {
        let session = format!("/v1/sessions/client-{client}");
        let (mut numbers, mut after) = (Vec::new(), String::new());
        loop {
            let path = format!("{session}/items?limit=1000{after}");
            let page = app.get(&path).await.expect(StatusCode::OK);
            let data = page["data"].as_array().unwrap();
            numbers.extend(data.iter().map(|i| i["item"]["n"].as_u64().unwrap()));
            if page["has_more"] != true {
                break;
            }
            after = format!("&after={}", page["last_id"].as_str().unwrap());
        }
        assert_eq!(numbers, *items, "client {client}'s items");
        for run in runs {
            app.get(&format!("{session}/runs/{run}")).await.expect(StatusCode::OK);
        }
    }
}

/// Once space returns, appends and run creations succeed again.
async fn writes_again(app: &TestApp) {
    let more = json!({"items": [{"after": "space returned"}]});
    app.post("/v1/sessions/client-1/items", more).await.expect(StatusCode::CREATED);
    let run = json!({"input": "again", "background": true, "if_busy": "enqueue"});
    app.post("/v1/sessions/client-1/runs", run).await.expect(StatusCode::ACCEPTED);
}

#[tokio::test]
async fn a_full_disk_refuses_what_it_cannot_store_and_heals() {
    let t = RunsApp::configured(TestDb::sqlite_capped(600).await, |c| c.run_workers = 0).await;
    fill(&t.app).await;
    // A deleted session's pages are free for new items and runs.
    t.app.delete("/v1/sessions/client-0").await.expect(StatusCode::NO_CONTENT);
    writes_again(&t.app).await;
}

/// A tablespace on a tmpfs of its own, mounted on the test's machine: where the test
/// runs as root beside its Postgres server.
struct SmallTablespace {
    dir: tempfile::TempDir,
    name: String,
}

impl SmallTablespace {
    fn mount(&self, options: &str) {
        let dir = self.dir.path().display().to_string();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs", &dir])
            .status()
            .unwrap();
        assert!(status.success(), "mount {options}");
    }
}

impl Drop for SmallTablespace {
    fn drop(&mut self) {
        let dir = self.dir.path().display().to_string();
        let _ = std::process::Command::new("umount").args(["-l", &dir]).status();
    }
}

#[tokio::test]
async fn a_full_postgres_disk_refuses_what_it_cannot_store_and_heals() {
    let admin_url = std::env::var("DATABASE_URL").expect("DATABASE_URL names the test Postgres");
    let local = ["@127.0.0.1", "@localhost"].iter().any(|host| admin_url.contains(host));
    let root = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap()) == 0;
    if !(local && root) {
        eprintln!(
            "skipped: needs root and the test Postgres on this machine, to mount a tmpfs for it"
        );
        return;
    }
    let owner = std::process::Command::new("id").args(["-u", "postgres"]).output().unwrap();
    let owner = String::from_utf8(owner.stdout).unwrap().trim().to_owned();
    let name = format!("small_{}", uuid::Uuid::new_v4().simple());
    let space = SmallTablespace { dir: tempfile::TempDir::new_in("/tmp").unwrap(), name };
    space.mount(&format!("size=9m,mode=0700,uid={owner}"));
    let admin = sqlx::PgPool::connect(&admin_url).await.unwrap();
    let location = space.dir.path().display();
    sqlx::query(&format!("create tablespace {} location '{location}'", space.name))
        .execute(&admin)
        .await
        .unwrap();
    sqlx::query(&format!("create database {0} tablespace {0}", space.name))
        .execute(&admin)
        .await
        .unwrap();
    let base = admin_url.rsplit_once('/').unwrap().0;
    let url = format!("{base}/{}", space.name);
    let filled = async {
        let t = RunsApp::configured(TestDb::postgres_at(&url).await, |c| c.run_workers = 0).await;
        fill(&t.app).await;
        let dir = space.dir.path().display().to_string();
        let status = std::process::Command::new("mount")
            .args(["-o", "remount,size=64m", &dir])
            .status()
            .unwrap();
        assert!(status.success(), "the tmpfs grows");
        writes_again(&t.app).await;
    };
    // The database and tablespace go before the tmpfs does, whatever the test found: the
    // server would otherwise keep a database whose files are gone.
    let outcome = std::panic::AssertUnwindSafe(filled).catch_unwind().await;
    sqlx::query(&format!("drop database {} with (force)", space.name))
        .execute(&admin)
        .await
        .unwrap();
    sqlx::query(&format!("drop tablespace {}", space.name)).execute(&admin).await.unwrap();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}
