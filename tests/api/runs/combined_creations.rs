//! Runs created while a creation's commit is in flight queue and are combined into one
//! transaction; each keeps the answer it would get alone.

use std::collections::HashSet;
use std::time::Duration;

use axum::http::StatusCode;
use futures::future::join_all;
use serde_json::json;

use super::RunsApp;
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, TestDb};

on_both_backends!(creations_queued_behind_a_commit_keep_their_answers);

const PAIRS: usize = 12;

async fn creations_queued_behind_a_commit_keep_their_answers(db: TestDb) {
    let handle = db.clone_handle();
    let t = RunsApp::configured(db, |c| c.llm_idle_timeout_secs = 30).await;
    // Slow enough that no run ends before the last creation is answered.
    let delay = Duration::from_secs(1);
    t.llm.set_default(Reply::Text { deltas: vec!["done".into()], usage: None, delay });
    // A session with an agent, and an expired one: a batch leaves both to be made alone.
    let agent = t.app.post("/v1/agents", json!({"model": "agent-model"})).await;
    let agent = agent.expect(StatusCode::CREATED);
    let session = json!({"id": "with-agent", "agent_id": agent["id"]});
    t.app.post("/v1/sessions", session).await.expect(StatusCode::CREATED);
    let old = json!({"items": [{"role": "user", "content": "forgotten"}]});
    t.app.post("/v1/sessions/expired/items", old).await.expect(StatusCode::CREATED);
    handle
        .execute_either(
            "update sessions set expires_at = now() - interval '1 hour' where id = 'expired'",
            "update sessions set expires_at = 1 where id = 'expired'",
        )
        .await;

    let held = handle.hold_inserts_into("runs").await;
    // Two runs for each of a dozen sessions, neither queueing behind the other, and
    // three that queue on one session.
    let paths: Vec<String> = (0..PAIRS).map(|i| format!("/v1/sessions/pair-{i}/runs")).collect();
    let pairs = paths.iter().flat_map(|path| {
        ["first", "second"].map(|input| {
            let body = json!({"input": input, "background": true});
            t.app.post(path, body)
        })
    });
    let queued = ["a", "b", "c"].map(|input| {
        let body = json!({"input": input, "background": true, "if_busy": "enqueue"});
        t.app.post("/v1/sessions/queue/runs", body)
    });
    let alone = ["/v1/sessions/with-agent/runs", "/v1/sessions/expired/runs"]
        .map(|path| t.app.post(path, json!({"input": "alone", "background": true})));
    let requests = join_all(pairs.chain(queued).chain(alone));
    let release = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        held.release().await;
    };
    let (answers, ()) = tokio::join!(requests, release);

    let mut created = Vec::new();
    for (i, pair) in answers[..2 * PAIRS].chunks(2).enumerate() {
        let accepted: Vec<_> = pair.iter().filter(|a| a.status == StatusCode::ACCEPTED).collect();
        assert_eq!(accepted.len(), 1, "one run of pair-{i} is created");
        let busy = pair.iter().find(|a| a.status != StatusCode::ACCEPTED).unwrap();
        let detail = busy.expect_problem(StatusCode::CONFLICT, "session_busy");
        let run = accepted[0].json();
        let id = run["id"].as_str().unwrap().to_owned();
        assert!(detail.contains(&id), "the busy answer names the run: {detail}");
        created.push((format!("pair-{i}"), id));
    }
    for answer in &answers[2 * PAIRS..2 * PAIRS + 3] {
        let run = answer.expect(StatusCode::ACCEPTED);
        created.push(("queue".to_owned(), run["id"].as_str().unwrap().to_owned()));
    }
    let with_agent = answers[2 * PAIRS + 3].expect(StatusCode::ACCEPTED);
    assert_eq!(with_agent["model"], "agent-model", "the session's agent configures the run");
    let expired = answers[2 * PAIRS + 4].expect(StatusCode::ACCEPTED);
    for (session, run) in [("with-agent", with_agent), ("expired", expired)] {
        created.push((session.to_owned(), run["id"].as_str().unwrap().to_owned()));
    }

    for (session, id) in &created {
        t.app.get(&format!("/v1/sessions/{session}/runs/{id}/events")).await;
        let run = t.app.get(&format!("/v1/sessions/{session}/runs/{id}")).await;
        assert_eq!(run.expect(StatusCode::OK)["status"], "completed", "{session} {id}");
    }
    for i in 0..PAIRS {
        let texts = texts(&t.items(&format!("pair-{i}")).await);
        assert!(texts == ["first", "done"] || texts == ["second", "done"], "{texts:?}");
    }
    let started_afresh = texts(&t.items("expired").await);
    assert_eq!(started_afresh, ["alone", "done"], "an expired session's id starts a new one");
    let texts = texts(&t.items("queue").await);
    assert_eq!(texts.len(), 6, "{texts:?}");
    assert_eq!(texts.iter().skip(1).step_by(2).collect::<Vec<_>>(), ["done"; 3]);
    let inputs: HashSet<&str> = texts.iter().step_by(2).map(String::as_str).collect();
    assert_eq!(inputs, HashSet::from(["a", "b", "c"]));

    if handle.is_postgres() {
        // The transactions that created the runs: their first events are never updated.
        let creators: HashSet<String> = handle
            .strings("select xmin::text from run_events where seq = 1")
            .await
            .into_iter()
            .collect();
        assert!(
            creators.len() <= created.len() / 2,
            "{} runs in {} transactions",
            created.len(),
            creators.len()
        );
    }
}

/// Each item's text.
fn texts(items: &[serde_json::Value]) -> Vec<String> {
    items
        .iter()
        .map(|i| match &i["content"] {
            serde_json::Value::String(s) => s.clone(),
            parts => parts[0]["text"].as_str().unwrap().to_owned(),
        })
        .collect()
}
