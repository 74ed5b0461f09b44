//! Runs end to end: the API, the worker pool and the in-process fake LLM.

mod approvals;
mod chat;
mod chat_tools;
mod combined_creations;
mod double_texting;
mod draining;
mod examples;
mod failures;
mod full_disk;
mod handover;
mod kept_history;
mod lost_workers;
mod metrics;
mod modes;
mod openai;
mod queue;
mod retries;
mod stopping;
mod tools;
mod translator;
pub mod webhooks;

use axum::http::StatusCode;
use serde_json::Value;

use crate::fake_llm::FakeLlm;
use crate::helpers::{test_config, TestApp, TestDb};

/// An app whose runs call a fresh fake LLM.
pub struct RunsApp {
    pub app: TestApp,
    pub llm: FakeLlm,
}

impl RunsApp {
    pub async fn new(db: TestDb) -> Self {
        Self::configured(db, |_| {}).await
    }

    pub async fn configured(
        db: TestDb, change: impl FnOnce(&mut agent_sessions::config::Config),
    ) -> Self {
        let llm = FakeLlm::start().await;
        let mut config = test_config();
        config.llm_base_url = llm.base_url();
        config.llm_idle_timeout_secs = 1;
        change(&mut config);
        Self { app: TestApp::new(db, &config), llm }
    }

    /// The items of a session, as stored objects.
    pub async fn items(&self, session: &str) -> Vec<Value> {
        let page = self
            .app
            .get(&format!("/v1/sessions/{session}/items?limit=1000"))
            .await
            .expect(StatusCode::OK);
        page["data"].as_array().unwrap().iter().map(|i| i["item"].clone()).collect()
    }
}

/// A webhook tool served on a port of its own, answering `result of {arguments}`.
pub struct ToolHook {
    /// The tool, as an agent lists it.
    pub tool: Value,
    /// The host to allow.
    pub host: String,
    /// The calls it received, as posted.
    pub calls: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
}

impl ToolHook {
    pub async fn start(name: &str) -> Self {
        Self::answering_after(name, std::time::Duration::ZERO).await
    }

    /// A hook that answers each call after `delay`.
    pub async fn answering_after(name: &str, delay: std::time::Duration) -> Self {
        let calls: std::sync::Arc<std::sync::Mutex<Vec<Value>>> = std::sync::Arc::default();
        let seen = std::sync::Arc::clone(&calls);
        let hook = axum::Router::new().route(
            "/tool",
            axum::routing::post(move |axum::Json(call): axum::Json<Value>| async move {
                seen.lock().unwrap().push(call.clone());
                tokio::time::sleep(delay).await;
                format!("result of {}", call["arguments"].as_str().unwrap_or_default())
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let host = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(listener, hook).await });
        let webhook = serde_json::json!({"url": format!("http://{host}/tool"), "timeout_ms": 2000});
        let tool = serde_json::json!({"type": "function", "name": name, "webhook": webhook});
        Self { tool, host, calls }
    }

    /// The tool, its calls approved by a person first.
    pub fn approved(&self) -> Value {
        let mut tool = self.tool.clone();
        tool["require_approval"] = "always".into();
        tool
    }

    /// The call ids it was called with.
    pub fn called(&self) -> Vec<String> {
        let calls = self.calls.lock().unwrap();
        calls.iter().map(|c| c["call_id"].as_str().unwrap_or_default().to_owned()).collect()
    }
}

/// Waits until the fake LLM has been called `calls` times, then long enough for what it
/// streams first to reach the run and the database.
pub async fn until_called(llm: &FakeLlm, calls: usize) {
    for _ in 0..500 {
        if llm.requests().len() >= calls {
            tokio::time::sleep(std::time::Duration::from_millis(400)).await;
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the LLM was not called {calls} times");
}

/// Server-sent events as (event, id, data).
pub fn parse_sse(text: &str) -> Vec<(String, i64, Value)> {
    text.split("\n\n")
        .filter_map(|block| {
            let mut event = None;
            let mut id = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    event = Some(v.trim().to_owned());
                } else if let Some(v) = line.strip_prefix("id:") {
                    id = v.trim().parse().ok();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.strip_prefix(' ').unwrap_or(v));
                }
            }
            Some((event?, id?, serde_json::from_str(&data).ok()?))
        })
        .collect()
}
