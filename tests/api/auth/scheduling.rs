//! Runs across tenants: workers take turns between tenants, and a tenant's limit of
//! executing runs holds across replicas.

use std::time::Duration;

use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde_json::json;

use super::{new_key, with_auth, As};
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, TestDb};
use crate::runs::RunsApp;

on_both_backends!(a_tenant_with_many_queued_runs_starves_no_other);

/// Queues a background run on each session; returns the sessions.
async fn queue(caller: &As<'_>, prefix: &str, count: usize) -> Vec<String> {
    let mut sessions = Vec::new();
    for n in 0..count {
        let session = format!("{prefix}-{n}");
        caller
            .post(
                &format!("/v1/sessions/{session}/runs"),
                json!({"input": "hi", "background": true}),
            )
            .await
            .expect(StatusCode::ACCEPTED);
        sessions.push(session);
    }
    sessions
}

/// When each session's run finished, once all have.
/// When each session's run was claimed, once it has completed. Claims are what the
/// scheduler decides; finishes also hang on how a loaded machine runs the workers.
async fn finished(caller: &As<'_>, sessions: &[String]) -> Vec<DateTime<Utc>> {
    let mut times = Vec::new();
    for session in sessions {
        let mut run = json!(null);
        for _ in 0..1000 {
            run = caller.get(&format!("/v1/sessions/{session}/runs")).await.expect(StatusCode::OK)
                ["data"][0]
                .clone();
            if run["status"] == "completed" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(run["status"], "completed", "{run}");
        times.push(run["started_at"].as_str().unwrap().parse().unwrap());
    }
    times
}

async fn a_tenant_with_many_queued_runs_starves_no_other(db: TestDb) {
    // One replica takes the requests and executes nothing; the other executes.
    let front = RunsApp::configured(db.clone_handle(), |c| {
        with_auth(c);
        c.run_workers = 0;
    })
    .await;
    let (_, noisy) = new_key(&front.app, "noisy", json!(["read", "write"])).await;
    let (_, quiet) = new_key(&front.app, "quiet", json!(["read", "write"])).await;
    let noisy = As { app: &front.app, key: Some(&noisy) };
    let quiet = As { app: &front.app, key: Some(&quiet) };
    let noisy_sessions = queue(&noisy, "n", 50).await;
    let quiet_sessions = queue(&quiet, "q", 1).await;

    let workers = RunsApp::configured(db, |c| {
        with_auth(c);
        c.run_workers = 2;
    })
    .await;
    // Workers take turns by how many runs each tenant has executing: runs that take a
    // moment, as model calls do, so that the second worker claims while the first runs.
    let deltas = vec!["do".into(), "ne".into()];
    workers.llm.set_default(Reply::Text { deltas, usage: None, delay: Duration::from_millis(50) });
    let mut noisy_done = finished(&noisy, &noisy_sessions).await;
    let quiet_done = finished(&quiet, &quiet_sessions).await[0];
    noisy_done.sort();
    assert!(
        quiet_done < noisy_done[9],
        "the quiet tenant's run started at {quiet_done}, after the noisy tenant's 10th at {}",
        noisy_done[9]
    );
}

/// `TENANT_MAX_ACTIVE_RUNS=1` with two replicas of two workers each: the tenant never
/// has two runs executing, and another tenant is not held up by it.
#[sqlx::test(migrations = "./migrations/postgres")]
async fn a_tenant_limit_holds_across_replicas(pool: sqlx::PgPool) {
    let replica = |db: TestDb| async move {
        let app = RunsApp::configured(db, |c| {
            with_auth(c);
            c.run_workers = 2;
            c.tenant_max_active_runs = Some(1.try_into().unwrap());
        })
        .await;
        app.llm.set_default(Reply::Text {
            deltas: vec!["a".into(), "b".into(), "c".into()],
            usage: None,
            delay: Duration::from_millis(40),
        });
        app
    };
    let first = replica(TestDb::postgres_replica(&pool)).await;
    let second = replica(TestDb::postgres(pool.clone())).await;
    let (_, busy) = new_key(&first.app, "busy", json!(["read", "write"])).await;
    let (_, other) = new_key(&first.app, "other", json!(["read", "write"])).await;
    let busy_first = As { app: &first.app, key: Some(&busy) };
    let busy_second = As { app: &second.app, key: Some(&busy) };
    let other = As { app: &second.app, key: Some(&other) };

    let sampler = tokio::spawn(async move {
        let mut most = 0i64;
        let mut other_alongside = false;
        for _ in 0..400 {
            let executing: Vec<(String, i64)> = sqlx::query_as(
                "select tenant_id, count(*) from runs where status = 'running' \
                 and lease_owner is not null group by tenant_id",
            )
            .fetch_all(&pool)
            .await
            .unwrap();
            for (tenant, count) in &executing {
                if tenant == "busy" {
                    most = most.max(*count);
                    other_alongside |= executing.iter().any(|(t, _)| t == "other");
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        (most, other_alongside)
    });
    let mut sessions = queue(&busy_first, "b1", 3).await;
    sessions.extend(queue(&busy_second, "b2", 3).await);
    let others = queue(&other, "o", 2).await;
    let busy_done = finished(&busy_first, &sessions).await;
    let other_done = finished(&other, &others).await;
    let (most, other_alongside) = sampler.await.unwrap();
    assert_eq!(most, 1, "the busy tenant had {most} runs executing at once");
    assert!(other_alongside, "the other tenant's runs waited for the busy tenant's");
    let last_busy = busy_done.iter().max().unwrap();
    assert!(other_done.iter().all(|done| done < last_busy));
}
