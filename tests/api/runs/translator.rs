//! A wire protocol written only here, over the engine's one stream of typed run events:
//! it turns a run's events into plain text lines. It uses nothing of `runs/` but the
//! public stream, which is what every protocol adapter at the edge stands on, and it
//! reads a replay from the database and a live run the same way.

use std::time::Duration;

use agent_sessions::model::{RunAnswer, RunEvent, RunEventKind, SessionId, ToolOutput};
use agent_sessions::runs::Runs;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use futures::StreamExt;
use serde_json::{json, Value};

use super::{parse_sse, RunsApp};
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, TestDb};

on_both_backends!(
    a_translator_outside_the_engine_reads_replay_and_live_alike,
    a_translator_resumes_after_any_event,
);

/// The line that stands for one event.
fn line(event: &RunEvent) -> String {
    match &event.kind {
        RunEventKind::Status(run) => format!("{}: status {}", event.seq, run.status),
        RunEventKind::TextDelta(delta) => format!("{}: text {delta:?}", event.seq),
        RunEventKind::ItemCreated(item) => {
            let item: Value = serde_json::from_str(item.get()).unwrap();
            let said = match item["type"].as_str() {
                Some("function_call") => format!("call {}{}", item["name"], item["arguments"]),
                Some("function_call_output") => format!("output {}", item["output"]),
                _ => format!("{} {}", item["role"], item["content"][0]["text"]),
            };
            format!("{}: item {said}", event.seq)
        }
        RunEventKind::CompactionCreated(compaction) => {
            format!("{}: compaction {}", event.seq, compaction.items_compacted)
        }
    }
}

/// The lines of a run's events after `after`, until the stream ends.
async fn lines(runs: &Runs, session: &str, run_id: &str, after: i64) -> Vec<String> {
    let session = SessionId::parse("session", session.to_owned()).unwrap();
    let run_id = run_id.parse().unwrap();
    let events = runs.events("default", &session, run_id, after);
    events.map(|event| line(&event.unwrap())).collect().await
}

async fn a_translator_outside_the_engine_reads_replay_and_live_alike(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.llm.push(Reply::tool_call("call_1", "lookup", r#"{"q":"x"}"#));
    t.llm.push(Reply::Text {
        deltas: vec!["Found".into(), " it".into(), ".".into()],
        usage: Some((5, 3)),
        delay: Duration::from_millis(150),
    });
    let tools = json!([{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]);
    let run = t
        .app
        .post(
            "/v1/sessions/tr/runs",
            json!({"input": "find x", "agent": {"tools": tools}, "background": true}),
        )
        .await
        .expect(StatusCode::ACCEPTED);
    let id = run["id"].as_str().unwrap();
    let paused = lines(&t.app.runs, "tr", id, 0).await;
    assert_eq!(
        paused,
        [
            "1: status queued",
            "2: status running",
            r#"3: item call "lookup""{\"q\":\"x\"}""#,
            "4: status requires_action",
        ]
    );

    let session = SessionId::parse("session", "tr".to_owned()).unwrap();
    let output = ToolOutput { call_id: "call_1".into(), output: "x is here".into() };
    let run_id = id.parse().unwrap();
    let answer = RunAnswer::ToolOutputs(vec![output]);
    let after = (t.app.runs).answer("default", &session, run_id, &answer).await.unwrap();
    assert_eq!(after, 4);
    // Followed live while the model streams: the first text line arrives before the run
    // has finished.
    let live = async {
        let mut events = Box::pin(t.app.runs.events("default", &session, run_id, after));
        let mut seen: Vec<String> = Vec::new();
        while let Some(event) = events.next().await {
            let event = event.unwrap();
            let first_text = !seen.iter().any(|l| l.contains("text"));
            if matches!(event.kind, RunEventKind::TextDelta(_)) && first_text {
                let now = t.app.get(&format!("/v1/sessions/tr/runs/{id}")).await.json();
                assert_eq!(now["status"], "running", "the text came while the run ran");
            }
            seen.push(line(&event));
        }
        seen
    };
    // The native stream, followed at the same time, is another translation of it: one
    // SSE event per line, numbered alike.
    let native = Request::get(format!("/v1/sessions/tr/runs/{id}/events"))
        .header("last-event-id", "4")
        .body(Body::empty())
        .unwrap();
    let (live, native) = tokio::join!(live, t.app.send(native));
    let native: Vec<i64> = parse_sse(&native.text).iter().map(|e| e.1).collect();
    let seqs: Vec<i64> =
        (live.iter()).map(|l| l.split(':').next().unwrap().parse().unwrap()).collect();
    assert_eq!(native, seqs);
    let continued = [
        "5: status running",
        r#"6: text "Found""#,
        r#"7: text " it""#,
        r#"8: text ".""#,
        r#"9: item "assistant" "Found it.""#,
        "10: status completed",
    ];
    assert_eq!(live, continued, "live from the hub");

    // The same lines again, now from the database.
    let replay = lines(&t.app.runs, "tr", id, 0).await;
    assert_eq!(replay[..4], paused[..]);
    assert_eq!(replay[4..], continued[..]);
}

async fn a_translator_resumes_after_any_event(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.llm.push(Reply::text("Hello there"));
    let run =
        t.app.post("/v1/sessions/tr2/runs", json!({"input": "hi"})).await.expect(StatusCode::OK);
    let id = run["id"].as_str().unwrap();
    let all = lines(&t.app.runs, "tr2", id, 0).await;
    assert_eq!(all.first().map(String::as_str), Some("1: status queued"));
    assert_eq!(all.last().map(String::as_str), Some(&*format!("{}: status completed", all.len())));
    for after in 0..all.len() {
        let tail = lines(&t.app.runs, "tr2", id, after as i64).await;
        assert_eq!(tail, all[after..], "after event {after}");
    }
}
