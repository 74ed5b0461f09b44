//! Every kind of bad input is a 400 (or 413/415) problem that names the field, never a 500.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::json;

use crate::helpers::{on_both_backends, test_config, TestApp, TestDb};

on_both_backends!(
    malformed_bodies_name_the_field,
    metadata_over_its_limits_is_refused,
    bad_queries_and_paths_name_the_parameter,
    items_json_libraries_cannot_read_are_refused,
);

fn raw(method: Method, uri: &str, body: &str) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Body::from(body.to_owned()))
        .unwrap()
}

/// (method, path, body, the field the detail must start with)
const BAD_BODIES: &[(&str, &str, &str, &str)] = &[
    ("POST", "/v1/sessions/s/items", "", "body"),
    ("POST", "/v1/sessions/s/items", "{", "body"),
    ("POST", "/v1/sessions/s/items", "[]", "body"),
    ("POST", "/v1/sessions/s/items", "null", "body"),
    ("POST", "/v1/sessions/s/items", r#"{"items":[{}]} trailing"#, "body"),
    ("POST", "/v1/sessions/s/items", "{}", "body"),
    ("POST", "/v1/sessions/s/items", r#"[[{}]]"#, "body"),
    ("POST", "/v1/sessions", r#"[null, {"a": "b"}, null]"#, "body"),
    ("PATCH", "/v1/sessions/s", r#"[null, null]"#, "body"),
    ("PATCH", "/v1/sessions/s", r#"{"metadata":{"":null}}"#, "metadata"),
    ("POST", "/v1/sessions/s/items", r#"{"items":{}}"#, "items"),
    ("POST", "/v1/sessions/s/items", r#"{"items":[],"state_delta":1}"#, "state_delta"),
    ("POST", "/v1/sessions/s/items", r#"{"items":[1]}"#, "items[0]"),
    ("POST", "/v1/sessions/s/items", r#"{"items":[{}, [{}]]}"#, "items[1]"),
    ("POST", "/v1/sessions/s/items", r#"{"items":[{}, null]}"#, "items[1]"),
    ("POST", "/v1/sessions/s/items", r#"{"items":[{"a":tru}]}"#, "items[0]"),
    ("POST", "/v1/sessions/s/items", r#"{"items":[{}],"extra":1}"#, "extra"),
    ("POST", "/v1/sessions", r#"{"id":""}"#, "id"),
    ("POST", "/v1/sessions", r#"{"id":"has space"}"#, "id"),
    ("POST", "/v1/sessions", r#"{"id":"slash/inside"}"#, "id"),
    ("POST", "/v1/sessions", r#"{"id":7}"#, "id"),
    ("POST", "/v1/sessions", r#"{"agent_id":"bad agent"}"#, "agent_id"),
    ("POST", "/v1/sessions", r#"{"metadata":[]}"#, "metadata"),
    ("POST", "/v1/sessions", r#"{"metadata":{"a":1}}"#, "metadata.a"),
    ("POST", "/v1/sessions", r#"{"metadata":{"a":null}}"#, "metadata.a"),
    ("POST", "/v1/sessions", r#"{"metadata":{"":"empty key"}}"#, "metadata"),
    ("POST", "/v1/sessions", r#"{"nope":true}"#, "nope"),
    ("POST", "/v1/sessions", r#"{"id":".."}"#, "id"),
    ("POST", "/v1/sessions", r#"{"metadata":{"a":"nul \u0000 inside"}}"#, "metadata.a"),
    ("POST", "/v1/sessions", r#"{"metadata":{"\u0000":"x"}}"#, "metadata"),
    ("PATCH", "/v1/sessions/s", r#"{"metadata":{"a":"\u0000"}}"#, "metadata.a"),
    ("PATCH", "/v1/sessions/s", r#"{"metadata":{"a":5}}"#, "metadata.a"),
    ("PATCH", "/v1/sessions/s", r#"{"metadata":"x"}"#, "metadata"),
    ("PATCH", "/v1/sessions/s", r#"{"agent_id":"no way"}"#, "agent_id"),
    ("PATCH", "/v1/sessions/s", r#"{"id":"other"}"#, "id"),
];

async fn malformed_bodies_name_the_field(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    app.post("/v1/sessions", json!({"id": "s"})).await.expect(StatusCode::CREATED);
    for (method, uri, body, field) in BAD_BODIES {
        let response = app.send(raw(method.parse().unwrap(), uri, body)).await;
        let detail = response.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
        assert!(
            detail.starts_with(&format!("{field}:")),
            "{method} {uri} {body}: detail `{detail}` does not name `{field}`"
        );
    }
    // Nothing of it was stored.
    let session = app.get("/v1/sessions/s").await.expect(StatusCode::OK);
    assert_eq!((session["item_count"].as_i64(), &session["metadata"]), (Some(0), &json!({})));
    assert_eq!(
        app.get("/v1/sessions").await.expect(StatusCode::OK)["data"].as_array().unwrap().len(),
        1
    );
}

async fn metadata_over_its_limits_is_refused(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    let many: serde_json::Map<String, serde_json::Value> =
        (0..65).map(|i| (format!("k{i}"), json!("v"))).collect();
    let cases = [
        (json!({"metadata": many}), "metadata"),
        (json!({"metadata": {"k".repeat(65): "v"}}), "metadata"),
        (json!({"metadata": {"k": "v".repeat(513)}}), "metadata.k"),
    ];
    for (body, field) in &cases {
        let detail = app
            .post("/v1/sessions", body.clone())
            .await
            .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
        assert!(detail.starts_with(&format!("{field}:")), "{detail}");
    }
    // At the limits exactly is fine; characters count, not bytes.
    let at_limit: serde_json::Map<String, serde_json::Value> =
        (0..64).map(|i| (format!("k{i}"), json!("v"))).collect();
    app.post("/v1/sessions", json!({"id": "full", "metadata": at_limit}))
        .await
        .expect(StatusCode::CREATED);
    app.post("/v1/sessions", json!({"metadata": {"ü".repeat(64): "é".repeat(512)}}))
        .await
        .expect(StatusCode::CREATED);
    let detail = app
        .patch("/v1/sessions/full", json!({"metadata": {"one_more": "v"}}))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("metadata:"), "{detail}");
    let detail = app
        .patch("/v1/sessions/full", json!({"metadata": {"k0": "v".repeat(513)}}))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("metadata.k0:"), "{detail}");
}

#[tokio::test]
async fn batches_are_limited_to_1000_items() {
    let app = TestApp::sqlite().await;
    let items = |n: usize| json!({"items": vec![json!({"i": 1}); n]});
    let detail = app
        .post("/v1/sessions/big/items", items(1001))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("items:"), "{detail}");
    let added = app.post("/v1/sessions/big/items", items(1000)).await.expect(StatusCode::CREATED);
    assert_eq!(added["data"].as_array().unwrap().len(), 1000);
    assert_eq!(added["data"][999]["seq"], 1000);
}

async fn bad_queries_and_paths_name_the_parameter(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    app.post("/v1/sessions/s/items", json!({"items": [{}]})).await.expect(StatusCode::CREATED);
    let long_id = "x".repeat(129);
    let cases = [
        ("/v1/sessions?limit=0", "limit"),
        ("/v1/sessions?limit=1001", "limit"),
        ("/v1/sessions?limit=-1", "limit"),
        ("/v1/sessions?limit=ten", "limit"),
        ("/v1/sessions?limit=99999999999999999999", "limit"),
        ("/v1/sessions?order=sideways", "order"),
        ("/v1/sessions?after=", "after"),
        ("/v1/sessions?after=a&before=b", "before"),
        ("/v1/sessions?after=%00", "after"),
        ("/v1/sessions?before=a%00b", "before"),
        ("/v1/sessions?metadata[a]=%00", "metadata[a]"),
        ("/v1/sessions?metadata[%00]=x", "metadata[\0]"),
        ("/v1/sessions?metadata[]=x", "metadata[]"),
        ("/v1/sessions/s/items?limit=0", "limit"),
        ("/v1/sessions/s/items?order=DESC", "order"),
        ("/v1/sessions/s/items?after=not-an-item", "after:"),
        ("/v1/sessions/s/items?before=019a9f0e-2b1c-7cc2-9a51-3f1f2f0c8a10", "before:"),
        ("/v1/sessions?before=nobody", "before:"),
        ("/v1/sessions/bad%20id", "session_id"),
        ("/v1/sessions/bad%20id/items", "session_id"),
        ("/v1/sessions/%C3%A9/items", "session_id"),
        // Unknown and repeated parameters are refused, not ignored.
        ("/v1/sessions?user=alice", "user: is not a query parameter"),
        ("/v1/sessions?metadata.user=alice", "metadata.user: is not"),
        ("/v1/sessions?limit=2&limit=3", "limit: may be given only once"),
        ("/v1/sessions?metadata[u]=a&metadata[u]=b", "metadata[u]: may be"),
        ("/v1/sessions/s/items?metadata[u]=a", "metadata[u]: is not"),
        ("/v1/sessions/s?verbose=1", "verbose: is not"),
        ("/healthz?probe=1", "probe: is not"),
    ];
    for (uri, field) in cases {
        let detail = app.get(uri).await.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
        assert!(detail.starts_with(field), "{uri}: {detail}");
    }
    let detail = app
        .get(&format!("/v1/sessions/{long_id}"))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("session_id:"), "{detail}");
    app.get(&format!("/v1/sessions/{}", "x".repeat(128)))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    app.post("/v1/sessions/bad%20id/items", json!({"items": [{}]}))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    let detail = app
        .post("/v1/sessions/s/items?dry_run=true", json!({"items": [{}]}))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("dry_run:"), "{detail}");
    app.post("/v1/sessions/%2E%2E/items", json!({"items": [{}]}))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");

    // A session has at most 64 keys, so more filters than that can never all match.
    let filters: Vec<String> = (0..65).map(|i| format!("metadata[k{i}]=v")).collect();
    let detail = app
        .get(&format!("/v1/sessions?{}", filters.join("&")))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("metadata:"), "{detail}");
    let filters: Vec<String> = (0..64).map(|i| format!("metadata[k{i}]=v")).collect();
    app.get(&format!("/v1/sessions?{}", filters.join("&"))).await.expect(StatusCode::OK);

    // A path that is not UTF-8 once decoded is a 400 in each route's own error shape.
    let detail = app.get("/v1/sessions/%ff%fe/items").await;
    let detail = detail.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("session_id:"), "{detail}");
    for uri in ["/v1/responses/resp_%ff%fe", "/v1/conversations/conv_%ff/items"] {
        let answer = app.get(uri).await;
        assert_eq!(answer.header("content-type"), Some("application/json"), "{uri}");
        let error = answer.expect(StatusCode::BAD_REQUEST);
        assert_eq!(error["error"]["code"], "invalid_request", "{uri}: {error}");
        assert_eq!(error["error"]["param"], "path", "{uri}: {error}");
    }
}

async fn items_json_libraries_cannot_read_are_refused(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    let cases = [
        r#"{"items":[{"ok":1},{"lone":"\ud800"}]}"#.to_owned(),
        r#"{"items":[{"huge":1e400}]}"#.to_owned(),
        format!(r#"{{"items":[{{"deep":{deep}}}]}}"#),
    ];
    for body in &cases {
        let detail = app
            .send(raw(Method::POST, "/v1/sessions/strict/items", body))
            .await
            .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
        assert!(detail.starts_with("items["), "{detail}");
    }
    // Too deep names the limit, for an item and for a request body alike.
    let detail = app
        .send(raw(Method::POST, "/v1/sessions/strict/items", &cases[2]))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.contains("deeper than 128 levels"), "{detail}");
    let detail = app
        .send(raw(
            Method::POST,
            "/v1/agents",
            &format!(
                r#"{{"tools":[{{"type":"function","name":"f","parameters":{{"d":{deep}}}}}]}}"#
            ),
        ))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.contains("deeper than 128 levels"), "{detail}");
    app.get("/v1/sessions/strict").await.expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    // Within the limits all of it is fine: a surrogate pair, 100 levels, a big integer.
    let fine = format!(
        r#"{{"items":[{{"pair":"\ud83c\udf0d","deep":{}1{},"big":123456789012345678901234567890}}]}}"#,
        "[".repeat(100),
        "]".repeat(100)
    );
    app.send(raw(Method::POST, "/v1/sessions/strict/items", &fine))
        .await
        .expect(StatusCode::CREATED);
}

#[tokio::test]
async fn oversized_bodies_are_413_and_other_media_types_415() {
    let mut config = test_config();
    config.max_body_bytes = 1024;
    let app = TestApp::new(TestDb::sqlite().await, &config);
    let big = json!({"items": [{"text": "x".repeat(2000)}]});
    let detail = app
        .post("/v1/sessions/s/items", big)
        .await
        .expect_problem(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    assert!(detail.contains("limit of 1024 bytes (1 KiB"), "{detail}");
    app.get("/v1/sessions/s").await.expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    app.post("/v1/sessions/s/items", json!({"items": [{"text": "small"}]}))
        .await
        .expect(StatusCode::CREATED);

    let form = Request::post("/v1/sessions")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Body::from("id=x"))
        .unwrap();
    app.send(form)
        .await
        .expect_problem(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");
    // No content type at all is read as JSON; a +json type is JSON too.
    let bare = Request::post("/v1/sessions").body(Body::from(r#"{"id":"bare"}"#)).unwrap();
    app.send(bare).await.expect(StatusCode::CREATED);
    let merge = Request::patch("/v1/sessions/bare")
        .header("content-type", "application/merge-patch+json; charset=utf-8")
        .body(Body::from(r#"{"metadata":{"a":"b"}}"#))
        .unwrap();
    assert_eq!(app.send(merge).await.expect(StatusCode::OK)["metadata"], json!({"a": "b"}));
}

#[tokio::test]
async fn unknown_routes_and_methods_are_problems() {
    let app = TestApp::sqlite().await;
    app.get("/v2/nothing").await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    let response = app.call(Method::PUT, "/v1/sessions", None).await;
    response.expect_problem(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    assert!(response.header("allow").unwrap().contains("POST"));
    app.call(Method::POST, "/v1/sessions/s/items/last", None)
        .await
        .expect_problem(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    // `last` is a resource of its own that can only be popped.
    let response = app.get("/v1/sessions/s/items/last").await;
    response.expect_problem(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    assert_eq!(response.header("allow"), Some("DELETE"));
}
