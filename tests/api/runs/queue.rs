use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::json;
use uuid::Uuid;

use super::RunsApp;
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, TestDb};

on_both_backends!(
    enqueued_runs_execute_in_order,
    cancel_drops_the_call_and_keeps_the_history,
    a_lost_worker_is_replaced_then_given_up_on,
    concurrent_runs_on_one_session_admit_one,
    concurrent_sync_runs_queue_and_execute_one_at_a_time,
    every_run_path_names_an_unknown_run,
    runs_started_at_creation_share_the_worker_slots,
    a_cancel_from_another_replica_ends_the_stream_here,
    a_cancel_through_the_database_is_numbered_after_the_stored_deltas,
    a_backlog_another_replica_queued_is_taken_by_every_idle_worker,
);

async fn enqueued_runs_execute_in_order(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.llm.push(Reply::Text {
        deltas: vec!["first".into()],
        usage: None,
        delay: Duration::from_millis(300),
    });
    t.llm.push(Reply::text("second"));
    t.llm.push(Reply::text("third"));
    let mut ids = Vec::new();
    for input in ["a", "b", "c"] {
        let run = t
            .app
            .post(
                "/v1/sessions/q/runs",
                json!({"input": input, "background": true, "if_busy": "enqueue"}),
            )
            .await
            .expect(StatusCode::ACCEPTED);
        ids.push(run["id"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        t.app.get(&format!("/v1/sessions/q/runs/{id}/events")).await;
    }
    let items = t.items("q").await;
    let contents: Vec<String> = items
        .iter()
        .map(|i| match &i["content"] {
            serde_json::Value::String(s) => s.clone(),
            parts => parts[0]["text"].as_str().unwrap().to_owned(),
        })
        .collect();
    assert_eq!(contents, ["a", "first", "b", "second", "c", "third"]);
    // Each run saw the turns before it.
    let third = &t.llm.requests()[2]["messages"];
    assert_eq!(third.as_array().unwrap().len(), 5);
}

async fn cancel_drops_the_call_and_keeps_the_history(db: TestDb) {
    let t = RunsApp::configured(db, |c| c.llm_idle_timeout_secs = 30).await;
    t.llm.push(Reply::HangMidStream);
    let run = t
        .app
        .post("/v1/sessions/c/runs", json!({"input": "go", "background": true}))
        .await
        .expect(StatusCode::ACCEPTED);
    let path = format!("/v1/sessions/c/runs/{}", run["id"].as_str().unwrap());
    // Wait until the model has started streaming.
    for _ in 0..100 {
        let run = t.app.get(&path).await.expect(StatusCode::OK);
        if run["status"] == "running" && !t.llm.requests().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cancelled = t.app.post(&format!("{path}/cancel"), json!({})).await.expect(StatusCode::OK);
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    // The call the cancel cut off was made (and billed): it counts.
    assert_eq!(cancelled["usage"]["llm_calls"], 1, "{cancelled}");
    let session = t.app.get("/v1/sessions/c").await.expect(StatusCode::OK);
    assert_eq!(session["usage"]["llm_calls"], 1, "{session}");
    assert!(t.items("c").await.is_empty());
    let events = super::parse_sse(&t.app.get(&format!("{path}/events")).await.text);
    assert_eq!(events.last().unwrap().0, "run.cancelled");
    t.app
        .post(&format!("{path}/cancel"), json!({}))
        .await
        .expect_problem(StatusCode::CONFLICT, "run_finished");
    // The session is free again.
    t.llm.push(Reply::text("done"));
    let next =
        t.app.post("/v1/sessions/c/runs", json!({"input": "again"})).await.expect(StatusCode::OK);
    assert_eq!(next["status"], "completed");
}

async fn a_lost_worker_is_replaced_then_given_up_on(db: TestDb) {
    let store = db.store.clone();
    let t = RunsApp::configured(db, |c| {
        c.run_workers = 0;
        c.run_max_attempts = 2;
    })
    .await;
    let run = t
        .app
        .post("/v1/sessions/l/runs", json!({"input": "hi", "background": true}))
        .await
        .expect(StatusCode::ACCEPTED);
    let path = format!("/v1/sessions/l/runs/{}", run["id"].as_str().unwrap());
    // A worker claims the run and dies: its lease lapses.
    let lease = Duration::from_millis(50);
    store.claim_run(Uuid::now_v7(), lease, None).await.unwrap().expect("a claim");
    tokio::time::sleep(lease * 2).await;
    assert_eq!(t.app.runs.recover_expired().await.unwrap(), (1, 0));
    assert_eq!(t.app.get(&path).await.expect(StatusCode::OK)["status"], "queued");
    // The second claim dies too: the run fails, never left running.
    store.claim_run(Uuid::now_v7(), lease, None).await.unwrap().expect("a claim");
    tokio::time::sleep(lease * 2).await;
    assert_eq!(t.app.runs.recover_expired().await.unwrap(), (0, 1));
    let failed = t.app.get(&path).await.expect(StatusCode::OK);
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["error"]["code"], "worker_lost");
    assert!(t.items("l").await.is_empty());

    // A re-queued run is executed by a live worker.
    let run = t
        .app
        .post("/v1/sessions/l2/runs", json!({"input": "hi", "background": true}))
        .await
        .expect(StatusCode::ACCEPTED);
    store.claim_run(Uuid::now_v7(), lease, None).await.unwrap().expect("a claim");
    tokio::time::sleep(lease * 2).await;
    t.app.runs.recover_expired().await.unwrap();
    t.llm.push(Reply::text("recovered"));
    assert_eq!(t.app.runs.run_pending().await.unwrap(), 1);
    let done = t
        .app
        .get(&format!("/v1/sessions/l2/runs/{}", run["id"].as_str().unwrap()))
        .await
        .expect(StatusCode::OK);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(t.items("l2").await.len(), 2);
}

async fn concurrent_runs_on_one_session_admit_one(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.llm.set_default(Reply::Text {
        deltas: vec!["busy".into()],
        usage: None,
        delay: Duration::from_millis(300),
    });
    let attempts = (0..8)
        .map(|_| t.app.post("/v1/sessions/race/runs", json!({"input": "hi", "background": true})));
    let answers = futures::future::join_all(attempts).await;
    let accepted = answers.iter().filter(|a| a.status == StatusCode::ACCEPTED).count();
    let busy = answers.iter().filter(|a| a.status == StatusCode::CONFLICT).count();
    assert_eq!((accepted, busy), (1, 7));
}

/// Sync runs created at once on one idle session: the creation that finds the session
/// idle starts its run, every other one queues behind it, and each run sees the turns
/// of all before it, so no two executed at once.
async fn concurrent_sync_runs_queue_and_execute_one_at_a_time(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.llm.set_default(Reply::Text {
        deltas: vec!["turn".into()],
        usage: None,
        delay: Duration::from_millis(50),
    });
    let attempts = (0..8).map(|i| {
        t.app
            .post("/v1/sessions/line/runs", json!({"input": format!("m{i}"), "if_busy": "enqueue"}))
    });
    let answers = futures::future::join_all(attempts).await;
    for answer in &answers {
        assert_eq!(answer.expect(StatusCode::OK)["status"], "completed");
    }
    let mut seen: Vec<usize> =
        t.llm.requests().iter().map(|r| r["messages"].as_array().unwrap().len()).collect();
    seen.sort_unstable();
    assert_eq!(seen, [1, 3, 5, 7, 9, 11, 13, 15]);
    assert_eq!(t.items("line").await.len(), 16);
}

async fn every_run_path_names_an_unknown_run(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.app
        .post("/v1/sessions/u/items", json!({"items": [{"role": "user", "content": "x"}]}))
        .await
        .expect(StatusCode::CREATED);
    for run in ["not-a-uuid", &Uuid::now_v7().to_string()] {
        let path = format!("/v1/sessions/u/runs/{run}");
        t.app.get(&path).await.expect_problem(StatusCode::NOT_FOUND, "run_not_found");
        t.app
            .get(&format!("{path}/events"))
            .await
            .expect_problem(StatusCode::NOT_FOUND, "run_not_found");
        t.app
            .post(&format!("{path}/cancel"), json!({}))
            .await
            .expect_problem(StatusCode::NOT_FOUND, "run_not_found");
        t.app
            .post(
                &format!("{path}/tool_outputs"),
                json!({"outputs": [{"call_id": "c", "output": "o"}]}),
            )
            .await
            .expect_problem(StatusCode::NOT_FOUND, "run_not_found");
        t.app
            .post(&format!("{path}/tool_outputs"), json!({"outputs": []}))
            .await
            .expect_problem(StatusCode::NOT_FOUND, "run_not_found");
    }
    t.app
        .get("/v1/sessions/nobody/runs")
        .await
        .expect_problem(StatusCode::NOT_FOUND, "session_not_found");
    let cursor = Uuid::now_v7();
    let detail = t
        .app
        .get(&format!("/v1/sessions/u/runs?after={cursor}"))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("after:"), "{detail}");
    // A run of another session is no cursor of this one, though this one has runs after it.
    let elsewhere =
        t.app.post("/v1/sessions/v/runs", json!({"input": "x"})).await.expect(StatusCode::OK);
    t.app.post("/v1/sessions/u/runs", json!({"input": "y"})).await.expect(StatusCode::OK);
    let detail = t
        .app
        .get(&format!("/v1/sessions/u/runs?order=asc&after={}", elsewhere["id"].as_str().unwrap()))
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("after:"), "{detail}");
    let detail = t
        .app
        .get("/v1/agents?before=missing")
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("before:"), "{detail}");
}

/// A sync run starts as it is created when a worker slot is free; with the only slot
/// taken, the next one waits in the queue until the slot is free again.
async fn runs_started_at_creation_share_the_worker_slots(db: TestDb) {
    let t = RunsApp::configured(db, |c| {
        c.run_workers = 1;
        c.llm_idle_timeout_secs = 30;
    })
    .await;
    t.llm.push(Reply::HangMidStream);
    t.llm.set_default(Reply::text("ok"));
    let first = t.app.post("/v1/sessions/a/runs", json!({"input": "hang"}));
    let second = async {
        while t.llm.requests().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let second = t.app.post("/v1/sessions/b/runs", json!({"input": "wait"}));
        let meanwhile = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let waiting = t.app.get("/v1/sessions/b/runs").await.expect(StatusCode::OK);
            assert_eq!(waiting["data"][0]["status"], "queued", "{waiting}");
            assert_eq!(t.llm.requests().len(), 1);
            let hanging = t.app.get("/v1/sessions/a/runs").await.expect(StatusCode::OK);
            let id = hanging["data"][0]["id"].as_str().unwrap();
            t.app
                .post(&format!("/v1/sessions/a/runs/{id}/cancel"), json!({}))
                .await
                .expect(StatusCode::OK);
        };
        tokio::join!(second, meanwhile).0
    };
    let (first, second) = tokio::join!(first, second);
    assert_eq!(first.expect(StatusCode::OK)["status"], "cancelled");
    assert_eq!(second.expect(StatusCode::OK)["status"], "completed");
    assert_eq!(t.llm.requests().len(), 2);
}

/// A run cancelled through the database, as another replica does, while this process
/// executes it: its followers here still end with `run.cancelled`, although the store
/// numbered that event before deltas they had from the worker's memory.
async fn a_cancel_from_another_replica_ends_the_stream_here(db: TestDb) {
    let store = db.store.clone();
    let t = RunsApp::configured(db, |c| c.llm_idle_timeout_secs = 30).await;
    t.llm.push(Reply::HangMidStream);
    let stream = t.app.post("/v1/sessions/x/runs", json!({"input": "go", "stream": true}));
    let cancel = async {
        while t.llm.requests().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        let runs = t.app.get("/v1/sessions/x/runs").await.expect(StatusCode::OK);
        let id = Uuid::parse_str(runs["data"][0]["id"].as_str().unwrap()).unwrap();
        let session = agent_sessions::model::SessionId::parse("id", "x".into()).unwrap();
        let cancel = agent_sessions::model::StopAction::Cancel;
        store.stop_run("default", &session, id, cancel).await.unwrap();
    };
    let (stream, ()) =
        tokio::time::timeout(Duration::from_secs(10), async { tokio::join!(stream, cancel) })
            .await
            .expect("the stream ends");
    let events = super::parse_sse(&stream.text);
    let (last, _, run) = events.last().unwrap();
    assert_eq!(last, "run.cancelled", "{events:?}");
    assert_eq!(run["status"], "cancelled");
    assert!(t.items("x").await.is_empty());
    // A client that reconnects after the newest id it saw ends with it too.
    let newest = events.iter().map(|(_, id, _)| *id).max().unwrap();
    let request = axum::http::Request::get(format!(
        "/v1/sessions/x/runs/{}/events",
        run["id"].as_str().unwrap()
    ))
    .header("last-event-id", newest.to_string())
    .body(axum::body::Body::empty())
    .unwrap();
    let again = super::parse_sse(&t.app.send(request).await.text);
    assert_eq!(again.last().map(|e| e.0.as_str()), Some("run.cancelled"), "{again:?}");
}

/// Deltas are stored while the run executes without its row counting them: a stop made
/// through the database (as another replica makes it) still numbers `run.cancelled`
/// after every stored delta, so the stored stream ends with it.
async fn a_cancel_through_the_database_is_numbered_after_the_stored_deltas(db: TestDb) {
    let store = db.store.clone();
    let t = RunsApp::new(db).await;
    t.llm.push(Reply::Clock { count: 2_000, interval: Duration::from_millis(5) });
    let body = json!({"input": "go", "background": true});
    let run = t.app.post("/v1/sessions/c/runs", body).await.expect(StatusCode::ACCEPTED);
    let id = Uuid::parse_str(run["id"].as_str().unwrap()).unwrap();
    let session = agent_sessions::model::SessionId::parse("id", "c".into()).unwrap();
    let stored_deltas = || async {
        let (events, _) = store.run_events("default", &session, id, 0).await.unwrap();
        events.iter().filter(|e| e.name() == "message.delta").count()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while stored_deltas().await < 20 {
        assert!(Instant::now() < deadline, "the deltas are stored while the run executes");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cancel = agent_sessions::model::StopAction::Cancel;
    store.stop_run("default", &session, id, cancel).await.unwrap();
    let (events, status) = store.run_events("default", &session, id, 0).await.unwrap();
    assert_eq!(status.as_str(), "cancelled");
    let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "each event once, in order: {seqs:?}");
    let last = events.last().unwrap();
    assert_eq!(last.name(), "run.cancelled", "after {} events", events.len());
    assert!(events.iter().filter(|e| e.name() == "message.delta").count() >= 20);
}

/// Runs another replica queued are found by one idle worker's periodic look; each worker
/// that claims one sends another to look, so every idle worker takes one at once rather
/// than one per poll interval (0.5 s) or as the runs finish.
async fn a_backlog_another_replica_queued_is_taken_by_every_idle_worker(db: TestDb) {
    let workers = RunsApp::configured(db.clone_handle(), |c| {
        c.run_workers = 16;
        c.llm_idle_timeout_secs = 30;
    })
    .await;
    let slow = Duration::from_secs(10);
    workers.llm.set_default(Reply::Text { deltas: vec!["done".into()], usage: None, delay: slow });
    let front = RunsApp::configured(db, |c| c.run_workers = 0).await;
    // The workers have looked at an empty queue and wait.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let queued = Instant::now();
    for n in 0..16 {
        front
            .app
            .post(
                &format!("/v1/sessions/backlog-{n}/runs"),
                json!({"input": "hi", "background": true}),
            )
            .await
            .expect(StatusCode::ACCEPTED);
    }
    while workers.llm.requests().len() < 16 && queued.elapsed() < slow {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // One worker per look would need 7.5 s for the last run.
    let all_started = queued.elapsed();
    assert_eq!(workers.llm.requests().len(), 16);
    assert!(all_started < Duration::from_secs(4), "16 runs took {all_started:?} to start");
}
