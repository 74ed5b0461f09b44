//! The Prometheus registry: requests by route and status, their latency, the database
//! pool, the sweeper's work, the stored values per encryption key and the run engine's
//! model calls, runs and webhook deliveries. The HTTP layer records the requests, the
//! upkeep tasks and the engine their work; `GET /metrics` exports it all.

mod engine;

use std::collections::BTreeMap;
use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

pub use engine::EngineMetrics;

use crate::store::{AppendStats, PoolStats};

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    route: String,
    status: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RouteLabels {
    method: String,
    route: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PoolLabels {
    state: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct KeyLabels {
    /// Empty for values stored in plain.
    key_id: String,
}

pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RouteLabels, Histogram, fn() -> Histogram>,
    pool_connections: Family<PoolLabels, Gauge>,
    sessions_expired: Counter,
    swept_rows: Counter,
    sweep_duration: Histogram,
    stored_values: Family<KeyLabels, Gauge>,
    appends: AppendCounters,
    /// What the run engine records; it holds them too.
    pub engine: Arc<EngineMetrics>,
}

/// The store's append counts, copied into counters at each export.
#[derive(Default)]
struct AppendCounters {
    transactions: Counter,
    appends: Counter,
    fallbacks: Counter,
    /// Two exports at once must not both add the same increase.
    copying: std::sync::Mutex<()>,
}

impl AppendCounters {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "append_transactions",
            "Transactions that wrote appends; several appends waiting at once share one",
            self.transactions.clone(),
        );
        registry.register("appends", "Appends written by those transactions", self.appends.clone());
        registry.register(
            "append_fallbacks",
            "Combined append transactions that failed and were made again one append at a time",
            self.fallbacks.clone(),
        );
    }

    fn copy(&self, stats: AppendStats) {
        let _copying = self.copying.lock().unwrap_or_else(|e| e.into_inner());
        for (counter, total) in [
            (&self.transactions, stats.transactions),
            (&self.appends, stats.appends),
            (&self.fallbacks, stats.fallbacks),
        ] {
            counter.inc_by(total.saturating_sub(counter.get()));
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let requests = Family::<RequestLabels, Counter>::default();
        // 1 ms to about 16 s.
        let latency: Family<RouteLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.001, 2.0, 15)));
        let pool_connections = Family::<PoolLabels, Gauge>::default();
        // Every series is the service's own: `agent_sessions_…`.
        let mut registry = Registry::with_prefix("agent_sessions");
        registry.register("http_requests", "HTTP requests answered", requests.clone());
        registry.register(
            "http_request_duration_seconds",
            "Time to answer an HTTP request",
            latency.clone(),
        );
        registry.register(
            "db_pool_connections",
            "Database connections by state",
            pool_connections.clone(),
        );
        let sessions_expired = Counter::default();
        registry.register(
            "sessions_expired",
            "Expired sessions the sweeper deleted",
            sessions_expired.clone(),
        );
        let swept_rows = Counter::default();
        registry.register(
            "swept_rows",
            "Rows the sweeper deleted: expired sessions, their items, and idempotency keys past 24 hours",
            swept_rows.clone(),
        );
        // 1 ms to about 33 s.
        let sweep_duration = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        registry.register(
            "sweep_duration_seconds",
            "Time one pass of the sweeper took",
            sweep_duration.clone(),
        );
        let stored_values = Family::<KeyLabels, Gauge>::default();
        registry.register(
            "stored_values",
            "Stored conversation values by the encryption key they are under (key_id empty: plain), as last counted",
            stored_values.clone(),
        );
        let appends = AppendCounters::default();
        appends.register(&mut registry);
        let engine = Arc::new(EngineMetrics::default());
        engine.register(&mut registry);
        Self {
            registry,
            appends,
            engine,
            requests,
            latency,
            pool_connections,
            sessions_expired,
            swept_rows,
            sweep_duration,
            stored_values,
        }
    }
}

impl Metrics {
    /// Records one pass of the sweeper.
    pub fn swept(&self, sessions: u64, rows: u64, seconds: f64) {
        self.sessions_expired.inc_by(sessions);
        self.swept_rows.inc_by(rows);
        self.sweep_duration.observe(seconds);
    }

    /// Records a count of the stored values by key id (`None`: plain).
    pub fn counted_values(&self, counts: &BTreeMap<Option<String>, u64>) {
        self.stored_values.clear();
        for (key_id, values) in counts {
            self.stored_values
                .get_or_create(&KeyLabels { key_id: key_id.clone().unwrap_or_default() })
                .set(i64::try_from(*values).unwrap_or(i64::MAX));
        }
    }

    /// Records one answered HTTP request.
    pub fn answered(&self, method: &str, route: &str, status: u16, seconds: f64) {
        self.requests
            .get_or_create(&RequestLabels {
                method: method.to_owned(),
                route: route.to_owned(),
                status: status.to_string(),
            })
            .inc();
        self.latency
            .get_or_create(&RouteLabels { method: method.to_owned(), route: route.to_owned() })
            .observe(seconds);
    }

    /// The registry in the OpenMetrics text format, with the gauges and counters that are
    /// read from the store at export (its pool, its appends) brought up to date first.
    pub fn encode(&self, pool: PoolStats, appends: AppendStats) -> Result<String, std::fmt::Error> {
        self.pool_connections
            .get_or_create(&PoolLabels { state: "in_use" })
            .set(i64::from(pool.in_use));
        self.pool_connections
            .get_or_create(&PoolLabels { state: "idle" })
            .set(i64::from(pool.idle));
        self.appends.copy(appends);
        let mut body = String::new();
        prometheus_client::encoding::text::encode(&mut body, &self.registry)?;
        Ok(body)
    }
}
