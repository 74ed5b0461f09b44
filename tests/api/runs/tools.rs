use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

use super::{parse_sse, RunsApp};
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, TestDb};

on_both_backends!(
    a_client_tool_pauses_the_run_until_its_output_arrives,
    a_run_out_of_turns_fails_before_its_tools_run,
    a_model_repeating_one_call_fails_as_a_loop,
);

async fn a_client_tool_pauses_the_run_until_its_output_arrives(db: TestDb) {
    let t = RunsApp::new(db).await;
    let agent = t
        .app
        .post(
            "/v1/agents",
            json!({"tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]}),
        )
        .await
        .expect(StatusCode::CREATED);
    t.llm.push(Reply::tool_call("call_1", "get_weather", r#"{"city":"Oslo"}"#));
    let run = t
        .app
        .post("/v1/sessions/w/runs", json!({"input": "Weather in Oslo?", "agent_id": agent["id"]}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(run["status"], "requires_action", "{run}");
    assert_eq!(run["required_action"]["type"], "submit_tool_outputs");
    let calls = &run["required_action"]["tool_calls"];
    assert_eq!(
        calls[0],
        json!({"call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"})
    );
    assert!(t.items("w").await.is_empty(), "nothing is appended while the run waits");
    let session = t.app.get("/v1/sessions/w").await.expect(StatusCode::OK);
    assert_eq!(session["updated_at"], session["created_at"], "a pause leaves the session alone");
    let path = format!("/v1/sessions/w/runs/{}", run["id"].as_str().unwrap());
    // Another run is refused while this one waits.
    let busy = t
        .app
        .post("/v1/sessions/w/runs", json!({"input": "hello?"}))
        .await
        .expect_problem(StatusCode::CONFLICT, "session_busy");
    assert!(busy.contains(run["id"].as_str().unwrap()), "{busy}");
    t.app
        .post(
            &format!("{path}/tool_outputs"),
            json!({"outputs": [{"call_id": "nope", "output": "x"}]}),
        )
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    for (body, field) in [
        (json!({"outputs": []}), "outputs"),
        (json!({"outputs": [{"call_id": "call_1"}]}), "outputs[0]"),
        (json!({"outputs": [{"call_id": "call_1", "output": "x"}], "stream": "yes"}), "stream"),
    ] {
        let detail = t
            .app
            .post(&format!("{path}/tool_outputs"), body.clone())
            .await
            .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
        assert!(detail.starts_with(field), "{body}: {detail}");
    }
    t.llm.push(Reply::text("It is sunny in Oslo."));
    let response = t
        .app
        .post(
            &format!("{path}/tool_outputs"),
            json!({"outputs": [{"call_id": "call_1", "output": "sunny, 21C"}], "stream": true}),
        )
        .await;
    let events = parse_sse(&response.text);
    assert_eq!(events.first().unwrap().0, "run.started", "{events:?}");
    assert_eq!(events.last().unwrap().0, "run.completed");
    let items = t.items("w").await;
    let types: Vec<&str> = items.iter().map(|i| i["type"].as_str().unwrap_or("message")).collect();
    assert_eq!(types, ["message", "function_call", "function_call_output", "message"]);
    assert_eq!(items[2]["output"], "sunny, 21C");
    let sent = &t.llm.requests()[1]["messages"];
    assert_eq!(sent[1]["tool_calls"][0]["id"], "call_1");
    assert_eq!(sent[2], json!({"role": "tool", "content": "sunny, 21C", "tool_call_id": "call_1"}));
    t.app
        .post(
            &format!("{path}/tool_outputs"),
            json!({"outputs": [{"call_id": "call_1", "output": "x"}]}),
        )
        .await
        .expect_problem(StatusCode::CONFLICT, "run_not_requires_action");
    // A replay of the whole run goes past its pause to its end.
    let replay = parse_sse(&t.app.get(&format!("{path}/events")).await.text);
    let names: Vec<&str> = replay.iter().map(|(name, _, _)| name.as_str()).collect();
    assert!(names.contains(&"run.requires_action"), "{names:?}");
    assert_eq!(names.last(), Some(&"run.completed"), "{names:?}");
    let ids: Vec<i64> = replay.iter().map(|(_, id, _)| *id).collect();
    assert_eq!(ids, (1..=ids.len() as i64).collect::<Vec<_>>(), "each event once");
}

#[tokio::test]
async fn webhook_tools_run_on_allowed_hosts_only() {
    let hook = Router::new().route(
        "/weather",
        post(|Json(call): Json<Value>| async move {
            let arguments = call["arguments"].as_str().unwrap_or_default().to_owned();
            format!(
                "weather for {arguments} ({} of {}/{})",
                call["name"].as_str().unwrap_or_default(),
                call["tenant"].as_str().unwrap_or_default(),
                call["session_id"].as_str().unwrap_or_default(),
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, hook).await });
    let url = format!("http://127.0.0.1:{port}/weather");
    let tool =
        json!({"type": "function", "name": "weather", "webhook": {"url": url, "timeout_ms": 2000}});

    let refused = RunsApp::new(TestDb::sqlite().await).await;
    let detail = refused
        .app
        .post("/v1/agents", json!({"tools": [tool]}))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("tools[0].webhook.url:"), "{detail}");
    refused
        .app
        .post("/v1/sessions/x/runs", json!({"input": "hi", "agent": {"tools": [tool]}}))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");

    let t = RunsApp::configured(TestDb::sqlite().await, |c| {
        c.tool_webhook_allowed_hosts = vec![format!("127.0.0.1:{port}")];
    })
    .await;
    t.llm.push(Reply::tool_call("c9", "weather", r#"{"city":"Rome"}"#));
    t.llm.push(Reply::text("Rome is warm."));
    let run = t
        .app
        .post("/v1/sessions/h/runs", json!({"input": "Rome?", "agent": {"tools": [tool]}}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(run["status"], "completed", "{run}");
    let items = t.items("h").await;
    assert_eq!(items[2]["type"], "function_call_output");
    assert_eq!(items[2]["output"], "weather for {\"city\":\"Rome\"} (weather of default/h)");
}

/// `max_turns` counts LLM calls; a call that asks for tools on the last turn fails the
/// run at once, without running the tools or pausing for the client.
async fn a_run_out_of_turns_fails_before_its_tools_run(db: TestDb) {
    let t = RunsApp::new(db).await;
    // A tool the agent does not have is answered by the service, so the loop goes on.
    t.llm.set_default(Reply::tool_call("call_x", "ghost", "{}"));
    let run = t
        .app
        .post("/v1/sessions/turns/runs", json!({"input": "loop", "agent": {"max_turns": 2}}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(run["error"]["code"], "max_turns_exceeded");
    assert_eq!(t.llm.requests().len(), 2);
    assert!(t.items("turns").await.is_empty());

    let client_tool = json!({"type": "function", "name": "ask"});
    t.llm.push(Reply::tool_call("call_1", "ask", "{}"));
    let run = t
        .app
        .post(
            "/v1/sessions/turns/runs",
            json!({"input": "once", "agent": {"max_turns": 1, "tools": [client_tool]}}),
        )
        .await
        .expect(StatusCode::OK);
    assert_eq!(run["status"], "failed", "not requires_action: {run}");
    assert_eq!(run["error"]["code"], "max_turns_exceeded");
    assert_eq!(run["required_action"], Value::Null);
}

/// The same tool with the same arguments `max_repeated_tool_calls` times in a row (3 by
/// default) fails the run `tool_call_loop` before the call is made again, across a pause
/// for the client too; other arguments are no loop.
async fn a_model_repeating_one_call_fails_as_a_loop(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.llm.set_default(Reply::tool_call("call_x", "ghost", "{}"));
    let run =
        t.app.post("/v1/sessions/loop/runs", json!({"input": "loop"})).await.expect(StatusCode::OK);
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(run["error"]["code"], "tool_call_loop");
    assert_eq!(t.llm.requests().len(), 3, "the default is 3, under max_turns' 10");
    let output = run["output"].as_array().unwrap();
    let calls = output.iter().filter(|i| i["type"] == "function_call").count();
    let answers = output.iter().filter(|i| i["type"] == "function_call_output").count();
    assert_eq!((calls, answers), (2, 2), "no call is left without its output: {run}");
    assert!(t.items("loop").await.is_empty());

    for n in 1..=3 {
        t.llm.push(Reply::tool_call(&format!("c{n}"), "ghost", &format!("{{\"n\":{n}}}")));
    }
    t.llm.push(Reply::text("done"));
    let run = t
        .app
        .post("/v1/sessions/varied/runs", json!({"input": "vary"}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(run["status"], "completed", "new arguments are no loop: {run}");

    let ask = json!({"type": "function", "name": "ask"});
    let agent = json!({"tools": [ask], "max_repeated_tool_calls": 2});
    t.llm.push(Reply::tool_call("call_1", "ask", "{}"));
    let run = t
        .app
        .post("/v1/sessions/paused/runs", json!({"input": "ask twice", "agent": agent}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(run["status"], "requires_action", "{run}");
    t.llm.push(Reply::tool_call("call_2", "ask", "{}"));
    let path = format!("/v1/sessions/paused/runs/{}/tool_outputs", run["id"].as_str().unwrap());
    let run = t
        .app
        .post(&path, json!({"outputs": [{"call_id": "call_1", "output": "no"}]}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(run["error"]["code"], "tool_call_loop");

    for repeats in [0, 1, 101] {
        let body = json!({"input": "x", "agent": {"max_repeated_tool_calls": repeats}});
        let detail = t
            .app
            .post("/v1/sessions/bounds/runs", body)
            .await
            .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
        assert!(detail.starts_with("agent.max_repeated_tool_calls: "), "{detail}");
    }
}
