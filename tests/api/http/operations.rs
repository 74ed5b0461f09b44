use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::json;

use crate::helpers::TestApp;

#[tokio::test]
async fn every_response_carries_a_request_id() {
    let app = TestApp::sqlite().await;
    let given =
        Request::get("/healthz").header("x-request-id", "trace-me-42").body(Body::empty()).unwrap();
    assert_eq!(app.send(given).await.header("x-request-id"), Some("trace-me-42"));
    for response in [
        app.get("/healthz").await,
        app.get("/v1/sessions/missing").await,
        app.get("/nowhere").await,
        app.post("/v1/sessions", json!({"id": 1})).await,
    ] {
        let id = response.header("x-request-id").expect("a request id");
        assert!(uuid::Uuid::parse_str(id).is_ok(), "{id}");
    }
}

#[tokio::test]
async fn health_and_readiness() {
    let app = TestApp::sqlite().await;
    assert_eq!(app.get("/healthz").await.expect(StatusCode::OK), json!({"status": "ok"}));
    assert_eq!(app.get("/readyz").await.expect(StatusCode::OK), json!({"status": "ok"}));
}

#[sqlx::test(migrations = "./migrations/postgres")]
async fn a_lost_database_is_503_everywhere(pool: sqlx::PgPool) {
    let app = TestApp::postgres(pool.clone());
    app.get("/readyz").await.expect(StatusCode::OK);
    pool.close().await;
    app.get("/readyz")
        .await
        .expect_problem(StatusCode::SERVICE_UNAVAILABLE, "database_unavailable");
    let response = app.get("/v1/sessions/any").await;
    assert_eq!(response.header("retry-after"), Some("1"));
    let detail = response.expect_problem(StatusCode::SERVICE_UNAVAILABLE, "database_unavailable");
    assert_eq!(detail, "the database is not reachable");
    assert!(!response.text.to_lowercase().contains("pool"), "{}", response.text);
}

#[sqlx::test(migrations = "./migrations/postgres")]
async fn internal_errors_are_opaque_500s(pool: sqlx::PgPool) {
    let app = TestApp::postgres(pool.clone());
    app.post("/v1/sessions/broken/items", json!({"items": [{"ok": true}]}))
        .await
        .expect(StatusCode::CREATED);
    // Damage the stored item behind the service's back.
    sqlx::query("update items set body = 'not json'").execute(&pool).await.unwrap();
    let response = app.get("/v1/sessions/broken/items").await;
    let detail = response.expect_problem(StatusCode::INTERNAL_SERVER_ERROR, "internal_error");
    assert_eq!(detail, "an internal error occurred", "internal causes stay in the log");
    assert!(!response.text.contains("not JSON"), "{}", response.text);
}

#[tokio::test]
async fn metrics_count_requests_by_route_and_report_the_pool() {
    let app = TestApp::sqlite().await;
    app.get("/v1/sessions/a").await;
    app.get("/v1/sessions/b").await;
    app.get("/healthz").await;
    app.call("BREW".parse().unwrap(), "/v1/sessions", None).await;
    let response = app.get("/metrics").await;
    assert_eq!(response.status, StatusCode::OK);
    assert!(response.header("content-type").unwrap().starts_with("application/openmetrics-text"));
    let text = &response.text;
    assert!(
        text.contains(
            r#"agent_sessions_http_requests_total{method="GET",route="/v1/sessions/{session_id}",status="404"} 2"#
        ),
        "{text}"
    );
    assert!(text.contains(r#"http_request_duration_seconds_bucket{"#), "{text}");
    assert!(text.contains(r#"agent_sessions_db_pool_connections{state="idle"}"#), "{text}");
    assert!(text.contains(r#"agent_sessions_db_pool_connections{state="in_use"}"#), "{text}");
}

#[tokio::test]
async fn the_committed_openapi_yaml_is_what_the_code_generates() {
    let generated = agent_sessions::http::openapi::yaml();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml");
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(path, generated).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == generated,
        "openapi.yaml is stale: run `UPDATE_OPENAPI=1 scripts/test.sh the_committed_openapi_yaml` and commit it"
    );
    let app = TestApp::sqlite().await;
    let served = app.get("/openapi.yaml").await;
    assert_eq!(served.status, StatusCode::OK);
    assert_eq!(served.text, generated);
    let spec: serde_json::Value =
        serde_json::from_str(&app.get("/openapi.json").await.text).unwrap();
    assert!(spec["paths"]["/v1/sessions/{session_id}/items/last"]["delete"].is_object());
    let root = app.get("/").await;
    assert_eq!(root.status, StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(root.header("location"), Some("/console"));
    let docs = app.get("/docs/").await;
    assert_eq!(docs.status, StatusCode::OK);
    assert!(docs.text.contains("swagger"), "{}", &docs.text[..200.min(docs.text.len())]);
}

#[sqlx::test(migrations = "./migrations/postgres")]
async fn a_request_over_the_time_limit_is_503(pool: sqlx::PgPool) {
    let mut config = crate::helpers::test_config();
    config.request_timeout_secs = 1;
    let app = TestApp::new(crate::helpers::TestDb::postgres(pool.clone()), &config);
    app.post("/v1/sessions", json!({"id": "locked"})).await.expect(StatusCode::CREATED);
    // Hold the session's row lock, so the patch waits for it.
    let mut blocker = pool.begin().await.unwrap();
    sqlx::query("select 1 from sessions where id = 'locked' for update")
        .execute(&mut *blocker)
        .await
        .unwrap();
    let detail = app
        .patch("/v1/sessions/locked", json!({"metadata": {"a": "b"}}))
        .await
        .expect_problem(StatusCode::SERVICE_UNAVAILABLE, "request_timeout");
    assert!(detail.contains('1'), "{detail}");
    blocker.rollback().await.unwrap();
    // The abandoned patch changed nothing; the next one goes through.
    assert_eq!(app.get("/v1/sessions/locked").await.expect(StatusCode::OK)["metadata"], json!({}));
    app.patch("/v1/sessions/locked", json!({"metadata": {"a": "b"}})).await.expect(StatusCode::OK);
}

#[tokio::test]
async fn cors_answers_only_for_configured_origins() {
    let preflight = |origin: &str| {
        Request::options("/v1/sessions")
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .body(Body::empty())
            .unwrap()
    };
    let closed = TestApp::sqlite().await;
    let response = closed.send(preflight("https://app.example")).await;
    assert_eq!(response.header("access-control-allow-origin"), None);

    let mut config = crate::helpers::test_config();
    config.cors_allowed_origins = vec!["https://app.example".into()];
    let open = TestApp::new(crate::helpers::TestDb::sqlite().await, &config);
    let response = open.send(preflight("https://app.example")).await;
    assert_eq!(response.header("access-control-allow-origin"), Some("https://app.example"));
    let methods = response.header("access-control-allow-methods").unwrap().to_owned();
    for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
        assert!(methods.contains(method), "{methods}");
    }
    // Any header a client sends is allowed: a resume, a condition, a client's own.
    let asked = "authorization, last-event-id, if-match, x-stainless-os, x-stainless-retry-count";
    let mut with_headers = preflight("https://app.example");
    with_headers.headers_mut().insert("access-control-request-headers", asked.parse().unwrap());
    let response = open.send(with_headers).await;
    assert_eq!(response.header("access-control-allow-headers"), Some(asked));
    let answered = open
        .send(
            Request::get("/v1/sessions")
                .header("origin", "https://app.example")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    let exposed = answered.header("access-control-expose-headers").unwrap().to_owned();
    for header in ["x-request-id", "idempotent-replayed", "etag", "retry-after"] {
        assert!(exposed.contains(header), "{exposed}");
    }
    let response = open.send(preflight("https://other.example")).await;
    assert_eq!(response.header("access-control-allow-origin"), None);
}
