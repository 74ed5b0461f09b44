use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::{append, append_messages, compactions, context, stored_items};
use crate::fake_llm::{is_summary_request, Reply};
use crate::helpers::{on_both_backends, TestDb};
use crate::runs::RunsApp;

on_both_backends!(
    compacting_forty_items_keeps_six_and_summarises_the_rest,
    a_tool_pair_on_the_boundary_is_kept_whole,
    compaction_refuses_bad_input_with_the_codes_design_names,
    a_failing_summariser_stores_nothing,
    deleting_summarised_items_drops_their_compactions,
    a_compaction_with_a_stale_if_match_calls_no_llm,
);

async fn a_compaction_with_a_stale_if_match_calls_no_llm(db: TestDb) {
    let t = RunsApp::new(db).await;
    append_messages(&t.app, "c", 10).await;
    let revision = t.app.get("/v1/sessions/c").await.expect(StatusCode::OK)["revision"].clone();
    let compact = |tag: String| {
        let request = axum::http::Request::post("/v1/sessions/c/compact")
            .header("content-type", "application/json")
            .header("if-match", tag)
            .body(axum::body::Body::from(r#"{"keep_recent_items": 2}"#))
            .unwrap();
        t.app.send(request)
    };
    let stale = compact("\"99\"".into()).await;
    stale.expect_problem(StatusCode::PRECONDITION_FAILED, "revision_mismatch");
    assert!(t.llm.requests().is_empty(), "no summary was asked for");
    let made = compact(format!("\"{revision}\"")).await;
    made.expect(StatusCode::CREATED);
    let after = t.app.get("/v1/sessions/c").await.expect(StatusCode::OK)["revision"].clone();
    assert_eq!(after.as_i64(), revision.as_i64().map(|r| r + 1));
}

/// The text the fake was asked to summarise in its `n`th summarising request.
fn summarised_text(t: &RunsApp, n: usize) -> String {
    let requests: Vec<Value> = t.llm.requests().into_iter().filter(is_summary_request).collect();
    let messages = requests[n]["messages"].as_array().unwrap();
    messages.last().unwrap()["content"].as_str().unwrap().to_owned()
}

async fn compacting_forty_items_keeps_six_and_summarises_the_rest(db: TestDb) {
    let t = RunsApp::new(db).await;
    let items = append_messages(&t.app, "c", 40).await;
    let compaction = t
        .app
        .post("/v1/sessions/c/compact", json!({"keep_recent_items": 6}))
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(compaction["session_id"], "c");
    assert_eq!(compaction["through_seq"], 34);
    assert_eq!(compaction["through_item_id"], items[33]["id"]);
    assert_eq!(compaction["items_compacted"], 34);
    assert_eq!(compaction["summary"], "summary 1");
    assert_eq!(compaction["model"], "test-model");
    assert_eq!(compaction["run_id"], Value::Null);
    assert_eq!(compaction["usage"]["llm_calls"], 1);
    assert_eq!(compaction["usage"]["input_tokens"], 12);

    let text = summarised_text(&t, 0);
    assert!(text.contains("user: message 0\n"), "{text}");
    assert!(text.contains("user: message 33\n"), "{text}");
    assert!(!text.contains("message 34"), "{text}");
    let prompt = &t.llm.requests()[0]["messages"][0];
    assert_eq!(prompt["role"], "system");
    assert!(prompt["content"].as_str().unwrap().contains("decision"));

    let entries = context(&t.app, "c").await;
    assert_eq!(entries.len(), 7);
    assert_eq!(entries[0], json!({"type": "compaction", "summary": "summary 1"}));
    assert_eq!(entries[1], items[34]["item"]);
    assert_eq!(entries[6], items[39]["item"]);
    assert_eq!(stored_items(&t.app, "c").await.len(), 40, "items stay");
    let session = t.app.get("/v1/sessions/c").await.expect(StatusCode::OK);
    assert_eq!(session["usage"]["llm_calls"], 1);

    // A second compaction folds the first summary in.
    append_messages(&t.app, "c", 10).await;
    let second = t
        .app
        .post("/v1/sessions/c/compact", json!({"instructions": "Be terse.", "model": "summariser"}))
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(second["items_compacted"], 40);
    assert_eq!(second["through_seq"], 40);
    assert_eq!(second["model"], "summariser");
    let text = summarised_text(&t, 1);
    assert!(text.contains("summary 1"), "{text}");
    assert!(!text.contains("message 33\n"), "{text}");
    let sent = t.llm.requests()[1].clone();
    assert_eq!(sent["model"], "summariser");
    assert_eq!(sent["messages"][0]["content"], "Be terse.");
    let listed = compactions(&t.app, "c").await;
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["id"], second["id"], "newest first");
    assert_eq!(context(&t.app, "c").await.len(), 11);
}

async fn a_tool_pair_on_the_boundary_is_kept_whole(db: TestDb) {
    let t = RunsApp::new(db).await;
    append_messages(&t.app, "t", 33).await;
    let call = json!({"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{\"city\":\"Oslo\"}"});
    let output = json!({"type": "function_call_output", "call_id": "c1", "output": "-3 C"});
    append(&t.app, "t", vec![call.clone(), output.clone()]).await;
    append_messages(&t.app, "t", 5).await;
    let compaction = t
        .app
        .post("/v1/sessions/t/compact", json!({"keep_recent_items": 6}))
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(compaction["through_seq"], 33);
    let entries = context(&t.app, "t").await;
    assert_eq!(entries.len(), 8, "the summary and 7 items");
    assert_eq!(entries[1], call);
    assert_eq!(entries[2], output);
    assert!(!summarised_text(&t, 0).contains("c1"));

    // A pair inside the summarised part is rendered into the text.
    t.app.delete("/v1/sessions/t/items").await;
    append(&t.app, "t", vec![call, output]).await;
    append_messages(&t.app, "t", 1).await;
    t.app
        .post("/v1/sessions/t/compact", json!({"keep_recent_items": 1}))
        .await
        .expect(StatusCode::CREATED);
    let text = summarised_text(&t, 1);
    assert!(text.contains("weather"), "{text}");
    assert!(text.contains("Oslo"), "{text}");
    assert!(text.contains("-3 C"), "{text}");
}

async fn compaction_refuses_bad_input_with_the_codes_design_names(db: TestDb) {
    let t = RunsApp::new(db).await;
    append_messages(&t.app, "b", 5).await;
    let cases = [
        (json!({"keep_recent_items": -1}), "keep_recent_items"),
        (json!({"keep_recent_items": 1001}), "keep_recent_items"),
        (json!({"keep_recent_items": "3"}), "keep_recent_items"),
        (json!({"model": ""}), "model"),
        (json!({"keep": 3}), "keep"),
    ];
    for (body, field) in cases {
        let detail = t
            .app
            .post("/v1/sessions/b/compact", body.clone())
            .await
            .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
        assert!(detail.contains(field), "{body}: {detail}");
    }
    t.app
        .post("/v1/sessions/b/compact", json!({}))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "nothing_to_compact");
    t.app
        .post("/v1/sessions/b/compact", json!({"keep_recent_items": 5}))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "nothing_to_compact");
    t.app
        .post("/v1/sessions/nope/compact", json!({}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    for path in ["compactions", "context"] {
        t.app
            .get(&format!("/v1/sessions/nope/{path}"))
            .await
            .expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    }
    // The provider refusing the model is its 4xx.
    t.llm.push_summary(Reply::status(404));
    t.app
        .post("/v1/sessions/b/compact", json!({"keep_recent_items": 1, "model": "no-such-model"}))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "llm_bad_request");

    // A run in flight makes the session busy.
    t.llm.push(Reply::Text {
        deltas: vec!["slow".into()],
        usage: None,
        delay: Duration::from_millis(500),
    });
    let run = t
        .app
        .post("/v1/sessions/b/runs", json!({"input": "hi", "background": true}))
        .await
        .expect(StatusCode::ACCEPTED);
    let detail = t
        .app
        .post("/v1/sessions/b/compact", json!({"keep_recent_items": 1}))
        .await
        .expect_problem(StatusCode::CONFLICT, "session_busy");
    assert!(detail.contains(run["id"].as_str().unwrap()), "{detail}");
    t.app.get(&format!("/v1/sessions/b/runs/{}/events", run["id"].as_str().unwrap())).await;
    assert!(compactions(&t.app, "b").await.is_empty());
}

async fn a_failing_summariser_stores_nothing(db: TestDb) {
    let t = RunsApp::new(db).await;
    append_messages(&t.app, "f", 12).await;
    t.llm.push_summary(Reply::status(500));
    t.app
        .post("/v1/sessions/f/compact", json!({}))
        .await
        .expect_problem(StatusCode::BAD_GATEWAY, "llm_unavailable");
    assert!(compactions(&t.app, "f").await.is_empty());
    assert_eq!(context(&t.app, "f").await.len(), 12);
    let session = t.app.get("/v1/sessions/f").await.expect(StatusCode::OK);
    assert_eq!(session["usage"]["llm_calls"], 0);
}

async fn deleting_summarised_items_drops_their_compactions(db: TestDb) {
    let t = RunsApp::new(db).await;
    let items = append_messages(&t.app, "d", 20).await;
    let compact = || t.app.post("/v1/sessions/d/compact", json!({"keep_recent_items": 5}));
    compact().await.expect(StatusCode::CREATED);
    // Popping or deleting a kept item leaves the summary: it covers none of them.
    t.app.delete("/v1/sessions/d/items/last").await.expect(StatusCode::OK);
    let kept = items[17]["id"].as_str().unwrap();
    t.app.delete(&format!("/v1/sessions/d/items/{kept}")).await.expect(StatusCode::NO_CONTENT);
    assert_eq!(compactions(&t.app, "d").await.len(), 1);
    assert_eq!(context(&t.app, "d").await.len(), 4);
    // Deleting a summarised item drops the summary that holds its content.
    let summarised = items[3]["id"].as_str().unwrap();
    t.app
        .delete(&format!("/v1/sessions/d/items/{summarised}"))
        .await
        .expect(StatusCode::NO_CONTENT);
    assert!(compactions(&t.app, "d").await.is_empty());
    let context_now = context(&t.app, "d").await;
    assert_eq!(context_now.len(), 17, "every item again");
    assert_eq!(context_now[0], items[0]["item"]);
    // Clearing the session drops every compaction.
    compact().await.expect(StatusCode::CREATED);
    t.app.delete("/v1/sessions/d/items").await.expect(StatusCode::NO_CONTENT);
    assert!(compactions(&t.app, "d").await.is_empty());
    assert!(context(&t.app, "d").await.is_empty());
}
