//! A full disk over HTTP: appends and run creations (both written by queues that
//! combine them into shared transactions) answer 507 `storage_full` with `Retry-After`
//! for what was not stored, everything answered 201 or 202 is there, and writes
//! succeed again once space returns, without a restart.

use axum::http::StatusCode;
use futures::future::join_all;
use serde_json::json;

use super::RunsApp;
use crate::helpers::{TestApp, TestDb};

/// What one client got stored before `failures` of its writes were refused: the
/// numbers of its items and the ids of its runs.
async fn write_until_full(
    app: &TestApp,
    client: usize,
    failures: usize,
) -> (Vec<u64>, Vec<String>) {
    let (mut items, mut runs, mut refused) = (Vec::new(), Vec::new(), 0);
    let pad = "x".repeat(2048);
    for n in 0..5_000u64 {
        let session = format!("/v1/sessions/client-{client}");
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

#[tokio::test]
async fn a_full_disk_refuses_what_it_cannot_store_and_heals() {
    let t = RunsApp::configured(TestDb::sqlite_capped(600).await, |c| c.run_workers = 0).await;
    let app = &t.app;
    let clients = join_all((0..8).map(|client| write_until_full(app, client, 10))).await;
    for (client, (items, runs)) in clients.iter().enumerate() {
        let session = format!("/v1/sessions/client-{client}");
        let stored = app.get(&format!("{session}/items?limit=1000")).await.expect(StatusCode::OK);
        let numbers: Vec<u64> = stored["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["item"]["n"].as_u64().unwrap())
            .collect();
        assert_eq!(numbers, *items, "client {client}'s items");
        for run in runs {
            app.get(&format!("{session}/runs/{run}")).await.expect(StatusCode::OK);
        }
    }
    let answer = app.get("/readyz").await;
    assert_eq!(
        answer.status,
        StatusCode::OK,
        "a capped file commits rewrites in place: {answer:?}"
    );

    // Space returns: a deleted session's pages are free for new items and runs.
    app.delete("/v1/sessions/client-0").await.expect(StatusCode::NO_CONTENT);
    let more = json!({"items": [{"after": "space returned"}]});
    app.post("/v1/sessions/client-1/items", more).await.expect(StatusCode::CREATED);
    let run = json!({"input": "again", "background": true, "if_busy": "enqueue"});
    app.post("/v1/sessions/client-1/runs", run).await.expect(StatusCode::ACCEPTED);
}
