//! Background upkeep every replica runs: the sweeper, which deletes expired sessions and
//! idempotency keys past their 24 hours, and the key census, which counts the stored
//! values by encryption key for `/metrics` and `/readyz`.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::model::IdempotencyKey;
use crate::store::SessionStore;

/// Expired sessions one statement deletes: each batch is a short transaction.
const SWEEP_BATCH: i64 = 100;

/// One pass: expired sessions batch by batch until none is left, then old idempotency
/// keys. Replicas sweeping at once take different sessions.
pub async fn sweep(store: &dyn SessionStore, metrics: &Metrics) {
    let started = Instant::now();
    let (mut sessions, mut rows) = (0, 0);
    loop {
        match store.sweep_expired(SWEEP_BATCH).await {
            Ok(swept) => {
                sessions += swept.sessions;
                rows += swept.sessions + swept.items;
                if swept.sessions < SWEEP_BATCH as u64 {
                    break;
                }
            }
            Err(error) => {
                tracing::warn!(%error, "cannot delete expired sessions");
                break;
            }
        }
    }
    let cutoff = chrono::Utc::now() - IdempotencyKey::ttl();
    match store.purge_idempotency_keys(cutoff).await {
        Ok(purged) => rows += purged,
        Err(error) => tracing::warn!(%error, "cannot purge expired idempotency keys"),
    }
    if sessions > 0 {
        tracing::info!(sessions, rows, "deleted expired sessions");
    }
    metrics.swept(sessions, rows, started.elapsed().as_secs_f64());
}

/// The key ids stored values are under that `ENCRYPTION_KEYS` does not list, as last
/// counted; empty until the first count.
#[derive(Debug, Default)]
pub struct KeyCensus {
    missing: RwLock<Vec<String>>,
}

impl KeyCensus {
    pub fn missing(&self) -> Vec<String> {
        self.missing.read().expect("never poisoned").clone()
    }

    /// Counts the stored values by key id, for the metrics and for `missing`.
    pub async fn count(&self, store: &dyn SessionStore, metrics: &Metrics) {
        let counts: BTreeMap<Option<String>, u64> = match store.count_values_by_key().await {
            Ok(counts) => counts,
            Err(error) => {
                tracing::warn!(%error, "cannot count the stored values by key id");
                return;
            }
        };
        let configured = store.key_ids();
        let missing: Vec<String> =
            counts.keys().flatten().filter(|id| !configured.contains(id)).cloned().collect();
        if !missing.is_empty() {
            tracing::error!(
                missing = ?missing,
                "stored values are under encryption keys ENCRYPTION_KEYS does not list; they cannot be read"
            );
        }
        metrics.counted_values(&counts);
        *self.missing.write().expect("never poisoned") = missing;
    }
}

/// Runs `task` now and then every `period` until `shutdown`.
pub async fn every<F, Fut>(period: Duration, shutdown: CancellationToken, mut task: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = interval.tick() => {}
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = task() => {}
        }
    }
}

/// Both tasks of a replica, until `shutdown`.
pub fn spawn(
    store: Arc<dyn SessionStore>, metrics: Arc<Metrics>, census: Arc<KeyCensus>,
    sweep_every: Duration, census_every: Duration, shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let sweeper = every(sweep_every, shutdown.clone(), || sweep(&*store, &metrics));
        let counter = every(census_every, shutdown.clone(), || census.count(&*store, &metrics));
        tokio::join!(sweeper, counter);
    })
}
