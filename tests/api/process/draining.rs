//! Two replicas on one Postgres: SIGTERM the one a client follows a run on, and the
//! client, told to reconnect, goes on at the other with `Last-Event-ID`, getting every
//! event of the run once. Meanwhile the replica shutting down still answers, unready.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{json, Value};

use super::{client, Server};
use crate::fake_llm::{FakeLlm, Reply};
use crate::helpers::scratch_postgres;
use crate::runs::parse_sse;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_by_sigterm_goes_on_at_the_other_replica() {
    let database = scratch_postgres().await;
    let llm = FakeLlm::start().await;
    let deltas: Vec<String> = (0..60).map(|n| format!("w{n} ")).collect();
    let whole: String = deltas.concat();
    llm.push(Reply::Text { deltas, usage: None, delay: Duration::from_millis(100) });
    let env = [("LLM_BASE_URL", llm.base_url()), ("LLM_MODEL", "test-model".to_owned())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut following = env.clone();
    following.extend([("RUN_WORKERS", "0"), ("SHUTDOWN_DELAY_SECS", "2")]);
    let executing = Server::start_with(&database.url, &env).await;
    let mut front = Server::start_with(&database.url, &following).await;
    let http = client();

    let body = json!({"input": "go", "background": true});
    let run: Value = (http.post(executing.url("/v1/sessions/h/runs")).json(&body).send().await)
        .unwrap()
        .json()
        .await
        .unwrap();
    let path = format!("/v1/sessions/h/runs/{}/events", run["id"].as_str().unwrap());
    let mut stream = http.get(front.url(&path)).send().await.unwrap().bytes_stream();
    let mut seen = String::new();
    while parse_sse(&seen).iter().filter(|(name, _, _)| name == "message.delta").count() < 3 {
        let chunk = stream.next().await.expect("the stream goes on").unwrap();
        seen.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    front.signal("-TERM");
    let mut ready = http.get(front.url("/readyz")).send().await.unwrap();
    for _ in 0..50 {
        if ready.status() == 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        ready = http.get(front.url("/readyz")).send().await.unwrap();
    }
    assert_eq!(ready.status(), 503);
    assert_eq!(ready.json::<Value>().await.unwrap()["code"], "shutting_down");
    assert_eq!(http.get(front.url("/livez")).send().await.unwrap().status(), 200);
    while let Some(chunk) = stream.next().await {
        seen.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
    }
    front.child.wait().await.unwrap();
    assert!(seen.trim_end().ends_with(": shutting down: reconnect with Last-Event-ID"), "{seen}");

    let events = parse_sse(&seen);
    assert!(!events.iter().any(|(name, _, _)| name == "run.completed"), "cut off mid-run");
    let (_, last, _) = events.last().unwrap();
    let rest = http.get(executing.url(&path)).header("last-event-id", last.to_string());
    let rest = rest.send().await.unwrap().text().await.unwrap();
    let all: Vec<_> = events.into_iter().chain(parse_sse(&rest)).collect();
    let ids: Vec<i64> = all.iter().map(|(_, id, _)| *id).collect();
    assert_eq!(ids, (1..=ids.len() as i64).collect::<Vec<_>>(), "each event once");
    assert_eq!(all.last().unwrap().0, "run.completed");
    let text: String = (all.iter())
        .filter(|(name, _, _)| name == "message.delta")
        .map(|(_, _, data)| data["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, whole);
    database.drop().await;
}
