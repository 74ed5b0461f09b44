//! A worker that takes its run from the queue claims its next run as it commits the
//! last: the next run starts the moment the last one finished.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::RunsApp;
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, TestDb};

on_both_backends!(
    a_worker_draining_the_queue_starts_its_next_run_as_it_finishes_one,
    a_worker_that_finishes_after_shutdown_began_claims_nothing_more,
);

async fn a_worker_draining_the_queue_starts_its_next_run_as_it_finishes_one(db: TestDb) {
    let t = RunsApp::configured(db, |c| {
        c.run_workers = 1;
        c.llm_idle_timeout_secs = 30;
    })
    .await;
    // The first run holds the only worker while the others queue.
    t.llm.push(Reply::HangMidStream);
    t.llm.set_default(Reply::text("ok"));
    let first = t.app.post("/v1/sessions/s0/runs", json!({"input": "hang", "background": true}));
    let first = first.await.expect(StatusCode::ACCEPTED);
    let mut runs = vec![("s0".to_owned(), first["id"].as_str().unwrap().to_owned())];
    while t.llm.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for n in 1..=3 {
        let session = format!("s{n}");
        let run = json!({"input": "queued", "background": true});
        let run = t.app.post(&format!("/v1/sessions/{session}/runs"), run).await;
        let run = run.expect(StatusCode::ACCEPTED);
        assert_eq!(run["status"], "queued", "{run}");
        runs.push((session, run["id"].as_str().unwrap().to_owned()));
    }
    let (session, id) = &runs[0];
    let cancel = format!("/v1/sessions/{session}/runs/{id}/cancel");
    t.app.post(&cancel, json!({})).await.expect(StatusCode::OK);

    let mut finished: Vec<Value> = Vec::new();
    for (session, id) in &runs {
        let path = format!("/v1/sessions/{session}/runs/{id}");
        t.app.get(&format!("{path}/events")).await;
        finished.push(t.app.get(&path).await.expect(StatusCode::OK));
    }
    assert_eq!(finished[0]["status"], "cancelled");
    for run in &finished[1..] {
        assert_eq!(run["status"], "completed", "{run}");
    }
    // The second run was claimed on its own once the first (started at its creation,
    // not from the queue) ended; each later one by the commit of the one before.
    for pair in finished[1..].windows(2) {
        let (last, next) = (&pair[0], &pair[1]);
        assert_eq!(next["started_at"], last["finished_at"], "{last}\n{next}");
    }
}

async fn a_worker_that_finishes_after_shutdown_began_claims_nothing_more(db: TestDb) {
    let t = RunsApp::configured(db, |c| {
        c.run_workers = 1;
        c.llm_idle_timeout_secs = 30;
    })
    .await;
    t.llm.push(Reply::HangMidStream);
    let slow = Duration::from_millis(400);
    t.llm.push(Reply::Text { deltas: vec!["slow".into()], usage: None, delay: slow });
    t.llm.set_default(Reply::text("ok"));
    let mut ids = Vec::new();
    for n in 0..3 {
        let run = json!({"input": "go", "background": true});
        let run = t.app.post(&format!("/v1/sessions/s{n}/runs"), run).await;
        ids.push(run.expect(StatusCode::ACCEPTED)["id"].as_str().unwrap().to_owned());
        while t.llm.requests().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    // The first run started at its creation; once it ends, the worker takes the second
    // from the queue, and shutdown begins while that one executes.
    let cancel = format!("/v1/sessions/s0/runs/{}/cancel", ids[0]);
    t.app.post(&cancel, json!({})).await.expect(StatusCode::OK);
    while t.llm.requests().len() < 2 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    t.app.stop_workers();
    let second = format!("/v1/sessions/s1/runs/{}", ids[1]);
    t.app.get(&format!("{second}/events")).await;
    assert_eq!(t.app.get(&second).await.expect(StatusCode::OK)["status"], "completed");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let third = t.app.get(&format!("/v1/sessions/s2/runs/{}", ids[2])).await;
    assert_eq!(third.expect(StatusCode::OK)["status"], "queued");
    assert_eq!(t.llm.requests().len(), 2);
}
