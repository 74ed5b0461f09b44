//! Tools in the AI SDK's chat: a call of the page's tool answered by the next request,
//! the service's own tools and the approvals they wait for, and a page that reloads
//! after it answered.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::chat::{chunks, post_chat, types, user_turn};
use super::{RunsApp, ToolHook};
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, TestDb};

on_both_backends!(
    a_client_tool_call_is_answered_by_the_next_chat_request,
    server_tools_stream_as_run_by_the_service_and_approvals_round_trip,
    a_reloaded_page_is_not_asked_again_for_what_it_answered,
);

/// A client tool: `tools` of an agent without webhooks.
pub(super) async fn agent_with(t: &RunsApp, tools: Value) -> String {
    let agent = t.app.post("/v1/agents", json!({"name": "chat", "tools": tools})).await;
    agent.expect(StatusCode::CREATED)["id"].as_str().unwrap().to_owned()
}

async fn a_client_tool_call_is_answered_by_the_next_chat_request(db: TestDb) {
    let t = RunsApp::new(db).await;
    let tools =
        json!([{"type": "function", "name": "get_location", "parameters": {"type": "object"}}]);
    let agent_id = agent_with(&t, tools).await;
    t.llm.push(Reply::tool_call("call_1", "get_location", r#"{"precise":true}"#));
    t.llm.push(Reply::text("You are in Oslo."));
    let mut body = user_turn("c2", "Where am I?", &[]);
    body["agent_id"] = agent_id.clone().into();
    let got = post_chat(&t, body).await;
    assert_eq!(
        types(&got),
        ["start", "start-step", "tool-input-available", "finish-step", "finish", "[DONE]"]
    );
    let call = &got[2];
    assert_eq!(call["toolName"], "get_location");
    assert_eq!(call["input"], json!({"precise": true}));
    assert!(call.get("providerExecuted").is_none(), "the page runs this tool: {call}");
    assert_eq!(got[4]["finishReason"], "tool-calls");
    let run_id = got[0]["messageId"].as_str().unwrap().to_owned();

    // A reloaded page sees the call waiting for its output.
    let messages = t.app.get("/v1/chat/c2/messages").await.expect(StatusCode::OK);
    let last = messages["data"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["id"], run_id.as_str());
    assert_eq!(last["parts"][1]["type"], "tool-get_location");
    assert_eq!(last["parts"][1]["state"], "input-available");

    // What `useChat` sends once `addToolOutput` filled the part in.
    let mut answered = last.clone();
    answered["parts"][1]["state"] = "output-available".into();
    answered["parts"][1]["output"] = json!({"city": "Oslo"});
    let user = messages["data"][0].clone();
    let body = json!({"id": "c2", "messages": [user, answered], "trigger": "submit-message",
                      "messageId": run_id, "agent_id": agent_id});
    let got = post_chat(&t, body).await;
    assert_eq!(got[0], json!({"type": "start", "messageId": run_id}), "the same message goes on");
    assert_eq!(
        types(&got)[1..4],
        ["start-step", "text-start", "text-delta"],
        "the continuation is a step of its own"
    );
    assert_eq!(got[got.len() - 2]["finishReason"], "stop");
    let tool_message = &t.llm.requests()[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap();
    assert_eq!(tool_message["content"], r#"{"city":"Oslo"}"#);

    let messages = t.app.get("/v1/chat/c2/messages").await.expect(StatusCode::OK);
    let assistant = &messages["data"][1];
    assert_eq!(messages["data"].as_array().unwrap().len(), 2, "{messages}");
    assert_eq!(assistant["id"], run_id.as_str());
    let parts = assistant["parts"].as_array().unwrap();
    let kinds: Vec<&str> = parts.iter().map(|p| p["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["step-start", "tool-get_location", "step-start", "text"]);
    assert_eq!(parts[1]["state"], "output-available");
    assert_eq!(parts[1]["output"], json!({"city": "Oslo"}));

    // The same answer again finds the run finished.
    let body = json!({"id": "c2", "messages": [answered], "trigger": "submit-message"});
    t.app
        .post("/v1/chat", body)
        .await
        .expect_problem(StatusCode::CONFLICT, "run_not_requires_action");
}

async fn server_tools_stream_as_run_by_the_service_and_approvals_round_trip(db: TestDb) {
    let (send, lookup) = (ToolHook::start("send").await, ToolHook::start("lookup").await);
    let t = RunsApp::configured(db, |c| {
        c.tool_webhook_allowed_hosts = vec![send.host.clone(), lookup.host.clone()];
    })
    .await;
    let agent_id = agent_with(&t, json!([send.approved(), lookup.tool])).await;
    let calls = vec![
        ("c1".into(), "lookup".into(), "{}".into()),
        ("c2".into(), "send".into(), "{}".into()),
    ];
    t.llm.push(Reply::ToolCalls { calls, usage: None });
    t.llm.push(Reply::text("Not sent."));
    let mut body = user_turn("c3", "send it", &[]);
    body["agent_id"] = agent_id.clone().into();
    let got = post_chat(&t, body).await;
    assert_eq!(
        types(&got),
        [
            "start",
            "start-step",
            "tool-input-available",
            "tool-input-available",
            "tool-output-available",
            "tool-approval-request",
            "finish-step",
            "finish",
            "[DONE]"
        ]
    );
    assert!(got[2..4].iter().all(|c| c["providerExecuted"] == true), "{got:?}");
    assert_eq!(
        got[4],
        json!({"type": "tool-output-available", "toolCallId": "c1", "output": "result of {}"})
    );
    assert_eq!(
        got[5],
        json!({"type": "tool-approval-request", "approvalId": "c2", "toolCallId": "c2"})
    );
    let run_id = got[0]["messageId"].as_str().unwrap().to_owned();

    let messages = t.app.get("/v1/chat/c3/messages").await.expect(StatusCode::OK);
    let mut last = messages["data"][1].clone();
    let waiting =
        last["parts"].as_array().unwrap().iter().find(|p| p["toolCallId"] == "c2").unwrap().clone();
    assert_eq!(waiting["state"], "approval-requested");
    assert_eq!(waiting["approval"], json!({"id": "c2"}));

    // `addToolApprovalResponse({id: "c2", approved: false, reason})`.
    for part in last["parts"].as_array_mut().unwrap() {
        if part["toolCallId"] == "c2" {
            part["state"] = "approval-responded".into();
            part["approval"] = json!({"id": "c2", "approved": false, "reason": "not today"});
        }
    }
    let body =
        json!({"id": "c3", "messages": [last], "trigger": "submit-message", "messageId": run_id});
    let got = post_chat(&t, body).await;
    assert_eq!(types(&got)[..3], ["start", "tool-output-denied", "start-step"]);
    assert_eq!(got[1]["toolCallId"], "c2");
    assert!(send.called().is_empty(), "a rejected call never runs");
    assert_eq!(got[got.len() - 2]["messageMetadata"]["status"], "completed");
}

async fn a_reloaded_page_is_not_asked_again_for_what_it_answered(db: TestDb) {
    let t = RunsApp::new(db).await;
    let tools = json!([{"type": "function", "name": "get_location"}]);
    let agent_id = agent_with(&t, tools).await;
    t.llm.push(Reply::tool_call("call_1", "get_location", "{}"));
    let deltas = ["You ", "are ", "in ", "Oslo."].map(String::from).to_vec();
    t.llm.push(Reply::Text { deltas, usage: None, delay: Duration::from_millis(300) });
    let mut body = user_turn("c9", "Where am I?", &[]);
    body["agent_id"] = agent_id.clone().into();
    let run_id = post_chat(&t, body).await[0]["messageId"].clone();
    let messages = t.app.get("/v1/chat/c9/messages").await.expect(StatusCode::OK);
    let mut answered = messages["data"][1].clone();
    answered["parts"][1]["state"] = "output-available".into();
    answered["parts"][1]["output"] = json!({"city": "Oslo"});
    let body = json!({"id": "c9", "messages": [answered], "trigger": "submit-message",
                      "messageId": run_id, "agent_id": agent_id});
    let app = t.app.router.clone();
    let going = tokio::spawn(async move {
        let request = axum::http::Request::post("/v1/chat")
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body.to_string()))
            .unwrap();
        let response = tower::ServiceExt::oneshot(app, request).await.unwrap();
        axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap()
    });
    super::until_called(&t.llm, 2).await;
    // The page reloads while the answer streams: the replay shows the call answered.
    let resumed = t.app.get("/v1/chat/c9/stream").await;
    assert_eq!(resumed.status, StatusCode::OK);
    let got = chunks(&resumed.text);
    let call: &Value = got.iter().find(|c| c["type"] == "tool-input-available").unwrap();
    assert_eq!(call["providerExecuted"], true, "not the page's to run again: {call}");
    let output = got.iter().find(|c| c["type"] == "tool-output-available").unwrap();
    assert_eq!(output["output"], json!({"city": "Oslo"}));
    assert_eq!(types(&got).last().unwrap(), "[DONE]");
    going.await.unwrap();
}
