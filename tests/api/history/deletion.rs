//! Deletion sticks: what a pop, an item delete, a clear or a session delete removes is
//! found in no table afterwards — not in runs, run events, idempotency responses or
//! compactions either.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::json;

use super::append;
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, TestDb};
use crate::runs::RunsApp;

on_both_backends!(removed_content_is_gone_from_every_table, an_item_no_run_made_takes_no_run);

async fn assert_gone(db: &TestDb, canaries: &[&str], after: &str) {
    let dump = db.dump().await;
    for canary in canaries {
        assert!(!dump.contains(canary), "{canary} is still stored after {after}");
    }
}

async fn removed_content_is_gone_from_every_table(db: TestDb) {
    let t = RunsApp::new(db.clone_handle()).await;
    let keyed = Request::post("/v1/sessions/d/items")
        .header("content-type", "application/json")
        .header("idempotency-key", "first")
        .body(Body::from(
            json!({"items": [{"role": "user", "content": "CANARY-APPENDED"}]}).to_string(),
        ))
        .unwrap();
    let appended = t.app.send(keyed).await.expect(StatusCode::CREATED);
    t.llm.push(Reply::text("CANARY-ANSWER from the model"));
    let run = t
        .app
        .post("/v1/sessions/d/runs", json!({"input": "CANARY-QUESTION?"}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(run["status"], "completed", "{run}");
    t.llm.push_summary(Reply::text("CANARY-SUMMARY of it all"));
    t.app
        .post("/v1/sessions/d/compact", json!({"keep_recent_items": 1}))
        .await
        .expect(StatusCode::CREATED);
    let dump = db.dump().await;
    for canary in ["CANARY-APPENDED", "CANARY-ANSWER", "CANARY-QUESTION", "CANARY-SUMMARY"] {
        assert!(dump.contains(canary), "{canary} was stored in the first place");
    }

    // A pop of the run's answer takes the run (its input and output) with it.
    let popped = t.app.delete("/v1/sessions/d/items/last").await.expect(StatusCode::OK);
    assert!(popped.to_string().contains("CANARY-ANSWER"), "{popped}");
    assert_gone(&db, &["CANARY-ANSWER"], "the pop").await;
    t.app
        .get(&format!("/v1/sessions/d/runs/{}", run["id"].as_str().unwrap()))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "run_not_found");

    // Deleting the first item takes the compaction that summarised it.
    let first = appended["data"][0]["id"].as_str().unwrap();
    t.app.delete(&format!("/v1/sessions/d/items/{first}")).await.expect(StatusCode::NO_CONTENT);
    assert_gone(&db, &["CANARY-APPENDED", "CANARY-SUMMARY"], "the item delete").await;
    // The key's replay holds no copy, and appends nothing again.
    let replay = Request::post("/v1/sessions/d/items")
        .header("content-type", "application/json")
        .header("idempotency-key", "first")
        .body(Body::from(
            json!({"items": [{"role": "user", "content": "CANARY-APPENDED"}]}).to_string(),
        ))
        .unwrap();
    let replayed = t.app.send(replay).await.expect(StatusCode::CREATED);
    assert_eq!(replayed["data"], json!([]));
    assert_gone(&db, &["CANARY-APPENDED"], "a replay").await;

    // A clear takes what is left.
    t.app.delete("/v1/sessions/d/items").await.expect(StatusCode::NO_CONTENT);
    assert_gone(&db, &["CANARY-QUESTION"], "the clear").await;

    // A session delete takes everything of it.
    t.llm.push(Reply::text("CANARY-LATER answer"));
    t.app
        .post("/v1/sessions/d/runs", json!({"input": "CANARY-AGAIN"}))
        .await
        .expect(StatusCode::OK);
    t.app.delete("/v1/sessions/d").await.expect(StatusCode::NO_CONTENT);
    assert_gone(&db, &["CANARY-LATER", "CANARY-AGAIN"], "the session delete").await;
    assert!(db.strings("select id from sessions").await.is_empty());
}

/// An item a client appended belongs to no run: deleting or popping it leaves every run,
/// and every response chained from one, in place.
async fn an_item_no_run_made_takes_no_run(db: TestDb) {
    let t = RunsApp::new(db).await;
    let conversation = t.app.post("/v1/conversations", json!({})).await.expect(StatusCode::OK);
    let id = conversation["id"].as_str().unwrap();
    let say = |content: &str| vec![json!({"role": "user", "content": content})];
    append(&t.app, id, say("first")).await;
    t.llm.push(Reply::text("answer"));
    let response = t
        .app
        .post("/v1/responses", json!({"input": "question", "conversation": id}))
        .await
        .expect(StatusCode::OK);
    let response_id = response["id"].as_str().unwrap();
    let later = append(&t.app, id, say("later")).await;
    let later = later[0]["id"].as_str().unwrap();

    t.app.delete(&format!("/v1/sessions/{id}/items/{later}")).await.expect(StatusCode::NO_CONTENT);
    append(&t.app, id, say("again")).await;
    let popped =
        t.app.delete(&format!("/v1/sessions/{id}/items/last")).await.expect(StatusCode::OK);
    assert_eq!(popped["item"]["content"], "again", "{popped}");
    let first = t.items(id).await;
    assert_eq!(first.len(), 3, "first, question, answer: {first:?}");

    let runs = t.app.get(&format!("/v1/sessions/{id}/runs")).await.expect(StatusCode::OK);
    assert_eq!(runs["data"].as_array().unwrap().len(), 1, "{runs}");
    let retrieved = t.app.get(&format!("/v1/responses/{response_id}")).await.expect(StatusCode::OK);
    assert_eq!(retrieved["status"], "completed", "{retrieved}");
    t.llm.push(Reply::text("chained"));
    t.app
        .post("/v1/responses", json!({"input": "next", "previous_response_id": response_id}))
        .await
        .expect(StatusCode::OK);

    // The run's own item still takes the run with it.
    let stored =
        t.app.get(&format!("/v1/sessions/{id}/items?limit=10")).await.expect(StatusCode::OK);
    let answer =
        stored["data"].as_array().unwrap().iter().find(|i| !i["run_id"].is_null()).unwrap();
    let answer = answer["id"].as_str().unwrap();
    t.app.delete(&format!("/v1/sessions/{id}/items/{answer}")).await.expect(StatusCode::NO_CONTENT);
    t.app.get(&format!("/v1/responses/{response_id}")).await.expect(StatusCode::NOT_FOUND);
}
