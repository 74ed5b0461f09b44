use agent_sessions::model::Tool;
use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::helpers::{on_both_backends, test_config, TestApp, TestDb};

on_both_backends!(agent_lifecycle_over_http, webhook_header_values_are_never_returned);

async fn agent_lifecycle_over_http(db: TestDb) {
    let app = TestApp::new(db, &crate::helpers::test_config());
    let created = app
        .post(
            "/v1/agents",
            json!({"name": "triage", "instructions": "Be brief.", "max_output_tokens": 512.0,
                   "metadata": {"team": "support"}}),
        )
        .await;
    let agent = created.expect(StatusCode::CREATED);
    let id = agent["id"].as_str().unwrap();
    assert_eq!(uuid::Uuid::parse_str(id).unwrap().get_version_num(), 7);
    assert_eq!(created.header("location"), Some(format!("/v1/agents/{id}").as_str()));
    assert_eq!(agent["max_output_tokens"], 512, "a whole float is a count");
    assert_eq!(agent["max_turns"], 10, "the default");
    assert_eq!(agent["tools"], json!([]));
    assert_eq!(agent["model"], Value::Null);
    assert_eq!(agent["metadata"], json!({"team": "support"}));
    assert_eq!(app.get(&format!("/v1/agents/{id}")).await.expect(StatusCode::OK), agent);

    // Left out stays, null resets, metadata merges.
    let patched = app
        .patch(
            &format!("/v1/agents/{id}"),
            json!({"instructions": null, "max_turns": 3.0, "temperature": 0.5,
                   "metadata": {"team": null, "tier": "1"}}),
        )
        .await
        .expect(StatusCode::OK);
    assert_eq!(patched["name"], "triage");
    assert_eq!(patched["instructions"], Value::Null);
    assert_eq!(patched["max_turns"], 3);
    assert_eq!(patched["temperature"], 0.5);
    assert_eq!(patched["metadata"], json!({"tier": "1"}));
    assert_eq!(patched["created_at"], agent["created_at"]);
    let reset = app
        .patch(&format!("/v1/agents/{id}"), json!({"max_turns": null}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(reset["max_turns"], 10);

    let second = app.post("/v1/agents", json!({})).await.expect(StatusCode::CREATED);
    let page = app.get("/v1/agents?order=asc&limit=1").await.expect(StatusCode::OK);
    assert_eq!(page["data"][0]["id"], id);
    assert_eq!(page["has_more"], true);
    let next = app.get(&format!("/v1/agents?order=asc&after={id}")).await.expect(StatusCode::OK);
    assert_eq!(next["data"], json!([second]));
    assert_eq!(next["has_more"], false);

    app.delete(&format!("/v1/agents/{id}")).await.expect(StatusCode::NO_CONTENT);
    app.get(&format!("/v1/agents/{id}"))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "agent_not_found");
    app.patch(&format!("/v1/agents/{id}"), json!({"name": "x"}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "agent_not_found");
    app.delete(&format!("/v1/agents/{id}"))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "agent_not_found");
    // A path that is no UTF-8 is a problem document naming the parameter, as everywhere.
    let detail =
        app.get("/v1/agents/%FF").await.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("agent_id:"), "{detail}");
}

/// Every field's limits, on create and on patch: a 400 whose detail starts with the field.
#[tokio::test]
async fn bad_agent_bodies_name_the_field() {
    let app = TestApp::sqlite().await;
    let agent = app.post("/v1/agents", json!({})).await.expect(StatusCode::CREATED);
    let path = format!("/v1/agents/{}", agent["id"].as_str().unwrap());
    let webhook =
        |url: &str| json!({"tools": [{"type": "function", "name": "f", "webhook": {"url": url}}]});
    let cases = [
        (json!({"max_output_tokens": 2_147_483_648_u64}), "max_output_tokens"),
        (json!({"max_output_tokens": 0}), "max_output_tokens"),
        (json!({"max_turns": 2.5}), "max_turns"),
        (json!({"max_turns": -1}), "max_turns"),
        (json!({"max_turns": 101}), "max_turns"),
        (json!({"max_turns": "5"}), "max_turns"),
        (json!({"temperature": 2.5}), "temperature"),
        (json!({"model": ""}), "model"),
        (json!({"model": "gpt\u{7}"}), "model"),
        (json!({"name": "n".repeat(257)}), "name"),
        (json!({"context": {"max_input_tokens": 0}}), "context.max_input_tokens"),
        (json!({"context": {"strategy": "summarize"}}), "context.strategy"),
        (
            json!({"context": {"strategy": "compact", "max_input_tokens": 100, "keep_recent_items": -1}}),
            "context.keep_recent_items",
        ),
        (
            json!({"context": {"strategy": "compact", "max_input_tokens": 100, "keep_recent_items": 1001}}),
            "context.keep_recent_items",
        ),
        (
            json!({"context": {"strategy": "compact", "compact_threshold_tokens": 0}}),
            "context.compact_threshold_tokens",
        ),
        (json!({"context": {"keep_recent_items": 3}}), "context.keep_recent_items"),
        (
            json!({"tools": [{"type": "function", "name": "f"}, {"type": "function", "name": "f"}]}),
            "tools[1].name",
        ),
        (
            json!({"tools": [{"type": "function", "name": "f", "parameters": []}]}),
            "tools[0].parameters",
        ),
        (webhook("ftp://tools.example/"), "tools[0].webhook.url"),
        (webhook("https://tools.example/run"), "tools[0].webhook.url"),
        (webhook("http://[::1"), "tools[0].webhook.url"),
        (json!({"colour": "red"}), "colour"),
    ];
    for (body, field) in cases {
        for (method, uri) in [("POST", "/v1/agents"), ("PATCH", path.as_str())] {
            let response = match method {
                "POST" => app.post(uri, body.clone()).await,
                _ => app.patch(uri, body.clone()).await,
            };
            let detail = response.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
            assert!(detail.starts_with(field), "{method} {body}: {detail}");
        }
    }
    let compact = json!({"context": {"strategy": "compact"}});
    let detail = app
        .post("/v1/agents", compact.clone())
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("context.compact_threshold_tokens"), "{detail}");
    app.patch(&path, compact).await.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(
        app.get(&path).await.expect(StatusCode::OK),
        agent,
        "a refused patch changes nothing"
    );
    let compacting = json!({"context": {"strategy": "compact", "max_input_tokens": 1000}});
    let patched = app.patch(&path, compacting).await.expect(StatusCode::OK);
    assert_eq!(patched["context"]["strategy"], "compact");
}

/// Webhook header values are credentials: answers show `[REDACTED]`, a PATCH that sends
/// it back keeps the stored value, and runs still send the real one.
async fn webhook_header_values_are_never_returned(db: TestDb) {
    let mut config = test_config();
    config.tool_webhook_allowed_hosts = vec!["tools.internal".into()];
    let store = db.store.clone();
    let app = TestApp::new(db, &config);
    let tool = |auth: &str| {
        json!({"type": "function", "name": "lookup", "webhook": {
            "url": "https://tools.internal/lookup",
            "headers": {"Authorization": auth, "X-Team": "support"},
        }})
    };
    let created = app
        .post("/v1/agents", json!({"tools": [tool("Bearer s3cret")]}))
        .await
        .expect(StatusCode::CREATED);
    let id = created["id"].as_str().unwrap().to_owned();
    let redacted = json!({"Authorization": "[REDACTED]", "X-Team": "[REDACTED]"});
    assert_eq!(created["tools"][0]["webhook"]["headers"], redacted);
    let path = format!("/v1/agents/{id}");
    for answer in [
        app.get(&path).await.expect(StatusCode::OK),
        app.get("/v1/agents").await.expect(StatusCode::OK)["data"][0].clone(),
    ] {
        assert!(!answer.to_string().contains("s3cret"), "{answer}");
        assert_eq!(answer["tools"][0]["webhook"]["headers"], redacted);
    }

    // Sending the redacted value back keeps the stored one; a new value replaces it.
    let patched = app
        .patch(&path, json!({"tools": [tool("[REDACTED]")], "name": "kept"}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(patched["tools"][0]["webhook"]["headers"], redacted);
    let stored: Value = app.get(&path).await.expect(StatusCode::OK);
    assert_eq!(stored["name"], "kept");
    let agent = store.get_agent("default", &id).await.unwrap();
    let Tool::Function(function) = &agent.tools[0] else { panic!("a function tool") };
    let headers = &function.webhook.as_ref().unwrap().headers;
    assert_eq!(headers["Authorization"], "Bearer s3cret");
    assert_eq!(headers["X-Team"], "support");

    // A redacted value with nothing stored behind it is refused.
    let mut fresh = tool("[REDACTED]");
    fresh["name"] = json!("other");
    let detail = app
        .patch(&path, json!({"tools": [fresh]}))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("tools[0].webhook.headers.Authorization:"), "{detail}");
}
