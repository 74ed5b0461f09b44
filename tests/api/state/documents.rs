//! A session's state: one JSON object, returned exactly as given, replaced or merged
//! (RFC 7396), limited in size, copied by a fork, gone with its session.

use axum::http::{Method, StatusCode};
use serde_json::json;

use super::{etag, send};
use crate::helpers::{on_both_backends, test_config, TestApp, TestDb};

on_both_backends!(
    state_reads_back_exactly_and_merges_as_a_merge_patch,
    a_state_write_makes_its_session_and_a_read_of_none_is_404,
    state_that_is_no_object_or_too_large_is_refused_by_name,
    a_fork_copies_the_state,
    an_append_with_a_state_delta_commits_both_or_neither,
    an_empty_append_changes_nothing_but_records_its_key,
);

async fn state_reads_back_exactly_and_merges_as_a_merge_patch(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    app.post("/v1/sessions", json!({"id": "s"})).await.expect(StatusCode::CREATED);
    let empty = app.get("/v1/sessions/s/state").await;
    assert_eq!(empty.expect(StatusCode::OK), json!({"state": {}, "revision": 1}));

    let state =
        r#"{"z":1,"big":123456789012345678901234567890,"ü":"😀","nested":{"b":1,"a":[1.50,null]}}"#;
    let request = axum::http::Request::put("/v1/sessions/s/state")
        .header("content-type", "application/json")
        .body(axum::body::Body::from(format!(r#"{{"state":{state}}}"#)))
        .unwrap();
    let put = app.send(request).await;
    assert_eq!(put.status, StatusCode::OK, "{}", put.text);
    assert!(put.text.contains(state), "{}", put.text);
    let read = app.get("/v1/sessions/s/state").await;
    assert_eq!(read.text, format!(r#"{{"state":{state},"revision":2}}"#));

    // null removes, objects merge, anything else replaces; untouched members keep their text.
    let patch = json!({"state": {"z": null, "nested": {"b": null, "c": true}, "new": [1]}});
    let merged = send(&app, Method::PATCH, "/v1/sessions/s/state", None, Some(patch)).await;
    assert_eq!(merged.status, StatusCode::OK, "{}", merged.text);
    assert_eq!(
        merged.text,
        r#"{"state":{"big":123456789012345678901234567890,"ü":"😀","nested":{"a":[1.50,null],"c":true},"new":[1]},"revision":3}"#
    );
    assert_eq!(etag(&merged), 3);
    assert_eq!(app.get("/v1/sessions/s/state").await.text, merged.text);
}

async fn a_state_write_makes_its_session_and_a_read_of_none_is_404(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    app.get("/v1/sessions/new/state")
        .await
        .expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    let patch = json!({"state": {"a": {"b": null, "c": 1}}});
    let made = send(&app, Method::PATCH, "/v1/sessions/new/state", None, Some(patch)).await;
    assert_eq!(made.expect(StatusCode::OK), json!({"state": {"a": {"c": 1}}, "revision": 1}));
    let session = app.get("/v1/sessions/new").await.expect(StatusCode::OK);
    assert_eq!((session["revision"].as_i64(), session["item_count"].as_i64()), (Some(1), Some(0)));
    // Deleting the session deletes its state with it.
    app.delete("/v1/sessions/new").await.expect(StatusCode::NO_CONTENT);
    app.get("/v1/sessions/new/state")
        .await
        .expect_problem(StatusCode::NOT_FOUND, "session_not_found");
}

async fn state_that_is_no_object_or_too_large_is_refused_by_name(db: TestDb) {
    let mut config = test_config();
    config.max_state_bytes = 64;
    let app = TestApp::new(db, &config);
    for bad in [json!([1]), json!("text"), json!(null), json!(3)] {
        for method in [Method::PUT, Method::PATCH] {
            let body = Some(json!({"state": bad}));
            let refused = send(&app, method, "/v1/sessions/s/state", None, body).await;
            let detail = refused.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
            assert!(detail.starts_with("state"), "{detail}");
        }
    }
    let missing = send(&app, Method::PUT, "/v1/sessions/s/state", None, Some(json!({}))).await;
    assert!(missing.expect_problem(StatusCode::BAD_REQUEST, "invalid_request").contains("state"));
    app.get("/v1/sessions/s").await.expect_problem(StatusCode::NOT_FOUND, "session_not_found");

    let fits = json!({"state": {"a": "x".repeat(40)}});
    send(&app, Method::PUT, "/v1/sessions/s/state", None, Some(fits)).await.expect(StatusCode::OK);
    // A patch that grows the document past the limit: 413, and nothing changes.
    let grows = json!({"state": {"b": "y".repeat(40)}});
    let refused = send(&app, Method::PATCH, "/v1/sessions/s/state", None, Some(grows)).await;
    let detail = refused.expect_problem(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    assert!(detail.starts_with("state") && detail.contains("MAX_STATE_BYTES"), "{detail}");
    let read = app.get("/v1/sessions/s/state").await.expect(StatusCode::OK);
    assert_eq!((read["state"]["b"].is_null(), read["revision"].as_i64()), (true, Some(1)));
}

async fn a_fork_copies_the_state(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    app.post("/v1/sessions/src/items", json!({"items": [{"n": 1}]}))
        .await
        .expect(StatusCode::CREATED);
    let state = json!({"state": {"step": 3, "plan": ["a", "b"]}});
    send(&app, Method::PUT, "/v1/sessions/src/state", None, Some(state))
        .await
        .expect(StatusCode::OK);
    let fork = app.post("/v1/sessions/src/fork", json!({"id": "copy"})).await;
    assert_eq!(fork.expect(StatusCode::CREATED)["revision"], 1);
    let copied = app.get("/v1/sessions/copy/state").await.expect(StatusCode::OK);
    assert_eq!(copied["state"], json!({"step": 3, "plan": ["a", "b"]}));
    // The copy is its own: a write to it leaves the source alone.
    let patch = json!({"state": {"step": 4}});
    send(&app, Method::PATCH, "/v1/sessions/copy/state", None, Some(patch))
        .await
        .expect(StatusCode::OK);
    assert_eq!(app.get("/v1/sessions/src/state").await.expect(StatusCode::OK)["state"]["step"], 3);
}

async fn an_append_with_a_state_delta_commits_both_or_neither(db: TestDb) {
    let mut config = test_config();
    config.max_state_bytes = 64;
    let app = TestApp::new(db, &config);
    let append = json!({"items": [{"n": 1}, {"n": 2}], "state_delta": {"turn": 1, "x": {"y": 1}}});
    let made = app.post("/v1/sessions/d/items", append).await;
    assert_eq!(made.expect(StatusCode::CREATED)["data"].as_array().unwrap().len(), 2);
    assert_eq!(etag(&made), 1, "items and state in one step");
    let read = app.get("/v1/sessions/d/state").await.expect(StatusCode::OK);
    assert_eq!(read, json!({"state": {"turn": 1, "x": {"y": 1}}, "revision": 1}));

    let next = json!({"items": [{"n": 3}], "state_delta": {"turn": 2, "x": null}});
    let appended = send(&app, Method::POST, "/v1/sessions/d/items", Some("\"1\""), Some(next));
    assert_eq!(etag(&appended.await), 2);
    let read = app.get("/v1/sessions/d/state").await.expect(StatusCode::OK);
    assert_eq!(read["state"], json!({"turn": 2}));

    // A delta the state cannot take: neither the items nor the delta are kept.
    let too_large = json!({"items": [{"n": 4}], "state_delta": {"pad": "z".repeat(80)}});
    let refused = app.post("/v1/sessions/d/items", too_large).await;
    refused.expect_problem(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    for (field, body) in [
        ("state_delta", json!({"items": [{"n": 4}], "state_delta": [1]})),
        ("user_state_delta", json!({"items": [{"n": 4}], "user_state_delta": {"a": 1}})),
        ("app_state_delta", json!({"items": [], "app_state_delta": {"a": 1}})),
    ] {
        let refused = app.post("/v1/sessions/d/items", body).await;
        let detail = refused.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
        assert!(detail.starts_with(field), "{detail}");
    }
    let session = app.get("/v1/sessions/d").await.expect(StatusCode::OK);
    assert_eq!((session["item_count"].as_i64(), session["revision"].as_i64()), (Some(3), Some(2)));

    // A delta alone is a step with no items.
    let alone =
        app.post("/v1/sessions/d/items", json!({"items": [], "state_delta": {"turn": 3}})).await;
    assert_eq!((alone.expect(StatusCode::CREATED)["data"].clone(), etag(&alone)), (json!([]), 3));
}

async fn an_empty_append_changes_nothing_but_records_its_key(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    app.post("/v1/sessions/e/items", json!({"items": [{"n": 1}]}))
        .await
        .expect(StatusCode::CREATED);
    let empty = || {
        axum::http::Request::post("/v1/sessions/e/items")
            .header("content-type", "application/json")
            .header("idempotency-key", "empty-op-1")
            .body(axum::body::Body::from(r#"{"items": []}"#))
            .unwrap()
    };
    let first = app.send(empty()).await;
    assert_eq!(first.expect(StatusCode::CREATED), json!({"data": []}));
    assert_eq!(etag(&first), 1, "the revision stays");
    assert_eq!(first.header("idempotent-replayed"), None);
    let again = app.send(empty()).await;
    assert_eq!(again.expect(StatusCode::CREATED), json!({"data": []}));
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    // The key is taken: the same key with items is another request.
    let request = axum::http::Request::post("/v1/sessions/e/items")
        .header("content-type", "application/json")
        .header("idempotency-key", "empty-op-1")
        .body(axum::body::Body::from(r#"{"items": [{"n": 2}]}"#))
        .unwrap();
    app.send(request)
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused");
    let session = app.get("/v1/sessions/e").await.expect(StatusCode::OK);
    assert_eq!((session["item_count"].as_i64(), session["revision"].as_i64()), (Some(1), Some(1)));
    // An empty append to no session makes none.
    app.post("/v1/sessions/none/items", json!({"items": []})).await.expect(StatusCode::CREATED);
    app.get("/v1/sessions/none").await.expect_problem(StatusCode::NOT_FOUND, "session_not_found");
}
