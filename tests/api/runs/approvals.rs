//! Webhook tools with `require_approval: "always"`: the run pauses before calling them
//! until a person approves or rejects each call at `…/approvals`.

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::{RunsApp, ToolHook};
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, TestDb};

on_both_backends!(
    approved_and_rejected_calls_answer_the_model,
    answers_of_the_wrong_kind_are_refused
);

fn calls(calls: &[(&str, &str)]) -> Reply {
    let calls = calls.iter().map(|(id, name)| ((*id).into(), (*name).into(), "{}".into()));
    Reply::ToolCalls { calls: calls.collect(), usage: None }
}

async fn approved_and_rejected_calls_answer_the_model(db: TestDb) {
    let (send, lookup) = (ToolHook::start("send").await, ToolHook::start("lookup").await);
    let t = RunsApp::configured(db, |c| {
        c.tool_webhook_allowed_hosts = vec![send.host.clone(), lookup.host.clone()];
    })
    .await;
    t.llm.push(calls(&[("c1", "send"), ("c2", "send"), ("c3", "lookup")]));
    t.llm.push(Reply::text("one sent"));
    let agent = json!({"tools": [send.approved(), lookup.tool]});
    let run = t.app.post("/v1/sessions/a/runs", json!({"input": "go", "agent": agent}));
    let run = run.await.expect(StatusCode::OK);
    assert_eq!(run["status"], "requires_action", "{run}");
    assert_eq!(run["required_action"]["type"], "approve_tool_calls");
    let waiting: Vec<&str> = (run["required_action"]["tool_calls"].as_array().unwrap().iter())
        .map(|c| c["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(waiting, ["c1", "c2"]);
    assert_eq!(lookup.called(), ["c3"], "a call needing no approval ran at once");
    assert!(send.called().is_empty(), "nothing runs before its approval");

    let path = format!("/v1/sessions/a/runs/{}", run["id"].as_str().unwrap());
    let approvals = json!({"approvals": [
        {"call_id": "c2", "approve": false, "reason": "not to this customer"},
        {"call_id": "c1", "approve": true},
    ]});
    let done = t.app.post(&format!("{path}/approvals"), approvals).await.expect(StatusCode::OK);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(send.called(), ["c1"], "the approved call ran, once");
    let tool_messages: Vec<Value> = (t.llm.requests()[1]["messages"].as_array().unwrap().iter())
        .filter(|m| m["role"] == "tool")
        .map(|m| json!([m["tool_call_id"], m["content"]]))
        .collect();
    // Outputs come in the order they were made: the rejection with the approvals, the
    // approved call's once it ran.
    assert_eq!(
        tool_messages,
        [
            json!(["c3", "result of {}"]),
            json!(["c2", r#"{"error":"rejected","reason":"not to this customer"}"#]),
            json!(["c1", "result of {}"]),
        ]
    );
    let items = t.items("a").await;
    assert_eq!(items.len(), 8, "input, three calls, three outputs, answer: {items:?}");
    // The approvals were the run's last pause.
    t.app
        .post(
            &format!("{path}/approvals"),
            json!({"approvals": [{"call_id": "c1", "approve": true}]}),
        )
        .await
        .expect_problem(StatusCode::CONFLICT, "run_not_requires_action")
        .contains("`completed`")
        .then_some(())
        .expect("the conflict names the run's status");
}

async fn answers_of_the_wrong_kind_are_refused(db: TestDb) {
    let send = ToolHook::start("send").await;
    let t =
        RunsApp::configured(db, |c| c.tool_webhook_allowed_hosts = vec![send.host.clone()]).await;
    let client_tool = json!({"type": "function", "name": "ask"});
    let refused = json!({"input": "x", "agent": {"tools": [{"type": "function", "name": "ask", "require_approval": "always"}]}});
    let detail = t.app.post("/v1/sessions/w/runs", refused).await;
    let detail = detail.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("agent.tools[0].require_approval:"), "{detail}");

    t.llm.push(calls(&[("c1", "send"), ("c2", "send")]));
    let agent = json!({"tools": [send.approved(), client_tool]});
    let run = t.app.post("/v1/sessions/w/runs", json!({"input": "go", "agent": agent}));
    let run = run.await.expect(StatusCode::OK);
    let path = format!("/v1/sessions/w/runs/{}", run["id"].as_str().unwrap());
    let outputs =
        json!({"outputs": [{"call_id": "c1", "output": "x"}, {"call_id": "c2", "output": "x"}]});
    let conflict = t.app.post(&format!("{path}/tool_outputs"), outputs).await;
    let conflict = conflict.expect_problem(StatusCode::CONFLICT, "run_not_requires_action");
    assert!(conflict.contains("waiting for approvals, not for tool outputs"), "{conflict}");
    for (approvals, field) in [
        (json!([{"call_id": "c1", "approve": true}]), "approvals:"),
        (
            json!([{"call_id": "c1", "approve": true}, {"call_id": "c9", "approve": true}]),
            "approvals[1].call_id:",
        ),
        (
            json!([{"call_id": "c1", "approve": true}, {"call_id": "c1", "approve": false}]),
            "approvals[1].call_id:",
        ),
        (json!([{"call_id": "c1"}]), "approvals[0]"),
    ] {
        let detail =
            t.app.post(&format!("{path}/approvals"), json!({"approvals": approvals})).await;
        let detail = detail.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
        assert!(detail.starts_with(field), "{field}: {detail}");
    }
    assert!(send.called().is_empty());
    // Approved, the calls run; the model then calls the client tool and the run waits
    // for its output.
    t.llm.push(Reply::tool_call("c3", "ask", "{}"));
    let approvals = json!({"approvals": [{"call_id": "c1", "approve": true}, {"call_id": "c2", "approve": true}]});
    let paused = t.app.post(&format!("{path}/approvals"), approvals).await.expect(StatusCode::OK);
    assert_eq!(paused["required_action"]["type"], "submit_tool_outputs", "{paused}");
    assert_eq!(send.called(), ["c1", "c2"]);
}
