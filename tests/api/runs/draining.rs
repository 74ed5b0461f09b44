//! Shutdown as a balancer and a following client see it: `/readyz` turns 503 while
//! `/livez` stays 200, and an open event stream ends with a comment that tells its
//! client to reconnect elsewhere, the run going on.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::json;

use super::{parse_sse, RunsApp};
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, test_config, TestApp, TestDb};

on_both_backends!(
    a_draining_replica_is_unready_and_hands_its_streams_over,
    a_stream_cut_by_shutdown_still_names_its_run,
);

async fn a_draining_replica_is_unready_and_hands_its_streams_over(db: TestDb) {
    let mut config = test_config();
    config.run_workers = 0;
    let other = TestApp::new(db.clone_handle(), &config);
    let t = RunsApp::new(db).await;
    let deltas = (0..10).map(|n| format!("w{n} ")).collect();
    t.llm.push(Reply::Text { deltas, usage: None, delay: Duration::from_millis(100) });
    let body = json!({"input": "go", "background": true});
    let run = t.app.post("/v1/sessions/s/runs", body).await.expect(StatusCode::ACCEPTED);
    let path = format!("/v1/sessions/s/runs/{}/events", run["id"].as_str().unwrap());
    let request = Request::get(&path).body(Body::empty()).unwrap();
    let answer = tower::ServiceExt::oneshot(t.app.router.clone(), request).await.unwrap();
    let mut body = answer.into_body();
    let mut seen = String::new();
    while parse_sse(&seen).iter().filter(|(name, _, _)| name == "message.delta").count() < 2 {
        let frame = body.frame().await.expect("the stream goes on").unwrap();
        seen.push_str(std::str::from_utf8(&frame.into_data().unwrap()).unwrap());
    }
    // Shutdown starts: the replica is unready, and its answers close their connections,
    // but the stream goes on until the replica stops listening.
    t.app.draining.cancel();
    let unready = t.app.get("/readyz").await;
    assert_eq!(unready.header("connection"), Some("close"));
    unready.expect_problem(StatusCode::SERVICE_UNAVAILABLE, "shutting_down");
    let before = parse_sse(&seen).len();
    while parse_sse(&seen).len() == before {
        let frame = body.frame().await.expect("the stream goes on").unwrap();
        seen.push_str(std::str::from_utf8(&frame.into_data().unwrap()).unwrap());
    }
    t.app.closing.cancel();
    let rest = tokio::time::timeout(Duration::from_secs(5), body.collect()).await;
    seen.push_str(
        std::str::from_utf8(&rest.expect("the stream ends at once").unwrap().to_bytes()).unwrap(),
    );
    assert!(seen.trim_end().ends_with(": shutting down: reconnect with Last-Event-ID"), "{seen}");
    let events = parse_sse(&seen);
    assert!(!events.iter().any(|(name, _, _)| name == "run.completed"), "cut off mid-run");

    t.app.get("/readyz").await.expect_problem(StatusCode::SERVICE_UNAVAILABLE, "shutting_down");
    t.app.get("/livez").await.expect(StatusCode::OK);
    // The client goes on at another replica after the last event it saw, and gets every
    // later one once.
    let (_, last, _) = events.last().unwrap();
    let request = Request::get(&path).header("last-event-id", last.to_string());
    let rest = other.send(request.body(Body::empty()).unwrap()).await;
    let later = parse_sse(&rest.text);
    let ids: Vec<i64> = events.iter().chain(&later).map(|(_, id, _)| *id).collect();
    assert_eq!(ids, (1..=ids.len() as i64).collect::<Vec<_>>(), "each event once");
    assert_eq!(later.last().unwrap().0, "run.completed");
}

/// A run started on a replica that is closing still tells its client which run it is: a
/// client without the run id could not resume it elsewhere.
async fn a_stream_cut_by_shutdown_still_names_its_run(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.app.closing.cancel();
    let deltas = (0..10).map(|n| format!("w{n} ")).collect();
    t.llm.push(Reply::Text { deltas, usage: None, delay: Duration::from_millis(100) });
    let started = t.app.post("/v1/sessions/c/runs", json!({"input": "go", "stream": true})).await;
    assert_eq!(started.status, StatusCode::OK);
    let events = parse_sse(&started.text);
    assert_eq!(events.len(), 1, "{}", started.text);
    assert_eq!(events[0].0, "run.created");
    assert!(events[0].2["id"].is_string());
    assert!(started.text.trim_end().ends_with(": shutting down: reconnect with Last-Event-ID"));
}
