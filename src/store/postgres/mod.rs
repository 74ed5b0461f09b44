//! The Postgres backend: for production and for several replicas sharing one database.
//! Writes to one session serialize on that session's row lock. The flows are shared
//! with SQLite (`store::shared`); this module holds what only Postgres does.

mod append_seqs;
mod append_states;
mod appends;
mod claims;
mod run_batch;
mod runs;
#[cfg(test)]
mod tests;

/// The flows both backends share, compiled here with this backend's types: they
/// implement `SessionStore` and the traits it builds on for `PgStore`. SQLite mounts the
/// same files (`store::shared` says why, and what they take from here).
#[allow(clippy::duplicate_mod)]
#[path = "../shared/mod.rs"]
mod shared;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value};
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::types::Json;
use sqlx::{ConnectOptions, Connection, Executor, Postgres, QueryBuilder};
use uuid::Uuid;

use super::at_rest::PayloadColumn;
use super::combined_writes::{Append, Creation};
use super::combiner::Combiner;
use super::held::HeldConnections;
use super::outage;
use super::payload::PayloadCodec;
use super::timestamp::Timestamp;
use super::{Appended, CreatedRun, Result, DEFAULT_TIMEOUT};
use crate::model::{ExpiresAfter, Item};
use shared::binds::BindAll;

static MIGRATOR: Migrator = sqlx::migrate!("./migrations/postgres");

/// The database and the store the shared flows work with.
type Db = Postgres;
type Store = PgStore;

/// Transactions lock the rows they change, so that concurrent writers queue.
const FOR_UPDATE: &str = " for update";

/// A run locked to change it, not its key: a steer's row that refers to it (a key-share
/// lock) may go in meanwhile, so that neither waits for the other's session lock.
const FOR_NO_KEY_UPDATE: &str = " for no key update";

/// Replicas recovering lapsed leases, or sweeping expired sessions, at once each take
/// other rows.
const SKIP_LOCKED: &str = " for update skip locked";

/// How long a connection may have been idle and still be used without a ping first. One
/// in steady use goes unchecked (a database restart costs the first statement on such a
/// connection, after which those idle since are checked: `store::outage`); one idle
/// longer, as every connection is after an outage of more than a moment, is checked and
/// replaced if the server or the network dropped it.
const PING_AFTER_IDLE: Duration = Duration::from_millis(500);

/// The current time in SQL, which expiry is checked against.
const NOW: &str = "now()";

/// The members of the JSON object (text) that `expr` is, as rows of `key` and `value`
/// text.
fn json_members(expr: &str) -> String {
    format!("json_each_text(({expr})::json)")
}

/// The SQL that records activity at `at` (a bound parameter): it moves a session's
/// `last_active_at`, and its `expires_at` when that counts from activity.
fn touch(at: &str) -> String {
    format!(
        "last_active_at = {at}, expires_at = case when sessions.expires_anchor = 'last_active_at' \
         then {at} + sessions.expires_seconds * interval '1 second' else sessions.expires_at end"
    )
}

/// The SQL of a UUIDv7 made of a prefix (a bound parameter, see
/// [`super::rows::id_prefix`]) and a row's rank: 32 hex digits, which `uuid` accepts.
fn new_id(prefix: &str, rank: &str) -> String {
    format!("({prefix} || lpad(to_hex({rank}), 8, '0'))::uuid")
}

/// A fork copies the source as of one snapshot while runs may commit to it.
const SNAPSHOT: Option<&str> = Some("set transaction isolation level repeatable read");

pub struct PgStore {
    pool: PgPool,
    codec: PayloadCodec,
    /// The retention of sessions created without one: `SESSION_EXPIRES_AFTER_SECS`.
    default_expiry: Option<ExpiresAfter>,
    /// Combines concurrent appends into one transaction; started by the first append,
    /// after the codec and retention are set.
    appends: OnceLock<Combiner<Append, Appended>>,
    /// Combines concurrent run creations into one transaction; started by the first
    /// creation that can be combined.
    creations: OnceLock<Combiner<Creation, Option<CreatedRun>>>,
    /// Connections kept between reads of pages of items.
    page_readers: HeldConnections<Postgres>,
    /// The connection the append queue's writer keeps between its transactions.
    append_writer: Arc<HeldConnections<Postgres>>,
    /// How long one transaction of the write queues may take: `DATABASE_TIMEOUT_SECS`.
    deadline: Duration,
}

impl PgStore {
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self> {
        Self::connect_within(url, max_connections, DEFAULT_TIMEOUT).await
    }

    /// Connects as `connect` does, with `deadline` for each database operation.
    pub async fn connect_within(
        url: &str, max_connections: u32, deadline: Duration,
    ) -> Result<Self> {
        let millis = |d: Duration| format!("{}ms", d.as_millis());
        let options = PgConnectOptions::from_str(url)?.options([
            // No statement or idle transaction may hold a connection (and its locks)
            // for long after its client gave up on it. The statements of migrations, the
            // count of values per key and `reencrypt` run longer than the deadline of a
            // request: statements get 30 s at least, as they always had.
            ("statement_timeout", millis(deadline.max(Duration::from_secs(30)))),
            (
                "idle_in_transaction_session_timeout",
                millis((deadline * 2).max(Duration::from_secs(10))),
            ),
            // The server notices a client whose network went away (its locks are
            // released); the driver sets no keepalive of its own, so on this side only
            // the deadline catches a dead peer.
            ("tcp_keepalives_idle", "10".into()),
            ("tcp_keepalives_interval", "5".into()),
            ("tcp_keepalives_count", "3".into()),
            ("tcp_user_timeout", millis(deadline * 2)),
            // The notices of a start that finds its migrations applied ("relation …
            // already exists, skipping") are no news; warnings still reach the log.
            ("client_min_messages", "warning".into()),
        ]);
        // One connection first: a pool that cannot connect only says it timed out, this
        // says why ("connection refused", a wrong password, no such database).
        options.connect().await?.close().await?;
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(deadline)
            // sqlx pings every connection it hands out, a round trip as long as most
            // statements; only one idle for a while is worth it (see PING_AFTER_IDLE).
            // A connection that broke while in use fails its statement (503) and is
            // closed, not reused.
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if outage::needs_check(meta.idle_for, PING_AFTER_IDLE) {
                        conn.ping().await?;
                    }
                    Ok(true)
                })
            })
            .after_release(move |conn, _| Box::pin(checked_after_a_miss(conn, deadline)))
            .connect_with(options)
            .await?;
        MIGRATOR.run(&pool).await?;
        Ok(Self { deadline, ..Self::from_pool(pool) })
    }

    /// Wraps a pool whose database is migrated already (as `#[sqlx::test]` gives). The
    /// store keeps some of the pool's connections for itself: one store per pool.
    pub fn from_pool(pool: PgPool) -> Self {
        // Up to 4, and never more than half the pool: the rest serve the other writes,
        // the run workers and the other reads.
        let max = pool.options().get_max_connections() as usize;
        let held = (max / 2).min(4);
        // One for the append writer where at least two stay for the rest.
        let writer = usize::from(max >= held + 3);
        let readers =
            HeldConnections::new(pool.clone(), held, Some(PING_AFTER_IDLE), Some(plan_pages_once));
        Self {
            page_readers: readers,
            append_writer: Arc::new(HeldConnections::new(
                pool.clone(),
                writer,
                Some(PING_AFTER_IDLE),
                None,
            )),
            pool,
            codec: PayloadCodec::default(),
            default_expiry: None,
            appends: OnceLock::new(),
            creations: OnceLock::new(),
            deadline: DEFAULT_TIMEOUT,
        }
    }

    fn writer(&self) -> &PgPool {
        &self.pool
    }

    fn reader(&self) -> &PgPool {
        &self.pool
    }

    fn pools(&self) -> [&PgPool; 1] {
        [&self.pool]
    }
}

/// Whether a connection given back may be used again. Right after a missed deadline it
/// may be one abandoned mid-statement on a peer gone silent, which the pool's own check
/// would wait on without end, holding its place: such a one is checked under the
/// deadline and closed when it does not answer.
async fn checked_after_a_miss(conn: &mut PgConnection, deadline: Duration) -> sqlx::Result<bool> {
    if !outage::deadline_missed_lately() {
        return Ok(true);
    }
    // An error has the pool close the connection at once, without the goodbye that a
    // silent peer may never take.
    match tokio::time::timeout(deadline, conn.ping()).await {
        Ok(answer) => answer.map(|()| true),
        Err(_) => Err(sqlx::Error::Io(std::io::ErrorKind::TimedOut.into())),
    }
}

/// Page reads plan their statements once per connection. Left to choose, Postgres plans
/// them again on every read once sessions hold more than about ten pages of items on
/// average: the generic plan of `limit $3`, costed at a tenth of a session's rows, looks
/// dearer than a plan for the page's size, though both are the same index scan.
/// Replanning tripled Postgres' CPU per read (docs/benchmarks.md).
fn plan_pages_once(conn: &mut PgConnection) -> BoxFuture<'_, sqlx::Result<()>> {
    Box::pin(
        async move { conn.execute("set plan_cache_mode = force_generic_plan").await.map(drop) },
    )
}

/// Inserts an append's items in one statement, whatever their number, so that it is
/// prepared once.
async fn insert_items(
    conn: &mut PgConnection, tenant: &str, session_pk: i64, items: &[Item],
    bodies: &[Cow<'_, str>], now: Timestamp,
) -> Result<()> {
    sqlx::query(
        r"insert into items (id, tenant_id, session_pk, seq, created_at, body)
          select id, $4, $5, seq, $6, body from unnest($1::uuid[], $2::bigint[], $3::text[]) as t (id, seq, body)",
    )
    .bind_all((items.iter().map(|i| i.id).collect::<Vec<Uuid>>(), items.iter().map(|i| i.seq).collect::<Vec<i64>>(), bodies.iter().map(|b| &**b).collect::<Vec<&str>>(), tenant, session_pk, now))
    .execute(conn)
    .await?;
    Ok(())
}

/// Starts a listing's `from` with the tenant's sessions whose metadata holds every pair
/// (one GIN index of tenant and metadata serves the filter); answers the columns the
/// listing is ordered by.
fn push_listed_sessions(
    query: &mut QueryBuilder<'_, Postgres>, tenant: &str, metadata: &[(String, String)],
) -> [&'static str; 2] {
    query.push("sessions where tenant_id = ").push_bind(tenant.to_owned());
    for (key, value) in metadata {
        let pair = Map::from_iter([(key.clone(), Value::String(value.clone()))]);
        query.push(" and metadata @> ").push_bind(Json(pair));
    }
    ["created_at", "pk"]
}

/// A row's physical id, what `reencrypt` walks a table by: read as text, bound back as
/// a `tid`.
type RowId = String;
const ROW_ID: &str = "ctid";
const ROW_READ: &str = "::text";
const ROW_BIND: &str = "::tid";
const FIRST_ROW: &str = "(0,0)";

/// The values of a payload column by the key id each is under (none: a plain value),
/// counted by the server.
async fn count_by_key_id(
    pool: &PgPool, payload: &PayloadColumn,
) -> Result<BTreeMap<Option<String>, u64>> {
    let PayloadColumn { alias, from, .. } = payload;
    let value = format!("{alias}.{}", payload.value);
    let rows: Vec<(Option<String>, i64)> = sqlx::query_as(&format!(
        "select case when substr({value}, 1, 7) = 'enc:v1:' then split_part({value}, ':', 3) end, \
         count(*) from {from} where {value} is not null group by 1"
    ))
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|(key_id, values)| (key_id, values as u64)).collect())
}
