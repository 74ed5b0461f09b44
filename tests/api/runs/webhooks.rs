//! Completion webhooks: a run's finish or pause posted to its `webhook`, signed as
//! Standard Webhooks sign, retried after failures, never in the run's way.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};

use super::RunsApp;
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, TestDb};

on_both_backends!(
    a_finished_run_is_posted_signed_and_retried_after_a_500,
    an_unreachable_webhook_never_holds_the_run_up,
    webhooks_are_checked_where_they_are_given,
);

pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// A receiver of webhooks that answers 500 to the first `failures` posts, then 200.
pub struct Receiver {
    pub url: String,
    pub host: String,
    pub received: Arc<Mutex<Vec<(HeaderMap, String)>>>,
    pub failures: Arc<AtomicUsize>,
}

impl Receiver {
    pub async fn start(failures: usize) -> Self {
        let received: Arc<Mutex<Vec<(HeaderMap, String)>>> = Arc::default();
        let failures = Arc::new(AtomicUsize::new(failures));
        let (log, failing) = (received.clone(), failures.clone());
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: String| async move {
                log.lock().unwrap().push((headers, body));
                let fail =
                    failing.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
                if fail.is_ok() {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::NO_CONTENT
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let host = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url: format!("http://{host}/hook"), host, received, failures }
    }

    /// Waits until `n` posts have arrived and returns them.
    pub async fn posts(&self, n: usize) -> Vec<(HeaderMap, String)> {
        for _ in 0..300 {
            if self.received.lock().unwrap().len() >= n {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let received = self.received.lock().unwrap().clone();
        assert!(received.len() >= n, "{} posts of {n} arrived", received.len());
        received
    }
}

/// Checks a post's signature as the Standard Webhooks specification says: the HMAC-SHA256
/// of `{webhook-id}.{webhook-timestamp}.{body}` under the base64 key after `whsec_`.
pub fn verify(headers: &HeaderMap, body: &str) {
    let header = |name: &str| headers[name].to_str().unwrap().to_owned();
    let key = base64::engine::general_purpose::STANDARD
        .decode(SECRET.strip_prefix("whsec_").unwrap())
        .unwrap();
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    let (id, timestamp) = (header("webhook-id"), header("webhook-timestamp"));
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    let expected = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    let signatures = header("webhook-signature");
    assert!(
        signatures.split(' ').any(|s| s == format!("v1,{expected}")),
        "{signatures} does not sign the body"
    );
    let age = chrono::Utc::now().timestamp() - timestamp.parse::<i64>().unwrap();
    assert!((0..60).contains(&age), "the timestamp is the time of sending");
}

async fn app(db: TestDb, receiver: &Receiver) -> RunsApp {
    let host = receiver.host.clone();
    RunsApp::configured(db, |c| {
        c.tool_webhook_allowed_hosts = vec![host];
        c.webhook_signing_secret = Some(SECRET.into());
    })
    .await
}

async fn a_finished_run_is_posted_signed_and_retried_after_a_500(db: TestDb) {
    let receiver = Receiver::start(1).await;
    let t = app(db, &receiver).await;
    t.llm.push(Reply::text("done"));
    let body = json!({"input": "hi", "webhook": {"url": receiver.url}});
    let run = t.app.post("/v1/sessions/w/runs", body).await.expect(StatusCode::OK);
    assert_eq!(run["status"], "completed");
    let posts = receiver.posts(2).await;
    for (headers, body) in &posts {
        verify(headers, body);
        let event: Value = serde_json::from_str(body).unwrap();
        assert_eq!(event["type"], "run.completed");
        assert_eq!(event["data"]["id"], run["id"]);
        assert_eq!(event["data"]["output"], run["output"]);
    }
    assert_eq!(posts[0].0["webhook-id"], posts[1].0["webhook-id"], "a retry is the same message");
    let path = format!("/v1/sessions/w/runs/{}", run["id"].as_str().unwrap());
    let mut shown = json!(null);
    for _ in 0..100 {
        shown = t.app.get(&path).await.expect(StatusCode::OK);
        if shown["webhook"]["status"] == "delivered" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        shown["webhook"],
        json!({"status": "delivered", "attempts": 2, "last_status_code": 204})
    );
    let listed = t.app.get("/v1/sessions/w/runs").await.expect(StatusCode::OK);
    assert_eq!(listed["data"][0]["webhook"], shown["webhook"]);
    let metrics = t.app.get("/metrics").await.text;
    for outcome in ["delivered", "retried"] {
        let line = format!("agent_sessions_webhook_deliveries_total{{outcome=\"{outcome}\"}} 1");
        assert!(metrics.contains(&line), "{line} in\n{metrics}");
    }
}

async fn an_unreachable_webhook_never_holds_the_run_up(db: TestDb) {
    // Nothing listens on the discard port.
    let unreachable = Receiver {
        url: "http://127.0.0.1:9/hook".into(),
        host: "127.0.0.1:9".into(),
        received: Arc::default(),
        failures: Arc::default(),
    };
    let t = app(db, &unreachable).await;
    t.llm.push(Reply::text("done anyway"));
    let started = std::time::Instant::now();
    let body = json!({"input": "hi", "webhook": {"url": unreachable.url}});
    let run = t.app.post("/v1/sessions/u/runs", body).await.expect(StatusCode::OK);
    assert_eq!(run["status"], "completed");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(t.items("u").await.len(), 2);
    let path = format!("/v1/sessions/u/runs/{}", run["id"].as_str().unwrap());
    let mut shown = json!(null);
    for _ in 0..100 {
        shown = t.app.get(&path).await.expect(StatusCode::OK);
        if shown["webhook"]["attempts"].as_u64() >= Some(1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(shown["webhook"]["status"], "pending", "retried for an hour: {shown}");
    assert_eq!(shown["webhook"]["last_status_code"], Value::Null);
}

async fn webhooks_are_checked_where_they_are_given(db: TestDb) {
    let receiver = Receiver::start(0).await;
    let t = app(db, &receiver).await;
    let elsewhere = json!({"url": "http://elsewhere.example/hook"});
    let refused =
        t.app.post("/v1/sessions/c/runs", json!({"input": "x", "webhook": elsewhere})).await;
    let detail = refused.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(detail.starts_with("webhook.url:"), "{detail}");
    let refused = t.app.post("/v1/agents", json!({"webhook": elsewhere})).await;
    assert!(refused
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request")
        .starts_with("webhook.url:"));

    // An agent's webhook hears of its runs' pauses too.
    let tool = json!({"type": "function", "name": "ask"});
    let agent = json!({"tools": [tool], "webhook": {"url": receiver.url}});
    let agent = t.app.post("/v1/agents", agent).await.expect(StatusCode::CREATED);
    assert_eq!(agent["webhook"]["url"], receiver.url.as_str());
    t.llm.push(Reply::tool_call("c1", "ask", "{}"));
    let body = json!({"input": "x", "agent_id": agent["id"]});
    let run = t.app.post("/v1/sessions/c/runs", body).await.expect(StatusCode::OK);
    assert_eq!(run["status"], "requires_action");
    let (headers, body) = receiver.posts(1).await.remove(0);
    verify(&headers, &body);
    let event: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(event["type"], "run.requires_action");
    assert_eq!(event["data"]["required_action"], run["required_action"]);

    // Without a signing secret, no webhook is taken.
    let unsigned = RunsApp::configured(TestDb::sqlite().await, |c| {
        c.tool_webhook_allowed_hosts = vec![receiver.host.clone()];
    })
    .await;
    let body = json!({"input": "x", "webhook": {"url": receiver.url}});
    let detail = unsigned.app.post("/v1/sessions/n/runs", body).await;
    let detail = detail.expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
    assert!(
        detail.starts_with("webhook:") && detail.contains("WEBHOOK_SIGNING_SECRET"),
        "{detail}"
    );
}
