//! Retention: sessions expire after their `expires_after`, are 404 from that moment on,
//! and the sweeper deletes them with all their rows; an unfinished run holds them.

use std::time::Duration;

use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use agent_sessions::model::ExpiresAfter;
use agent_sessions::store::PayloadCodec;

use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, test_config, TestApp, TestDb};
use crate::runs::RunsApp;

on_both_backends!(
    an_expired_session_is_gone_everywhere_and_swept,
    activity_pushes_the_expiry_of_an_inactivity_retention,
    an_unfinished_run_holds_its_session,
    retention_is_set_changed_and_removed_and_checked,
    the_server_default_applies_to_sessions_made_without_one,
);

fn at(value: &Value) -> DateTime<Utc> {
    value.as_str().unwrap().parse().unwrap()
}

/// Sleeps until `instant` has passed (with a margin for the database's clock reading).
async fn sleep_past(instant: DateTime<Utc>) {
    let left = (instant - Utc::now()).to_std().unwrap_or_default();
    tokio::time::sleep(left + Duration::from_millis(150)).await;
}

async fn an_expired_session_is_gone_everywhere_and_swept(db: TestDb) {
    let app = TestApp::new(db.clone_handle(), &test_config());
    let brief = json!({"anchor": "created_at", "seconds": 2});
    let mut expires_at = Vec::new();
    for id in ["brief", "reused", "appended"] {
        let session = app
            .post("/v1/sessions", json!({"id": id, "expires_after": brief}))
            .await
            .expect(StatusCode::CREATED);
        assert_eq!(session["expires_after"], brief);
        let at_ = at(&session["expires_at"]);
        assert_eq!((at_ - at(&session["created_at"])).num_seconds(), 2, "{session}");
        expires_at.push(at_);
    }
    let item = app
        .post(
            "/v1/sessions/brief/items",
            json!({"items": [{"role": "user", "content": "short-lived"}]}),
        )
        .await
        .expect(StatusCode::CREATED)["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.post("/v1/sessions", json!({"id": "kept"})).await.expect(StatusCode::CREATED);
    sleep_past(expires_at.into_iter().max().unwrap()).await;

    for path in [
        "/v1/sessions/brief".to_owned(),
        "/v1/sessions/brief/items".to_owned(),
        format!("/v1/sessions/brief/items/{item}"),
        "/v1/sessions/brief/runs".to_owned(),
        "/v1/sessions/brief/context".to_owned(),
        "/v1/sessions/brief/compactions".to_owned(),
    ] {
        app.get(&path).await.expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    }
    app.delete("/v1/sessions/brief")
        .await
        .expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    app.patch("/v1/sessions/brief", json!({"metadata": {"k": "v"}}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    let listed = app.get("/v1/sessions").await.expect(StatusCode::OK);
    let ids: Vec<&str> =
        listed["data"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["kept"]);
    assert_eq!(db.strings("select body from items").await.len(), 1);

    // The ids are free before the sweeper comes: a create or an append starts anew.
    let reused =
        app.post("/v1/sessions", json!({"id": "reused"})).await.expect(StatusCode::CREATED);
    assert_eq!(reused["expires_after"], Value::Null);
    let fresh = app
        .post(
            "/v1/sessions/appended/items",
            json!({"items": [{"role": "user", "content": "again"}]}),
        )
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(fresh["data"][0]["seq"], 1);

    // The sweeper deletes the last expired one with its rows; the others stay.
    agent_sessions::upkeep::sweep(&*app.store, &app.metrics).await;
    let mut left = db.strings("select id from sessions").await;
    left.sort();
    assert_eq!(left, ["appended", "kept", "reused"]);
    assert_eq!(db.strings("select body from items").await.len(), 1);
    let metrics = app.get("/metrics").await.text;
    assert!(metrics.contains("agent_sessions_sessions_expired_total 1"), "{metrics}");
    assert!(metrics.contains("agent_sessions_swept_rows_total 2"), "{metrics}");
    assert!(metrics.contains("sweep_duration_seconds_count 1"), "{metrics}");
}

async fn activity_pushes_the_expiry_of_an_inactivity_retention(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    let created = app
        .post(
            "/v1/sessions",
            json!({"id": "idle", "expires_after": {"anchor": "last_active_at", "seconds": 2}}),
        )
        .await
        .expect(StatusCode::CREATED);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    app.post(
        "/v1/sessions/idle/items",
        json!({"items": [{"role": "user", "content": "still here"}]}),
    )
    .await
    .expect(StatusCode::CREATED);
    let touched = app.get("/v1/sessions/idle").await.expect(StatusCode::OK);
    assert!(at(&touched["last_active_at"]) > at(&created["last_active_at"]));
    let pushed = at(&touched["expires_at"]);
    assert!(pushed > at(&created["expires_at"]), "{touched}");
    assert_eq!((pushed - at(&touched["last_active_at"])).num_seconds(), 2);
    // Past the first expiry, alive thanks to the append.
    sleep_past(at(&created["expires_at"])).await;
    app.get("/v1/sessions/idle").await.expect(StatusCode::OK);
    sleep_past(pushed).await;
    app.get("/v1/sessions/idle").await.expect_problem(StatusCode::NOT_FOUND, "session_not_found");
}

async fn an_unfinished_run_holds_its_session(db: TestDb) {
    let t = RunsApp::new(db.clone_handle()).await;
    t.app
        .post(
            "/v1/sessions",
            json!({"id": "busy", "expires_after": {"anchor": "created_at", "seconds": 2}}),
        )
        .await
        .expect(StatusCode::CREATED);
    t.llm.push(Reply::tool_call("call_1", "lookup", "{}"));
    t.llm.push(Reply::text("done"));
    let run = t
        .app
        .post(
            "/v1/sessions/busy/runs",
            json!({"input": "look it up", "agent": {"tools": [{"type": "function", "name": "lookup"}]}}),
        )
        .await
        .expect(StatusCode::OK);
    assert_eq!(run["status"], "requires_action", "{run}");
    let session = t.app.get("/v1/sessions/busy").await.expect(StatusCode::OK);
    sleep_past(at(&session["expires_at"])).await;

    // Past expiry, the run waits for its tool output: the session stays.
    t.app.get("/v1/sessions/busy").await.expect(StatusCode::OK);
    agent_sessions::upkeep::sweep(&*t.app.store, &t.app.metrics).await;
    assert_eq!(db.strings("select id from sessions").await, ["busy"]);

    let run_id = run["id"].as_str().unwrap();
    let done = t
        .app
        .post(
            &format!("/v1/sessions/busy/runs/{run_id}/tool_outputs"),
            json!({"outputs": [{"call_id": "call_1", "output": "42"}]}),
        )
        .await
        .expect(StatusCode::OK);
    assert_eq!(done["status"], "completed", "{done}");
    // The run has ended: the session is gone.
    t.app.get("/v1/sessions/busy").await.expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    // A run under the expired id starts a new session, before any sweep.
    t.llm.push(Reply::text("fresh"));
    let fresh = t
        .app
        .post("/v1/sessions/busy/runs", json!({"input": "again"}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(fresh["status"], "completed", "{fresh}");
    assert_eq!(t.items("busy").await.len(), 2);
    let session = t.app.get("/v1/sessions/busy").await.expect(StatusCode::OK);
    assert_eq!(session["expires_after"], Value::Null);
    agent_sessions::upkeep::sweep(&*t.app.store, &t.app.metrics).await;
    assert_eq!(db.strings("select id from sessions").await, ["busy"]);
    assert_eq!(db.strings("select body from runs").await.len(), 1);
}

async fn retention_is_set_changed_and_removed_and_checked(db: TestDb) {
    let app = TestApp::new(db, &test_config());
    let forever = app.post("/v1/sessions", json!({"id": "r"})).await.expect(StatusCode::CREATED);
    assert_eq!(forever["expires_after"], Value::Null);
    assert_eq!(forever["expires_at"], Value::Null);
    assert_eq!(forever["last_active_at"], forever["created_at"]);

    let patched = app
        .patch(
            "/v1/sessions/r",
            json!({"expires_after": {"anchor": "created_at", "seconds": 3600}}),
        )
        .await
        .expect(StatusCode::OK);
    assert_eq!((at(&patched["expires_at"]) - at(&patched["created_at"])).num_seconds(), 3600);
    let unchanged =
        app.patch("/v1/sessions/r", json!({"metadata": {"k": "v"}})).await.expect(StatusCode::OK);
    assert_eq!(unchanged["expires_at"], patched["expires_at"]);
    let removed =
        app.patch("/v1/sessions/r", json!({"expires_after": null})).await.expect(StatusCode::OK);
    assert_eq!(removed["expires_after"], Value::Null);
    assert_eq!(removed["expires_at"], Value::Null);

    for (body, field) in [
        (json!({"anchor": "created_at", "seconds": 0}), "expires_after.seconds"),
        (json!({"anchor": "created_at", "seconds": 3_153_600_001_u64}), "expires_after.seconds"),
        (json!({"anchor": "created_at", "seconds": -1}), "expires_after.seconds"),
        (json!({"anchor": "updated_at", "seconds": 5}), "expires_after.anchor"),
        (json!({"seconds": 5}), "expires_after"),
    ] {
        for (method, path, request) in [
            ("post", "/v1/sessions", json!({"expires_after": body})),
            ("patch", "/v1/sessions/r", json!({"expires_after": body})),
        ] {
            let answer = match method {
                "post" => app.post(path, request).await,
                _ => app.patch(path, request).await,
            };
            let detail = answer.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
            assert!(detail.starts_with(field), "{body}: {detail}");
        }
    }
}

async fn the_server_default_applies_to_sessions_made_without_one(db: TestDb) {
    let db = db.reopen_with(PayloadCodec::default(), Some(ExpiresAfter::inactivity(600))).await;
    let app = TestApp::new(db, &test_config());
    let appended = app
        .post("/v1/sessions/implicit/items", json!({"items": [{"role": "user", "content": "hi"}]}))
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(appended["data"][0]["seq"], 1);
    let implicit = app.get("/v1/sessions/implicit").await.expect(StatusCode::OK);
    assert_eq!(implicit["expires_after"], json!({"anchor": "last_active_at", "seconds": 600}));
    let explicit = app
        .post("/v1/sessions", json!({"id": "x", "expires_after": null}))
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(explicit["expires_after"], Value::Null);
    let defaulted = app.post("/v1/sessions", json!({"id": "y"})).await.expect(StatusCode::CREATED);
    assert_eq!(
        (at(&defaulted["expires_at"]) - at(&defaulted["last_active_at"])).num_seconds(),
        600
    );
    // A fork keeps its source's retention.
    let fork = app
        .post("/v1/sessions/implicit/fork", json!({"id": "implicit-2"}))
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(fork["expires_after"], implicit["expires_after"]);
}
