//! Owners: a session's app and user, taken once; the state documents they share, with
//! their own revisions, changed alone or in an append's transaction.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use futures::future::join_all;
use serde_json::{json, Value};

use super::{etag, send};
use crate::helpers::{on_both_backends, test_config, TestApp, TestDb, TestResponse};
use agent_sessions::model::{OwnerDocument, OwnerId};
use agent_sessions::store::StoreError;

on_both_backends!(
    a_session_takes_its_owners_once_and_keeps_them,
    the_listing_filters_by_owner,
    app_and_user_documents_have_revisions_of_their_own,
    deltas_commit_with_the_append_or_not_at_all,
    a_state_read_includes_the_owners_documents_in_one_answer,
    first_merges_of_a_new_document_all_land,
    state_writes_take_idempotency_keys,
    another_tenant_sees_no_owner_document,
);

async fn a_session_takes_its_owners_once_and_keeps_them(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    let made = app.post("/v1/sessions", json!({"id": "s", "app_id": "a", "user_id": "u"})).await;
    let made = made.expect(StatusCode::CREATED);
    assert_eq!((&made["app_id"], &made["user_id"]), (&json!("a"), &json!("u")));

    // A session made by an append takes them from it; one without takes them later.
    let appended = json!({"items": [{"n": 1}]});
    app.post("/v1/sessions/t/items", appended).await.expect(StatusCode::CREATED);
    let session = app.get("/v1/sessions/t").await.expect(StatusCode::OK);
    assert_eq!((&session["app_id"], &session["user_id"]), (&Value::Null, &Value::Null));
    let named = json!({"state": {"k": 1}, "app_id": "a"});
    let taken = send(&app, Method::PATCH, "/v1/sessions/t/state", None, Some(named)).await;
    assert_eq!(taken.status, StatusCode::OK, "{}", taken.text);
    let named = json!({"items": [{"n": 2}], "user_id": "u"});
    app.post("/v1/sessions/t/items", named).await.expect(StatusCode::CREATED);
    let session = app.get("/v1/sessions/t").await.expect(StatusCode::OK);
    assert_eq!((&session["app_id"], &session["user_id"]), (&json!("a"), &json!("u")));
    let revision = session["revision"].as_i64().unwrap();

    // Another owner is refused by name, and nothing of the write is kept.
    for (field, body) in [
        ("app_id", json!({"items": [{"n": 3}], "app_id": "b"})),
        ("user_id", json!({"items": [{"n": 3}], "app_id": "a", "user_id": "v"})),
    ] {
        let refused = app.post("/v1/sessions/t/items", body).await;
        let detail = refused.expect_problem(StatusCode::CONFLICT, "owner_mismatch");
        assert!(detail.starts_with(field), "{detail}");
    }
    let other = json!({"state": {"k": 2}, "user_id": "v"});
    let refused = send(&app, Method::PUT, "/v1/sessions/t/state", None, Some(other)).await;
    refused.expect_problem(StatusCode::CONFLICT, "owner_mismatch");
    let session = app.get("/v1/sessions/t").await.expect(StatusCode::OK);
    assert_eq!(
        (session["revision"].as_i64(), session["item_count"].as_i64()),
        (Some(revision), Some(2))
    );

    // A fork belongs to the same owners.
    let fork =
        app.post("/v1/sessions/t/fork", json!({"id": "f"})).await.expect(StatusCode::CREATED);
    assert_eq!((&fork["app_id"], &fork["user_id"]), (&json!("a"), &json!("u")));

    for (field, body) in [
        ("app_id", json!({"id": "x", "app_id": "no spaces"})),
        ("user_id", json!({"id": "x", "user_id": ""})),
    ] {
        let detail = app.post("/v1/sessions", body).await;
        let detail = detail.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
        assert!(detail.starts_with(field), "{detail}");
    }
}

async fn the_listing_filters_by_owner(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    for (id, app_id, user_id) in [("1", "a", "u"), ("2", "a", "v"), ("3", "b", "u"), ("4", "", "")]
    {
        let mut body = json!({"id": id, "metadata": {"tier": "pro"}});
        if !app_id.is_empty() {
            body["app_id"] = json!(app_id);
            body["user_id"] = json!(user_id);
        }
        app.post("/v1/sessions", body).await.expect(StatusCode::CREATED);
    }
    let listed = |query: &'static str| {
        let app = &app;
        async move {
            let page = app.get(&format!("/v1/sessions?order=asc&{query}")).await;
            let page = page.expect(StatusCode::OK);
            let ids = page["data"].as_array().unwrap().iter();
            ids.map(|s| s["id"].as_str().unwrap().to_owned()).collect::<Vec<_>>()
        }
    };
    assert_eq!(listed("app_id=a").await, ["1", "2"]);
    assert_eq!(listed("app_id=a&user_id=u").await, ["1"]);
    assert_eq!(listed("user_id=u").await, ["1", "3"]);
    assert_eq!(listed("user_id=u&metadata[tier]=pro").await, ["1", "3"]);
    assert!(listed("app_id=c").await.is_empty());
    let detail = app.get("/v1/sessions?app_id=a%20b").await;
    let detail = detail.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("app_id"), "{detail}");
}

async fn app_and_user_documents_have_revisions_of_their_own(db: TestDb) {
    let mut config = test_config();
    config.max_state_bytes = 64;
    let app = TestApp::new(db, &config);
    for path in ["/v1/apps/a/state", "/v1/apps/a/users/u/state"] {
        let detail = app.get(path).await.expect_problem(StatusCode::NOT_FOUND, "state_not_found");
        assert!(detail.contains("`a`"), "{detail}");
        // If-Match on a document that does not exist is 412, and makes none.
        let body = Some(json!({"state": {"k": 1}}));
        let refused = send(&app, Method::PUT, path, Some("*"), body.clone()).await;
        refused.expect_problem(StatusCode::PRECONDITION_FAILED, "revision_mismatch");
        app.get(path).await.expect_problem(StatusCode::NOT_FOUND, "state_not_found");

        let put = send(&app, Method::PUT, path, None, body).await;
        assert_eq!(put.expect(StatusCode::OK), json!({"state": {"k": 1}, "revision": 1}));
        assert_eq!(etag(&put), 1);
        let patch = Some(json!({"state": {"k": null, "m": [1]}}));
        let merged = send(&app, Method::PATCH, path, Some("\"1\""), patch.clone()).await;
        assert_eq!(merged.expect(StatusCode::OK), json!({"state": {"m": [1]}, "revision": 2}));
        let stale = send(&app, Method::PATCH, path, Some("\"1\""), patch).await;
        let detail = stale.expect_problem(StatusCode::PRECONDITION_FAILED, "revision_mismatch");
        assert!(detail.contains("revision 2"), "{detail}");
        let read = app.get(path).await;
        assert_eq!((read.expect(StatusCode::OK)["revision"].as_i64(), etag(&read)), (Some(2), 2));

        let too_large = Some(json!({"state": {"k": "x".repeat(64)}}));
        let refused = send(&app, Method::PUT, path, None, too_large).await;
        refused.expect_problem(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
        let refused = send(&app, Method::PUT, path, None, Some(json!({"state": [1]}))).await;
        let detail = refused.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
        assert!(detail.starts_with("state"), "{detail}");
    }
    // The app's and each user's documents are apart.
    let user = app.get("/v1/apps/a/users/w/state").await;
    user.expect_problem(StatusCode::NOT_FOUND, "state_not_found");
    let detail = app.get("/v1/apps/a.b%20c/state").await;
    let detail = detail.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("app_id"), "{detail}");
}

async fn deltas_commit_with_the_append_or_not_at_all(db: TestDb) {
    let mut config = test_config();
    config.max_state_bytes = 64;
    let app = TestApp::new(db, &config);
    // Without owners, a delta for one has nowhere to go.
    for (field, owners) in [
        ("user_state_delta", json!({})),
        ("app_state_delta", json!({"user_id": "u"})),
        ("user_state_delta", json!({"user_id": "u"})),
    ] {
        let mut body = json!({"items": [{"n": 1}], field: {"k": 1}});
        body.as_object_mut().unwrap().extend(owners.as_object().unwrap().clone());
        let refused = app.post("/v1/sessions/s/items", body).await;
        let detail = refused.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
        assert!(detail.starts_with(field), "{detail}");
        app.get("/v1/sessions/s").await.expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    }
    // Named with the deltas, the owners are taken in the same append.
    let body = json!({"items": [{"n": 1}], "app_id": "a", "user_id": "u",
        "state_delta": {"s": 1}, "user_state_delta": {"u": 1}, "app_state_delta": {"a": 1}});
    let appended = app.post("/v1/sessions/s/items", body).await;
    appended.expect(StatusCode::CREATED);
    assert_eq!(etag(&appended), 1);
    // One delta over the limit: neither the items nor any document changes.
    let body = json!({"items": [{"n": 2}], "state_delta": {"s": 2}, "user_state_delta": {"u": 2},
        "app_state_delta": {"a": "x".repeat(64)}});
    let refused = app.post("/v1/sessions/s/items", body).await;
    refused.expect_problem(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    let read = app.get("/v1/sessions/s/state?include=user,app").await.expect(StatusCode::OK);
    assert_eq!(
        read,
        json!({"state": {"s": 1}, "revision": 1, "user_state": {"u": 1}, "app_state": {"a": 1}})
    );
    let items = app.get("/v1/sessions/s/items").await.expect(StatusCode::OK);
    assert_eq!(items["data"].as_array().unwrap().len(), 1);
    // An owner's document changes its own revision, not the session's.
    let user = app.get("/v1/apps/a/users/u/state").await.expect(StatusCode::OK);
    assert_eq!(user, json!({"state": {"u": 1}, "revision": 1}));
    let body = json!({"items": [], "user_state_delta": {"u": null, "v": true}});
    let appended = app.post("/v1/sessions/s/items", body).await;
    appended.expect(StatusCode::CREATED);
    let user = app.get("/v1/apps/a/users/u/state").await.expect(StatusCode::OK);
    assert_eq!(user, json!({"state": {"v": true}, "revision": 2}));
}

async fn a_state_read_includes_the_owners_documents_in_one_answer(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    let body = json!({"state": {"s": 1}, "app_id": "a", "user_id": "u"});
    send(&app, Method::PUT, "/v1/sessions/s/state", None, Some(body)).await.expect(StatusCode::OK);
    let read = app.get("/v1/sessions/s/state?include=user,app").await.expect(StatusCode::OK);
    assert_eq!((&read["user_state"], &read["app_state"]), (&Value::Null, &Value::Null));
    let body = Some(json!({"state": {"shared": true}}));
    send(&app, Method::PUT, "/v1/apps/a/state", None, body).await.expect(StatusCode::OK);
    let read = app.get("/v1/sessions/s/state?include=app").await.expect(StatusCode::OK);
    assert_eq!(read, json!({"state": {"s": 1}, "revision": 1, "app_state": {"shared": true}}));
    let read = app.get("/v1/sessions/s/state?include=user").await.expect(StatusCode::OK);
    assert_eq!(read, json!({"state": {"s": 1}, "revision": 1, "user_state": null}));
    let detail = app.get("/v1/sessions/s/state?include=users").await;
    let detail = detail.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("include"), "{detail}");
}

async fn first_merges_of_a_new_document_all_land(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    let writes = (0..8).map(|n| {
        let body = Some(json!({"state": {format!("k{n}"): n}}));
        send(&app, Method::PATCH, "/v1/apps/a/users/u/state", None, body)
    });
    for answer in join_all(writes).await {
        answer.expect(StatusCode::OK);
    }
    let read = app.get("/v1/apps/a/users/u/state").await.expect(StatusCode::OK);
    assert_eq!(read["state"].as_object().unwrap().len(), 8, "{read}");
    assert_eq!(read["revision"], 8);
}

/// A state write with an `Idempotency-Key`.
async fn keyed(app: &TestApp, method: Method, key: &str, body: Value) -> TestResponse {
    let request = Request::builder()
        .method(method)
        .uri("/v1/sessions/s/state")
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        .body(Body::from(body.to_string()))
        .unwrap();
    app.send(request).await
}

async fn state_writes_take_idempotency_keys(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    let body = json!({"state": {"n": 1}});
    let first = keyed(&app, Method::PATCH, "k1", body.clone()).await;
    assert_eq!(first.expect(StatusCode::OK), json!({"state": {"n": 1}, "revision": 1}));
    let body2 = json!({"state": {"n": 2}});
    send(&app, Method::PATCH, "/v1/sessions/s/state", None, Some(body2.clone())).await;
    // The retry answers the first answer, and writes nothing.
    let retry = keyed(&app, Method::PATCH, "k1", body.clone()).await;
    assert_eq!(retry.expect(StatusCode::OK), json!({"state": {"n": 1}, "revision": 1}));
    assert_eq!(retry.header("idempotent-replayed"), Some("true"));
    let read = app.get("/v1/sessions/s/state").await.expect(StatusCode::OK);
    assert_eq!(read, json!({"state": {"n": 2}, "revision": 2}));
    // The same key with another body, or on another route, is refused.
    let other = keyed(&app, Method::PATCH, "k1", body2).await;
    other.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused");
    let other = keyed(&app, Method::PUT, "k1", body).await;
    other.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused");
}

async fn another_tenant_sees_no_owner_document(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    let body = Some(json!({"state": {"k": 1}}));
    send(&app, Method::PUT, "/v1/apps/a/users/u/state", None, body).await.expect(StatusCode::OK);
    let user = OwnerDocument::User(id("a"), id("u"));
    let mine = app.store.owner_state("default", &user).await.unwrap();
    assert_eq!(mine.0.as_str(), r#"{"k":1}"#);
    let theirs = app.store.owner_state("other", &user).await;
    assert!(matches!(theirs, Err(StoreError::StateNotFound)), "{theirs:?}");
}

fn id(value: &str) -> OwnerId {
    OwnerId::parse("id", value.to_owned()).unwrap()
}
