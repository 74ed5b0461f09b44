//! What the tests share: databases for both backends and an in-process client.

use std::sync::Arc;

use agent_sessions::app;
use agent_sessions::config::{Cli, Config};
use agent_sessions::http;
use agent_sessions::llm::OpenAiClient;
use agent_sessions::runs::Runs;
use agent_sessions::store::{PgStore, SessionStore, SqliteStore};
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use axum::Router;
use clap::Parser;
use serde_json::Value;
use sqlx::{PgPool, SqlitePool};
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// A store under test with a side door to its database, for what the API cannot do
/// (make timestamps tie, age a key).
pub struct TestDb {
    pub store: Arc<dyn SessionStore>,
    raw: RawDb,
    _dir: Option<TempDir>,
}

enum RawDb {
    Postgres(PgPool),
    Sqlite(SqlitePool),
}

/// A new pool on the database of `pool`, as another process has: a store keeps some of
/// its pool's connections for itself, so two stores must not share one.
fn pool_of_its_own(pool: &PgPool) -> PgPool {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(pool.options().get_max_connections())
        .connect_lazy_with((*pool.connect_options()).clone())
}

impl TestDb {
    pub fn postgres(pool: PgPool) -> Self {
        Self {
            store: Arc::new(PgStore::from_pool(pool.clone())),
            raw: RawDb::Postgres(pool),
            _dir: None,
        }
    }

    /// Another replica on the database of `pool`, with a pool of its own.
    pub fn postgres_replica(pool: &PgPool) -> Self {
        Self::postgres(pool_of_its_own(pool))
    }

    /// A store connected to `url` as the service connects (its pool's options), not
    /// through the test's pool.
    pub async fn postgres_at(url: &str) -> Self {
        let store = PgStore::connect(url, 10).await.expect("Postgres answers");
        let raw = PgPool::connect(url).await.expect("Postgres answers twice");
        Self { store: Arc::new(store), raw: RawDb::Postgres(raw), _dir: None }
    }

    pub async fn sqlite() -> Self {
        let dir = TempDir::new().expect("a temp dir");
        let url = format!("sqlite://{}", dir.path().join("test.db").display());
        let store = SqliteStore::connect(&url).await.expect("SQLite opens");
        let raw = SqlitePool::connect(&url).await.expect("SQLite opens twice");
        Self { store: Arc::new(store), raw: RawDb::Sqlite(raw), _dir: Some(dir) }
    }

    /// A Postgres store opened apart from the test's pool (through a proxy, say), with
    /// the test's pool as the side door.
    pub fn postgres_with(store: Arc<dyn SessionStore>, pool: PgPool) -> Self {
        Self { store, raw: RawDb::Postgres(pool), _dir: None }
    }

    /// A SQLite store whose file may not grow past `pages` pages of 4 KiB: full on
    /// demand.
    pub async fn sqlite_capped(pages: u32) -> Self {
        let dir = TempDir::new().expect("a temp dir");
        let url = format!("sqlite://{}", dir.path().join("test.db").display());
        let cap = move |options: sqlx::sqlite::SqliteConnectOptions| {
            options.pragma("max_page_count", pages.to_string())
        };
        let store = SqliteStore::connect_tuned(&url, agent_sessions::store::DEFAULT_TIMEOUT, cap)
            .await
            .expect("SQLite opens");
        let raw = SqlitePool::connect(&url).await.expect("SQLite opens twice");
        Self { store: Arc::new(store), raw: RawDb::Sqlite(raw), _dir: Some(dir) }
    }

    /// The same database through a store that keeps payloads with `codec`.
    pub async fn reopen(&self, codec: agent_sessions::store::PayloadCodec) -> Self {
        self.reopen_with(codec, None).await
    }

    /// The same database through a store that keeps payloads with `codec` and gives
    /// new sessions `expiry` unless they ask for another.
    pub async fn reopen_with(
        &self, codec: agent_sessions::store::PayloadCodec,
        expiry: Option<agent_sessions::model::ExpiresAfter>,
    ) -> Self {
        let store: Arc<dyn SessionStore> = match &self.raw {
            RawDb::Postgres(pool) => Arc::new(
                PgStore::from_pool(pool_of_its_own(pool))
                    .with_codec(codec)
                    .with_default_expiry(expiry),
            ),
            RawDb::Sqlite(pool) => {
                let path = pool.connect_options().get_filename().display().to_string();
                let store =
                    SqliteStore::connect(&format!("sqlite://{path}")).await.expect("SQLite opens");
                Arc::new(store.with_codec(codec).with_default_expiry(expiry))
            }
        };
        Self { store, ..self.clone_handle() }
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self.raw, RawDb::Postgres(_))
    }

    /// Another handle on the same database, for a second app (a replica).
    pub fn clone_handle(&self) -> Self {
        Self {
            store: self.store.clone(),
            raw: match &self.raw {
                RawDb::Postgres(pool) => RawDb::Postgres(pool.clone()),
                RawDb::Sqlite(pool) => RawDb::Sqlite(pool.clone()),
            },
            _dir: None,
        }
    }

    /// The first column of every row of a query, as text.
    pub async fn strings(&self, sql: &str) -> Vec<String> {
        match &self.raw {
            RawDb::Postgres(pool) => sqlx::query_scalar(sql).fetch_all(pool).await,
            RawDb::Sqlite(pool) => sqlx::query_scalar(sql).fetch_all(pool).await,
        }
        .expect("the query runs")
    }

    /// Every row of every table as text, for a search of what the database holds.
    pub async fn dump(&self) -> String {
        let mut dump = String::new();
        match &self.raw {
            RawDb::Postgres(pool) => {
                let tables: Vec<String> = sqlx::query_scalar(
                    "select table_name::text from information_schema.tables where table_schema = 'public'",
                )
                .fetch_all(pool)
                .await
                .expect("the tables");
                for table in tables {
                    let rows: Vec<String> =
                        sqlx::query_scalar(&format!("select t::text from \"{table}\" t"))
                            .fetch_all(pool)
                            .await
                            .expect("the rows");
                    dump.push_str(&rows.join("\n"));
                }
            }
            RawDb::Sqlite(pool) => {
                let tables: Vec<String> =
                    sqlx::query_scalar("select name from sqlite_master where type = 'table'")
                        .fetch_all(pool)
                        .await
                        .expect("the tables");
                for table in tables {
                    let columns: Vec<String> = sqlx::query_scalar(&format!(
                        "select name from pragma_table_info('{table}')"
                    ))
                    .fetch_all(pool)
                    .await
                    .expect("the columns");
                    let row = columns
                        .iter()
                        .map(|c| {
                            format!(
                                "coalesce(case when typeof(\"{c}\") = 'blob' then hex(\"{c}\") \
                                 else cast(\"{c}\" as text) end, '')"
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(" || ' ' || ");
                    let rows: Vec<String> =
                        sqlx::query_scalar(&format!("select {row} from \"{table}\""))
                            .fetch_all(pool)
                            .await
                            .expect("the rows");
                    dump.push_str(&rows.join("\n"));
                }
            }
        }
        dump
    }

    /// The bytes of the SQLite database file and its WAL, after a checkpoint; none on
    /// Postgres.
    pub async fn file_bytes(&self) -> Option<Vec<u8>> {
        let RawDb::Sqlite(pool) = &self.raw else {
            return None;
        };
        sqlx::query("pragma wal_checkpoint(truncate)").execute(pool).await.expect("a checkpoint");
        let path = pool.connect_options().get_filename().to_path_buf();
        let mut bytes = std::fs::read(&path).expect("the database file");
        if let Ok(wal) = std::fs::read(path.with_extension("db-wal")) {
            bytes.extend(wal);
        }
        Some(bytes)
    }

    /// Holds every insert of items until the hold is released: the store's writes queue
    /// behind it, as they do behind a slow commit.
    pub async fn hold_writes(&self) -> HeldWrites {
        self.hold_inserts_into("items").await
    }

    /// Holds every insert into `table` (on SQLite, every write) until the hold is
    /// released.
    pub async fn hold_inserts_into(&self, table: &str) -> HeldWrites {
        match &self.raw {
            RawDb::Postgres(pool) => {
                let mut conn = pool.acquire().await.expect("a connection");
                sqlx::query("begin").execute(&mut *conn).await.unwrap();
                let lock = format!("lock table {table} in share mode");
                sqlx::query(&lock).execute(&mut *conn).await.unwrap();
                HeldWrites::Postgres(conn)
            }
            RawDb::Sqlite(pool) => {
                let mut conn = pool.acquire().await.expect("a connection");
                sqlx::query("begin immediate").execute(&mut *conn).await.unwrap();
                HeldWrites::Sqlite(conn)
            }
        }
    }

    /// Runs one SQL statement that is the same in both dialects.
    pub async fn execute(&self, sql: &str) {
        self.execute_either(sql, sql).await;
    }

    /// Runs the statement written for this backend.
    pub async fn execute_either(&self, postgres: &str, sqlite: &str) {
        match &self.raw {
            RawDb::Postgres(pool) => sqlx::query(postgres).execute(pool).await.map(drop),
            RawDb::Sqlite(pool) => sqlx::query(sqlite).execute(pool).await.map(drop),
        }
        .expect("the statement runs");
    }
}

/// A transaction that holds the store's writes; see [`TestDb::hold_writes`].
pub enum HeldWrites {
    Postgres(sqlx::pool::PoolConnection<sqlx::Postgres>),
    Sqlite(sqlx::pool::PoolConnection<sqlx::Sqlite>),
}

impl HeldWrites {
    pub async fn release(self) {
        match self {
            Self::Postgres(mut conn) => sqlx::query("commit").execute(&mut *conn).await.map(drop),
            Self::Sqlite(mut conn) => sqlx::query("commit").execute(&mut *conn).await.map(drop),
        }
        .expect("the hold ends");
    }
}

/// The configuration a test starts from: the defaults, whatever the environment says.
pub fn test_config() -> Config {
    let mut config = Cli::parse_from(["agent-sessions"]).config;
    config.listen_addr = "127.0.0.1:0".into();
    config.database_url = None;
    config.max_body_bytes = 16 * 1024 * 1024;
    config.request_timeout_secs = 30;
    config.cors_allowed_origins = Vec::new();
    // Nothing listens on the discard port: a run that reaches the LLM fails fast.
    config.llm_base_url = "http://127.0.0.1:9/v1".into();
    config.llm_api_key = None;
    config.llm_model = Some("test-model".into());
    config.llm_max_retries = 0;
    config.run_workers = 2;
    config.tool_webhook_allowed_hosts = Vec::new();
    config.admin_api_key = None;
    config.allow_unauthenticated = false;
    config.rate_limit_per_key = None;
    config.tenant_max_active_runs = None;
    config
}

/// The router in process, called without a socket.
pub struct TestApp {
    pub router: Router,
    pub runs: Runs,
    /// What the background upkeep writes to, for tests that run a pass of it.
    pub metrics: Arc<agent_sessions::metrics::Metrics>,
    pub key_census: Arc<agent_sessions::upkeep::KeyCensus>,
    pub store: Arc<dyn SessionStore>,
    /// What shutdown cancels first: `/readyz` turns 503.
    pub draining: CancellationToken,
    /// What shutdown cancels when it stops listening: event streams end.
    pub closing: CancellationToken,
    workers: Workers,
    /// Keeps the database (and its temp dir) alive as long as the app.
    _db: TestDb,
}

/// The run workers of a test app, stopped with it.
struct Workers {
    stop: CancellationToken,
    _tasks: tokio::task::JoinSet<()>,
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl TestApp {
    pub async fn sqlite() -> Self {
        Self::new(TestDb::sqlite().await, &test_config())
    }

    pub fn postgres(pool: PgPool) -> Self {
        Self::new(TestDb::postgres(pool), &test_config())
    }

    pub fn new(db: TestDb, config: &Config) -> Self {
        let llm = Arc::new(OpenAiClient::new(config.llm_settings()).expect("the client builds"));
        let state = app::state(config, db.store.clone(), llm).expect("the configuration is valid");
        let stop = CancellationToken::new();
        let workers = state.runs.start_workers(stop.clone());
        let runs = state.runs.clone();
        let (metrics, key_census) = (state.metrics.clone(), state.key_census.clone());
        let store = db.store.clone();
        let (draining, closing) = (state.draining.clone(), state.closing.clone());
        let router = http::router(state, config).expect("the router builds");
        Self {
            router,
            runs,
            metrics,
            key_census,
            store,
            draining,
            closing,
            workers: Workers { stop, _tasks: workers },
            _db: db,
        }
    }

    /// Begins the workers' shutdown, as the application's does: they finish the runs in
    /// hand and claim no more.
    pub fn stop_workers(&self) {
        self.workers.stop.cancel();
    }

    pub async fn get(&self, uri: &str) -> TestResponse {
        self.call(Method::GET, uri, None).await
    }

    pub async fn delete(&self, uri: &str) -> TestResponse {
        self.call(Method::DELETE, uri, None).await
    }

    pub async fn post(&self, uri: &str, body: Value) -> TestResponse {
        self.call(Method::POST, uri, Some(body)).await
    }

    pub async fn patch(&self, uri: &str, body: Value) -> TestResponse {
        self.call(Method::PATCH, uri, Some(body)).await
    }

    pub async fn call(&self, method: Method, uri: &str, body: Option<Value>) -> TestResponse {
        let request = Request::builder().method(method).uri(uri);
        let request = match body {
            Some(body) => request
                .header("content-type", "application/json")
                .body(Body::from(body.to_string())),
            None => request.body(Body::empty()),
        };
        self.send(request.expect("a valid request")).await
    }

    pub async fn send(&self, request: Request<Body>) -> TestResponse {
        let response = self.router.clone().oneshot(request).await.expect("the router answers");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("the body is readable");
        TestResponse {
            status,
            headers,
            text: String::from_utf8(bytes.to_vec()).expect("the body is UTF-8"),
        }
    }
}

#[derive(Debug)]
pub struct TestResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub text: String,
}

impl TestResponse {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().expect("an ASCII header"))
    }

    /// Asserts the status and the JSON body, and returns the body.
    pub fn expect(&self, status: StatusCode) -> Value {
        assert_eq!(self.status, status, "body: {}", self.text);
        if self.text.is_empty() {
            Value::Null
        } else {
            self.json()
        }
    }

    /// Asserts a problem+json answer with this status and code; returns its detail.
    pub fn expect_problem(&self, status: StatusCode, code: &str) -> String {
        assert_eq!(self.status, status, "body: {}", self.text);
        assert_eq!(self.header("content-type"), Some("application/problem+json"));
        let problem = self.json();
        assert_eq!(problem["code"], code, "{problem}");
        assert_eq!(problem["status"], status.as_u16(), "{problem}");
        assert_eq!(problem["type"], format!("urn:agent-sessions:problem:{code}"));
        assert!(problem["title"].is_string(), "{problem}");
        problem["detail"].as_str().expect("a detail").to_owned()
    }
}

/// Declares each listed `async fn(TestDb)` as a test on Postgres and one on SQLite.
macro_rules! on_both_backends {
    ($($test:ident),* $(,)?) => {
        mod postgres {
            $(
                #[sqlx::test(migrations = "./migrations/postgres")]
                async fn $test(pool: sqlx::PgPool) {
                    super::$test($crate::helpers::TestDb::postgres(pool)).await
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test]
                async fn $test() {
                    super::$test($crate::helpers::TestDb::sqlite().await).await
                }
            )*
        }
    };
}
pub(crate) use on_both_backends;

/// A database of its own on the test Postgres server (`DATABASE_URL`), for a process
/// that needs a URL rather than a pool.
pub struct ScratchDatabase {
    pub url: String,
    name: String,
    admin: PgPool,
}

pub async fn scratch_postgres() -> ScratchDatabase {
    let admin_url =
        std::env::var("DATABASE_URL").expect("DATABASE_URL names the test Postgres server");
    let admin = PgPool::connect(&admin_url).await.expect("the test Postgres answers");
    let name = format!("scratch_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(&format!("create database {name}"))
        .execute(&admin)
        .await
        .expect("a database can be created");
    ScratchDatabase { url: with_database(&admin_url, &name), name, admin }
}

impl ScratchDatabase {
    pub async fn drop(self) {
        sqlx::query(&format!("drop database if exists {} with (force)", self.name))
            .execute(&self.admin)
            .await
            .expect("the database can be dropped");
    }
}

/// The same server URL with another database name.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let authority_end = base[scheme_end..].find('/').map_or(base.len(), |i| scheme_end + i);
    let mut out = format!("{}/{name}", &base[..authority_end]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

/// GETs `url` over HTTP and reads the answer as JSON.
pub async fn get_json(http: &reqwest::Client, url: impl reqwest::IntoUrl) -> Value {
    let response = http.get(url).send().await.expect("the server answers");
    response.json().await.expect("a JSON answer")
}
