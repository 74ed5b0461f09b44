//! A run waiting for a person's approval is a row like any paused run: a process killed
//! with SIGKILL loses nothing of it, and the next process carries the approval out.

use serde_json::{json, Value};
use tempfile::TempDir;

use super::{client, Server};
use crate::fake_llm::{FakeLlm, Reply};
use crate::helpers::{get_json, scratch_postgres};
use crate::runs::ToolHook;

async fn an_approval_outlives_kill_9(database_url: &str) {
    let llm = FakeLlm::start().await;
    let hook = ToolHook::start("send").await;
    llm.push(Reply::tool_call("c1", "send", r#"{"to":"ops"}"#));
    llm.set_default(Reply::text("sent"));
    let env = [
        ("LLM_BASE_URL", llm.base_url()),
        ("LLM_MODEL", "test-model".to_owned()),
        ("LLM_MAX_RETRIES", "0".to_owned()),
        ("TOOL_WEBHOOK_ALLOWED_HOSTS", hook.host.clone()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let http = client();

    let mut first = Server::start_with(database_url, &env).await;
    let body = json!({"input": "tell ops", "agent": {"tools": [hook.approved()]}});
    let run: Value = (http.post(first.url("/v1/sessions/k/runs")).json(&body).send().await)
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(run["required_action"]["type"], "approve_tool_calls", "{run}");
    first.signal("-KILL");
    first.child.wait().await.unwrap();

    let second = Server::start_with(database_url, &env).await;
    let path = format!("/v1/sessions/k/runs/{}", run["id"].as_str().unwrap());
    let waiting = get_json(&http, second.url(&path)).await;
    assert_eq!(waiting["status"], "requires_action");
    assert_eq!(waiting["required_action"], run["required_action"]);
    let approvals = json!({"approvals": [{"call_id": "c1", "approve": true}]});
    let response = http.post(second.url(&format!("{path}/approvals"))).json(&approvals).send();
    let done: Value = response.await.unwrap().json().await.unwrap();
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(hook.called(), ["c1"]);
    let items = get_json(&http, second.url("/v1/sessions/k/items")).await;
    assert_eq!(items["data"].as_array().unwrap().len(), 4, "{items}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_outlives_kill_9_on_sqlite() {
    let dir = TempDir::new().unwrap();
    an_approval_outlives_kill_9(&format!("sqlite://{}", dir.path().join("a.db").display())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_outlives_kill_9_on_postgres() {
    let database = scratch_postgres().await;
    an_approval_outlives_kill_9(&database.url).await;
    database.drop().await;
}
