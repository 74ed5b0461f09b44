//! Replacing history: one item in place, the whole history, or what follows an item,
//! each one revision, and compare-and-swap with `If-Match`.

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

use super::{etag, send};
use crate::helpers::{on_both_backends, test_config, TestApp, TestDb};

on_both_backends!(
    an_item_is_replaced_in_place,
    the_history_or_a_suffix_is_replaced_at_once_with_new_seqs,
    a_stale_or_bad_replacement_changes_nothing,
    removals_and_replacements_take_idempotency_keys,
);

/// A request with an `Idempotency-Key` and a JSON body, if any.
async fn keyed(
    app: &TestApp, method: Method, uri: &str, key: &str, body: Option<Value>,
) -> crate::helpers::TestResponse {
    let request =
        axum::http::Request::builder().method(method).uri(uri).header("idempotency-key", key);
    let request = match body {
        Some(body) => request
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body.to_string())),
        None => request.body(axum::body::Body::empty()),
    };
    app.send(request.unwrap()).await
}

async fn removals_and_replacements_take_idempotency_keys(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    let made =
        app.post("/v1/sessions/k/items", json!({"items": [{"n": 1}, {"n": 2}, {"n": 3}]})).await;
    let made = made.expect(StatusCode::CREATED);
    let id = |n: usize| made["data"][n]["id"].as_str().unwrap().to_owned();

    // A retried pop answers the item the first one removed, and removes no other.
    let popped = keyed(&app, Method::DELETE, "/v1/sessions/k/items/last", "pop-1", None).await;
    let popped = popped.expect(StatusCode::OK);
    let again = keyed(&app, Method::DELETE, "/v1/sessions/k/items/last", "pop-1", None).await;
    assert_eq!(again.expect(StatusCode::OK), popped);
    assert_eq!(items(&app, "k").await.len(), 2);

    let first = format!("/v1/sessions/k/items/{}", id(0));
    keyed(&app, Method::DELETE, &first, "del-1", None).await.expect(StatusCode::NO_CONTENT);
    keyed(&app, Method::DELETE, &first, "del-1", None).await.expect(StatusCode::NO_CONTENT);
    // Without its key, a repeat finds nothing to delete.
    app.delete(&first).await.expect_problem(StatusCode::NOT_FOUND, "item_not_found");

    let second = format!("/v1/sessions/k/items/{}", id(1));
    let body = Some(json!({"item": {"n": 20}}));
    let replaced = keyed(&app, Method::PUT, &second, "put-1", body.clone()).await;
    let replaced_body = replaced.expect(StatusCode::OK);
    let revision = etag(&replaced);
    keyed(&app, Method::DELETE, "/v1/sessions/k/items", "clear-1", None)
        .await
        .expect(StatusCode::NO_CONTENT);
    let retried = keyed(&app, Method::PUT, &second, "put-1", body).await;
    assert_eq!((retried.expect(StatusCode::OK), etag(&retried)), (replaced_body, revision));
    keyed(&app, Method::DELETE, "/v1/sessions/k/items", "clear-1", None)
        .await
        .expect(StatusCode::NO_CONTENT);
    let other = keyed(&app, Method::PUT, &second, "put-1", Some(json!({"item": {"n": 21}}))).await;
    other.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused");
    let other_route =
        keyed(&app, Method::DELETE, "/v1/sessions/k/items/last", "clear-1", None).await;
    other_route.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused");
}

async fn items(app: &TestApp, session: &str) -> Vec<Value> {
    let page = app.get(&format!("/v1/sessions/{session}/items")).await.expect(StatusCode::OK);
    page["data"].as_array().unwrap().clone()
}

async fn an_item_is_replaced_in_place(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    let made = app.post("/v1/sessions/h/items", json!({"items": [{"n": 1}, {"n": 2}]})).await;
    let first = made.expect(StatusCode::CREATED)["data"][0].clone();
    let uri = format!("/v1/sessions/h/items/{}", first["id"].as_str().unwrap());
    let body = json!({"item": {"n": 1, "edited": true}});
    let replaced = send(&app, Method::PUT, &uri, Some("\"1\""), Some(body)).await;
    assert_eq!(etag(&replaced), 2);
    let replaced = replaced.expect(StatusCode::OK);
    assert_eq!((&replaced["id"], &replaced["seq"]), (&first["id"], &first["seq"]));
    assert_eq!(replaced["item"], json!({"n": 1, "edited": true}));
    assert_eq!(app.get(&uri).await.expect(StatusCode::OK), replaced);
    let session = app.get("/v1/sessions/h").await.expect(StatusCode::OK);
    assert_eq!((session["item_count"].as_i64(), session["revision"].as_i64()), (Some(2), Some(2)));
}

async fn the_history_or_a_suffix_is_replaced_at_once_with_new_seqs(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    let made =
        app.post("/v1/sessions/h/items", json!({"items": [{"n": 1}, {"n": 2}, {"n": 3}]})).await;
    let first = made.expect(StatusCode::CREATED)["data"][0]["id"].as_str().unwrap().to_owned();
    app.delete("/v1/sessions/h/items/last").await.expect(StatusCode::OK);

    // A suffix: what follows the first item goes; the new items' seqs were never used.
    let suffix = json!({"items": [{"n": "b"}, {"n": "c"}]});
    let uri = format!("/v1/sessions/h/items?after={first}");
    let replaced = send(&app, Method::PUT, &uri, Some("\"2\""), Some(suffix)).await;
    assert_eq!(etag(&replaced), 3);
    let new = replaced.expect(StatusCode::OK)["data"].clone();
    assert_eq!(
        new.as_array().unwrap().iter().map(|i| i["seq"].as_i64().unwrap()).collect::<Vec<_>>(),
        [4, 5]
    );
    let listed = items(&app, "h").await;
    let seen: Vec<Value> = listed.iter().map(|i| i["item"]["n"].clone()).collect();
    assert_eq!(seen, [json!(1), json!("b"), json!("c")]);

    // The whole history; the session keeps its id and counts only the new items.
    let whole =
        send(&app, Method::PUT, "/v1/sessions/h/items", None, Some(json!({"items": [{"n": "x"}]})));
    assert_eq!(whole.await.expect(StatusCode::OK)["data"][0]["seq"], 6);
    assert_eq!(items(&app, "h").await.len(), 1);
    let session = app.get("/v1/sessions/h").await.expect(StatusCode::OK);
    assert_eq!((session["item_count"].as_i64(), session["revision"].as_i64()), (Some(1), Some(4)));
    assert_eq!(
        app.delete("/v1/sessions/h/items/last").await.expect(StatusCode::OK)["item"]["n"],
        "x"
    );

    // A replacement makes the session it names, as an append does.
    let made =
        send(&app, Method::PUT, "/v1/sessions/new/items", None, Some(json!({"items": [{"n": 1}]})));
    assert_eq!(etag(&made.await), 1);
}

async fn a_stale_or_bad_replacement_changes_nothing(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    let made = app.post("/v1/sessions/h/items", json!({"items": [{"n": 1}, {"n": 2}]})).await;
    let first = made.expect(StatusCode::CREATED)["data"][0]["id"].as_str().unwrap().to_owned();
    let before = items(&app, "h").await;
    let body = || Some(json!({"items": [{"n": "new"}]}));
    let stale = send(&app, Method::PUT, "/v1/sessions/h/items", Some("\"9\""), body()).await;
    stale.expect_problem(StatusCode::PRECONDITION_FAILED, "revision_mismatch");
    let item_uri = format!("/v1/sessions/h/items/{first}");
    let stale = send(&app, Method::PUT, &item_uri, Some("\"9\""), Some(json!({"item": {"n": 0}})));
    stale.await.expect_problem(StatusCode::PRECONDITION_FAILED, "revision_mismatch");
    let unknown = "/v1/sessions/h/items?after=0195f2a0-0000-7000-8000-000000000000";
    let missing = send(&app, Method::PUT, unknown, None, body()).await;
    missing.expect_problem(StatusCode::NOT_FOUND, "item_not_found");
    let bad = send(&app, Method::PUT, "/v1/sessions/h/items?after=nope", None, body()).await;
    assert!(bad.expect_problem(StatusCode::BAD_REQUEST, "invalid_request").starts_with("after"));
    let not_object = send(&app, Method::PUT, &item_uri, None, Some(json!({"item": [1]}))).await;
    assert!(not_object
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request")
        .starts_with("item"));
    assert_eq!(items(&app, "h").await, before);
    assert_eq!(app.get("/v1/sessions/h").await.expect(StatusCode::OK)["revision"], 1);
    // An unknown item after which to replace makes no session either.
    let ghost = "/v1/sessions/ghost/items?after=0195f2a0-0000-7000-8000-000000000000";
    send(&app, Method::PUT, ghost, None, body())
        .await
        .expect_problem(StatusCode::NOT_FOUND, "item_not_found");
    app.get("/v1/sessions/ghost").await.expect_problem(StatusCode::NOT_FOUND, "session_not_found");
}
