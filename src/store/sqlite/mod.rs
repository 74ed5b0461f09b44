//! The SQLite backend: the embedded default, for one process. All writes go through a
//! single connection, so transactions never contend for the write lock and need no row
//! locks; reads use a pool of their own and see committed data (WAL mode). The flows are
//! shared with Postgres (`store::shared`); this module holds what only SQLite does.

mod appends;
mod claims;
mod run_batch;
mod runs;

/// The flows both backends share, compiled here with this backend's types: they
/// implement `SessionStore` and the traits it builds on for `SqliteStore`. Postgres
/// mounts the same files (`store::shared` says why, and what they take from here).
#[allow(clippy::duplicate_mod)]
#[path = "../shared/mod.rs"]
mod shared;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use sqlx::{ConnectOptions, Connection, QueryBuilder, Sqlite};

use super::at_rest::PayloadColumn;
use super::combined_writes::{Append, Creation};
use super::combiner::Combiner;
use super::held::HeldConnections;
use super::payload::PayloadCodec;
use super::timestamp::Timestamp;
use super::{Appended, CreatedRun, Result, DEFAULT_TIMEOUT};
use crate::model::{ExpiresAfter, Item};

static MIGRATOR: Migrator = sqlx::migrate!("./migrations/sqlite");

/// The database and the store the shared flows work with.
type Db = Sqlite;
type Store = SqliteStore;

const READ_CONNECTIONS: u32 = 4;

/// The single writer serialises transactions: there are no row locks to take.
const FOR_UPDATE: &str = "";

/// The single writer takes no row locks.
const SKIP_LOCKED: &str = "";

/// See `FOR_UPDATE`.
const FOR_NO_KEY_UPDATE: &str = "";

/// The current time in SQL, which expiry is checked against.
const NOW: &str = "cast((julianday('now') - 2440587.5) * 86400000000.0 as integer)";

/// The members of the JSON object (text) that `expr` is, as rows of `key` and `value`
/// text.
fn json_members(expr: &str) -> String {
    format!("json_each({expr})")
}

/// The SQL that records activity at `at` (a bound parameter): it moves a session's
/// `last_active_at`, and its `expires_at` when that counts from activity.
fn touch(at: &str) -> String {
    format!(
        "last_active_at = {at}, expires_at = case when sessions.expires_anchor = 'last_active_at' \
         then {at} + sessions.expires_seconds * 1000000 else sessions.expires_at end"
    )
}

/// The SQL of a UUIDv7 made of a prefix (a bound parameter, see
/// [`super::rows::id_prefix`]) and a row's rank, as the 16-byte blob sqlx stores a `Uuid`
/// as.
fn new_id(prefix: &str, rank: &str) -> String {
    format!("unhex({prefix} || printf('%08X', {rank}))")
}

/// The single writer's transaction sees no other writes.
const SNAPSHOT: Option<&str> = None;

pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
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
    page_readers: HeldConnections<Sqlite>,
    /// None kept for the append queue's writer: the writer pool's one connection serves
    /// every write.
    append_writer: Arc<HeldConnections<Sqlite>>,
    /// How long one transaction of the write queues may take: `DATABASE_TIMEOUT_SECS`.
    deadline: Duration,
}

impl SqliteStore {
    /// Opens (creating if needed) the database file of a `sqlite:` URL and migrates it.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_tuned(url, DEFAULT_TIMEOUT, |options| options).await
    }

    /// Opens the database as `connect` does, with `deadline` for each database
    /// operation and every connection's options passed through `tune` last: a pragma of
    /// the caller's, such as a cap on the file's size.
    pub async fn connect_tuned(
        url: &str, deadline: Duration, tune: impl Fn(SqliteConnectOptions) -> SqliteConnectOptions,
    ) -> Result<Self> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // An acknowledged write is on disk, not only in the OS cache.
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            // Deleted content is overwritten with zeros, not left in free pages.
            .pragma("secure_delete", "on")
            // After a checkpoint that a long reader held back, the WAL is cut back to
            // 64 MiB instead of keeping the size it grew to.
            .pragma("journal_size_limit", "67108864")
            .busy_timeout(Duration::from_secs(5));
        let options = tune(options);
        // A connection to a file cannot be dropped from the other end: sqlx's ping of
        // every connection it hands out would only add a hop to its worker thread, and
        // replacing connections by age or idleness only empties their page caches, for
        // the new ones to fill again (the process' memory swung by a quarter in a soak).
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(deadline)
            .test_before_acquire(false)
            .idle_timeout(None)
            .max_lifetime(None)
            .after_release(|conn, _| Box::pin(settled(conn)))
            // The one writer gets a larger page cache (16 MiB, from 2): a large fork or
            // append then keeps the indexes it extends in memory. 32 MiB forked no
            // faster and held the process over 64 MB under combined appends.
            .connect_with(options.clone().pragma("cache_size", "-16384"))
            .await?;
        MIGRATOR.run(&writer).await?;
        // Every connection to an in-memory database opens a database of its own.
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        let reader = if in_memory {
            writer.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(READ_CONNECTIONS)
                .acquire_timeout(deadline)
                .test_before_acquire(false)
                .idle_timeout(None)
                .max_lifetime(None)
                .connect_with(options)
                .await?
        };
        // Half the read connections; none when the reader is the writer, whose one
        // connection must never be parked.
        let held = if in_memory { 0 } else { READ_CONNECTIONS as usize / 2 };
        Ok(Self {
            page_readers: HeldConnections::new(reader.clone(), held, None, None),
            append_writer: Arc::new(HeldConnections::new(writer.clone(), 0, None, None)),
            writer,
            reader,
            codec: PayloadCodec::default(),
            default_expiry: None,
            appends: OnceLock::new(),
            creations: OnceLock::new(),
            deadline,
        })
    }

    fn writer(&self) -> &SqlitePool {
        &self.writer
    }

    fn reader(&self) -> &SqlitePool {
        &self.reader
    }

    fn pools(&self) -> [&SqlitePool; 2] {
        [&self.writer, &self.reader]
    }
}

/// Whether the writer's connection may be used again: its last transaction ended. A
/// commit that fails for a full disk or an I/O error can leave SQLite's transaction and
/// the driver's count of it apart (the driver's rollback then fails and the count stays
/// at one), after which every `begin` would open a savepoint and every commit only
/// release it: writes answered as committed and never stored. Such a connection is
/// closed, which ends whatever transaction it holds, and the pool opens a new one.
async fn settled(conn: &mut SqliteConnection) -> sqlx::Result<bool> {
    // The driver's rollback of a dropped transaction is queued on the connection's
    // worker; the ping runs after it.
    sqlx::Connection::ping(conn).await?;
    Ok(!sqlx::Connection::is_in_transaction(conn))
}

/// Inserts an append's items in one statement.
async fn insert_items(
    conn: &mut SqliteConnection, tenant: &str, session_pk: i64, items: &[Item],
    bodies: &[Cow<'_, str>], now: Timestamp,
) -> Result<()> {
    let mut insert = QueryBuilder::<Sqlite>::new(
        "insert into items (id, tenant_id, session_pk, seq, created_at, body) ",
    );
    insert.push_values(items.iter().zip(bodies), |mut row, (item, body)| {
        row.push_bind(item.id)
            .push_bind(tenant)
            .push_bind(session_pk)
            .push_bind(item.seq)
            .push_bind(now)
            .push_bind(&**body);
    });
    insert.build().execute(conn).await?;
    Ok(())
}

/// Starts a listing's `from` with the tenant's sessions whose metadata holds every pair;
/// answers the columns the listing is ordered by. With a filter, the first pair's
/// entries in `session_metadata` (kept by triggers, in the listing's order) lead, so
/// that a page costs its own rows however few sessions match; the other pairs are
/// tested on the sessions found.
fn push_listed_sessions(
    query: &mut QueryBuilder<'_, Sqlite>, tenant: &str, metadata: &[(String, String)],
) -> [&'static str; 2] {
    let Some(((key, value), others)) = metadata.split_first() else {
        query.push("sessions where tenant_id = ").push_bind(tenant.to_owned());
        return ["created_at", "pk"];
    };
    query.push(
        "session_metadata m cross join sessions on sessions.pk = m.session_pk where m.tenant = ",
    );
    query.push_bind(tenant.to_owned()).push(" and m.key = ").push_bind(key.clone());
    query.push(" and m.value = ").push_bind(value.clone());
    for (key, value) in others {
        query.push(" and exists (select 1 from json_each(sessions.metadata) where key = ");
        query.push_bind(key.clone()).push(" and value = ").push_bind(value.clone()).push(")");
    }
    ["m.created", "m.session_pk"]
}

/// A row's physical id, what `reencrypt` walks a table by.
type RowId = i64;
const ROW_ID: &str = "rowid";
const ROW_READ: &str = "";
const ROW_BIND: &str = "";
const FIRST_ROW: i64 = 0;

/// The values of a payload column by the key id each is under (none: a plain value),
/// counted here as the rows stream by: SQLite's `group by` sorts them, and its sorter's
/// memory stayed with the process, a step of tens of MB at every census. The scan runs
/// on a connection of its own with a small page cache, closed after it: it passes
/// through every page of the table, which a pooled reader's cache would keep. It reads
/// `CENSUS_BATCH` rows per statement, each its own read snapshot: one snapshot over the
/// whole scan kept the writer from checkpointing, and the WAL grew by tens of MB (and
/// the process by up to 12 MB) during each census under load.
async fn count_by_key_id(
    pool: &SqlitePool, payload: &PayloadColumn,
) -> Result<BTreeMap<Option<String>, u64>> {
    let options = pool.connect_options().as_ref().clone();
    let mut conn = options.pragma("cache_size", "-256").connect().await?;
    let counts = count_on(&mut conn, payload).await;
    conn.close().await?;
    counts
}

const CENSUS_BATCH: i64 = 2_000;

async fn count_on(
    conn: &mut SqliteConnection, payload: &PayloadColumn,
) -> Result<BTreeMap<Option<String>, u64>> {
    let PayloadColumn { alias, from, .. } = payload;
    let value = format!("{alias}.{}", payload.value);
    let sql = format!(
        "select {alias}.rowid, case when substr({value}, 1, 7) = 'enc:v1:' \
         then substr({value}, 8, instr(substr({value}, 8), ':') - 1) end \
         from {from} where {value} is not null and {alias}.rowid > $1 \
         order by {alias}.rowid limit {CENSUS_BATCH}"
    );
    let mut counts = BTreeMap::new();
    let mut after = 0_i64;
    loop {
        let rows: Vec<(i64, Option<String>)> =
            sqlx::query_as(&sql).bind(after).fetch_all(&mut *conn).await?;
        let Some(&(last, _)) = rows.last() else {
            return Ok(counts);
        };
        after = last;
        for (_, key_id) in rows {
            *counts.entry(key_id).or_default() += 1;
        }
    }
}
