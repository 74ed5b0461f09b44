//! A worker lost mid-run may have stored events past its run row's count: whoever takes
//! the run over numbers its own events after them, so each stored event stays and the
//! stream reads in order. The LLM request the lost execution stored counts in the run's
//! usage, whoever ends the run.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::json;
use uuid::Uuid;

use super::RunsApp;
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, TestDb};
use agent_sessions::model::{RunEvent, RunEventKind, SessionId};
use agent_sessions::store::{RunFlush, RunStore, SessionStore};

on_both_backends!(
    a_lost_run_that_fails_is_numbered_after_its_stored_events,
    a_lost_run_executed_again_is_numbered_after_its_stored_events,
);

const LEASE: Duration = Duration::from_millis(50);

/// How far past the stored events a follower may have been shown events (the
/// architecture's promise): a lost execution may have shown that many never stored.
const UNSTORED_SHOWN: i64 = 10_000;

/// An app with no workers of its own that gives a run `max_attempts`, and the id of a
/// background run on `session` whose worker stored one LLM request and five deltas and
/// died: its lease has lapsed.
async fn lose_a_worker_mid_stream(
    db: TestDb, max_attempts: u32, session: &str,
) -> (RunsApp, Arc<dyn SessionStore>, Uuid) {
    let store = db.store.clone();
    let t = RunsApp::configured(db, |c| {
        c.run_workers = 0;
        c.run_max_attempts = max_attempts;
    })
    .await;
    let body = json!({"input": "hi", "background": true});
    let path = format!("/v1/sessions/{session}/runs");
    let run = t.app.post(&path, body).await.expect(StatusCode::ACCEPTED);
    let claim = store.claim_run(Uuid::now_v7(), LEASE, None).await.unwrap().expect("a claim");
    let deltas = (2..=6)
        .map(|seq| RunEvent { seq, kind: RunEventKind::TextDelta(format!("d{seq} ")) })
        .collect();
    let flush = RunFlush { lease: claim.lease(), events: deltas, llm_calls: 1 };
    let held = store.save_run_events(&[flush]).await.unwrap();
    assert_eq!(held, [true]);
    tokio::time::sleep(LEASE * 2).await;
    (t, store, Uuid::parse_str(run["id"].as_str().unwrap()).unwrap())
}

/// The stored events' seqs, checked increasing, and their names.
async fn stored(store: &dyn RunStore, session: &str, id: Uuid) -> (Vec<i64>, Vec<String>) {
    let session = SessionId::parse("id", session.into()).unwrap();
    let (events, _) = store.run_events("default", &session, id, 0).await.unwrap();
    let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "each event once, in order: {seqs:?}");
    (seqs, events.iter().map(|e| e.name().to_owned()).collect())
}

async fn a_lost_run_that_fails_is_numbered_after_its_stored_events(db: TestDb) {
    let (t, store, id) = lose_a_worker_mid_stream(db, 1, "fails").await;
    assert_eq!(t.app.runs.recover_expired().await.unwrap(), (0, 1));
    let (seqs, names) = stored(&*store, "fails", id).await;
    assert_eq!(names.iter().filter(|n| *n == "message.delta").count(), 5, "{names:?}");
    assert_eq!(names.last().map(String::as_str), Some("run.failed"), "{names:?}");
    assert_eq!(seqs.last(), Some(&7));
    let run = t.app.get(&format!("/v1/sessions/fails/runs/{id}")).await.expect(StatusCode::OK);
    assert_eq!(run["error"]["code"], "worker_lost");
    assert_eq!(run["usage"]["llm_calls"], 1, "the lost execution's request: {run}");
}

async fn a_lost_run_executed_again_is_numbered_after_its_stored_events(db: TestDb) {
    let (t, store, id) = lose_a_worker_mid_stream(db, 2, "again").await;
    assert_eq!(t.app.runs.recover_expired().await.unwrap(), (1, 0));
    t.llm.push(Reply::text("second try"));
    assert_eq!(t.app.runs.run_pending().await.unwrap(), 1);
    let (seqs, names) = stored(&*store, "again", id).await;
    assert_eq!(names.last().map(String::as_str), Some("run.completed"), "{names:?}");
    assert_eq!(&seqs[..6], &[1, 2, 3, 4, 5, 6], "the lost execution's events stay");
    assert!(
        seqs[6] > 6 + UNSTORED_SHOWN,
        "the new execution's are numbered after any the lost one showed: {seqs:?}"
    );
    let items = t.items("again").await;
    assert_eq!(items[1]["content"][0]["text"], "second try");
    let run = t.app.get(&format!("/v1/sessions/again/runs/{id}")).await.expect(StatusCode::OK);
    assert_eq!(run["usage"]["llm_calls"], 2, "each execution's request: {run}");
    let session = t.app.get("/v1/sessions/again").await.expect(StatusCode::OK);
    assert_eq!(session["usage"]["llm_calls"], 2, "{session}");
}
