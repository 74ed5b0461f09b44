use axum::http::StatusCode;
use serde_json::{json, Value};

use super::{append, compactions, stored_items};
use crate::fake_llm::{is_summary_request, Reply};
use crate::helpers::{on_both_backends, TestDb};
use crate::runs::{parse_sse, RunsApp};

on_both_backends!(
    a_compact_agent_compacts_before_calling_the_model,
    a_failing_summariser_fails_the_run_and_changes_nothing,
);

/// A user message of 150 bytes: 54 estimated tokens.
fn long(tag: &str) -> String {
    format!("{tag} {}", "x".repeat(149 - tag.len()))
}

/// An agent that compacts past 160 estimated tokens and keeps 2 items.
async fn compacting_agent(t: &RunsApp) -> Value {
    t.app
        .post(
            "/v1/agents",
            json!({"model": "fake-1", "context": {
                "strategy": "compact", "max_input_tokens": 400,
                "compact_threshold_tokens": 160, "keep_recent_items": 2,
            }}),
        )
        .await
        .expect(StatusCode::CREATED)
}

async fn a_compact_agent_compacts_before_calling_the_model(db: TestDb) {
    let t = RunsApp::new(db).await;
    let agent = compacting_agent(&t).await;
    let earlier: Vec<Value> =
        (0..6).map(|i| json!({"role": "user", "content": long(&format!("old{i}"))})).collect();
    append(&t.app, "a", earlier).await;
    t.app.patch("/v1/sessions/a", json!({"agent_id": agent["id"]})).await.expect(StatusCode::OK);
    let mut runs = Vec::new();
    for turn in 1..=3 {
        t.llm.push(Reply::text(&format!("answer {turn}")));
        let stream = t
            .app
            .post(
                "/v1/sessions/a/runs",
                json!({"input": long(&format!("question{turn}")), "stream": true}),
            )
            .await;
        assert_eq!(stream.status, StatusCode::OK, "{}", stream.text);
        let events = parse_sse(&stream.text);
        let names: Vec<&str> = events.iter().map(|(name, _, _)| name.as_str()).collect();
        let at = names.iter().position(|n| *n == "compaction.created");
        let first_delta = names.iter().position(|n| *n == "message.delta");
        assert!(at.is_some() && at < first_delta, "{names:?}");
        let (_, _, last) = events.last().unwrap();
        assert_eq!(last["status"], "completed", "{last}");
        let compaction = &events[at.unwrap()].2["compaction"];
        assert_eq!(compaction["run_id"], last["id"]);
        assert_eq!(compaction["summary"], format!("summary {turn}"));
        runs.push(last.clone());
    }

    // The model got the latest summary, then the two kept items, then the input.
    let sent: Vec<Value> = t.llm.requests();
    let (summaries, turns): (Vec<&Value>, Vec<&Value>) =
        sent.iter().partition(|r| is_summary_request(r));
    assert_eq!((summaries.len(), turns.len()), (3, 3));
    let third = turns[2]["messages"].as_array().unwrap();
    assert_eq!(third.len(), 4, "{third:?}");
    assert_eq!(third[0]["role"], "system");
    let summary = third[0]["content"].as_str().unwrap();
    assert!(summary.starts_with(agent_sessions::runs::SUMMARY_HEADING));
    assert!(summary.ends_with("summary 3"), "{summary}");
    assert_eq!(third[1]["content"], long("question2"));
    assert_eq!(third[2]["content"], "answer 2");
    assert_eq!(third[3]["content"], long("question3"));
    let folded = summaries[2]["messages"][1]["content"].as_str().unwrap();
    assert!(folded.contains("summary 2"), "{folded}");
    assert!(folded.contains("question1"), "{folded}");

    // Each run counts its summary's call; the session counts every call.
    for run in &runs {
        assert_eq!(run["usage"]["llm_calls"], 2, "{run}");
        assert_eq!(run["usage"]["input_tokens"], 24, "{run}");
    }
    let session = t.app.get("/v1/sessions/a").await.expect(StatusCode::OK);
    assert_eq!(session["usage"]["llm_calls"], 6);
    assert_eq!(session["usage"]["input_tokens"], 72);
    assert_eq!(stored_items(&t.app, "a").await.len(), 12, "items stay");
    assert_eq!(compactions(&t.app, "a").await.len(), 3);
}

async fn a_failing_summariser_fails_the_run_and_changes_nothing(db: TestDb) {
    let t = RunsApp::new(db).await;
    let agent = compacting_agent(&t).await;
    let earlier: Vec<Value> =
        (0..6).map(|i| json!({"role": "user", "content": long(&format!("old{i}"))})).collect();
    append(&t.app, "f", earlier).await;
    let before = stored_items(&t.app, "f").await;
    t.llm.push_summary(Reply::status(500));
    let run = t
        .app
        .post("/v1/sessions/f/runs", json!({"input": long("q"), "agent_id": agent["id"]}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(run["error"]["code"], "llm_unavailable");
    assert_eq!(run["usage"]["llm_calls"], 1);
    assert_eq!(stored_items(&t.app, "f").await, before);
    assert!(compactions(&t.app, "f").await.is_empty());
    assert_eq!(t.llm.requests().len(), 1, "the model was never called");
}
