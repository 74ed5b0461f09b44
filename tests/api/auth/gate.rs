//! With `ADMIN_API_KEY` set, no `/v1` route answers without a valid key.

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

use super::{admin, new_key, with_auth, As, ADMIN_KEY};
use crate::helpers::{test_config, TestApp, TestDb};

/// Every operation of the document, with its path parameters filled in.
fn operations() -> Vec<(Method, String)> {
    let spec: Value = serde_norway::from_str(agent_sessions::http::openapi::yaml()).unwrap();
    let mut operations = Vec::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        let mut uri = path.clone();
        for name in ["session_id", "item_id", "run_id", "agent_id", "key_id"] {
            uri = uri.replace(&format!("{{{name}}}"), "x");
        }
        for method in item.as_object().unwrap().keys() {
            operations
                .push((Method::from_bytes(method.to_uppercase().as_bytes()).unwrap(), uri.clone()));
        }
    }
    operations
}

async fn auth_app() -> TestApp {
    let mut config = test_config();
    with_auth(&mut config);
    TestApp::new(TestDb::sqlite().await, &config)
}

#[tokio::test]
async fn every_v1_route_needs_a_valid_key() {
    let app = auth_app().await;
    let operations = operations();
    assert!(operations.len() > 30, "{operations:?}");
    for (method, uri) in operations {
        let body = matches!(method, Method::POST | Method::PATCH).then(|| json!({}));
        for key in [None, Some("ask_not-a-key"), Some("")] {
            let response = As { app: &app, key }.call(method.clone(), &uri, body.clone()).await;
            let openai = ["/v1/conversations", "/v1/responses", "/v1/models"];
            if openai.iter().any(|route| uri.starts_with(route)) {
                // OpenAI's routes answer in OpenAI's error shape.
                assert_eq!(response.status, StatusCode::UNAUTHORIZED, "{method} {uri}");
                let error = &response.json()["error"];
                assert_eq!(error["code"], "unauthorized", "{method} {uri}: {error}");
                assert_eq!(error["type"], "authentication_error", "{method} {uri}: {error}");
                assert_eq!(response.header("www-authenticate"), Some("Bearer"), "{method} {uri}");
            } else if uri.starts_with("/v1/") {
                response.expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
                assert_eq!(response.header("www-authenticate"), Some("Bearer"), "{method} {uri}");
            } else {
                assert!(response.status.is_success(), "{method} {uri}: {}", response.status);
            }
        }
    }
    for open in ["/docs/", "/console"] {
        let status = app.get(open).await.status;
        assert!(status.is_success() || status.is_redirection(), "{open}: {status}");
    }
    // Scheme names are case-insensitive; a key in another scheme is no key.
    let (_, key) = new_key(&app, "acme", json!(["read", "write"])).await;
    for (header, status) in [
        (format!("bearer {key}"), StatusCode::OK),
        (format!("Basic {key}"), StatusCode::UNAUTHORIZED),
        (key.clone(), StatusCode::UNAUTHORIZED),
    ] {
        let request = axum::http::Request::get("/v1/sessions")
            .header("authorization", header.as_str())
            .body(axum::body::Body::empty())
            .unwrap();
        assert_eq!(app.send(request).await.status, status, "{header}");
    }
}

#[tokio::test]
async fn the_admin_manages_keys_and_tenants_use_them() {
    let app = auth_app().await;
    let (_, key) = new_key(&app, "acme", json!(["read", "write"])).await;
    let tenant = As { app: &app, key: Some(&key) };
    // The admin key reaches no data; a tenant's key no keys.
    let detail =
        admin(&app).get("/v1/sessions").await.expect_problem(StatusCode::FORBIDDEN, "forbidden");
    assert!(detail.contains("admin key"), "{detail}");
    tenant.get("/v1/api_keys").await.expect_problem(StatusCode::FORBIDDEN, "forbidden");
    tenant
        .post("/v1/api_keys", json!({"tenant": "acme", "name": "mine"}))
        .await
        .expect_problem(StatusCode::FORBIDDEN, "forbidden");
    tenant.post("/v1/sessions", json!({"id": "s1"})).await.expect(StatusCode::CREATED);

    // A read key reads, and changes nothing.
    let (_, reader) = new_key(&app, "acme", json!(["read"])).await;
    let reader = As { app: &app, key: Some(&reader) };
    reader.get("/v1/sessions/s1").await.expect(StatusCode::OK);
    reader.get("/v1/sessions/s1/items").await.expect(StatusCode::OK);
    for (method, uri) in [
        (Method::POST, "/v1/sessions"),
        (Method::PATCH, "/v1/sessions/s1"),
        (Method::DELETE, "/v1/sessions/s1"),
        (Method::POST, "/v1/sessions/s1/items"),
        (Method::DELETE, "/v1/sessions/s1/items/last"),
        (Method::POST, "/v1/sessions/s1/runs"),
        (Method::POST, "/v1/agents"),
    ] {
        let body = (method != Method::DELETE).then(|| json!({}));
        let detail = reader
            .call(method.clone(), uri, body)
            .await
            .expect_problem(StatusCode::FORBIDDEN, "forbidden");
        assert!(detail.contains("read"), "{method} {uri}: {detail}");
    }
    tenant.get("/v1/sessions/s1").await.expect(StatusCode::OK);
}

#[tokio::test]
async fn without_an_admin_key_everyone_is_the_default_tenant() {
    let app = TestApp::sqlite().await;
    app.post("/v1/sessions", json!({"id": "open"})).await.expect(StatusCode::CREATED);
    // A key is not needed, and one sent is not looked at.
    As { app: &app, key: Some("anything") }.get("/v1/sessions/open").await.expect(StatusCode::OK);
    let detail = app.get("/v1/api_keys").await.expect_problem(StatusCode::FORBIDDEN, "forbidden");
    assert!(detail.contains("ADMIN_API_KEY"), "{detail}");
}

#[tokio::test]
async fn a_short_admin_key_is_refused() {
    let mut config = test_config();
    config.admin_api_key = Some("too-short".into());
    let error = config.auth_settings().unwrap_err().to_string();
    assert!(error.contains("ADMIN_API_KEY") && error.contains("32"), "{error}");
    config.admin_api_key = Some(ADMIN_KEY.into());
    assert!(config.auth_settings().is_ok());
}

#[tokio::test]
async fn a_burst_over_the_rate_limit_is_429_and_spares_the_neighbour() {
    let mut config = test_config();
    with_auth(&mut config);
    config.rate_limit_per_key = Some(2.try_into().unwrap());
    let app = TestApp::new(TestDb::sqlite().await, &config);
    let (_, noisy) = new_key(&app, "acme", json!(["read", "write"])).await;
    let (_, quiet) = new_key(&app, "acme", json!(["read", "write"])).await;
    let noisy = As { app: &app, key: Some(&noisy) };
    // Burst: twice the rate per second.
    let mut answers = Vec::new();
    for _ in 0..6 {
        answers.push(noisy.get("/v1/sessions").await);
    }
    let first = &answers[0];
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.header("ratelimit-limit"), Some("4"));
    assert_eq!(first.header("ratelimit-remaining"), Some("3"));
    let limited = answers
        .iter()
        .find(|a| a.status == StatusCode::TOO_MANY_REQUESTS)
        .expect("a request over the burst is refused");
    limited.expect_problem(StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    let retry_after: u64 = limited.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    assert_eq!(limited.header("ratelimit-remaining"), Some("0"));
    assert!(limited.header("ratelimit-reset").is_some());
    As { app: &app, key: Some(&quiet) }.get("/v1/sessions").await.expect(StatusCode::OK);
}
