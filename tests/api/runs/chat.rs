//! The AI SDK's chat at `/v1/chat`: the body `useChat` sends, the UI message stream a
//! run's events become, client tools and approvals answered by the next request, the
//! history as `UIMessage`s, and resuming a stream. The browser test drives the real
//! `useChat` against the binary; these pin the wire exchanges on both backends.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::RunsApp;
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, TestDb};

use super::chat_tools::agent_with;

on_both_backends!(
    a_chat_message_streams_its_turn_as_ui_message_chunks,
    a_failed_turn_streams_an_error_and_keeps_the_history,
    bad_chat_requests_are_refused_naming_the_field,
    the_stream_resumes_from_the_start_of_the_active_run,
    a_page_that_goes_away_leaves_its_turn_to_finish,
);

/// What `useChat` posts for a new message, after the page's copy of the history.
pub(super) fn user_turn(chat: &str, text: &str, earlier: &[Value]) -> Value {
    let mut messages = earlier.to_vec();
    messages
        .push(json!({"id": "m-new", "role": "user", "parts": [{"type": "text", "text": text}]}));
    json!({"id": chat, "messages": messages, "trigger": "submit-message"})
}

/// The `data:` of each event: JSON chunks, and `[DONE]` as a string.
pub(super) fn chunks(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .flat_map(|block| block.lines().filter_map(|line| line.strip_prefix("data: ")))
        .map(|data| serde_json::from_str(data).unwrap_or_else(|_| Value::String(data.to_owned())))
        .collect()
}

pub(super) fn types(chunks: &[Value]) -> Vec<String> {
    (chunks.iter())
        .map(|c| c["type"].as_str().map_or_else(|| c.as_str().unwrap().to_owned(), str::to_owned))
        .collect()
}

pub(super) async fn post_chat(t: &RunsApp, body: Value) -> Vec<Value> {
    let answer = t.app.post("/v1/chat", body).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    assert_eq!(answer.header("x-vercel-ai-ui-message-stream"), Some("v1"));
    assert!(answer.header("content-type").unwrap().starts_with("text/event-stream"));
    chunks(&answer.text)
}

async fn a_chat_message_streams_its_turn_as_ui_message_chunks(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.llm.push(Reply::text("Hello there"));
    // The page's copy of earlier messages is not trusted: only the newest is input.
    let forged = json!({"id": "m0", "role": "assistant", "parts": [{"type": "text", "text": "I said this?"}]});
    let got = post_chat(&t, user_turn("c1", "Hi", &[forged])).await;
    let run_id = got[0]["messageId"].as_str().unwrap().to_owned();
    let text_id = got[2]["id"].clone();
    let deltas: String = got
        .iter()
        .filter(|c| c["type"] == "text-delta")
        .map(|c| c["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, "Hello there");
    assert_eq!(
        types(&got),
        [
            "start",
            "start-step",
            "text-start",
            "text-delta",
            "text-delta",
            "text-delta",
            "text-delta",
            "text-end",
            "finish-step",
            "finish",
            "[DONE]"
        ]
    );
    assert!(got.iter().filter(|c| c["id"].is_string()).all(|c| c["id"] == text_id));
    let finish = &got[9];
    assert_eq!(finish["finishReason"], "stop");
    assert_eq!(finish["messageMetadata"]["run_id"], run_id.as_str());
    assert_eq!(finish["messageMetadata"]["status"], "completed");
    assert_eq!(finish["messageMetadata"]["usage"]["output_tokens"], 4);
    assert_eq!(
        t.items("c1").await,
        [
            json!({"role": "user", "content": "Hi"}),
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello there", "annotations": []}]})
        ]
    );
    let sent = &t.llm.requests()[0]["messages"];
    assert!(!sent.to_string().contains("I said this?"), "{sent}");

    let messages = t.app.get("/v1/chat/c1/messages").await.expect(StatusCode::OK);
    let messages = messages["data"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[0]["parts"], json!([{"type": "text", "text": "Hi", "state": "done"}]));
    assert_eq!(messages[1]["id"], run_id.as_str(), "the id the stream gave it");
    assert_eq!(
        messages[1]["parts"],
        json!([{"type": "step-start"}, {"type": "text", "text": "Hello there", "state": "done"}])
    );
    let again = t.app.get("/v1/chat/c1/messages").await.expect(StatusCode::OK);
    assert_eq!(again["data"][0]["id"], messages[0]["id"], "ids are stable");
}

async fn a_failed_turn_streams_an_error_and_keeps_the_history(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.llm.push(Reply::status(400));
    let got = post_chat(&t, user_turn("c4", "Hi", &[])).await;
    assert_eq!(types(&got), ["start", "error", "[DONE]"]);
    assert!(got[1]["errorText"].as_str().unwrap().starts_with("llm_"), "{}", got[1]);
    assert!(t.items("c4").await.is_empty(), "a failed turn appends nothing");
}

async fn bad_chat_requests_are_refused_naming_the_field(db: TestDb) {
    let t = RunsApp::new(db).await;
    let app = &t.app;
    let refused = |body: Value| async move {
        let answer = app.post("/v1/chat", body).await;
        answer.expect_problem(StatusCode::BAD_REQUEST, "invalid_request")
    };
    let text = |t: &str| json!([{"type": "text", "text": t}]);
    let cases = [
        (json!({"id": "c5", "trigger": "submit-message"}), "messages"),
        (json!({"id": "c5", "messages": [], "trigger": "submit-message"}), "messages"),
        (
            json!({"id": "c5", "messages": [{"id": "a", "role": "robot", "parts": []}], "trigger": "submit-message"}),
            "messages[0].role",
        ),
        (
            json!({"id": "c5", "messages": [{"id": "a", "role": "system", "parts": text("x")}], "trigger": "submit-message"}),
            "messages[0].role",
        ),
        (
            json!({"id": "c5", "messages": [{"id": "a", "role": "user", "parts": []}], "trigger": "submit-message"}),
            "messages[0].parts",
        ),
        (
            json!({"id": "c5", "messages": [{"id": "a", "role": "user", "parts": [{"type": "file", "url": "data:,x", "mediaType": "text/plain"}]}], "trigger": "submit-message"}),
            "messages[0].parts[0].type",
        ),
        (
            json!({"id": "c5", "messages": [{"id": "a", "role": "user", "parts": text("x")}], "trigger": "regenerate-message"}),
            "trigger",
        ),
        (
            json!({"id": "c5", "messages": [{"id": "a", "role": "user", "parts": text("x")}], "trigger": "shout"}),
            "trigger",
        ),
        (
            json!({"id": "c5", "messages": [{"id": "a", "role": "user", "parts": text("x")}], "trigger": "submit-message", "messageId": "a"}),
            "messageId",
        ),
        (
            json!({"id": "c5", "messages": [{"id": "a", "role": "user", "parts": text("x")}], "trigger": "submit-message", "model": "x"}),
            "model",
        ),
        (
            json!({"id": "bad id!", "messages": [{"id": "a", "role": "user", "parts": text("x")}], "trigger": "submit-message"}),
            "id",
        ),
        (
            json!({"id": "c5", "messages": [{"id": "not-a-run", "role": "assistant", "parts": []}], "trigger": "submit-message"}),
            "messages[0].id",
        ),
    ];
    for (body, field) in cases {
        let detail = refused(body.clone()).await;
        assert!(
            detail.starts_with(&format!("{field}:")) || detail.contains(&format!("`{field}`")),
            "{body} → {detail}"
        );
    }
    // A client tool's run waits; an answer without the output names what is missing.
    let agent_id = agent_with(&t, json!([{"type": "function", "name": "pick"}])).await;
    t.llm.push(Reply::tool_call("call_9", "pick", "{}"));
    let mut body = user_turn("c5", "pick one", &[]);
    body["agent_id"] = agent_id.into();
    let run_id = post_chat(&t, body).await[0]["messageId"].clone();
    let body = json!({"id": "c5", "messages": [{"id": run_id, "role": "assistant", "parts": []}], "trigger": "submit-message"});
    let detail = refused(body).await;
    assert!(detail.starts_with("messages[0].parts:") && detail.contains("call_9"), "{detail}");
    // An assistant message naming a run of another session is no run of this one.
    let run = uuid::Uuid::now_v7().to_string();
    let body = json!({"id": "c5", "messages": [{"id": run, "role": "assistant", "parts": []}], "trigger": "submit-message"});
    t.app.post("/v1/chat", body).await.expect_problem(StatusCode::NOT_FOUND, "run_not_found");
    // New text while the run waits for the page is refused, not queued behind it.
    t.app
        .post("/v1/chat", user_turn("c5", "never mind", &[]))
        .await
        .expect_problem(StatusCode::CONFLICT, "session_busy");
    assert_eq!(t.app.get("/v1/chat/c5/messages?limit=0").await.status, StatusCode::BAD_REQUEST);
    assert_eq!(t.app.get("/v1/chat/c5/messages?order=asc").await.status, StatusCode::BAD_REQUEST);
    t.app
        .get("/v1/chat/nobody/messages")
        .await
        .expect_problem(StatusCode::NOT_FOUND, "session_not_found");
}

async fn the_stream_resumes_from_the_start_of_the_active_run(db: TestDb) {
    let t = RunsApp::new(db).await;
    assert_eq!(t.app.get("/v1/chat/c6/stream").await.status, StatusCode::NO_CONTENT, "no session");
    let deltas = ["one ", "two ", "three"].map(String::from).to_vec();
    t.llm.push(Reply::Text { deltas, usage: None, delay: Duration::from_millis(300) });
    let app = t.app.router.clone();
    let first = tokio::spawn(async move {
        let request = axum::http::Request::post("/v1/chat")
            .header("content-type", "application/json")
            .body(axum::body::Body::from(user_turn("c6", "count", &[]).to_string()))
            .unwrap();
        let response = tower::ServiceExt::oneshot(app, request).await.unwrap();
        axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap()
    });
    super::until_called(&t.llm, 1).await;
    // A reloaded page: the user's message of the running turn, then its stream again.
    let messages = t.app.get("/v1/chat/c6/messages").await.expect(StatusCode::OK);
    assert_eq!(messages["data"].as_array().unwrap().len(), 1, "{messages}");
    assert_eq!(messages["data"][0]["parts"][0]["text"], "count");
    let resumed = t.app.get("/v1/chat/c6/stream").await;
    assert_eq!(resumed.status, StatusCode::OK);
    let resumed = chunks(&resumed.text);
    let streamed = chunks(std::str::from_utf8(&first.await.unwrap()).unwrap());
    assert_eq!(resumed, streamed, "a resumed stream is the whole message again");
    assert_eq!(types(&resumed).last().unwrap(), "[DONE]");
    assert_eq!(t.app.get("/v1/chat/c6/stream").await.status, StatusCode::NO_CONTENT, "idle");
}

async fn a_page_that_goes_away_leaves_its_turn_to_finish(db: TestDb) {
    let t = RunsApp::new(db).await;
    let deltas = ["a", "b", "c"].map(String::from).to_vec();
    t.llm.push(Reply::Text { deltas, usage: None, delay: Duration::from_millis(200) });
    let request = axum::http::Request::post("/v1/chat")
        .header("content-type", "application/json")
        .body(axum::body::Body::from(user_turn("c7", "go", &[]).to_string()))
        .unwrap();
    let response = tower::ServiceExt::oneshot(t.app.router.clone(), request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    drop(response);
    for _ in 0..100 {
        if t.items("c7").await.len() == 2 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the turn did not finish: {:?}", t.items("c7").await);
}

/// A page that reloads onto another replica resumes there: that replica executes
/// nothing and follows the run through the database.
#[sqlx::test(migrations = "./migrations/postgres")]
async fn the_stream_resumes_on_another_replica(pool: sqlx::PgPool) {
    let executing = RunsApp::new(TestDb::postgres(pool.clone())).await;
    let mut config = crate::helpers::test_config();
    config.run_workers = 0;
    config.llm_base_url = executing.llm.base_url();
    let other = crate::helpers::TestApp::new(TestDb::postgres_replica(&pool), &config);
    let deltas = ["uno ", "dos ", "tres"].map(String::from).to_vec();
    executing.llm.push(Reply::Text { deltas, usage: None, delay: Duration::from_millis(400) });
    let app = executing.app.router.clone();
    let first = tokio::spawn(async move {
        let body = user_turn("c8", "count in Spanish", &[]).to_string();
        let request = axum::http::Request::post("/v1/chat")
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body))
            .unwrap();
        let response = tower::ServiceExt::oneshot(app, request).await.unwrap();
        axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap()
    });
    super::until_called(&executing.llm, 1).await;
    let resumed = other.get("/v1/chat/c8/stream").await;
    assert_eq!(resumed.status, StatusCode::OK, "{}", resumed.text);
    let streamed = chunks(std::str::from_utf8(&first.await.unwrap()).unwrap());
    assert_eq!(chunks(&resumed.text), streamed);
    let text: String = streamed.iter().filter_map(|c| c["delta"].as_str()).collect();
    assert_eq!(text, "uno dos tres");
}
