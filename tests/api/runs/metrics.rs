//! What `/metrics` says of runs: their model calls by model (latency, time to the
//! first token, tokens) and how they ended, under the service's prefix.

use axum::http::StatusCode;
use serde_json::json;

use super::RunsApp;
use crate::fake_llm::Reply;
use crate::helpers::TestDb;

#[tokio::test]
async fn runs_are_counted_by_outcome_and_model_calls_by_model() {
    let t = RunsApp::new(TestDb::sqlite().await).await;
    t.llm.push(Reply::text("hello there"));
    t.llm.push(Reply::Status { status: 400, retry_after: None, body: "{}".into() });
    let done = t.app.post("/v1/sessions/m/runs", json!({"input": "hi"})).await;
    assert_eq!(done.expect(StatusCode::OK)["status"], "completed");
    let failed = t.app.post("/v1/sessions/m/runs", json!({"input": "again"})).await;
    let failed = failed.expect(StatusCode::OK);
    assert_eq!(failed["status"], "failed");
    let code = failed["error"]["code"].as_str().unwrap();

    let metrics = t.app.get("/metrics").await.text;
    for line in [
        r#"agent_sessions_runs_total{status="completed",code=""} 1"#.to_owned(),
        format!(r#"agent_sessions_runs_total{{status="failed",code="{code}"}} 1"#),
        // `Reply::text` reports 12 input tokens and one output token per 3 characters.
        r#"agent_sessions_llm_tokens_total{model="test-model",token_type="input"} 12"#.into(),
        r#"agent_sessions_llm_tokens_total{model="test-model",token_type="output"} 4"#.into(),
        r#"agent_sessions_llm_request_duration_seconds_count{model="test-model"} 2"#.into(),
        r#"agent_sessions_llm_time_to_first_token_seconds_count{model="test-model"} 1"#.into(),
    ] {
        assert!(metrics.contains(&line), "{line} in\n{metrics}");
    }
    let names: Vec<&str> = (metrics.lines())
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .map(|line| line.split(' ').next().unwrap())
        .collect();
    assert!(names.len() > 10, "{names:?}");
    assert!(names.iter().all(|n| n.starts_with("agent_sessions_")), "{names:?}");
}

#[tokio::test]
async fn a_summarising_call_is_a_model_call_in_the_series() {
    let t = RunsApp::new(TestDb::sqlite().await).await;
    let items: Vec<_> =
        (0..4).map(|n| json!({"role": "user", "content": format!("m{n}")})).collect();
    t.app.post("/v1/sessions/c/items", json!({"items": items})).await.expect(StatusCode::CREATED);
    let compacted = t.app.post("/v1/sessions/c/compact", json!({"keep_recent_items": 1})).await;
    compacted.expect(StatusCode::CREATED);
    let metrics = t.app.get("/metrics").await.text;
    let line = r#"agent_sessions_llm_request_duration_seconds_count{model="test-model"} 1"#;
    assert!(metrics.contains(line), "{line} in\n{metrics}");
}
