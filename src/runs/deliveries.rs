//! The delivery of completion webhooks: each replica's workers claim due deliveries,
//! post them signed, and record the outcome; a failed attempt is retried with backoff
//! until an hour after the run's write queued it. A delivery is a row, so retries go on
//! across restarts and replicas, and a run never waits for its webhook.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use futures::future::join_all;
use tokio_util::sync::CancellationToken;

use super::signature::sign;
use super::Engine;
use crate::model::DeliveryStatus;
use crate::store::{Attempt, Delivery};

/// Deliveries one worker claims at a time.
const BATCH: i64 = 16;
/// How long one attempt may take; its claim holds a little longer.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
const CLAIM_HOLD: Duration = Duration::from_secs(60);
/// Retries go on this long after the delivery was queued.
const RETRY_FOR: chrono::TimeDelta = chrono::TimeDelta::hours(1);
const FIRST_RETRY: Duration = Duration::from_secs(1);
const LONGEST_WAIT: Duration = Duration::from_secs(300);

/// Delivers until shutdown, polling for due deliveries.
pub(super) async fn deliver(engine: Arc<Engine>, shutdown: CancellationToken) {
    while !shutdown.is_cancelled() {
        match engine.store.claim_deliveries(BATCH, CLAIM_HOLD).await {
            Ok(due) if !due.is_empty() => {
                join_all(due.into_iter().map(|delivery| attempt(&engine, delivery))).await;
                continue;
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "cannot claim webhook deliveries"),
        }
        tokio::select! {
            _ = tokio::time::sleep(engine.settings.poll_interval) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

/// Posts one delivery and records how it went.
async fn attempt(engine: &Engine, delivery: Delivery) {
    let code = post(engine, &delivery).await;
    let attempts = delivery.attempts + 1;
    let now = Utc::now();
    let delivered = code.is_some_and(|code| (200..300).contains(&code));
    let wait = FIRST_RETRY.saturating_mul(1 << (attempts - 1).min(16)).min(LONGEST_WAIT);
    let next_attempt_at = now + wait;
    let status = if delivered {
        DeliveryStatus::Delivered
    } else if next_attempt_at > delivery.created_at + RETRY_FOR {
        DeliveryStatus::Failed
    } else {
        DeliveryStatus::Pending
    };
    engine.metrics.delivery(match status {
        DeliveryStatus::Delivered => "delivered",
        DeliveryStatus::Pending => "retried",
        DeliveryStatus::Failed => "failed",
    });
    if status != DeliveryStatus::Delivered {
        tracing::warn!(delivery = %delivery.id, attempts, code, status = status.as_str(), "a webhook delivery failed");
    }
    let attempt = Attempt { status, attempts, last_status_code: code, next_attempt_at };
    if let Err(error) = engine.store.record_delivery(&delivery, &attempt).await {
        // The claim lapses, and the delivery is attempted again: at least once.
        tracing::warn!(%error, "cannot record a webhook delivery");
    }
}

/// The status code of the answer; None when there was none to post or no answer.
async fn post(engine: &Engine, delivery: &Delivery) -> Option<u16> {
    let secret = engine.settings.webhook_signing_secret.as_ref()?;
    // The allow-list may have shrunk since the run was created.
    let url = reqwest::Url::parse(&delivery.url).ok()?;
    let allowed = (engine.settings.webhooks)
        .allows(url.host_str().unwrap_or_default(), url.port_or_known_default());
    if !allowed {
        return None;
    }
    let id = delivery.id.to_string();
    let timestamp = Utc::now().timestamp();
    let signature = sign(secret.expose(), &id, timestamp, &delivery.body);
    let sent = engine
        .webhook_client
        .post(url)
        .header("content-type", "application/json")
        .header("webhook-id", &id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(delivery.body.clone())
        .timeout(ATTEMPT_TIMEOUT)
        .send()
        .await;
    sent.ok().map(|answer| answer.status().as_u16())
}
