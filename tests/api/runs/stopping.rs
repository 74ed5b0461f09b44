//! `…/cancel?action=`: a run cancelled, interrupted (what it finished kept as a turn) or
//! rolled back (nothing of it kept), whether its worker is here or on another replica.

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::retries::keyed;
use super::{parse_sse, until_called, RunsApp, ToolHook};
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, TestDb};
use agent_sessions::model::{SessionId, StopAction};

on_both_backends!(
    an_interrupt_keeps_finished_calls_and_the_partial_message,
    an_interrupt_on_another_replica_keeps_what_was_stored,
    an_interrupted_pause_drops_its_unanswered_calls,
    a_rollback_leaves_no_trace,
);

fn run_path(session: &str, run: &Value) -> String {
    format!("/v1/sessions/{session}/runs/{}", run["id"].as_str().unwrap())
}

async fn an_interrupt_keeps_finished_calls_and_the_partial_message(db: TestDb) {
    let hook = ToolHook::start("lookup").await;
    let t = RunsApp::configured(db, |c| {
        c.llm_idle_timeout_secs = 30;
        c.tool_webhook_allowed_hosts = vec![hook.host.clone()];
    })
    .await;
    t.llm.push(Reply::tool_call("c1", "lookup", r#"{"q":1}"#));
    t.llm.push(Reply::HangMidStream);
    let body = json!({"input": "go", "background": true, "agent": {"tools": [hook.tool]}});
    let run = t.app.post("/v1/sessions/i/runs", body).await.expect(StatusCode::ACCEPTED);
    until_called(&t.llm, 2).await;
    let path = run_path("i", &run);
    let stopped = t
        .app
        .post(&format!("{path}/cancel?action=interrupt"), json!({}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(stopped["status"], "interrupted", "{stopped}");
    assert!(stopped["finished_at"].is_string());
    let kinds: Vec<&str> = (stopped["output"].as_array().unwrap().iter())
        .map(|item| item["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["function_call", "function_call_output", "message"], "{stopped}");
    let partial = &stopped["output"][2];
    assert_eq!(partial["status"], "incomplete");
    assert_eq!(partial["content"][0]["text"], "Hel");
    // The turn is in the session: the input, then what the run finished.
    let items = t.items("i").await;
    assert_eq!(items.len(), 4);
    assert_eq!(items[0]["content"], "go");
    assert_eq!(items[2]["output"], r#"result of {"q":1}"#);
    assert_eq!(items[3], *partial);
    let events = parse_sse(&t.app.get(&format!("{path}/events")).await.text);
    assert_eq!(events.last().unwrap().0, "run.interrupted");
    t.app
        .post(&format!("{path}/cancel?action=interrupt"), json!({}))
        .await
        .expect_problem(StatusCode::CONFLICT, "run_finished");
    // The next run reads the interrupted turn as history.
    t.llm.push(Reply::text("ok"));
    let next = t.app.post("/v1/sessions/i/runs", json!({"input": "next"})).await;
    assert_eq!(next.expect(StatusCode::OK)["status"], "completed");
    let messages = &t.llm.requests()[2]["messages"];
    let roles: Vec<&str> =
        messages.as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant", "user"], "{messages}");
    assert_eq!(messages[3]["content"], "Hel");
    t.app
        .post(&format!("{path}/cancel?action=pause"), json!({}))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request")
        .starts_with("action:")
        .then_some(())
        .expect("the problem names `action`");
}

/// The store interrupts a run that a worker of another replica executes: it keeps what
/// the run's stored events show, and the worker's followers here end with it.
async fn an_interrupt_on_another_replica_keeps_what_was_stored(db: TestDb) {
    let store = db.store.clone();
    let t = RunsApp::configured(db, |c| c.llm_idle_timeout_secs = 30).await;
    t.llm.push(Reply::HangMidStream);
    let stream = t.app.post("/v1/sessions/r/runs", json!({"input": "go", "stream": true}));
    let interrupt = async {
        until_called(&t.llm, 1).await;
        let runs = t.app.get("/v1/sessions/r/runs").await.expect(StatusCode::OK);
        let id = uuid::Uuid::parse_str(runs["data"][0]["id"].as_str().unwrap()).unwrap();
        let session = SessionId::parse("id", "r".into()).unwrap();
        store.stop_run("default", &session, id, StopAction::Interrupt).await.unwrap()
    };
    let (stream, stopped) = tokio::join!(stream, interrupt);
    assert_eq!(stopped.status.as_str(), "interrupted");
    let (last, _, run) = parse_sse(&stream.text).pop().unwrap();
    assert_eq!(last, "run.interrupted");
    assert_eq!(run["output"][0]["content"][0]["text"], "Hel", "{run}");
    let items = t.items("r").await;
    assert_eq!(items.len(), 2);
    assert_eq!(items[1]["status"], "incomplete");
}

async fn an_interrupted_pause_drops_its_unanswered_calls(db: TestDb) {
    let t = RunsApp::new(db).await;
    let tool = json!({"type": "function", "name": "ask", "parameters": {"type": "object"}});
    t.llm.push(Reply::tool_call("c1", "ask", "{}"));
    let body = json!({"input": "go", "agent": {"tools": [tool]}});
    let run = t.app.post("/v1/sessions/p/runs", body).await.expect(StatusCode::OK);
    assert_eq!(run["status"], "requires_action");
    let path = run_path("p", &run);
    let stopped = t
        .app
        .post(&format!("{path}/cancel?action=interrupt"), json!({}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(stopped["status"], "interrupted");
    assert_eq!(stopped["output"], json!([]), "a call without its output is not kept");
    assert_eq!(stopped["required_action"], Value::Null);
    let items = t.items("p").await;
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["content"], "go");
}

async fn a_rollback_leaves_no_trace(db: TestDb) {
    let t = RunsApp::configured(db, |c| c.llm_idle_timeout_secs = 30).await;
    t.llm.push(Reply::HangMidStream);
    let body = json!({"input": "go", "background": true});
    let run = t.app.send(keyed("/v1/sessions/b/runs", "key-b", &body)).await;
    let run = run.expect(StatusCode::ACCEPTED);
    until_called(&t.llm, 1).await;
    let path = run_path("b", &run);
    let stopped = t
        .app
        .post(&format!("{path}/cancel?action=rollback"), json!({}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(stopped["status"], "cancelled");
    t.app.get(&path).await.expect_problem(StatusCode::NOT_FOUND, "run_not_found");
    t.app
        .get(&format!("{path}/events"))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "run_not_found");
    let runs = t.app.get("/v1/sessions/b/runs").await.expect(StatusCode::OK);
    assert_eq!(runs["data"], json!([]));
    assert!(t.items("b").await.is_empty());
    // The key went with the run: another request may use it.
    t.llm.push(Reply::text("fresh"));
    let other = json!({"input": "something else"});
    let again = t.app.send(keyed("/v1/sessions/b/runs", "key-b", &other)).await;
    let again = again.expect(StatusCode::OK);
    assert_eq!(again["status"], "completed");
    assert_ne!(again["id"], run["id"]);
    // A finished run is not rolled back: deleting it is `DELETE`, which keeps its turn.
    // Nor is one cancelled before.
    t.llm.push(Reply::HangMidStream);
    let body = json!({"input": "later", "background": true});
    let cancelled = t.app.post("/v1/sessions/b/runs", body).await.expect(StatusCode::ACCEPTED);
    until_called(&t.llm, 3).await;
    let cancelled = run_path("b", &cancelled);
    t.app.post(&format!("{cancelled}/cancel"), json!({})).await.expect(StatusCode::OK);
    for finished in [run_path("b", &again), cancelled] {
        t.app
            .post(&format!("{finished}/cancel?action=rollback"), json!({}))
            .await
            .expect_problem(StatusCode::CONFLICT, "run_finished");
        t.app.get(&finished).await.expect(StatusCode::OK);
    }
}
