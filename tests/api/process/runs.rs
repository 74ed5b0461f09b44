//! Runs across a killed process: the lease is all that tells a live worker from a dead one.

use std::time::Duration;

use serde_json::{json, Value};
use tempfile::TempDir;

use super::{client, Server};
use crate::fake_llm::{FakeLlm, Reply};
use crate::helpers::{get_json, scratch_postgres};

/// Starts a background run whose LLM call hangs, kills the process with SIGKILL while
/// the call is open, and starts a second process on the same database. Returns the run
/// as that process leaves it, the session's items and how many LLM calls were made.
async fn kill_9_mid_run(
    database_url: &str, max_attempts: &str,
) -> (Value, Vec<Value>, usize, String) {
    let llm = FakeLlm::start().await;
    llm.push(Reply::HangMidStream);
    llm.set_default(Reply::text("recovered"));
    let env = [
        ("LLM_BASE_URL", llm.base_url()),
        ("LLM_MODEL", "test-model".to_owned()),
        ("LLM_MAX_RETRIES", "0".to_owned()),
        ("RUN_LEASE_SECS", "1".to_owned()),
        ("RUN_MAX_ATTEMPTS", max_attempts.to_owned()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let http = client();

    let mut first = Server::start_with(database_url, &env).await;
    let response = http
        .post(first.url("/v1/sessions/crash/runs"))
        .json(&json!({"input": "hello", "background": true}))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let run: Value = response.json().await.unwrap();
    assert_eq!(status, 202, "{run}");
    let run_path = format!("/v1/sessions/crash/runs/{}", run["id"].as_str().unwrap());
    // Killed once the flush that stores the request has committed.
    let stored = || async {
        let calls = stored_llm_calls(database_url).await;
        (calls > 0).then_some(())
    };
    wait_for(stored).await;
    first.signal("-KILL");
    first.child.wait().await.unwrap();

    let second = Server::start_with(database_url, &env).await;
    let finished = |run: &Value| matches!(run["status"].as_str(), Some("completed" | "failed"));
    let run =
        wait_for(|| async { Some(get_json(&http, second.url(&run_path)).await).filter(finished) })
            .await;
    let items: Value = get_json(&http, second.url("/v1/sessions/crash/items")).await;
    let metrics = http.get(second.url("/metrics")).send().await.unwrap().text().await.unwrap();
    (run, items["data"].as_array().unwrap().clone(), llm.requests().len(), metrics)
}

/// The LLM requests the database holds for runs that no run document counts yet.
async fn stored_llm_calls(database_url: &str) -> i64 {
    let sql = "select cast(coalesce(sum(unsettled_llm_calls), 0) as bigint) from runs";
    if database_url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(database_url).await.unwrap();
        let calls = sqlx::query_scalar(sql).fetch_one(&pool).await.unwrap();
        pool.close().await;
        calls
    } else {
        let pool = sqlx::PgPool::connect(database_url).await.unwrap();
        let calls = sqlx::query_scalar(sql).fetch_one(&pool).await.unwrap();
        pool.close().await;
        calls
    }
}

/// Polls `check` until it gives a value, for at most 30 s.
async fn wait_for<T, F: std::future::Future<Output = Option<T>>>(check: impl Fn() -> F) -> T {
    for _ in 0..300 {
        if let Some(value) = check().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("gave up after 30 s");
}

fn assert_ran_again(run: &Value, items: &[Value], llm_calls: usize) {
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(llm_calls, 2, "the second process calls the LLM again");
    assert_eq!(run["usage"]["llm_calls"], 2, "both processes' requests count: {run}");
    let texts: Vec<&Value> = items.iter().map(|i| &i["item"]).collect();
    assert_eq!(texts.len(), 2, "the turn is in the history once: {texts:?}");
    assert_eq!(texts[0], &json!({"role": "user", "content": "hello"}));
    assert_eq!(texts[1]["content"][0]["text"], "recovered");
    assert!(items.iter().all(|i| i["run_id"] == run["id"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_with_its_process_runs_again_on_sqlite() {
    let dir = TempDir::new().unwrap();
    let url = format!("sqlite://{}", dir.path().join("runs.db").display());
    let (run, items, llm_calls, _) = kill_9_mid_run(&url, "3").await;
    assert_ran_again(&run, &items, llm_calls);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_with_its_process_runs_again_on_postgres() {
    let database = scratch_postgres().await;
    let (run, items, llm_calls, _) = kill_9_mid_run(&database.url, "3").await;
    assert_ran_again(&run, &items, llm_calls);
    database.drop().await;
}

/// Out of attempts, the run fails with `worker_lost` and the history stays empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_out_of_attempts_fails_as_worker_lost() {
    let dir = TempDir::new().unwrap();
    let url = format!("sqlite://{}", dir.path().join("runs.db").display());
    let (run, items, llm_calls, metrics) = kill_9_mid_run(&url, "1").await;
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(run["error"]["code"], "worker_lost");
    let lost = r#"agent_sessions_runs_total{status="failed",code="worker_lost"} 1"#;
    assert!(metrics.lines().any(|line| line == lost), "{metrics}");
    assert!(run["finished_at"].is_string());
    assert_eq!(llm_calls, 1);
    assert_eq!(run["usage"]["llm_calls"], 1, "the killed process's request counts: {run}");
    assert!(items.is_empty(), "{items:?}");
}
