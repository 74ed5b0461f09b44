//! A completion webhook's delivery is a row: a process killed with SIGKILL before the
//! receiver took it leaves it to the next process, which delivers it.

use std::sync::atomic::Ordering;

use serde_json::{json, Value};
use tempfile::TempDir;

use super::{client, Server};
use crate::fake_llm::{FakeLlm, Reply};
use crate::helpers::{get_json, scratch_postgres};
use crate::runs::webhooks::{verify, Receiver, SECRET};

async fn a_delivery_outlives_kill_9(database_url: &str) {
    let llm = FakeLlm::start().await;
    llm.set_default(Reply::text("done"));
    let receiver = Receiver::start(usize::MAX).await;
    let env = [
        ("LLM_BASE_URL", llm.base_url()),
        ("LLM_MODEL", "test-model".to_owned()),
        ("TOOL_WEBHOOK_ALLOWED_HOSTS", receiver.host.clone()),
        ("WEBHOOK_SIGNING_SECRET", SECRET.to_owned()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let http = client();

    let mut first = Server::start_with(database_url, &env).await;
    let body = json!({"input": "hi", "webhook": {"url": receiver.url}});
    let run: Value = (http.post(first.url("/v1/sessions/d/runs")).json(&body).send().await)
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(run["status"], "completed", "{run}");
    let path = format!("/v1/sessions/d/runs/{}", run["id"].as_str().unwrap());
    // Killed once a failed attempt is recorded, not while one is in flight.
    for _ in 0..100 {
        let shown = get_json(&http, first.url(&path)).await;
        if shown["webhook"]["attempts"].as_u64() >= Some(1) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    first.signal("-KILL");
    first.child.wait().await.unwrap();
    receiver.failures.store(0, Ordering::SeqCst);

    let second = Server::start_with(database_url, &env).await;
    let mut shown = json!(null);
    for _ in 0..200 {
        shown = get_json(&http, second.url(&path)).await;
        if shown["webhook"]["status"] == "delivered" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(shown["webhook"]["status"], "delivered", "{shown}");
    let posts = receiver.posts(2).await;
    let (headers, body) = posts.last().unwrap();
    verify(headers, body);
    assert!(posts.iter().all(|(h, _)| h["webhook-id"] == posts[0].0["webhook-id"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_outlives_kill_9_on_sqlite() {
    let dir = TempDir::new().unwrap();
    a_delivery_outlives_kill_9(&format!("sqlite://{}", dir.path().join("w.db").display())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_outlives_kill_9_on_postgres() {
    let database = scratch_postgres().await;
    a_delivery_outlives_kill_9(&database.url).await;
    database.drop().await;
}
