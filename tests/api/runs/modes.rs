use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::json;
use uuid::Uuid;

use super::{parse_sse, RunsApp};
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, TestDb};

on_both_backends!(
    a_sync_run_appends_the_turn_and_sends_history,
    a_streamed_run_sends_numbered_events_and_replays_them,
    followers_joining_a_long_run_late_get_every_event_once,
    a_background_run_answers_at_once,
    configuration_layers_from_the_session_to_the_run,
);

async fn a_sync_run_appends_the_turn_and_sends_history(db: TestDb) {
    let t = RunsApp::new(db).await;
    let agent = t
        .app
        .post(
            "/v1/agents",
            json!({"name": "helper", "model": "fake-1", "instructions": "Be brief."}),
        )
        .await
        .expect(StatusCode::CREATED);
    t.llm.push(Reply::text("Hello, Ada!"));
    let run = t
        .app
        .post("/v1/sessions/s1/runs", json!({"input": "Hi, I am Ada", "agent_id": agent["id"]}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["model"], "fake-1");
    assert_eq!(run["output"][0]["content"][0]["text"], "Hello, Ada!");
    assert_eq!(run["usage"]["llm_calls"], 1);
    assert_eq!(run["usage"]["input_tokens"], 12);
    let items = t.items("s1").await;
    assert_eq!(items.len(), 2);
    assert_eq!(items[0], json!({"role": "user", "content": "Hi, I am Ada"}));
    assert_eq!(items[1]["role"], "assistant");
    assert_eq!(items[1]["type"], "message");

    // Turn 2 sees turn 1, after the instructions.
    t.llm.push(Reply::text("You are Ada."));
    let second = t
        .app
        .post("/v1/sessions/s1/runs", json!({"input": "Who am I?", "agent_id": agent["id"]}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(second["status"], "completed");
    let sent = &t.llm.requests()[1];
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"]["include_usage"], true);
    let messages = sent["messages"].as_array().unwrap();
    assert_eq!(messages[0], json!({"role": "system", "content": "Be brief."}));
    assert_eq!(messages[1]["content"], "Hi, I am Ada");
    assert_eq!(messages[2]["content"], "Hello, Ada!");
    assert_eq!(messages[3]["content"], "Who am I?");
    let session = t.app.get("/v1/sessions/s1").await.expect(StatusCode::OK);
    assert_eq!(session["item_count"], 4);
    assert_eq!(session["usage"]["llm_calls"], 2);
    let runs = t.app.get("/v1/sessions/s1/runs").await.expect(StatusCode::OK);
    assert_eq!(runs["data"][0]["id"], second["id"], "newest first");
    assert_eq!(runs["data"].as_array().unwrap().len(), 2);
    let items = t.app.get("/v1/sessions/s1/items").await.expect(StatusCode::OK);
    assert_eq!(items["data"][3]["run_id"], second["id"]);
}

async fn a_streamed_run_sends_numbered_events_and_replays_them(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.llm.push(Reply::text("one two three four"));
    let response =
        t.app.post("/v1/sessions/s2/runs", json!({"input": "count", "stream": true})).await;
    assert_eq!(response.status, StatusCode::OK);
    assert!(response.header("content-type").unwrap().starts_with("text/event-stream"));
    let events = parse_sse(&response.text);
    let names: Vec<&str> = events.iter().map(|(e, _, _)| e.as_str()).collect();
    assert_eq!(names.first(), Some(&"run.created"));
    assert_eq!(names[1], "run.started");
    assert_eq!(names.last(), Some(&"run.completed"));
    assert!(names.contains(&"item.created"));
    let ids: Vec<i64> = events.iter().map(|(_, id, _)| *id).collect();
    assert_eq!(ids, (1..=ids.len() as i64).collect::<Vec<_>>());
    let text: String = events
        .iter()
        .filter(|(e, _, _)| e == "message.delta")
        .map(|(_, _, d)| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "one two three four");
    let run = &events.last().unwrap().2;
    assert_eq!(run["status"], "completed");

    // Replays: everything, then only what follows Last-Event-ID.
    let path = format!("/v1/sessions/s2/runs/{}/events", run["id"].as_str().unwrap());
    let replay = t.app.get(&path).await;
    assert_eq!(parse_sse(&replay.text), events);
    let request = Request::get(&path).header("last-event-id", "3").body(Body::empty()).unwrap();
    let tail = t.app.send(request).await;
    assert_eq!(parse_sse(&tail.text), events[3..].to_vec());
    for id in ["x", "-1", "+3", "3.0", "1234567890123456789"] {
        let bad = Request::get(&path).header("last-event-id", id).body(Body::empty()).unwrap();
        let detail =
            t.app.send(bad).await.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
        assert!(detail.starts_with("Last-Event-ID"), "{id}: {detail}");
    }
}

/// A live run keeps only its newest stored events in memory: followers that join after
/// many were stored read the older ones from the database, then follow from memory,
/// each event once and in order.
async fn followers_joining_a_long_run_late_get_every_event_once(db: TestDb) {
    let store = db.store.clone();
    let t = RunsApp::new(db).await;
    let deltas = 400;
    t.llm.push(Reply::Clock { count: deltas, interval: Duration::from_millis(5) });
    let body = json!({"input": "go", "background": true});
    let run = t.app.post("/v1/sessions/late/runs", body).await.expect(StatusCode::ACCEPTED);
    let id = Uuid::parse_str(run["id"].as_str().unwrap()).unwrap();
    let session = agent_sessions::model::SessionId::parse("id", "late".into()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (events, status) = store.run_events("default", &session, id, 0).await.unwrap();
        assert!(!status.is_final(), "the followers join while it runs");
        if events.len() >= 150 {
            break;
        }
        assert!(Instant::now() < deadline, "the deltas are stored while the run executes");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let path = format!("/v1/sessions/late/runs/{id}/events");
    let after = |id: i64| {
        let request = Request::get(&path).header("last-event-id", id.to_string());
        t.app.send(request.body(Body::empty()).unwrap())
    };
    let (whole, tail) = tokio::time::timeout(Duration::from_secs(20), async {
        tokio::join!(t.app.get(&path), after(40))
    })
    .await
    .expect("the streams end with the run");
    let whole = parse_sse(&whole.text);
    let ids: Vec<i64> = whole.iter().map(|(_, id, _)| *id).collect();
    assert_eq!(ids, (1..=ids.len() as i64).collect::<Vec<_>>(), "each event once, in order");
    assert_eq!(whole.last().map(|e| e.0.as_str()), Some("run.completed"));
    let sent: Vec<&str> = whole
        .iter()
        .filter(|(e, _, _)| e == "message.delta")
        .map(|(_, _, d)| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(sent.len(), deltas);
    let items = t.items("late").await;
    assert_eq!(items[1]["content"][0]["text"], sent.concat(), "the stream is the answer");
    assert_eq!(parse_sse(&tail.text), whole[40..].to_vec());
}

/// Inline settings over `agent_id`'s agent over the session's agent over LLM_MODEL.
async fn configuration_layers_from_the_session_to_the_run(db: TestDb) {
    let t = RunsApp::new(db).await;
    let agent = |body: serde_json::Value| {
        let app = &t.app;
        async move { app.post("/v1/agents", body).await.expect(StatusCode::CREATED) }
    };
    let own = agent(json!({"instructions": "Session agent.", "temperature": 0.5})).await;
    let named = agent(json!({"model": "named-model", "temperature": 1.0})).await;
    t.app
        .post("/v1/sessions", json!({"id": "layers", "agent_id": own["id"]}))
        .await
        .expect(StatusCode::CREATED);

    let run =
        t.app.post("/v1/sessions/layers/runs", json!({"input": "a"})).await.expect(StatusCode::OK);
    assert_eq!(run["model"], "test-model", "LLM_MODEL where no agent sets one");
    let sent = &t.llm.requests()[0];
    assert_eq!(sent["messages"][0]["content"], "Session agent.");
    assert_eq!(sent["temperature"], 0.5);

    let run = t
        .app
        .post(
            "/v1/sessions/layers/runs",
            json!({"input": "b", "agent_id": named["id"], "agent": {"temperature": 0.0}}),
        )
        .await
        .expect(StatusCode::OK);
    assert_eq!(run["model"], "named-model");
    let sent = &t.llm.requests()[1];
    assert_eq!(sent["messages"][0]["content"], "Session agent.", "kept from below");
    assert_eq!(sent["temperature"], 0.0, "inline wins");

    // The session's agent is looked up when a run starts: once deleted, runs say so.
    t.app
        .delete(&format!("/v1/agents/{}", own["id"].as_str().unwrap()))
        .await
        .expect(StatusCode::NO_CONTENT);
    let detail = t
        .app
        .post("/v1/sessions/layers/runs", json!({"input": "c"}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "agent_not_found");
    assert!(detail.contains("session `layers`"), "{detail}");
    assert_eq!(t.llm.requests().len(), 2);
}

async fn a_background_run_answers_at_once(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.llm.push(Reply::Text {
        deltas: vec!["slow".into(), " answer".into()],
        usage: None,
        delay: std::time::Duration::from_millis(200),
    });
    let response =
        t.app.post("/v1/sessions/s3/runs", json!({"input": "hi", "background": true})).await;
    let run = response.expect(StatusCode::ACCEPTED);
    assert_eq!(run["status"], "queued");
    let location = response.header("location").unwrap().to_owned();
    assert_eq!(location, format!("/v1/sessions/s3/runs/{}", run["id"].as_str().unwrap()));
    let events = t.app.get(&format!("{location}/events")).await;
    let events = parse_sse(&events.text);
    assert_eq!(events.last().unwrap().0, "run.completed");
    let done = t.app.get(&location).await.expect(StatusCode::OK);
    assert_eq!(done["status"], "completed");
    assert!(done["started_at"].is_string() && done["finished_at"].is_string());
    assert_eq!(t.items("s3").await.len(), 2);
    t.app
        .post("/v1/sessions/s3/runs", json!({"input": "hi", "background": true, "stream": true}))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    t.app
        .get("/v1/sessions/s3/runs/not-a-run")
        .await
        .expect_problem(StatusCode::NOT_FOUND, "run_not_found");
}

/// The request time limit bounds ordinary requests, not one that waits for its run.
#[tokio::test]
async fn a_sync_run_may_outlast_the_request_time_limit() {
    let t = RunsApp::configured(TestDb::sqlite().await, |c| c.request_timeout_secs = 1).await;
    t.llm.push(Reply::Text {
        deltas: vec!["slow".into(), " but".into(), " sure".into()],
        usage: None,
        delay: std::time::Duration::from_millis(500),
    });
    let run = t
        .app
        .post("/v1/sessions/slow/runs", json!({"input": "take your time"}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["output"][0]["content"][0]["text"], "slow but sure");
}

/// A client that goes away while its run streams does not cancel the run.
#[tokio::test]
async fn a_disconnected_stream_leaves_the_run_running() {
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    let t = RunsApp::new(TestDb::sqlite().await).await;
    t.llm.push(Reply::Text {
        deltas: vec!["still".into(), " here".into()],
        usage: None,
        delay: std::time::Duration::from_millis(200),
    });
    let request = Request::post("/v1/sessions/gone/runs")
        .header("content-type", "application/json")
        .body(Body::from(json!({"input": "hi", "stream": true}).to_string()))
        .unwrap();
    let response = t.app.router.clone().oneshot(request).await.unwrap();
    let mut body = response.into_body();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    let created = parse_sse(std::str::from_utf8(&first).unwrap());
    let run_id = created[0].2["id"].as_str().unwrap().to_owned();
    drop(body);
    let events = t.app.get(&format!("/v1/sessions/gone/runs/{run_id}/events")).await;
    assert_eq!(parse_sse(&events.text).last().unwrap().0, "run.completed");
    assert_eq!(t.items("gone").await.len(), 2);
}

/// Bad run bodies are 400s whose detail starts with the field at fault.
#[tokio::test]
async fn bad_run_bodies_name_the_field() {
    let t = RunsApp::new(TestDb::sqlite().await).await;
    let cases = [
        (json!({"input": "hi", "if_busy": "sometimes"}), "if_busy"),
        (json!({"input": 42}), "input"),
        (json!({"input": []}), "input"),
        (json!({"input": ["not an object"]}), "input[0]"),
        (json!({"input": "hi", "agent": {"temperature": 3}}), "agent.temperature"),
        (json!({"input": "hi", "agent": {"max_turns": 0}}), "agent.max_turns"),
        (json!({"input": "hi", "agent": {"modle": "x"}}), "agent"),
        (
            json!({"input": "hi", "agent": {"max_output_tokens": 4_294_967_296_u64}}),
            "agent.max_output_tokens",
        ),
        (json!({"input": "hi", "agent": {"max_turns": 1.5}}), "agent.max_turns"),
        (json!({"input": "hi", "stream": true, "background": true}), "stream"),
        (json!({"input": "hi", "agent_id": "no/slash"}), "agent_id"),
        // A turn on nothing is refused.
        (json!({"input": ""}), "input: must not be empty"),
        (json!({"input": []}), "input: must hold at least one item"),
        (
            json!({"input": "hi", "agent": {"tools": [{"type": "function", "name": "bad name"}]}}),
            "agent.tools[0].name",
        ),
    ];
    for (body, field) in cases {
        let detail = t
            .app
            .post("/v1/sessions/bad/runs", body.clone())
            .await
            .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
        assert!(detail.starts_with(field), "{body}: {detail}");
    }
    t.app
        .post("/v1/sessions/bad/runs", json!({"input": "hi", "agent_id": "missing"}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "agent_not_found");
    assert!(t.llm.requests().is_empty());
}
