use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{json, Value};

use crate::helpers::TestApp;

fn append_request(session: &str, body: &str, key: Option<&str>) -> Request<Body> {
    let mut request = Request::post(format!("/v1/sessions/{session}/items"))
        .header("content-type", "application/json");
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    request.body(Body::from(body.to_owned())).unwrap()
}

#[tokio::test]
async fn the_sdk_session_protocol_over_http() {
    let app = TestApp::sqlite().await;
    // add_items creates the session.
    let added = app
        .post(
            "/v1/sessions/sdk/items",
            json!({"items": [
                {"role": "user", "content": "What is 2+2?"},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "4"}]},
                {"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{\"a\":2}"},
            ]}),
        )
        .await
        .expect(StatusCode::CREATED);
    let data = added["data"].as_array().unwrap();
    assert_eq!(data.len(), 3);
    assert_eq!(data.iter().map(|i| i["seq"].as_i64().unwrap()).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(data[0]["item"], json!({"role": "user", "content": "What is 2+2?"}));
    assert_eq!(data[0]["run_id"], Value::Null);
    assert_eq!(app.get("/v1/sessions/sdk").await.expect(StatusCode::OK)["item_count"], 3);

    // get_items(limit=2): the newest two, newest first.
    let latest = app.get("/v1/sessions/sdk/items?order=desc&limit=2").await.expect(StatusCode::OK);
    let seqs: Vec<i64> =
        latest["data"].as_array().unwrap().iter().map(|i| i["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, [3, 2]);
    assert_eq!(latest["has_more"], true);
    let older = app
        .get(&format!(
            "/v1/sessions/sdk/items?order=desc&after={}",
            latest["last_id"].as_str().unwrap()
        ))
        .await
        .expect(StatusCode::OK);
    assert_eq!(older["data"][0]["seq"], 1);

    let first_id = data[0]["id"].as_str().unwrap();
    let one = app.get(&format!("/v1/sessions/sdk/items/{first_id}")).await.expect(StatusCode::OK);
    assert_eq!(one, data[0]);

    // pop_item
    let popped = app.delete("/v1/sessions/sdk/items/last").await.expect(StatusCode::OK);
    assert_eq!(popped, data[2]);
    app.get(&format!("/v1/sessions/sdk/items/{}", data[2]["id"].as_str().unwrap()))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "item_not_found");

    app.delete(&format!("/v1/sessions/sdk/items/{first_id}")).await.expect(StatusCode::NO_CONTENT);
    let left = app.get("/v1/sessions/sdk/items").await.expect(StatusCode::OK);
    assert_eq!(left["data"].as_array().unwrap().len(), 1);
    assert_eq!(left["data"][0]["seq"], 2);

    // clear_session
    app.delete("/v1/sessions/sdk/items").await.expect(StatusCode::NO_CONTENT);
    let session = app.get("/v1/sessions/sdk").await.expect(StatusCode::OK);
    assert_eq!(session["item_count"], 0);
    app.delete("/v1/sessions/sdk/items/last")
        .await
        .expect_problem(StatusCode::NOT_FOUND, "session_empty");
}

#[tokio::test]
async fn items_come_back_byte_for_byte() {
    let app = TestApp::sqlite().await;
    let item =
        r#"{"z":1,"a":{"big":123456789012345678901234567890,"f":0.10,"u":"\u00e9 ü 🦀","n":null}}"#;
    let response =
        app.send(append_request("exact", &format!(r#"{{"items":[{item}]}}"#), None)).await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    assert!(response.text.contains(item), "{}", response.text);
    let listed = app.get("/v1/sessions/exact/items").await;
    assert!(listed.text.contains(item), "{}", listed.text);
}

#[tokio::test]
async fn unknown_sessions_and_items_are_404() {
    let app = TestApp::sqlite().await;
    for path in [
        "/v1/sessions/ghost/items",
        "/v1/sessions/ghost/items/019a9f0e-2b1c-7cc2-9a51-3f1f2f0c8a10",
        "/v1/sessions/ghost/items/not-a-uuid",
    ] {
        app.get(path).await.expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    }
    for path in ["/v1/sessions/ghost/items/last", "/v1/sessions/ghost/items", "/v1/sessions/ghost"]
    {
        app.delete(path).await.expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    }
    app.post("/v1/sessions", json!({"id": "real"})).await.expect(StatusCode::CREATED);
    let detail = app
        .get("/v1/sessions/real/items/not-a-uuid")
        .await
        .expect_problem(StatusCode::NOT_FOUND, "item_not_found");
    assert!(detail.contains("not-a-uuid"), "{detail}");
    app.delete("/v1/sessions/real/items/019a9f0e-2b1c-7cc2-9a51-3f1f2f0c8a10")
        .await
        .expect_problem(StatusCode::NOT_FOUND, "item_not_found");
}

#[tokio::test]
async fn idempotency_keys_over_http() {
    let app = TestApp::sqlite().await;
    let body = r#"{"items":[{"role":"user","content":"once"}]}"#;
    let first = app.send(append_request("idem", body, Some("key-1"))).await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(first.header("idempotent-replayed"), None);
    let retry = app.send(append_request("idem", body, Some("key-1"))).await;
    assert_eq!(retry.status, StatusCode::CREATED);
    assert_eq!(retry.header("idempotent-replayed"), Some("true"));
    assert_eq!(retry.json(), first.json());
    assert_eq!(app.get("/v1/sessions/idem").await.expect(StatusCode::OK)["item_count"], 1);

    let other = r#"{"items":[{"role":"user","content":"twice"}]}"#;
    app.send(append_request("idem", other, Some("key-1")))
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused");
    for bad_key in ["", &"k".repeat(256), "has space"] {
        let detail = app
            .send(append_request("idem", body, Some(bad_key)))
            .await
            .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
        assert!(detail.starts_with("Idempotency-Key"), "{detail}");
    }
    assert_eq!(app.get("/v1/sessions/idem").await.expect(StatusCode::OK)["item_count"], 1);
}

#[tokio::test]
async fn a_batch_with_one_bad_item_appends_nothing() {
    let app = TestApp::sqlite().await;
    app.post("/v1/sessions/atomic/items", json!({"items": [{"ok": 1}]}))
        .await
        .expect(StatusCode::CREATED);
    let detail = app
        .post(
            "/v1/sessions/atomic/items",
            json!({"items": [{"ok": 2}, {"ok": 3}, "not an object", {"ok": 4}]}),
        )
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("items[2]"), "{detail}");
    let items = app.get("/v1/sessions/atomic/items").await.expect(StatusCode::OK);
    assert_eq!(items["data"].as_array().unwrap().len(), 1);
    // Nor does a refused batch create its session.
    app.post("/v1/sessions/never/items", json!({"items": [{"ok": 1}, 7]}))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    app.get("/v1/sessions/never").await.expect_problem(StatusCode::NOT_FOUND, "session_not_found");
}

#[sqlx::test(migrations = "./migrations/postgres")]
async fn items_over_http_on_postgres(pool: sqlx::PgPool) {
    let app = TestApp::postgres(pool);
    let item = r#"{"b":1,"a":[1.0,2e5,"x"],"big":98765432109876543210}"#;
    let response =
        app.send(append_request("pg", &format!(r#"{{"items":[{item},{{}}]}}"#), Some("k"))).await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    assert!(response.text.contains(item));
    let retry =
        app.send(append_request("pg", &format!(r#"{{"items":[{item},{{}}]}}"#), Some("k"))).await;
    assert_eq!(retry.header("idempotent-replayed"), Some("true"));
    let listed = app.get("/v1/sessions/pg/items?order=desc").await;
    assert!(listed.text.contains(item));
    assert_eq!(listed.json()["data"][0]["seq"], 2);
    let popped = app.delete("/v1/sessions/pg/items/last").await.expect(StatusCode::OK);
    assert_eq!(popped["item"], json!({}));
    app.delete("/v1/sessions/pg").await.expect(StatusCode::NO_CONTENT);
    app.get("/v1/sessions/pg/items")
        .await
        .expect_problem(StatusCode::NOT_FOUND, "session_not_found");
}
