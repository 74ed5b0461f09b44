use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use super::{append_messages, compactions, context, stored_items};
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, TestApp, TestDb};
use crate::runs::RunsApp;

on_both_backends!(
    a_fork_at_an_item_copies_the_history_up_to_it,
    a_fork_before_a_run_lets_the_turn_be_retried,
    a_fork_while_a_run_streams_copies_only_finished_turns,
    a_fork_keeps_the_compactions_within_it,
    forks_refuse_bad_input_with_the_codes_design_names,
    a_fork_retried_with_its_idempotency_key_is_made_once,
);

async fn fork(app: &TestApp, source: &str, body: Value) -> Value {
    app.post(&format!("/v1/sessions/{source}/fork"), body).await.expect(StatusCode::CREATED)
}

/// The fork's items are exact copies of the source's first ones, with new ids (UUIDv7)
/// and seqs from 1.
fn assert_copies(copies: &[Value], originals: &[Value]) {
    assert_eq!(copies.len(), originals.len());
    for (i, (copy, original)) in copies.iter().zip(originals).enumerate() {
        assert_eq!(copy["item"], original["item"]);
        assert_eq!(copy["seq"], i as i64 + 1);
        assert_ne!(copy["id"], original["id"]);
        let id = Uuid::parse_str(copy["id"].as_str().unwrap()).unwrap();
        assert_eq!(id.get_version_num(), 7, "{id}");
    }
}

async fn a_fork_at_an_item_copies_the_history_up_to_it(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.app
        .post("/v1/sessions", json!({"id": "src", "metadata": {"user": "ada"}}))
        .await
        .expect(StatusCode::CREATED);
    let items = append_messages(&t.app, "src", 5).await;
    let response = t
        .app
        .post("/v1/sessions/src/fork", json!({"id": "f1", "through_item_id": items[2]["id"]}))
        .await;
    assert_eq!(response.header("location"), Some("/v1/sessions/f1"));
    let f1 = response.expect(StatusCode::CREATED);
    assert_eq!(f1["id"], "f1");
    assert_eq!(f1["forked_from"], json!({"session_id": "src", "item_id": items[2]["id"]}));
    assert_eq!(f1["item_count"], 3);
    assert_eq!(f1["metadata"], json!({"user": "ada"}));
    assert_eq!(f1["usage"]["llm_calls"], 0);
    assert_copies(&stored_items(&t.app, "f1").await, &items[..3]);
    assert_eq!(stored_items(&t.app, "src").await, items, "the source is unchanged");
    let source = t.app.get("/v1/sessions/src").await.expect(StatusCode::OK);
    assert_eq!(source["forked_from"], Value::Null);

    // A fork of a fork, with metadata of its own; appends go on from the copies.
    let f2 = fork(&t.app, "f1", json!({"metadata": {"try": "2"}})).await;
    assert_eq!(f2["metadata"], json!({"try": "2"}));
    let f1_items = stored_items(&t.app, "f1").await;
    assert_eq!(f2["forked_from"]["item_id"], f1_items[2]["id"]);
    let f2_id = f2["id"].as_str().unwrap();
    assert_copies(&stored_items(&t.app, f2_id).await, &f1_items);
    append_messages(&t.app, f2_id, 1).await;
    assert_eq!(stored_items(&t.app, f2_id).await[3]["seq"], 4);
    assert_eq!(stored_items(&t.app, "f1").await.len(), 3);
}

async fn a_fork_before_a_run_lets_the_turn_be_retried(db: TestDb) {
    let t = RunsApp::new(db).await;
    append_messages(&t.app, "r", 2).await;
    t.llm.push(Reply::text("first answer"));
    t.app.post("/v1/sessions/r/runs", json!({"input": "one"})).await.expect(StatusCode::OK);
    t.llm.push(Reply::text("second answer"));
    let second =
        t.app.post("/v1/sessions/r/runs", json!({"input": "two"})).await.expect(StatusCode::OK);
    let source = stored_items(&t.app, "r").await;
    assert_eq!(source.len(), 6);
    let retry = fork(&t.app, "r", json!({"id": "retry", "before_run_id": second["id"]})).await;
    assert_eq!(retry["forked_from"]["item_id"], source[3]["id"]);
    assert_copies(&stored_items(&t.app, "retry").await, &source[..4]);
    let runs = t.app.get("/v1/sessions/retry/runs").await.expect(StatusCode::OK);
    assert_eq!(runs["data"], json!([]));
    let copies = stored_items(&t.app, "retry").await;
    assert_eq!(copies[2]["run_id"], Value::Null, "the fork has no runs");

    // A run on the fork carries on from the copied history.
    t.llm.push(Reply::text("another answer"));
    t.app
        .post("/v1/sessions/retry/runs", json!({"input": "two, again"}))
        .await
        .expect(StatusCode::OK);
    let sent = t.llm.requests().last().unwrap()["messages"].clone();
    let contents: Vec<&str> =
        sent.as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(contents, ["message 0", "message 1", "one", "first answer", "two, again"]);

    // A run that appended nothing leaves everything to copy.
    t.llm.push(Reply::status(400));
    let failed =
        t.app.post("/v1/sessions/r/runs", json!({"input": "three"})).await.expect(StatusCode::OK);
    assert_eq!(failed["status"], "failed");
    let all = fork(&t.app, "r", json!({"before_run_id": failed["id"]})).await;
    assert_eq!(all["item_count"], 6);
}

async fn a_fork_while_a_run_streams_copies_only_finished_turns(db: TestDb) {
    let t = RunsApp::new(db).await;
    let items = append_messages(&t.app, "s", 3).await;
    t.llm.push(Reply::Text {
        deltas: vec!["slow ".into(), "answer".into()],
        usage: None,
        delay: Duration::from_millis(800),
    });
    let request = Request::post("/v1/sessions/s/runs")
        .header("content-type", "application/json")
        .body(Body::from(json!({"input": "hi", "stream": true}).to_string()))
        .unwrap();
    let streaming = tokio::spawn({
        let router = t.app.router.clone();
        async move { tower::ServiceExt::oneshot(router, request).await }
    });
    // The run is under way when the fork is made, and the fork does not wait for it:
    // the LLM's pauses (0.8 s before each of its two deltas, under the tests' idle
    // timeout of 1 s) leave a loaded machine ample time to fork first.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let started = std::time::Instant::now();
    let during = fork(&t.app, "s", json!({"id": "during"})).await;
    assert!(started.elapsed() < Duration::from_millis(1200));
    assert_eq!(during["item_count"], 3);
    let response = streaming.await.unwrap().unwrap();
    axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    assert_copies(&stored_items(&t.app, "during").await, &items);
    assert_eq!(stored_items(&t.app, "s").await.len(), 5);
}

async fn a_fork_keeps_the_compactions_within_it(db: TestDb) {
    let t = RunsApp::new(db).await;
    let items = append_messages(&t.app, "c", 40).await;
    let compaction = t
        .app
        .post("/v1/sessions/c/compact", json!({"keep_recent_items": 6}))
        .await
        .expect(StatusCode::CREATED);
    fork(&t.app, "c", json!({"id": "within", "through_item_id": items[35]["id"]})).await;
    let copied = compactions(&t.app, "within").await;
    assert_eq!(copied.len(), 1);
    assert_ne!(copied[0]["id"], compaction["id"]);
    assert_eq!(copied[0]["summary"], compaction["summary"]);
    assert_eq!(copied[0]["through_seq"], 34);
    let fork_items = stored_items(&t.app, "within").await;
    assert_eq!(copied[0]["through_item_id"], fork_items[33]["id"]);
    let entries = context(&t.app, "within").await;
    assert_eq!(entries.len(), 3, "the summary and items 35 and 36");
    assert_eq!(entries[2], items[35]["item"]);

    fork(&t.app, "c", json!({"id": "before", "through_item_id": items[20]["id"]})).await;
    assert!(compactions(&t.app, "before").await.is_empty());
    assert_eq!(compactions(&t.app, "c").await.len(), 1);
}

async fn forks_refuse_bad_input_with_the_codes_design_names(db: TestDb) {
    let t = RunsApp::new(db).await;
    let items = append_messages(&t.app, "a", 2).await;
    let other = append_messages(&t.app, "b", 1).await;
    let run =
        t.app.post("/v1/sessions/b/runs", json!({"input": "hi"})).await.expect(StatusCode::OK);
    let both = json!({"through_item_id": items[0]["id"], "before_run_id": run["id"]});
    let detail = t
        .app
        .post("/v1/sessions/a/fork", both)
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.contains("before_run_id"), "{detail}");
    for (body, field) in [
        (json!({"through_item_id": "nope"}), "through_item_id"),
        (json!({"id": "no spaces"}), "id"),
        (json!({"metadata": {"k": 1}}), "metadata"),
        (json!({"parent": "x"}), "parent"),
    ] {
        let detail = t
            .app
            .post("/v1/sessions/a/fork", body.clone())
            .await
            .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
        assert!(detail.contains(field), "{body}: {detail}");
    }
    t.app
        .post("/v1/sessions/a/fork", json!({"through_item_id": other[0]["id"]}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "item_not_found");
    t.app
        .post("/v1/sessions/a/fork", json!({"before_run_id": run["id"]}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "run_not_found");
    t.app
        .post("/v1/sessions/nope/fork", json!({}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    t.app
        .post("/v1/sessions/a/fork", json!({"id": "b"}))
        .await
        .expect_problem(StatusCode::CONFLICT, "session_exists");
    assert_eq!(stored_items(&t.app, "b").await.len(), 3, "the taken id is untouched");
}

async fn a_fork_retried_with_its_idempotency_key_is_made_once(db: TestDb) {
    let t = RunsApp::new(db).await;
    append_messages(&t.app, "k", 2).await;
    let send = |body: Value| {
        let request = Request::post("/v1/sessions/k/fork")
            .header("content-type", "application/json")
            .header("idempotency-key", "fork-1")
            .body(Body::from(body.to_string()))
            .unwrap();
        t.app.send(request)
    };
    let first = send(json!({})).await;
    let fork = first.expect(StatusCode::CREATED);
    let again = send(json!({})).await;
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.expect(StatusCode::CREATED)["id"], fork["id"]);
    let sessions = t.app.get("/v1/sessions").await.expect(StatusCode::OK);
    assert_eq!(sessions["data"].as_array().unwrap().len(), 2);
    send(json!({"id": "other"}))
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused");
}
