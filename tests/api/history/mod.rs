//! History that outlives the context window: compactions (explicit and inside runs) and
//! forks, end to end with the fake LLM.

mod auto_compaction;
mod compaction;
mod deletion;
mod encryption;
mod forks;
mod retention;

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::helpers::TestApp;

/// Appends `count` user messages `message 0`, `message 1`, … and returns the stored items.
pub async fn append_messages(app: &TestApp, session: &str, count: usize) -> Vec<Value> {
    let items: Vec<Value> =
        (0..count).map(|i| json!({"role": "user", "content": format!("message {i}")})).collect();
    append(app, session, items).await
}

/// Appends the items and returns them as stored.
pub async fn append(app: &TestApp, session: &str, items: Vec<Value>) -> Vec<Value> {
    let appended = app
        .post(&format!("/v1/sessions/{session}/items"), json!({ "items": items }))
        .await
        .expect(StatusCode::CREATED);
    appended["data"].as_array().unwrap().clone()
}

/// Every stored item of the session (id, seq, item…), oldest first.
pub async fn stored_items(app: &TestApp, session: &str) -> Vec<Value> {
    let page =
        app.get(&format!("/v1/sessions/{session}/items?limit=1000")).await.expect(StatusCode::OK);
    page["data"].as_array().unwrap().clone()
}

/// The session's `/context` entries.
pub async fn context(app: &TestApp, session: &str) -> Vec<Value> {
    let context = app.get(&format!("/v1/sessions/{session}/context")).await.expect(StatusCode::OK);
    context["data"].as_array().unwrap().clone()
}

/// The session's compactions, newest first.
pub async fn compactions(app: &TestApp, session: &str) -> Vec<Value> {
    let page = app.get(&format!("/v1/sessions/{session}/compactions")).await.expect(StatusCode::OK);
    page["data"].as_array().unwrap().clone()
}
