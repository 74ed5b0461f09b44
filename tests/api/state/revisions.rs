//! Every committed change raises the session's revision by one; `If-Match` makes any
//! write conditional on it.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::json;

use super::{etag, send};
use crate::helpers::{on_both_backends, test_config, TestApp, TestDb};

on_both_backends!(
    every_change_is_one_revision_and_every_answer_names_it,
    a_stale_if_match_writes_nothing_on_every_write_route,
    if_match_on_a_session_that_does_not_exist_creates_nothing,
    eight_writers_with_if_match_lose_no_update,
    a_run_is_created_only_at_the_revision_its_if_match_names,
    a_page_of_items_names_its_revision_and_keeps_what_came_after_an_instant,
);

async fn a_page_of_items_names_its_revision_and_keeps_what_came_after_an_instant(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    app.post("/v1/sessions", json!({"id": "p"})).await.expect(StatusCode::CREATED);
    let empty = app.get("/v1/sessions/p/items").await;
    empty.expect(StatusCode::OK);
    assert_eq!(etag(&empty), 1, "an empty page names the revision too");
    app.post("/v1/sessions/p/items", json!({"items": [{"n": 1}]}))
        .await
        .expect(StatusCode::CREATED);
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let later = app.post("/v1/sessions/p/items", json!({"items": [{"n": 2}, {"n": 3}]})).await;
    let later = later.expect(StatusCode::CREATED);
    let page = app.get("/v1/sessions/p/items?limit=1").await;
    assert_eq!(
        (page.expect(StatusCode::OK)["data"][0]["item"]["n"].as_i64(), etag(&page)),
        (Some(1), 3)
    );

    let first = app.get("/v1/sessions/p/items").await.expect(StatusCode::OK);
    let cut = first["data"][0]["created_at"].as_str().unwrap().to_owned();
    let since = format!("/v1/sessions/p/items?created_after={}", cut.replace('+', "%2B"));
    let newer = app.get(&since).await;
    let numbers: Vec<_> = newer.expect(StatusCode::OK)["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["item"]["n"].as_i64().unwrap())
        .collect();
    assert_eq!(numbers, [2, 3]);
    assert_eq!(etag(&newer), 3);
    // With a cursor and the newest first, too.
    let after_id = later["data"][1]["id"].as_str().unwrap();
    let desc = app.get(&format!("{since}&order=desc&after={after_id}")).await;
    let desc = desc.expect(StatusCode::OK);
    assert_eq!(desc["data"][0]["item"]["n"], 2);
    assert_eq!(desc["data"].as_array().unwrap().len(), 1);
    let future = app.get("/v1/sessions/p/items?created_after=2999-01-01T00:00:00Z").await;
    assert!(future.expect(StatusCode::OK)["data"].as_array().unwrap().is_empty());
    let bad = app.get("/v1/sessions/p/items?created_after=yesterday").await;
    let detail = bad.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("created_after"), "{detail}");
    // Only the items listing takes it.
    let refused = app.get("/v1/sessions?created_after=2026-01-01T00:00:00Z").await;
    refused.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
}

async fn every_change_is_one_revision_and_every_answer_names_it(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    let created = app.post("/v1/sessions", json!({"id": "r"})).await;
    assert_eq!(created.expect(StatusCode::CREATED)["revision"], 1);
    assert_eq!(etag(&created), 1);

    let appended = app.post("/v1/sessions/r/items", json!({"items": [{"n": 1}, {"n": 2}]})).await;
    appended.expect(StatusCode::CREATED);
    assert_eq!(etag(&appended), 2, "one append of two items is one step");
    let patched = app.patch("/v1/sessions/r", json!({"metadata": {"k": "v"}})).await;
    assert_eq!(patched.expect(StatusCode::OK)["revision"], 3);
    assert_eq!(etag(&patched), 3);
    let state = send(&app, Method::PUT, "/v1/sessions/r/state", None, Some(json!({"state": {}})));
    assert_eq!(etag(&state.await), 4);
    app.delete("/v1/sessions/r/items/last").await.expect(StatusCode::OK);
    let read = app.get("/v1/sessions/r").await;
    assert_eq!((read.expect(StatusCode::OK)["revision"].as_i64(), etag(&read)), (Some(5), 5));
    app.delete("/v1/sessions/r/items").await.expect(StatusCode::NO_CONTENT);
    assert_eq!(etag(&app.get("/v1/sessions/r/state").await), 6);

    // Reads change nothing; a session made by an append is at 1 after it.
    app.get("/v1/sessions/r/items").await.expect(StatusCode::OK);
    assert_eq!(etag(&app.get("/v1/sessions/r").await), 6);
    let made = app.post("/v1/sessions/by-append/items", json!({"items": [{"n": 1}]})).await;
    assert_eq!(etag(&made), 1);
}

async fn a_stale_if_match_writes_nothing_on_every_write_route(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    let appended = app.post("/v1/sessions/s/items", json!({"items": [{"n": 1}, {"n": 2}]})).await;
    let first = appended.expect(StatusCode::CREATED)["data"][0]["id"].as_str().unwrap().to_owned();
    let before = app.get("/v1/sessions/s").await.expect(StatusCode::OK);
    assert_eq!(before["revision"], 1);

    let item = format!("/v1/sessions/s/items/{first}");
    let writes = [
        (Method::POST, "/v1/sessions/s/items", Some(json!({"items": [{"n": 3}]}))),
        (Method::PATCH, "/v1/sessions/s", Some(json!({"metadata": {"k": "v"}}))),
        (Method::PUT, "/v1/sessions/s/state", Some(json!({"state": {"a": 1}}))),
        (Method::PATCH, "/v1/sessions/s/state", Some(json!({"state": {"a": 1}}))),
        (Method::DELETE, item.as_str(), None),
        (Method::DELETE, "/v1/sessions/s/items/last", None),
        (Method::DELETE, "/v1/sessions/s/items", None),
        (Method::DELETE, "/v1/sessions/s", None),
    ];
    for (method, uri, body) in &writes {
        let stale = send(&app, method.clone(), uri, Some("\"7\""), body.clone()).await;
        let detail = stale.expect_problem(StatusCode::PRECONDITION_FAILED, "revision_mismatch");
        assert!(detail.contains("revision 1"), "{method} {uri}: {detail}");
        let malformed = send(&app, method.clone(), uri, Some("7"), body.clone()).await;
        let detail = malformed.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
        assert!(detail.starts_with("If-Match"), "{detail}");
    }
    assert_eq!(app.get("/v1/sessions/s").await.expect(StatusCode::OK), before);
    assert_eq!(app.get("/v1/sessions/s/items").await.expect(StatusCode::OK)["data"][1]["seq"], 2);
    assert_eq!(app.get("/v1/sessions/s/state").await.expect(StatusCode::OK)["state"], json!({}));

    // The current revision, quoted or weak, and `*` let each write through.
    let mut revision = 1;
    for (n, (method, uri, body)) in writes.into_iter().enumerate() {
        let tag = match n % 3 {
            0 => format!("\"{revision}\""),
            1 => format!("W/\"{revision}\""),
            _ => "*".to_owned(),
        };
        let answer = send(&app, method.clone(), uri, Some(&tag), body).await;
        assert!(answer.status.is_success(), "{method} {uri} with {tag}: {answer:?}");
        revision += 1;
        if answer.status != StatusCode::NO_CONTENT && method != Method::DELETE {
            assert_eq!(etag(&answer), revision, "{method} {uri}");
        }
    }
    app.get("/v1/sessions/s").await.expect_problem(StatusCode::NOT_FOUND, "session_not_found");
}

async fn if_match_on_a_session_that_does_not_exist_creates_nothing(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    for tag in ["*", "\"1\"", "\"0\""] {
        let append = json!({"items": [{"n": 1}]});
        let refused =
            send(&app, Method::POST, "/v1/sessions/ghost/items", Some(tag), Some(append)).await;
        let detail = refused.expect_problem(StatusCode::PRECONDITION_FAILED, "revision_mismatch");
        assert!(detail.contains("does not exist"), "{detail}");
        let state = json!({"state": {"a": 1}});
        let refused =
            send(&app, Method::PUT, "/v1/sessions/ghost/state", Some(tag), Some(state)).await;
        refused.expect_problem(StatusCode::PRECONDITION_FAILED, "revision_mismatch");
    }
    app.get("/v1/sessions/ghost").await.expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    // An empty If-Match is an empty list of tags: it asks nothing.
    let append = Some(json!({"items": [{"n": 1}]}));
    let made = send(&app, Method::POST, "/v1/sessions/open/items", Some(""), append).await;
    assert_eq!(etag(&made), 1);
}

async fn a_run_is_created_only_at_the_revision_its_if_match_names(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    app.post("/v1/sessions/r/items", json!({"items": [{"n": 1}]}))
        .await
        .expect(StatusCode::CREATED);
    let run = json!({"input": "hi", "background": true});
    for tag in ["\"2\"", "\"0\""] {
        let stale = send(&app, Method::POST, "/v1/sessions/r/runs", Some(tag), Some(run.clone()));
        let detail =
            stale.await.expect_problem(StatusCode::PRECONDITION_FAILED, "revision_mismatch");
        assert!(detail.contains("revision 1"), "{detail}");
    }
    let malformed = send(&app, Method::POST, "/v1/sessions/r/runs", Some("1"), Some(run.clone()));
    let detail = malformed.await.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("If-Match"), "{detail}");
    let runs = app.get("/v1/sessions/r/runs").await.expect(StatusCode::OK);
    assert_eq!(runs["data"], json!([]), "a stale If-Match creates no run");

    let ghost = send(&app, Method::POST, "/v1/sessions/ghost/runs", Some("*"), Some(run.clone()));
    ghost.await.expect_problem(StatusCode::PRECONDITION_FAILED, "revision_mismatch");
    app.get("/v1/sessions/ghost").await.expect_problem(StatusCode::NOT_FOUND, "session_not_found");

    let queued = send(&app, Method::POST, "/v1/sessions/r/runs", Some("\"1\""), Some(run.clone()));
    let queued = queued.await.expect(StatusCode::ACCEPTED);
    let runs = app.get("/v1/sessions/r/runs").await.expect(StatusCode::OK);
    assert_eq!(runs["data"][0]["id"], queued["id"]);

    // A retry must carry the first request's If-Match: another is another request.
    let keyed = |tag: &'static str| {
        let request = Request::builder()
            .method(Method::POST)
            .uri("/v1/sessions/k/runs")
            .header("content-type", "application/json")
            .header("idempotency-key", "run-once")
            .header("if-match", tag)
            .body(Body::from(run.to_string()))
            .unwrap();
        app.send(request)
    };
    app.post("/v1/sessions/k/items", json!({"items": [{"n": 1}]}))
        .await
        .expect(StatusCode::CREATED);
    let first = keyed("*").await.expect(StatusCode::ACCEPTED);
    let again = keyed("*").await;
    assert_eq!(again.expect(StatusCode::ACCEPTED)["id"], first["id"]);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    keyed("\"1\"").await.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused");
}

/// Eight clients each read the counter, write it one higher with `If-Match`, and read
/// again after a 412, 25 times: no increment is lost.
async fn eight_writers_with_if_match_lose_no_update(db: TestDb) {
    let app = std::sync::Arc::new(TestApp::new(db, &test_config()));
    count_to_200(&[app.clone(), app]).await;
}

/// The same eight writers, half on each of two replicas of one Postgres.
#[sqlx::test(migrations = "./migrations/postgres")]
async fn eight_writers_on_two_replicas_lose_no_update(pool: sqlx::PgPool) {
    let first = TestApp::new(crate::helpers::TestDb::postgres_replica(&pool), &test_config());
    let second = TestApp::new(crate::helpers::TestDb::postgres(pool), &test_config());
    count_to_200(&[std::sync::Arc::new(first), std::sync::Arc::new(second)]).await;
}

/// Eight clients, taking turns over `apps`, each count 25 times in one session's state:
/// read, merge with `If-Match`, again on 412. The counter ends at exactly 200.
async fn count_to_200(apps: &[std::sync::Arc<TestApp>]) {
    let start = json!({"state": {"counter": 0}});
    send(&apps[0], Method::PUT, "/v1/sessions/c/state", None, Some(start)).await;
    let mut clients = tokio::task::JoinSet::new();
    for n in 0..8 {
        let app = apps[n % apps.len()].clone();
        clients.spawn(async move {
            let mut refused = 0;
            for _ in 0..25 {
                loop {
                    let read = app.get("/v1/sessions/c/state").await;
                    let counter = read.expect(StatusCode::OK)["state"]["counter"].as_i64().unwrap();
                    let tag = format!("\"{}\"", etag(&read));
                    let next = json!({"state": {"counter": counter + 1}});
                    let uri = "/v1/sessions/c/state";
                    let written = send(&app, Method::PATCH, uri, Some(&tag), Some(next)).await;
                    if written.status == StatusCode::OK {
                        break;
                    }
                    written.expect_problem(StatusCode::PRECONDITION_FAILED, "revision_mismatch");
                    refused += 1;
                }
            }
            refused
        });
    }
    let refused: i64 = clients.join_all().await.into_iter().sum();
    let read = apps[1].get("/v1/sessions/c/state").await;
    assert_eq!(read.expect(StatusCode::OK)["state"]["counter"], 200, "{refused} refusals");
    assert_eq!(etag(&read), 201);
}
