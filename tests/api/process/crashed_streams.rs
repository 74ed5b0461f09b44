//! SIGKILL while many runs stream: events are stored in batches, so followers have seen
//! events the database never got. After a restart every turn a client was told of is in
//! the history once, and a follower that reconnects with `Last-Event-ID` gets the run's
//! new attempt whole, each event once, in order.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{json, Value};
use tempfile::TempDir;

use super::{client, Server};
use crate::fake_llm::{FakeLlm, Reply};
use crate::helpers::{get_json, scratch_postgres};
use crate::runs::parse_sse;

const STREAMS: usize = 8;
const TOKENS: usize = 40;

async fn kill_9_while_streaming(database_url: &str) {
    let llm = FakeLlm::start().await;
    llm.set_default(Reply::Clock { count: TOKENS, interval: Duration::from_millis(50) });
    let env = [
        ("LLM_BASE_URL", llm.base_url()),
        ("LLM_MODEL", "test-model".to_owned()),
        ("RUN_LEASE_SECS", "1".to_owned()),
        ("RUN_WORKERS", "16".to_owned()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let http = client();
    let mut first = Server::start_with(database_url, &env).await;

    // Turns acknowledged before the crash.
    for n in 0..4 {
        llm.push(Reply::text(&format!("kept {n}")));
        let url = first.url(&format!("/v1/sessions/kept-{n}/runs"));
        let run: Value = http
            .post(url)
            .json(&json!({"input": "hi"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(run["status"], "completed", "{run}");
    }

    // Streams followed until each has shown a few tokens, some of them not yet stored.
    let followers: Vec<_> = (0..STREAMS)
        .map(|n| {
            let request = http
                .post(first.url(&format!("/v1/sessions/streamed-{n}/runs")))
                .json(&json!({"input": "go", "stream": true}));
            tokio::spawn(async move {
                let mut body = request.send().await.unwrap().bytes_stream();
                let mut seen = String::new();
                while parse_sse(&seen).iter().filter(|(name, ..)| name == "message.delta").count()
                    < 6
                {
                    let chunk = body.next().await.expect("the stream goes on").unwrap();
                    seen.push_str(std::str::from_utf8(&chunk).unwrap());
                }
                parse_sse(&seen)
            })
        })
        .collect();
    let mut seen = Vec::new();
    for follower in followers {
        seen.push(follower.await.unwrap());
    }
    first.signal("-KILL");
    first.child.wait().await.unwrap();

    let second = Server::start_with(database_url, &env).await;
    for n in 0..4 {
        let items = get_json(&http, second.url(&format!("/v1/sessions/kept-{n}/items"))).await;
        let items = items["data"].as_array().unwrap().clone();
        assert_eq!(items.len(), 2, "the turn is in the history once: {items:?}");
        assert_eq!(items[1]["item"]["content"][0]["text"], format!("kept {n}"));
    }
    for (n, before) in seen.into_iter().enumerate() {
        let run_id = before[0].2["id"].as_str().unwrap().to_owned();
        let path = format!("/v1/sessions/streamed-{n}/runs/{run_id}/events");
        let (_, last, _) = before.last().unwrap();
        let request = http.get(second.url(&path)).header("last-event-id", last.to_string());
        let rest = request.timeout(Duration::from_secs(60)).send().await.unwrap();
        let rest = parse_sse(&rest.text().await.unwrap());

        let names: Vec<&str> = rest.iter().map(|(name, ..)| name.as_str()).collect();
        let mut expected = vec!["run.started"];
        expected.extend(std::iter::repeat_n("message.delta", TOKENS));
        expected.extend(["item.created", "run.completed"]);
        assert_eq!(names, expected, "the new attempt, whole, after what was seen");
        let ids: Vec<i64> = before.iter().chain(&rest).map(|(_, id, _)| *id).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "each event once, in order: {ids:?}");

        let replay = http.get(second.url(&path)).send().await.unwrap().text().await.unwrap();
        let replay = parse_sse(&replay);
        let ids: Vec<i64> = replay.iter().map(|(_, id, _)| *id).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "a replay has each once: {ids:?}");
        assert_eq!(replay.last().map(|(name, ..)| name.as_str()), Some("run.completed"));

        let items = get_json(&http, second.url(&format!("/v1/sessions/streamed-{n}/items"))).await;
        let items = items["data"].as_array().unwrap();
        assert_eq!(items.len(), 2, "the turn once: {items:?}");
        assert!(items.iter().all(|item| item["run_id"] == run_id.as_str()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_killed_mid_run_go_on_whole_after_a_restart_on_sqlite() {
    let dir = TempDir::new().unwrap();
    kill_9_while_streaming(&format!("sqlite://{}", dir.path().join("streams.db").display())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_killed_mid_run_go_on_whole_after_a_restart_on_postgres() {
    let database = scratch_postgres().await;
    kill_9_while_streaming(&database.url).await;
    database.drop().await;
}
