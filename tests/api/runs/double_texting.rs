//! `if_busy` when a new run finds its session busy: `interrupt` and `rollback` stop the
//! active run first; `steer` adds the input to it, or queues it once that run is over.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::{until_called, RunsApp, ToolHook};
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, test_config, TestApp, TestDb};

on_both_backends!(
    interrupt_keeps_the_active_turn_and_runs_the_new_input,
    rollback_forgets_the_active_run,
    steer_joins_the_paused_runs_next_model_call,
    steer_after_the_last_model_call_queues_a_run,
    steering_a_run_that_ended_without_taking_it_is_queued_by_recovery,
    unknown_if_busy_values_are_refused,
    interrupts_racing_their_runs_end_never_fail_nor_split_a_turn,
    steered_input_stays_with_an_interrupted_turn,
);

fn texts(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|item| match &item["content"] {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts[0]["text"].as_str().unwrap_or_default().to_owned(),
            _ => item["type"].as_str().unwrap_or_default().to_owned(),
        })
        .collect()
}

/// Session `d` with a run streaming its answer (`Hel` so far) when a second run with
/// `if_busy` arrives; returns the app and the path of the first run, once the second
/// completed.
async fn double_text(db: TestDb, if_busy: &str) -> (RunsApp, String) {
    let t = RunsApp::configured(db, |c| c.llm_idle_timeout_secs = 30).await;
    t.llm.push(Reply::HangMidStream);
    let body = json!({"input": "first", "background": true});
    let active = t.app.post("/v1/sessions/d/runs", body).await.expect(StatusCode::ACCEPTED);
    until_called(&t.llm, 1).await;
    t.llm.push(Reply::text("second answer"));
    let body = json!({"input": "second", "if_busy": if_busy});
    let next = t.app.post("/v1/sessions/d/runs", body).await.expect(StatusCode::OK);
    assert_eq!(next["status"], "completed", "{next}");
    let path = format!("/v1/sessions/d/runs/{}", active["id"].as_str().unwrap());
    (t, path)
}

async fn interrupt_keeps_the_active_turn_and_runs_the_new_input(db: TestDb) {
    let (t, path) = double_text(db, "interrupt").await;
    let active = t.app.get(&path).await.expect(StatusCode::OK);
    assert_eq!(active["status"], "interrupted");
    assert_eq!(texts(&t.items("d").await), ["first", "Hel", "second", "second answer"]);
    // The new run started on the interrupted turn.
    let messages = &t.llm.requests()[1]["messages"];
    assert_eq!(messages[1], json!({"role": "assistant", "content": "Hel"}), "{messages}");
}

async fn rollback_forgets_the_active_run(db: TestDb) {
    let (t, path) = double_text(db, "rollback").await;
    t.app.get(&path).await.expect_problem(StatusCode::NOT_FOUND, "run_not_found");
    let runs = t.app.get("/v1/sessions/d/runs").await.expect(StatusCode::OK);
    assert_eq!(runs["data"].as_array().unwrap().len(), 1);
    assert_eq!(texts(&t.items("d").await), ["second", "second answer"]);
    assert_eq!(t.llm.requests()[1]["messages"].as_array().unwrap().len(), 1);
}

/// The input joins a run waiting for a client tool: the model sees it after the tool's
/// output, and the turn holds it there.
async fn steer_joins_the_paused_runs_next_model_call(db: TestDb) {
    let t = RunsApp::new(db).await;
    let tool = json!({"type": "function", "name": "ask", "parameters": {"type": "object"}});
    t.llm.push(Reply::tool_call("c1", "ask", "{}"));
    let body = json!({"input": "first", "agent": {"tools": [tool]}});
    let active = t.app.post("/v1/sessions/s/runs", body).await.expect(StatusCode::OK);
    assert_eq!(active["status"], "requires_action");
    let body = json!({"input": "and also this", "if_busy": "steer", "background": true});
    let steered = t.app.post("/v1/sessions/s/runs", body).await.expect(StatusCode::ACCEPTED);
    assert_eq!(steered["id"], active["id"], "the input joined the active run");
    t.llm.push(Reply::text("both answered"));
    let path = format!("/v1/sessions/s/runs/{}", active["id"].as_str().unwrap());
    let outputs = json!({"outputs": [{"call_id": "c1", "output": "tool says hi"}]});
    let done = t.app.post(&format!("{path}/tool_outputs"), outputs).await.expect(StatusCode::OK);
    assert_eq!(done["status"], "completed", "{done}");
    let messages = &t.llm.requests()[1]["messages"];
    let last = messages.as_array().unwrap().len() - 1;
    assert_eq!(messages[last], json!({"role": "user", "content": "and also this"}));
    assert_eq!(messages[last - 1]["role"], "tool");
    let items = texts(&t.items("s").await);
    assert_eq!(
        items,
        ["first", "function_call", "function_call_output", "and also this", "both answered"]
    );
    let runs = t.app.get("/v1/sessions/s/runs").await.expect(StatusCode::OK);
    assert_eq!(runs["data"].as_array().unwrap().len(), 1, "no run of its own");
}

/// The race: the active run makes no further model call after the input arrives, so the
/// input becomes the next run, as `enqueue` would have made it.
async fn steer_after_the_last_model_call_queues_a_run(db: TestDb) {
    let t = RunsApp::new(db).await;
    let deltas = vec!["slow ".into(), "answer".into()];
    t.llm.push(Reply::Text { deltas, usage: None, delay: Duration::from_millis(300) });
    t.llm.push(Reply::text("steered answer"));
    let body = json!({"input": "first", "background": true});
    let active = t.app.post("/v1/sessions/r/runs", body).await.expect(StatusCode::ACCEPTED);
    for _ in 0..200 {
        if !t.llm.requests().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let body = json!({"input": "late", "if_busy": "steer", "background": true});
    let steered = t.app.post("/v1/sessions/r/runs", body).await.expect(StatusCode::ACCEPTED);
    assert_eq!(steered["id"], active["id"]);
    let mut runs = json!(null);
    for _ in 0..200 {
        runs = t.app.get("/v1/sessions/r/runs?order=asc").await.expect(StatusCode::OK);
        let statuses: Vec<&str> = (runs["data"].as_array().unwrap().iter())
            .map(|run| run["status"].as_str().unwrap())
            .collect();
        if statuses == ["completed", "completed"] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(runs["data"][1]["input"], json!([{"role": "user", "content": "late"}]), "{runs}");
    assert_eq!(texts(&t.items("r").await), ["first", "slow answer", "late", "steered answer"]);
}

/// A worker that finished a run and stopped before it queued the input steered into it:
/// the recovery that any replica runs queues it.
async fn steering_a_run_that_ended_without_taking_it_is_queued_by_recovery(db: TestDb) {
    let raw = db.clone_handle();
    // Recovery runs every half lease.
    let t = RunsApp::configured(db, |c| {
        c.run_workers = 0;
        c.run_lease_secs = 1;
    })
    .await;
    let body = json!({"input": "first", "background": true});
    let active = t.app.post("/v1/sessions/q/runs", body).await.expect(StatusCode::ACCEPTED);
    let body = json!({"input": "steered", "if_busy": "steer", "background": true});
    t.app.post("/v1/sessions/q/runs", body).await.expect(StatusCode::ACCEPTED);
    raw.execute("update runs set status = 'failed'").await;
    let mut runs = json!(null);
    for _ in 0..100 {
        runs = t.app.get("/v1/sessions/q/runs?order=asc").await.expect(StatusCode::OK);
        if runs["data"].as_array().unwrap().len() > 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(t.app.store.release_steering(None).await.unwrap(), 0, "released once");
    assert_eq!(runs["data"].as_array().unwrap().len(), 2, "{runs}");
    assert_eq!(runs["data"][0]["id"], active["id"]);
    assert_eq!(runs["data"][1]["status"], "queued");
    assert_eq!(runs["data"][1]["input"], json!([{"role": "user", "content": "steered"}]));
    t.llm.push(Reply::text("done"));
    assert_eq!(t.app.runs.run_pending().await.unwrap(), 1);
    assert_eq!(texts(&t.items("q").await), ["steered", "done"]);
}

/// Input steered into a run that is then interrupted is part of its turn, whether the
/// worker here stops the run or the store does for another replica.
async fn steered_input_stays_with_an_interrupted_turn(db: TestDb) {
    let store = db.store.clone();
    let t = RunsApp::configured(db, |c| c.llm_idle_timeout_secs = 30).await;
    for (session, here) in [("here", true), ("elsewhere", false)] {
        t.llm.push(Reply::HangMidStream);
        let runs = format!("/v1/sessions/{session}/runs");
        let body = json!({"input": "first", "background": true});
        let active = t.app.post(&runs, body).await.expect(StatusCode::ACCEPTED);
        until_called(&t.llm, if here { 1 } else { 2 }).await;
        let body = json!({"input": "also this", "if_busy": "steer", "background": true});
        t.app.post(&runs, body).await.expect(StatusCode::ACCEPTED);
        let id = active["id"].as_str().unwrap();
        let stopped = if here {
            let path = format!("{runs}/{id}/cancel?action=interrupt");
            t.app.post(&path, json!({})).await.expect(StatusCode::OK)
        } else {
            let session = agent_sessions::model::SessionId::parse("id", session.into()).unwrap();
            let stop = agent_sessions::model::StopAction::Interrupt;
            let run = store.stop_run("default", &session, id.parse().unwrap(), stop).await;
            serde_json::to_value(run.unwrap()).unwrap()
        };
        assert_eq!(stopped["status"], "interrupted");
        assert_eq!(texts(&t.items(session).await), ["first", "Hel", "also this"], "{session}");
        let listed = t.app.get(&runs).await.expect(StatusCode::OK);
        assert_eq!(listed["data"].as_array().unwrap().len(), 1, "no run of its own: {listed}");
    }
}

/// The active run may finish while the interrupting request stops it: either way the
/// request gets its run, and every turn in the history is whole.
async fn interrupts_racing_their_runs_end_never_fail_nor_split_a_turn(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.llm.set_default(Reply::text("ok"));
    for n in 0..8 {
        let body = json!({"input": format!("first {n}"), "background": true});
        t.app.post("/v1/sessions/race/runs", body).await.expect(StatusCode::ACCEPTED);
        let body = json!({"input": format!("second {n}"), "if_busy": "interrupt"});
        let next = t.app.post("/v1/sessions/race/runs", body).await.expect(StatusCode::OK);
        assert_eq!(next["status"], "completed", "{next}");
    }
    let runs = t.app.get("/v1/sessions/race/runs?limit=100").await.expect(StatusCode::OK);
    let statuses: Vec<&str> =
        runs["data"].as_array().unwrap().iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(statuses.len(), 16);
    assert!(statuses.iter().all(|s| ["completed", "interrupted"].contains(s)), "{statuses:?}");
    let items = texts(&t.items("race").await);
    for n in 0..8 {
        let first = items.iter().position(|i| *i == format!("first {n}")).unwrap();
        let second = items.iter().position(|i| *i == format!("second {n}")).unwrap();
        assert!(first < second, "{items:?}");
        assert_eq!(items[second + 1], "ok", "the second run's answer follows it: {items:?}");
    }
}

/// An interrupt sent to a replica that executes nothing stops the run the other replica
/// executes, keeping what its stored events show.
#[sqlx::test(migrations = "./migrations/postgres")]
async fn interrupt_lands_on_another_replica(pool: sqlx::PgPool) {
    let executing =
        RunsApp::configured(TestDb::postgres(pool.clone()), |c| c.llm_idle_timeout_secs = 30).await;
    let mut config = test_config();
    config.run_workers = 0;
    config.llm_base_url = executing.llm.base_url();
    let other = TestApp::new(TestDb::postgres_replica(&pool), &config);
    executing.llm.push(Reply::HangMidStream);
    let body = json!({"input": "first", "background": true});
    let active = executing.app.post("/v1/sessions/y/runs", body).await.expect(StatusCode::ACCEPTED);
    until_called(&executing.llm, 1).await;
    executing.llm.push(Reply::text("second answer"));
    // The other replica queues the new run; the executing one runs it.
    let body = json!({"input": "second", "if_busy": "interrupt", "background": true});
    let next = other.post("/v1/sessions/y/runs", body).await.expect(StatusCode::ACCEPTED);
    let path = format!("/v1/sessions/y/runs/{}", active["id"].as_str().unwrap());
    assert_eq!(other.get(&path).await.expect(StatusCode::OK)["status"], "interrupted");
    let events = format!("/v1/sessions/y/runs/{}/events", next["id"].as_str().unwrap());
    let (last, _, _) = super::parse_sse(&other.get(&events).await.text).pop().unwrap();
    assert_eq!(last, "run.completed");
    assert_eq!(texts(&executing.items("y").await), ["first", "Hel", "second", "second answer"]);
}

async fn unknown_if_busy_values_are_refused(db: TestDb) {
    let t = RunsApp::new(db).await;
    let detail = t
        .app
        .post("/v1/sessions/u/runs", json!({"input": "x", "if_busy": "shout"}))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("if_busy"), "{detail}");
    for body in [
        json!({"input": "x", "if_busy": "steer"}),
        json!({"input": "x", "if_busy": "steer", "conversation": "u", "store": false}),
    ] {
        let detail = t.app.post("/v1/responses", body).await.expect(StatusCode::BAD_REQUEST);
        assert_eq!(detail["error"]["param"], "if_busy", "{detail}");
    }
}

/// Steering posted to a replica that executes nothing reaches the worker of the replica
/// that executes the run, at its next model call.
#[sqlx::test(migrations = "./migrations/postgres")]
async fn steer_lands_on_another_replica(pool: sqlx::PgPool) {
    let hook = ToolHook::answering_after("lookup", Duration::from_millis(800)).await;
    let executing = RunsApp::configured(TestDb::postgres(pool.clone()), |c| {
        c.tool_webhook_allowed_hosts = vec![hook.host.clone()];
    })
    .await;
    let mut config = test_config();
    config.run_workers = 0;
    config.tool_webhook_allowed_hosts = vec![hook.host.clone()];
    let other = TestApp::new(TestDb::postgres_replica(&pool), &config);
    executing.llm.push(Reply::tool_call("c1", "lookup", "{}"));
    executing.llm.push(Reply::text("joined"));
    let body = json!({"input": "first", "background": true, "agent": {"tools": [hook.tool]}});
    let active = executing.app.post("/v1/sessions/x/runs", body).await.expect(StatusCode::ACCEPTED);
    until_called(&executing.llm, 1).await;
    let body = json!({"input": "meanwhile", "if_busy": "steer", "background": true});
    let steered = other.post("/v1/sessions/x/runs", body).await.expect(StatusCode::ACCEPTED);
    assert_eq!(steered["id"], active["id"]);
    let path = format!("/v1/sessions/x/runs/{}", active["id"].as_str().unwrap());
    let events = other.get(&format!("{path}/events")).await;
    let (last, _, run) = super::parse_sse(&events.text).pop().unwrap();
    assert_eq!(last, "run.completed", "{run}");
    let messages = &executing.llm.requests()[1]["messages"];
    let last = messages.as_array().unwrap().len() - 1;
    assert_eq!(messages[last], json!({"role": "user", "content": "meanwhile"}));
    let items = texts(&executing.items("x").await);
    assert_eq!(items, ["first", "function_call", "function_call_output", "meanwhile", "joined"]);
}
