//! Every way the LLM can fail ends the run with a stable code and leaves the history
//! exactly as it was.

use axum::http::StatusCode;
use serde_json::json;

use super::RunsApp;
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, TestDb};

on_both_backends!(llm_failures_fail_the_run_and_keep_the_history);

async fn llm_failures_fail_the_run_and_keep_the_history(db: TestDb) {
    let t = RunsApp::configured(db, |c| c.llm_max_retries = 1).await;
    t.app
        .post(
            "/v1/sessions/f/items",
            json!({"items": [{"role": "user", "content": "before"}]}),
        )
        .await
        .expect(StatusCode::CREATED);
    let before = t.items("f").await;
    let cases = [
        (vec![Reply::status(429), Reply::status(429)], "llm_rate_limited"),
        (vec![Reply::status(500), Reply::status(503)], "llm_unavailable"),
        (vec![Reply::status(401)], "llm_auth_failed"),
        (
            vec![Reply::Status {
                status: 400,
                retry_after: None,
                body: json!({"error": {"message": "This model's maximum context length is 8192 tokens", "code": "context_length_exceeded"}}).to_string(),
            }],
            "context_too_long",
        ),
        (vec![Reply::Malformed], "llm_bad_response"),
        (vec![Reply::Truncated], "llm_bad_response"),
        (vec![Reply::Hang, Reply::Hang], "llm_timeout"),
    ];
    for (replies, code) in cases {
        for reply in replies {
            t.llm.push(reply);
        }
        let run = t
            .app
            .post("/v1/sessions/f/runs", json!({"input": "again"}))
            .await
            .expect(StatusCode::OK);
        assert_eq!(run["status"], "failed", "{code}: {run}");
        assert_eq!(run["error"]["code"], code, "{run}");
        assert_eq!(t.items("f").await, before, "{code} changed the history");
    }
    // The retried 429 and 500 came back, and the next run succeeds.
    t.llm.push(Reply::status(500));
    t.llm.push(Reply::text("recovered"));
    let run = t
        .app
        .post("/v1/sessions/f/runs", json!({"input": "again"}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(t.items("f").await.len(), before.len() + 2);
}

#[tokio::test]
async fn a_run_with_too_much_input_for_its_budget_fails_before_calling() {
    let t = RunsApp::new(TestDb::sqlite().await).await;
    let run = t
        .app
        .post(
            "/v1/sessions/b/runs",
            json!({"input": "x".repeat(4000), "agent": {"context": {"max_input_tokens": 100}}}),
        )
        .await
        .expect(StatusCode::OK);
    assert_eq!(run["error"]["code"], "context_too_long");
    assert!(t.llm.requests().is_empty());
    t.app
        .post(
            "/v1/sessions/b/runs",
            json!({"input": "x", "agent": {"context": {"strategy": "compact"}}}),
        )
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "not_implemented");
}

#[tokio::test]
async fn truncation_keeps_calls_with_their_outputs() {
    let t = RunsApp::new(TestDb::sqlite().await).await;
    let long = "y".repeat(600);
    t.app
        .post(
            "/v1/sessions/t/items",
            json!({"items": [
                {"role": "user", "content": long},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": long},
                {"role": "user", "content": "recent"},
            ]}),
        )
        .await
        .expect(StatusCode::CREATED);
    t.llm.push(Reply::text("ok"));
    t.app
        .post(
            "/v1/sessions/t/runs",
            json!({"input": "now", "agent": {"instructions": "sys", "context": {"max_input_tokens": 260}}}),
        )
        .await
        .expect(StatusCode::OK);
    let messages = t.llm.requests()[0]["messages"].as_array().unwrap().clone();
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages.last().unwrap()["content"], "now");
    let calls = messages
        .iter()
        .filter(|m| m.get("tool_calls").is_some())
        .count();
    let outputs = messages.iter().filter(|m| m["role"] == "tool").count();
    assert_eq!(calls, outputs, "{messages:?}");
    assert!(messages.iter().any(|m| m["content"] == "recent"));
    assert!(
        messages.len() < 6,
        "the oldest history was dropped: {messages:?}"
    );
}
