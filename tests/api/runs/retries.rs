//! `Idempotency-Key` on new runs: a retried request never starts a second run.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{json, Value};

use super::RunsApp;
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, TestDb, TestResponse};

on_both_backends!(
    a_retried_run_is_answered_with_the_first_run,
    concurrent_retries_start_one_run,
    a_client_that_leaves_mid_request_strands_no_run,
    a_keyed_run_on_a_session_with_an_agent_is_created_once,
);

pub(super) fn keyed(path: &str, key: &str, body: &Value) -> Request<Body> {
    Request::post(path)
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        .body(Body::from(body.to_string()))
        .unwrap()
}

fn replayed(response: &TestResponse) -> bool {
    response.header("idempotent-replayed") == Some("true")
}

async fn a_retried_run_is_answered_with_the_first_run(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.llm.set_default(Reply::text("hello"));
    let body = json!({"input": "hi"});
    let first = t.app.send(keyed("/v1/sessions/k/runs", "key-1", &body)).await;
    assert!(!replayed(&first));
    let first = first.expect(StatusCode::OK);
    assert_eq!(first["status"], "completed");

    let retry = t.app.send(keyed("/v1/sessions/k/runs", "key-1", &body)).await;
    assert!(replayed(&retry));
    assert_eq!(retry.expect(StatusCode::OK), first);
    assert_eq!(t.llm.requests().len(), 1, "the model ran once");
    assert_eq!(t.items("k").await.len(), 2, "the turn is in the history once");

    // A background retry answers with the same run, as it is now.
    let background = json!({"input": "later", "background": true});
    let queued = t
        .app
        .send(keyed("/v1/sessions/k/runs", "key-2", &background))
        .await
        .expect(StatusCode::ACCEPTED);
    let again = t.app.send(keyed("/v1/sessions/k/runs", "key-2", &background)).await;
    assert!(replayed(&again));
    assert_eq!(again.expect(StatusCode::ACCEPTED)["id"], queued["id"]);
    // The stream ends with the run: the session is idle for the next run below.
    let events =
        t.app.get(&format!("/v1/sessions/k/runs/{}/events", queued["id"].as_str().unwrap())).await;
    let events = super::parse_sse(&events.text);
    assert_eq!(events.last().unwrap().0, "run.completed");

    // The key belongs to its first request: another body, another session or an append
    // that reuses it is refused.
    for (path, body) in [
        ("/v1/sessions/k/runs", json!({"input": "something else"})),
        ("/v1/sessions/other/runs", body.clone()),
        ("/v1/sessions/k/items", json!({"items": [{"role": "user", "content": "hi"}]})),
    ] {
        t.app
            .send(keyed(path, "key-1", &body))
            .await
            .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused");
    }
    let runs = t.app.get("/v1/sessions/k/runs").await.expect(StatusCode::OK);
    assert_eq!(runs["data"].as_array().unwrap().len(), 2);
    t.app
        .get("/v1/sessions/other")
        .await
        .expect_problem(StatusCode::NOT_FOUND, "session_not_found");

    // A retry is answered before its agent is looked up again: the agent may be gone.
    let agent = t
        .app
        .post("/v1/agents", json!({"instructions": "Be brief."}))
        .await
        .expect(StatusCode::CREATED);
    let with_agent = json!({"input": "hi", "agent_id": agent["id"]});
    let first_with_agent =
        t.app.send(keyed("/v1/sessions/k/runs", "key-3", &with_agent)).await.expect(StatusCode::OK);
    t.app
        .delete(&format!("/v1/agents/{}", agent["id"].as_str().unwrap()))
        .await
        .expect(StatusCode::NO_CONTENT);
    let retry = t.app.send(keyed("/v1/sessions/k/runs", "key-3", &with_agent)).await;
    assert!(replayed(&retry));
    assert_eq!(retry.expect(StatusCode::OK)["id"], first_with_agent["id"]);

    // Once the first run is gone with its session, a retry creates the run again.
    t.app.delete("/v1/sessions/k").await.expect(StatusCode::NO_CONTENT);
    let again = t.app.send(keyed("/v1/sessions/k/runs", "key-1", &body)).await;
    assert!(!replayed(&again));
    let again = again.expect(StatusCode::OK);
    assert_eq!(again["status"], "completed");
    assert_ne!(again["id"], first["id"]);
    let retry = t.app.send(keyed("/v1/sessions/k/runs", "key-1", &body)).await;
    assert!(replayed(&retry));
    assert_eq!(retry.expect(StatusCode::OK)["id"], again["id"]);
}

/// Retries that race each other start one run; a refused request leaves its key unused.
async fn concurrent_retries_start_one_run(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.llm.set_default(Reply::Text {
        deltas: vec!["slow".into()],
        usage: None,
        delay: Duration::from_millis(200),
    });
    let body = json!({"input": "hi", "background": true});
    let attempts = (0..6).map(|_| t.app.send(keyed("/v1/sessions/race/runs", "same", &body)));
    let answers = futures::future::join_all(attempts).await;
    let ids: Vec<Value> =
        answers.iter().map(|a| a.expect(StatusCode::ACCEPTED)["id"].clone()).collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    assert_eq!(answers.iter().filter(|a| replayed(a)).count(), 5);

    // While that run is busy a new key is refused with 409; the refusal is not kept, so
    // the same request succeeds once the session is free.
    let next = json!({"input": "next"});
    t.app
        .send(keyed("/v1/sessions/race/runs", "next", &next))
        .await
        .expect_problem(StatusCode::CONFLICT, "session_busy");
    let path = format!("/v1/sessions/race/runs/{}/events", ids[0].as_str().unwrap());
    t.app.get(&path).await;
    let done = t.app.send(keyed("/v1/sessions/race/runs", "next", &next)).await;
    assert!(!replayed(&done));
    assert_eq!(done.expect(StatusCode::OK)["status"], "completed");
    assert_eq!(t.llm.requests().len(), 2);
}

/// A client that gives up while its run is being created: whenever the run was
/// committed, it executes to the end; none is left `running` for its lease to lapse.
async fn a_client_that_leaves_mid_request_strands_no_run(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.llm.set_default(Reply::text("done"));
    let mut created = 0;
    for attempt in 0..12u64 {
        let path = format!("/v1/sessions/gone-{attempt}/runs");
        let request = t.app.post(&path, json!({"input": "hi"}));
        // Ever later give-ups; the last attempt waits it out, so one run at least is
        // created however slow the machine is.
        match attempt {
            11 => {
                let _ = request.await;
            }
            _ => {
                let _ = tokio::time::timeout(Duration::from_micros(250 * attempt), request).await;
            }
        }
        // 20 s: well within the 30 s lease that a stranded run would wait for, and
        // room for a database that stalls on a busy disk.
        let mut runs = Vec::new();
        for _ in 0..1000 {
            let page = t.app.get(&path).await;
            runs = match page.status {
                StatusCode::OK => page.json()["data"].as_array().unwrap().clone(),
                _ => Vec::new(),
            };
            if runs.iter().all(|r| r["status"] == "completed") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(runs.iter().all(|r| r["status"] == "completed"), "{runs:?}");
        created += runs.len();
    }
    assert!(created > 0, "no attempt got as far as creating its run");
}

/// A run is configured as if its session had no agent, and created again with the
/// agent's configuration when the creation finds one: the first attempt leaves nothing,
/// not its run, its session's activity nor its claim of the key.
async fn a_keyed_run_on_a_session_with_an_agent_is_created_once(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.llm.set_default(Reply::text("done"));
    let agent = t
        .app
        .post("/v1/agents", json!({"model": "agent-model", "instructions": "From the agent."}))
        .await
        .expect(StatusCode::CREATED);
    t.app
        .post("/v1/sessions", json!({"id": "with-agent", "agent_id": agent["id"]}))
        .await
        .expect(StatusCode::CREATED);
    let body = json!({"input": "hi", "background": true});
    let first = t.app.send(keyed("/v1/sessions/with-agent/runs", "agent-key", &body)).await;
    assert!(!replayed(&first));
    let first = first.expect(StatusCode::ACCEPTED);
    assert_eq!(first["model"], "agent-model");
    let events = format!("/v1/sessions/with-agent/runs/{}/events", first["id"].as_str().unwrap());
    let events = super::parse_sse(&t.app.get(&events).await.text);
    assert_eq!(events.last().unwrap().0, "run.completed");
    assert_eq!(t.llm.requests()[0]["messages"][0]["content"], "From the agent.");

    let retry = t.app.send(keyed("/v1/sessions/with-agent/runs", "agent-key", &body)).await;
    assert!(replayed(&retry));
    assert_eq!(retry.expect(StatusCode::ACCEPTED)["id"], first["id"]);
    let runs = t.app.get("/v1/sessions/with-agent/runs").await.expect(StatusCode::OK);
    assert_eq!(runs["data"].as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(t.llm.requests().len(), 1);
}
