//! Every way the LLM can fail ends the run with a stable code and leaves the history
//! exactly as it was.

use axum::http::StatusCode;
use serde_json::{json, Value};

use std::collections::BTreeMap;
use std::time::Duration;

use agent_sessions::model::{
    run_items, IfBusy, Metadata, NewRun, Order, PageRequest, RunConfig, RunStatus, SessionId,
    DEFAULT_TENANT,
};
use agent_sessions::store::{PgStore, RunStore, SessionStore, StartNow};
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

use super::RunsApp;
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, scratch_postgres, TestDb};

on_both_backends!(
    llm_failures_fail_the_run_and_keep_the_history,
    an_answer_cut_short_is_marked_incomplete,
);

async fn llm_failures_fail_the_run_and_keep_the_history(db: TestDb) {
    let t = RunsApp::configured(db, |c| c.llm_max_retries = 1).await;
    t.app
        .post("/v1/sessions/f/items", json!({"items": [{"role": "user", "content": "before"}]}))
        .await
        .expect(StatusCode::CREATED);
    let before = t.items("f").await;
    // (replies, code): every reply is one request the service made, and counts.
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
        let calls = replies.len();
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
        assert_eq!(run["usage"]["llm_calls"], calls, "{code}: {run}");
        assert_eq!(t.items("f").await, before, "{code} changed the history");
    }
    // The retried 429 and 500 came back, and the next run succeeds.
    t.llm.push(Reply::status(500));
    t.llm.push(Reply::text("recovered"));
    let run =
        t.app.post("/v1/sessions/f/runs", json!({"input": "again"})).await.expect(StatusCode::OK);
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["usage"]["llm_calls"], 2, "the failed attempt counts: {run}");
    assert_eq!(run["incomplete_details"], json!(null), "{run}");
    assert_eq!(t.items("f").await.len(), before.len() + 2);
}

async fn an_answer_cut_short_is_marked_incomplete(db: TestDb) {
    let t = RunsApp::new(db).await;
    for (finish_reason, reason) in
        [("length", "max_output_tokens"), ("content_filter", "content_filter")]
    {
        t.llm.push(Reply::Cut { text: "Once upon a".into(), reason: finish_reason.into() });
        let run = t
            .app
            .post("/v1/sessions/cut/runs", json!({"input": "a story"}))
            .await
            .expect(StatusCode::OK);
        assert_eq!(run["status"], "completed", "{run}");
        assert_eq!(run["incomplete_details"], json!({"reason": reason}), "{run}");
        let items = t.items("cut").await;
        let answer = items.last().unwrap();
        assert_eq!(answer["status"], "incomplete", "{answer}");
        assert_eq!(answer["content"][0]["text"], "Once upon a", "{answer}");
    }
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
            json!({"input": "x", "agent": {"context": {"strategy": "compact", "keep_recent_items": 1001}}}),
        )
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
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
    let calls = messages.iter().filter(|m| m.get("tool_calls").is_some()).count();
    let outputs = messages.iter().filter(|m| m["role"] == "tool").count();
    assert_eq!(calls, outputs, "{messages:?}");
    assert!(messages.iter().any(|m| m["content"] == "recent"));
    assert!(messages.len() < 6, "the oldest history was dropped: {messages:?}");
}

/// Postgres closes every connection while a run waits for the model (a restart under
/// load): a statement on a connection in steady use may fail (503, retryable), but the
/// run's outcome is stored once, without the run being executed again.
#[tokio::test]
async fn a_run_outlives_its_database_connections() {
    let scratch = scratch_postgres().await;
    let db = TestDb::postgres_at(&scratch.url).await;
    let t = RunsApp::new(db.clone_handle()).await;
    t.llm.set_default(Reply::Text {
        deltas: vec!["after".into()],
        usage: None,
        delay: Duration::from_millis(600),
    });
    let run = t.app.post("/v1/sessions/cut/runs", json!({"input": "hi"}));
    let cut = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        db.execute(
            "select pg_terminate_backend(pid) from pg_stat_activity \
             where datname = current_database() and pid <> pg_backend_pid()",
        )
        .await;
    };
    let (answer, ()) = tokio::join!(run, cut);
    assert!(
        [StatusCode::OK, StatusCode::SERVICE_UNAVAILABLE].contains(&answer.status),
        "{}",
        answer.json()
    );
    let mut status = Value::Null;
    for _ in 0..50 {
        let runs = t.app.get("/v1/sessions/cut/runs").await;
        if runs.status == StatusCode::OK {
            status = runs.json()["data"][0]["status"].clone();
            if status == "completed" {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, "completed");
    assert_eq!(t.llm.requests().len(), 1);
    assert_eq!(t.items("cut").await.len(), 2);
    drop(t);
    drop(db);
    scratch.drop().await;
}

/// A worker's final write on a connection the database closed since its last use (a
/// restart, within the half second the pool leaves connections unchecked) is made again
/// on a checked connection: the write holds the lease, the run is completed and its turn
/// stored once.
#[tokio::test]
async fn a_final_write_on_a_dropped_connection_is_made_again() {
    let scratch = scratch_postgres().await;
    // One connection, so the final write is certain to get the one the server closed.
    let store = PgStore::connect(&scratch.url, 1).await.unwrap();
    let mut raw = PgConnection::connect(&scratch.url).await.unwrap();
    let session = SessionId::parse("id", "dropped".into()).unwrap();
    let run = NewRun {
        id: Uuid::now_v7(),
        input: vec![run_items::user_message("hi")],
        config: RunConfig {
            model: "m".into(),
            instructions: None,
            temperature: None,
            max_output_tokens: None,
            tools: Vec::new(),
            max_turns: 1,
            max_repeated_tool_calls: 3,
            max_input_tokens: None,
            compaction: None,
            sampling: Default::default(),
            client_calls_complete: false,
            webhook: None,
        },
        metadata: Metadata::new(BTreeMap::new()).unwrap(),
        idempotency: None,
        if_match: None,
        request: None,
        trace_parent: None,
    };
    let start = StartNow { worker: Uuid::now_v7(), lease: Duration::from_secs(30) };
    let created = store
        .create_run(DEFAULT_TENANT, &session, run, IfBusy::Reject, Some(start), false)
        .await
        .unwrap();
    let claim = created.claim.expect("an idle session's run starts");
    let others = "select count(*) from pg_stat_activity \
                  where datname = current_database() and pid <> pg_backend_pid()";
    sqlx::query(&others.replace("count(*)", "pg_terminate_backend(pid)"))
        .execute(&mut raw)
        .await
        .unwrap();
    while sqlx::query_scalar::<_, i64>(others).fetch_one(&mut raw).await.unwrap() > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut record = claim.record.clone();
    record.run.output.push(run_items::user_message("there"));
    let last = record.end(RunStatus::Completed, None, claim.last_event_seq, chrono::Utc::now());
    assert!(store.finish_run(&claim, &record, &[last], None).await.unwrap().written);
    let stored = store.get_run(DEFAULT_TENANT, &session, record.run.id).await.unwrap();
    assert_eq!(stored.status, RunStatus::Completed);
    let newest = PageRequest { limit: 10, order: Order::Asc, cursor: None, created_after: None };
    let items = store.list_items(DEFAULT_TENANT, &session, &newest).await.unwrap();
    assert_eq!(items.data.len(), 2);
    raw.close().await.unwrap();
    drop(store);
    scratch.drop().await;
}
