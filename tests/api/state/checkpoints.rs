//! Checkpoints: stored with the blobs of the channels they change and the writes of their
//! tasks, read whole, listed newest first, deleted by session, run or pruning, forked.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::{json, Value};

use super::{etag, send};
use crate::helpers::{on_both_backends, test_config, TestApp, TestDb, TestResponse};

on_both_backends!(
    a_checkpoint_reads_back_with_the_blobs_of_its_versions,
    listings_are_newest_first_and_filter,
    writes_keep_the_first_at_a_place_but_the_last_at_a_negative_one,
    bad_checkpoints_are_refused_by_field,
    checkpoints_go_with_their_session_runs_and_prunes,
    a_fork_copies_checkpoints_and_other_tenants_see_none,
    checkpoint_writes_take_keys_and_conditions_but_change_no_revision,
);

fn b64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// A checkpoint whose payload says `payload` and which holds `versions`, bringing a
/// blob for each of `changed` (`channel` at its version, its value the channel's name
/// and version).
fn checkpoint(payload: &str, versions: &[(&str, &str)], changed: &[&str]) -> Value {
    let versions: serde_json::Map<String, Value> =
        versions.iter().map(|(c, v)| (c.to_string(), json!(v))).collect();
    let blobs: Vec<Value> = changed
        .iter()
        .map(|c| {
            let version = versions[*c].as_str().unwrap();
            json!({"channel": c, "version": version, "type": "json", "data": b64(&format!("{c}@{version}"))})
        })
        .collect();
    json!({"checkpoint": {"type": "msgpack", "data": b64(payload)}, "metadata": {"step": 1},
        "channel_versions": versions, "blobs": blobs})
}

async fn put(app: &TestApp, path: &str, body: Value) -> TestResponse {
    send(app, Method::PUT, path, None, Some(body)).await
}

/// The `channel@version` each blob of a checkpoint holds, by channel.
fn values(checkpoint: &Value) -> Vec<String> {
    use base64::Engine;
    let blobs = checkpoint["blobs"].as_array().unwrap().iter();
    blobs
        .map(|b| {
            let data = base64::engine::general_purpose::STANDARD
                .decode(b["data"].as_str().unwrap())
                .unwrap();
            String::from_utf8(data).unwrap()
        })
        .collect()
}

fn ids(list: &Value) -> Vec<String> {
    list["data"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap().into()).collect()
}

async fn a_checkpoint_reads_back_with_the_blobs_of_its_versions(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    let first = checkpoint("one", &[("a", "1"), ("b", "1")], &["a", "b"]);
    let saved = put(&app, "/v1/sessions/t/checkpoints/c1", first).await.expect(StatusCode::OK);
    assert_eq!(saved, json!({"session_id": "t", "namespace": "", "id": "c1", "parent_id": null}));
    // The session is made by its first checkpoint, at revision 1.
    assert_eq!(app.get("/v1/sessions/t").await.expect(StatusCode::OK)["revision"], 1);

    let mut second = checkpoint("two", &[("a", "2"), ("b", "1")], &["a"]);
    second["parent_id"] = json!("c1");
    put(&app, "/v1/sessions/t/checkpoints/c2", second).await.expect(StatusCode::OK);
    let got = app.get("/v1/sessions/t/checkpoints/c2").await.expect(StatusCode::OK);
    assert_eq!(got["checkpoint"], json!({"type": "msgpack", "data": b64("two")}));
    assert_eq!((got["parent_id"].as_str(), &got["metadata"]), (Some("c1"), &json!({"step": 1})));
    assert_eq!(values(&got), ["a@2", "b@1"], "b from the first checkpoint's blob");
    let old = app.get("/v1/sessions/t/checkpoints/c1").await.expect(StatusCode::OK);
    assert_eq!(values(&old), ["a@1", "b@1"]);
    // A channel dropped from the versions is gone from the checkpoint.
    put(&app, "/v1/sessions/t/checkpoints/c3", checkpoint("three", &[("b", "1")], &[]))
        .await
        .expect(StatusCode::OK);
    let third = app.get("/v1/sessions/t/checkpoints/c3").await.expect(StatusCode::OK);
    assert_eq!(values(&third), ["b@1"]);
    // One blob per channel version: the second checkpoint wrote one.
    let blobs = app.store.list_checkpoints("default", None, &Default::default()).await.unwrap();
    assert_eq!(blobs.len(), 3);

    let missing = app.get("/v1/sessions/t/checkpoints/c9").await;
    missing.expect_problem(StatusCode::NOT_FOUND, "checkpoint_not_found");
    let other_namespace = app.get("/v1/sessions/t/checkpoints/c1?namespace=child%3A1").await;
    other_namespace.expect_problem(StatusCode::NOT_FOUND, "checkpoint_not_found");
    let no_session = app.get("/v1/sessions/none/checkpoints/c1").await;
    no_session.expect_problem(StatusCode::NOT_FOUND, "session_not_found");
}

async fn listings_are_newest_first_and_filter(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    for (n, ns) in [(1, ""), (2, "child:1"), (3, ""), (4, "child:1"), (5, "")] {
        let mut body = checkpoint("p", &[], &[]);
        body["metadata"] = json!({"step": n, "source": if n % 2 == 1 { "loop" } else { "input" }});
        let path = format!("/v1/sessions/t/checkpoints/c{n}?namespace={}", ns.replace(':', "%3A"));
        put(&app, &path, body).await.expect(StatusCode::OK);
    }
    put(&app, "/v1/sessions/u/checkpoints/c6", checkpoint("p", &[], &[]))
        .await
        .expect(StatusCode::OK);
    let list = |query: &'static str| {
        let app = &app;
        async move {
            app.get(&format!("/v1/sessions/t/checkpoints{query}")).await.expect(StatusCode::OK)
        }
    };
    assert_eq!(ids(&list("").await), ["c5", "c4", "c3", "c2", "c1"], "every namespace");
    assert_eq!(ids(&list("?namespace=").await), ["c5", "c3", "c1"], "the root only");
    assert_eq!(ids(&list("?namespace=child%3A1").await), ["c4", "c2"]);
    let newest = list("?namespace=&limit=1").await;
    assert_eq!((ids(&newest), &newest["has_more"]), (vec!["c5".to_owned()], &json!(true)));
    assert_eq!(ids(&list("?before=c4").await), ["c3", "c2", "c1"]);
    assert_eq!(ids(&list("?before=c4&limit=1").await), ["c3"]);
    let filtered = list("?metadata=%7B%22source%22%3A%22input%22%7D").await;
    assert_eq!(ids(&filtered), ["c4", "c2"]);
    let both = list("?metadata=%7B%22source%22%3A%22loop%22%2C%22step%22%3A3%7D").await;
    assert_eq!(ids(&both), ["c3"]);
    let absent = list("?metadata=%7B%22run_id%22%3Anull%7D&limit=2").await;
    assert_eq!(ids(&absent), ["c5", "c4"], "null matches a missing member");
    let all = app.get("/v1/checkpoints?namespace=").await.expect(StatusCode::OK);
    assert_eq!(ids(&all), ["c6", "c5", "c3", "c1"], "every session of the tenant");
    assert_eq!(all["data"][0]["session_id"], "u");
    let bad = app.get("/v1/sessions/t/checkpoints?metadata=%5B1%5D").await;
    let detail = bad.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("metadata"), "{detail}");
    let none = app.get("/v1/sessions/nobody/checkpoints").await;
    none.expect_problem(StatusCode::NOT_FOUND, "session_not_found");
}

async fn writes(app: &TestApp, session: &str, checkpoint: &str, body: Value) -> TestResponse {
    let path = format!("/v1/sessions/{session}/checkpoints/{checkpoint}/writes");
    send(app, Method::POST, &path, None, Some(body)).await
}

fn write(idx: i64, channel: &str, value: &str) -> Value {
    json!({"idx": idx, "channel": channel, "type": "json", "data": b64(value)})
}

async fn writes_keep_the_first_at_a_place_but_the_last_at_a_negative_one(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    put(&app, "/v1/sessions/t/checkpoints/c1", checkpoint("p", &[], &[]))
        .await
        .expect(StatusCode::OK);
    let first = json!({"task_id": "t2", "task_path": "a:b:c",
        "writes": [write(0, "x", "first"), write(1, "x", "second"), write(-1, "__error__", "boom")]});
    writes(&app, "t", "c1", first).await.expect(StatusCode::NO_CONTENT);
    let again = json!({"task_id": "t2", "task_path": "a:b:c",
        "writes": [write(0, "x", "other"), write(-1, "__error__", "later")]});
    writes(&app, "t", "c1", again).await.expect(StatusCode::NO_CONTENT);
    let earlier = json!({"task_id": "t1", "writes": [write(0, "y", "v")]});
    writes(&app, "t", "c1", earlier).await.expect(StatusCode::NO_CONTENT);

    let got = app.get("/v1/sessions/t/checkpoints/c1").await.expect(StatusCode::OK);
    let seen: Vec<(String, i64, String)> = got["writes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["task_id"].as_str().unwrap().into(),
                w["idx"].as_i64().unwrap(),
                w["data"].as_str().unwrap().into(),
            )
        })
        .collect();
    let expected = [("t1", 0, "v"), ("t2", -1, "later"), ("t2", 0, "first"), ("t2", 1, "second")];
    let expected: Vec<(String, i64, String)> =
        expected.iter().map(|(t, i, v)| (t.to_string(), *i, b64(v))).collect();
    assert_eq!(seen, expected, "by task path, task and place");
    // Writes belong to one checkpoint of one namespace.
    put(&app, "/v1/sessions/t/checkpoints/c2", checkpoint("p", &[], &[]))
        .await
        .expect(StatusCode::OK);
    let next = app.get("/v1/sessions/t/checkpoints/c2").await.expect(StatusCode::OK);
    assert_eq!(next["writes"], json!([]));
    let listed = app.get("/v1/sessions/t/checkpoints?before=c2").await.expect(StatusCode::OK);
    assert_eq!(listed["data"][0]["writes"].as_array().unwrap().len(), 4);
}

async fn bad_checkpoints_are_refused_by_field(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    let mut not_base64 = checkpoint("p", &[("a", "1")], &["a"]);
    not_base64["blobs"][0]["data"] = json!("%%%");
    let mut unnamed = checkpoint("p", &[("a", "1")], &["a"]);
    unnamed["blobs"][0]["version"] = json!("2");
    let mut no_data = checkpoint("p", &[], &[]);
    no_data["checkpoint"]["data"] = Value::Null;
    for (body, field) in [
        (not_base64, "blobs[0].data"),
        (unnamed, "blobs[0]"),
        (no_data, "checkpoint.data"),
        (json!({"checkpoint": {"type": "msgpack", "data": "AA=="}, "metadata": [1]}), "metadata"),
    ] {
        let refused = put(&app, "/v1/sessions/t/checkpoints/c1", body).await;
        let detail = refused.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
        assert!(detail.starts_with(field), "{field}: {detail}");
    }
    let bad_write = json!({"task_id": "t", "writes": [{"idx": 0, "channel": "x", "type": "json", "data": "!"}]});
    let refused = writes(&app, "t", "c1", bad_write).await;
    let detail = refused.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("writes[0].data"), "{detail}");
    app.get("/v1/sessions/t").await.expect_problem(StatusCode::NOT_FOUND, "session_not_found");
}

async fn checkpoints_go_with_their_session_runs_and_prunes(db: TestDb) {
    let app = TestApp::new(db.clone_handle(), &test_config());
    for (session, n, run) in
        [("s", 1, "r1"), ("s", 2, "r2"), ("s", 3, "r2"), ("o", 4, "r2"), ("o", 5, "r3")]
    {
        let mut body = checkpoint(&format!("p{n}"), &[("a", &n.to_string())], &["a"]);
        body["metadata"] = json!({"run_id": run});
        put(&app, &format!("/v1/sessions/{session}/checkpoints/c{n}"), body)
            .await
            .expect(StatusCode::OK);
        writes(
            &app,
            session,
            &format!("c{n}"),
            json!({"task_id": "t", "writes": [write(0, "x", "v")]}),
        )
        .await;
    }
    let deleted = app.post("/v1/checkpoints/delete", json!({"run_ids": ["r2", "nope"]})).await;
    assert_eq!(deleted.expect(StatusCode::OK), json!({"deleted": 3}));
    let left = app.get("/v1/checkpoints").await.expect(StatusCode::OK);
    assert_eq!(ids(&left), ["c5", "c1"]);
    assert_eq!(
        db.strings("select version from checkpoint_blobs order by version").await,
        ["1", "5"]
    );

    // Prune: the newest of each namespace stays, with its writes and the blobs it names.
    for n in 6..9 {
        let changed: &[&str] = if n == 6 { &["a", "b"] } else { &["b"] };
        let body = checkpoint("p", &[("a", "1"), ("b", &n.to_string())], changed);
        let path = format!("/v1/sessions/s/checkpoints/c{n}?namespace=ns");
        put(&app, &path, body).await.expect(StatusCode::OK);
    }
    let pruned = app
        .post("/v1/checkpoints/prune", json!({"session_ids": ["s", "x"], "keep": "latest"}))
        .await;
    assert_eq!(pruned.expect(StatusCode::OK), json!({"deleted": 2}));
    let kept = app.get("/v1/sessions/s/checkpoints").await.expect(StatusCode::OK);
    assert_eq!(ids(&kept), ["c8", "c1"]);
    assert_eq!(values(&kept["data"][0]), ["a@1", "b@8"]);
    assert_eq!(kept["data"][1]["writes"].as_array().unwrap().len(), 1);
    let none =
        app.post("/v1/checkpoints/prune", json!({"session_ids": ["s"], "keep": "none"})).await;
    assert_eq!(none.expect(StatusCode::OK), json!({"deleted": 2}));
    let bad =
        app.post("/v1/checkpoints/prune", json!({"session_ids": ["s"], "keep": "some"})).await;
    bad.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");

    // Deleting a session's checkpoints, and the session itself, leaves nothing behind.
    app.delete("/v1/sessions/o/checkpoints").await.expect(StatusCode::NO_CONTENT);
    assert!(ids(&app.get("/v1/sessions/o/checkpoints").await.expect(StatusCode::OK)).is_empty());
    put(&app, "/v1/sessions/o/checkpoints/c9", checkpoint("p", &[("a", "9")], &["a"])).await;
    writes(&app, "o", "c9", json!({"task_id": "t", "writes": [write(0, "x", "v")]})).await;
    app.delete("/v1/sessions/o").await.expect(StatusCode::NO_CONTENT);
    app.delete("/v1/sessions/s").await.expect(StatusCode::NO_CONTENT);
    for table in ["checkpoints", "checkpoint_blobs", "checkpoint_writes"] {
        let rows = db.strings(&format!("select tenant_id from {table}")).await;
        assert!(rows.is_empty(), "{table}: {rows:?}");
    }
}

async fn a_fork_copies_checkpoints_and_other_tenants_see_none(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    put(&app, "/v1/sessions/s/checkpoints/c1", checkpoint("p", &[("a", "1")], &["a"])).await;
    writes(&app, "s", "c1", json!({"task_id": "t", "writes": [write(0, "x", "v")]})).await;
    app.post("/v1/sessions/s/fork", json!({"id": "f"})).await.expect(StatusCode::CREATED);
    let source = app.get("/v1/sessions/s/checkpoints/c1").await.expect(StatusCode::OK);
    let copy = app.get("/v1/sessions/f/checkpoints/c1").await.expect(StatusCode::OK);
    for field in ["checkpoint", "metadata", "blobs", "writes", "channel_versions"] {
        assert_eq!(source[field], copy[field], "{field}");
    }
    let theirs = app.store.list_checkpoints("other", None, &Default::default()).await.unwrap();
    assert!(theirs.is_empty());
}

async fn checkpoint_writes_take_keys_and_conditions_but_change_no_revision(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    app.post("/v1/sessions", json!({"id": "t"})).await.expect(StatusCode::CREATED);
    let keyed = |body: Value, key: &'static str| {
        Request::builder()
            .method(Method::PUT)
            .uri("/v1/sessions/t/checkpoints/c1")
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    let body = checkpoint("p", &[], &[]);
    app.send(keyed(body.clone(), "k")).await.expect(StatusCode::OK);
    let replay = app.send(keyed(body, "k")).await;
    replay.expect(StatusCode::OK);
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    let other = app.send(keyed(checkpoint("q", &[], &[]), "k")).await;
    other.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused");

    let stale = send(
        &app,
        Method::PUT,
        "/v1/sessions/t/checkpoints/c2",
        Some("\"7\""),
        Some(checkpoint("p", &[], &[])),
    )
    .await;
    stale.expect_problem(StatusCode::PRECONDITION_FAILED, "revision_mismatch");
    let current = send(
        &app,
        Method::PUT,
        "/v1/sessions/t/checkpoints/c2",
        Some("\"1\""),
        Some(checkpoint("p", &[], &[])),
    )
    .await;
    current.expect(StatusCode::OK);
    let absent = send(
        &app,
        Method::PUT,
        "/v1/sessions/n/checkpoints/c1",
        Some("*"),
        Some(checkpoint("p", &[], &[])),
    )
    .await;
    absent.expect_problem(StatusCode::PRECONDITION_FAILED, "revision_mismatch");
    let session = app.get("/v1/sessions/t").await;
    assert_eq!(etag(&session), 1, "checkpoints are no change to the session's revision");
}
