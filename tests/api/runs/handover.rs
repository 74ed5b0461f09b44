//! A worker that takes its run from the queue claims its next run as it commits the
//! last: the next run starts the moment the last one finished.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::RunsApp;
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, TestDb};
use agent_sessions::model::RunStatus;
use uuid::Uuid;

on_both_backends!(
    a_worker_draining_the_queue_starts_its_next_run_as_it_finishes_one,
    a_worker_that_finishes_after_shutdown_began_claims_nothing_more,
    a_run_claimed_with_a_finish_that_cannot_be_taken_up_is_queued_again,
);

/// One worker, held by a run on `s0` that hangs, and `queued` more runs queued behind it
/// on `s1`, `s2`, …; their ids, `s0`'s first. The model then gives `replies`, then "ok".
async fn one_worker_held(db: TestDb, queued: usize, replies: Vec<Reply>) -> (RunsApp, Vec<String>) {
    let t = RunsApp::configured(db, |c| {
        c.run_workers = 1;
        c.llm_idle_timeout_secs = 30;
    })
    .await;
    t.llm.push(Reply::HangMidStream);
    for reply in replies {
        t.llm.push(reply);
    }
    t.llm.set_default(Reply::text("ok"));
    let mut ids = Vec::new();
    for n in 0..=queued {
        let run = json!({"input": "go", "background": true});
        let run = t.app.post(&format!("/v1/sessions/s{n}/runs"), run).await;
        let run = run.expect(StatusCode::ACCEPTED);
        assert_eq!(run["status"], "queued", "{run}");
        ids.push(run["id"].as_str().unwrap().to_owned());
        while t.llm.requests().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    (t, ids)
}

async fn a_worker_draining_the_queue_starts_its_next_run_as_it_finishes_one(db: TestDb) {
    let (t, ids) = one_worker_held(db, 3, Vec::new()).await;
    t.app.post(&format!("/v1/sessions/s0/runs/{}/cancel", ids[0]), json!({})).await;
    let mut finished: Vec<Value> = Vec::new();
    for (n, id) in ids.iter().enumerate() {
        let path = format!("/v1/sessions/s{n}/runs/{id}");
        t.app.get(&format!("{path}/events")).await;
        finished.push(t.app.get(&path).await.expect(StatusCode::OK));
    }
    assert_eq!(finished[0]["status"], "cancelled");
    for run in &finished[1..] {
        assert_eq!(run["status"], "completed", "{run}");
    }
    // Each run was claimed by the commit of the one before, the cancelled one's too.
    for pair in finished.windows(2) {
        let (last, next) = (&pair[0], &pair[1]);
        assert_eq!(next["started_at"], last["finished_at"], "{last}\n{next}");
    }
}

async fn a_worker_that_finishes_after_shutdown_began_claims_nothing_more(db: TestDb) {
    let slow =
        Reply::Text { deltas: vec!["slow".into()], usage: None, delay: Duration::from_millis(400) };
    let (t, ids) = one_worker_held(db, 2, vec![slow]).await;
    // Once the first run ends, the worker goes on with the second, and shutdown begins
    // while that one executes.
    t.app.post(&format!("/v1/sessions/s0/runs/{}/cancel", ids[0]), json!({})).await;
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

async fn a_run_claimed_with_a_finish_that_cannot_be_taken_up_is_queued_again(db: TestDb) {
    let (store, handle) = (db.store.clone(), db.clone_handle());
    let t = RunsApp::configured(db, |c| c.run_workers = 0).await;
    for n in 0..2 {
        let run = json!({"input": "go", "background": true});
        t.app.post(&format!("/v1/sessions/s{n}/runs"), run).await.expect(StatusCode::ACCEPTED);
    }
    let lease = Duration::from_secs(30);
    let claim = store.claim_run(Uuid::now_v7(), lease, None).await.unwrap().expect("a claim");
    assert_eq!(claim.record.run.session_id, "s0");
    // The queued run's record cannot be read back, so its claim cannot be taken up.
    let body = handle.strings("select body from runs where status = 'queued'").await;
    let broken = "update runs set body = 'not json' where status = 'queued'";
    handle.execute_either(broken, broken).await;
    let mut record = claim.record.clone();
    let last = record.end(RunStatus::Completed, None, claim.last_event_seq, chrono::Utc::now());
    let finished = store.finish_run(&claim, &record, &[last], Some(lease)).await.unwrap();
    assert!(finished.written);
    assert!(finished.next.is_none());
    let row = "select status || ' ' || attempts || ' ' \
               || case when lease_owner is null then 'free' else 'leased' end || ' ' \
               || case when started_at is null then 'unstarted' else 'started' end \
               from runs where body = 'not json'";
    assert_eq!(handle.strings(row).await, ["queued 0 free unstarted"]);
    // Mended, it is claimed and executed as if the finish had never claimed it.
    let mend = format!("update runs set body = '{}' where body = 'not json'", body[0]);
    handle.execute_either(&mend, &mend).await;
    t.llm.set_default(Reply::text("ok"));
    assert_eq!(t.app.runs.run_pending().await.unwrap(), 1);
    let runs = t.app.get("/v1/sessions/s1/runs").await.expect(StatusCode::OK);
    assert_eq!(runs["data"][0]["status"], "completed", "{runs}");
}
