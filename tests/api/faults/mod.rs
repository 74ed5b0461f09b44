//! Network faults between the service and Postgres, injected by a proxy (silence, a
//! blackhole, resets, latency): whatever the network does, every acknowledged write is stored once, every failure is a 503
//! `database_unavailable` that arrives within the database deadline, and writes succeed
//! again by themselves once the database can be reached.

mod failover;
mod proxy;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use agent_sessions::store::{self, Options};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::json;
use sqlx::PgPool;

use crate::helpers::{test_config, TestApp, TestDb};
use proxy::FaultProxy;

/// The database deadline of these tests (`DATABASE_TIMEOUT_SECS`).
const DEADLINE: Duration = Duration::from_secs(2);

/// The longest a failure may take: the deadline and a margin for a busy machine.
const TIME_TO_FAIL: Duration = Duration::from_secs(5);

/// The app, its store reaching the test's database through a fault proxy.
async fn app_behind_proxy(pool: PgPool) -> (FaultProxy, TestApp) {
    app_behind_proxy_within(pool, DEADLINE).await
}

/// The same, with `deadline` for each database operation.
async fn app_behind_proxy_within(pool: PgPool, deadline: Duration) -> (FaultProxy, TestApp) {
    let options = pool.connect_options();
    let proxy = FaultProxy::start(format!("{}:{}", options.get_host(), options.get_port())).await;
    let url = format!(
        "postgres://{}@127.0.0.1:{}/{}",
        options.get_username(),
        proxy.port,
        options.get_database().expect("a database")
    );
    let store = store::connect_with(&url, Options { timeout: deadline, ..Options::new(10) })
        .await
        .expect("Postgres answers through the proxy");
    (proxy, TestApp::new(TestDb::postgres_with(store, pool), &test_config()))
}

/// One answer to an append: when it was sent (after the load began), how long it took.
struct Answer {
    sent: Duration,
    took: Duration,
    status: StatusCode,
}

/// Appends `{"key": …}` items to the client's session under Idempotency-Keys, each
/// retried with its key on 503 until it is acknowledged, until `load_for` has passed.
/// Returns every answer and the keys acknowledged.
async fn keyed_appends(
    app: &TestApp, client: usize, load_for: Duration,
) -> (Vec<Answer>, Vec<String>) {
    let began = Instant::now();
    let (mut answers, mut acknowledged) = (Vec::new(), Vec::new());
    for n in 0.. {
        if began.elapsed() > load_for {
            break;
        }
        let key = format!("client-{client}-{n}");
        loop {
            let body = json!({"items": [{"key": key}]}).to_string();
            let request = Request::post(format!("/v1/sessions/client-{client}/items"))
                .header("content-type", "application/json")
                .header("idempotency-key", &key)
                .body(Body::from(body))
                .unwrap();
            let sent = began.elapsed();
            let answer = app.send(request).await;
            answers.push(Answer { sent, took: began.elapsed() - sent, status: answer.status });
            if answer.status == StatusCode::CREATED {
                acknowledged.push(key);
                break;
            }
            answer.expect_problem(StatusCode::SERVICE_UNAVAILABLE, "database_unavailable");
            assert!(answer.header("retry-after").is_some(), "{answer:?}");
            assert!(began.elapsed() < load_for + Duration::from_secs(30), "{key} never landed");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    (answers, acknowledged)
}

/// Checks that the session holds each acknowledged key once, and no other.
async fn assert_stored_once(app: &TestApp, session: &str, acknowledged: &[String]) {
    let mut stored: HashMap<String, usize> = HashMap::new();
    let mut after = String::new();
    loop {
        let path = format!("/v1/sessions/{session}/items?limit=1000{after}");
        let page = app.get(&path).await.expect(StatusCode::OK);
        for item in page["data"].as_array().unwrap() {
            *stored.entry(item["item"]["key"].as_str().unwrap().to_owned()).or_default() += 1;
        }
        if page["has_more"] != true {
            break;
        }
        after = format!("&after={}", page["last_id"].as_str().unwrap());
    }
    for key in acknowledged {
        assert_eq!(stored.get(key), Some(&1), "acknowledged {key} is stored once");
    }
    assert!(stored.values().all(|&n| n == 1), "a key stored twice: {stored:?}");
    assert_eq!(stored.len(), acknowledged.len(), "stored but never acknowledged");
}

/// Runs four clients' keyed appends for `load_for` while `fault` runs; checks that each
/// acknowledged key is stored once and no key twice, and that every failure took at most
/// TIME_TO_FAIL. Returns the answers, in the order sent.
async fn under_load<F: std::future::Future<Output = ()>>(
    app: &TestApp, load_for: Duration, fault: F,
) -> Vec<Answer> {
    let clients = futures::future::join_all((0..4).map(|c| keyed_appends(app, c, load_for)));
    let (results, ()) = tokio::join!(clients, fault);
    let mut all = Vec::new();
    for (client, (answers, acknowledged)) in results.into_iter().enumerate() {
        assert_stored_once(app, &format!("client-{client}"), &acknowledged).await;
        all.extend(answers);
    }
    for answer in all.iter().filter(|a| a.status != StatusCode::CREATED) {
        assert!(answer.took <= TIME_TO_FAIL, "a failure took {:?}", answer.took);
    }
    all.sort_by_key(|a| a.sent);
    all
}

#[sqlx::test(migrations = "./migrations/postgres")]
async fn connections_gone_silent_fail_fast_and_are_replaced(pool: PgPool) {
    let (proxy, app) = app_behind_proxy(pool).await;
    let silenced_at = Duration::from_secs(1);
    let fault = async {
        tokio::time::sleep(silenced_at).await;
        proxy.silence_open_connections();
    };
    let answers = under_load(&app, Duration::from_secs(14), fault).await;
    let failures: Vec<&Answer> =
        answers.iter().filter(|a| a.status != StatusCode::CREATED).collect();
    assert!(!failures.is_empty(), "silencing the open connections failed no append");
    let last_failure = failures.last().map(|a| a.sent + a.took).unwrap();
    assert!(
        last_failure <= silenced_at + Duration::from_secs(15),
        "appends failed until {last_failure:?}, the fault began at {silenced_at:?}"
    );
    assert!(
        answers.iter().any(|a| a.status == StatusCode::CREATED && a.sent > last_failure),
        "no append succeeded after the last failure"
    );
    app.get("/readyz").await.expect(StatusCode::OK);
}

#[sqlx::test(migrations = "./migrations/postgres")]
async fn an_outage_fails_requests_fast_and_heals_by_itself(pool: PgPool) {
    let (proxy, app) = app_behind_proxy(pool).await;
    let (outage_at, outage_for) = (Duration::from_secs(1), Duration::from_secs(6));
    let fault = async {
        tokio::time::sleep(outage_at).await;
        proxy.blackhole();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let sent = Instant::now();
        let ready = app.get("/readyz").await;
        ready.expect_problem(StatusCode::SERVICE_UNAVAILABLE, "database_unavailable");
        assert!(sent.elapsed() <= TIME_TO_FAIL, "/readyz took {:?}", sent.elapsed());
        tokio::time::sleep(outage_for - Duration::from_secs(3)).await;
        proxy.heal();
    };
    let answers = under_load(&app, Duration::from_secs(14), fault).await;
    let healed = outage_at + outage_for;
    let failed_in_outage = answers
        .iter()
        .filter(|a| a.status != StatusCode::CREATED)
        .all(|a| a.sent + a.took >= outage_at && a.sent <= healed + Duration::from_secs(10));
    assert!(failed_in_outage, "appends failed outside the outage and the 10 s after it");
    assert!(
        answers
            .iter()
            .any(|a| a.sent > outage_at && a.sent < healed && a.status != StatusCode::CREATED),
        "the outage failed no append"
    );
    let recovered = answers.iter().find(|a| a.status == StatusCode::CREATED && a.sent >= healed);
    let recovered = recovered.expect("appends succeed after the outage");
    assert!(recovered.sent + recovered.took <= healed + Duration::from_secs(10));
    app.get("/readyz").await.expect(StatusCode::OK);
}

#[sqlx::test(migrations = "./migrations/postgres")]
async fn connections_reset_every_two_seconds_fail_fast_and_lose_nothing(pool: PgPool) {
    let (proxy, app) = app_behind_proxy(pool).await;
    let resets = async {
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_secs(2)).await;
            proxy.reset_open_connections();
        }
    };
    let answers = under_load(&app, Duration::from_secs(8), resets).await;
    let last_failure = answers.iter().rfind(|a| a.status != StatusCode::CREATED);
    if let Some(last_failure) = last_failure {
        assert!(
            answers.iter().any(|a| a.status == StatusCode::CREATED && a.sent > last_failure.sent),
            "no append succeeded after the last failure"
        );
    }
    app.get("/readyz").await.expect(StatusCode::OK);
}

#[sqlx::test(migrations = "./migrations/postgres")]
async fn latency_slows_writes_and_loses_nothing(pool: PgPool) {
    // An append on a new connection takes about a dozen round trips (connecting,
    // preparing each statement once): at 400 ms each, with appends queued behind one
    // another, more than the default 5 s deadline. DATABASE_TIMEOUT_SECS must be set
    // for a database this far away (docs/operations.md).
    let (proxy, app) = app_behind_proxy_within(pool, Duration::from_secs(15)).await;
    proxy.delay(Duration::from_millis(200));
    let answers = under_load(&app, Duration::from_secs(6), async {}).await;
    assert!(
        answers.iter().filter(|a| a.status == StatusCode::CREATED).count() >= 4,
        "appends go through 200 ms each way"
    );
    app.get("/readyz").await.expect(StatusCode::OK);
}
