//! What only this backend's own parts can show: the connections it keeps out of its
//! pool, for page reads (planned once) and for the append writer.

use serde_json::value::RawValue;
use sqlx::PgPool;

use super::PgStore;
use crate::model::{ItemBody, Order, PageRequest, SessionId};
use crate::store::{Appended, SessionStore};

const T: &str = "default";

fn item(text: String) -> ItemBody {
    ItemBody::new("item", RawValue::from_string(text).unwrap()).unwrap()
}

fn session(id: &str) -> SessionId {
    SessionId::parse("id", id.into()).unwrap()
}

/// Appends `{"n": n}` to the session `id`.
async fn append_n(store: &PgStore, id: &SessionId, n: u32) -> crate::store::Result<Appended> {
    store.append_items(T, id, vec![item(format!(r#"{{"n":{n}}}"#))], None, None).await
}

fn newest(limit: u32) -> PageRequest {
    PageRequest { limit, order: Order::Desc, cursor: None, created_after: None }
}

/// Sessions of 300 items, pages of 20: left to choose, Postgres would plan every read.
#[sqlx::test(migrations = "./migrations/postgres")]
async fn page_reads_are_planned_once_per_connection(pool: PgPool) {
    let store = PgStore::from_pool(pool);
    let id = session("long");
    for n in 0..3 {
        let items = (0..100).map(|i| item(format!(r#"{{"n":{}}}"#, n * 100 + i))).collect();
        store.append_items(T, &id, items, None, None).await.unwrap();
    }
    sqlx::query("analyze").execute(&store.pool).await.unwrap();
    for _ in 0..8 {
        let page = store.list_items(T, &id, &newest(20)).await.unwrap();
        assert_eq!(page.data.len(), 20);
    }
    // Reads one after another took turns on one kept connection.
    let mut conn = store.page_readers.take().await.unwrap();
    let (generic, custom): (i64, i64) = sqlx::query_as(
        "select generic_plans, custom_plans from pg_prepared_statements \
         where statement like 'select id, seq, created_at, run_id, body, (select revision%'",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    assert_eq!((generic, custom), (8, 0));
    conn.keep();
}

/// A read cut short by the byte budget does not park its connection, and that
/// connection is closed: none the pool hands out plans as page reads do.
#[sqlx::test(migrations = "./migrations/postgres")]
async fn connections_readied_for_pages_never_go_back_to_the_pool(pool: PgPool) {
    let store = PgStore::from_pool(pool.clone());
    let id = session("large");
    let large = format!(r#"{{"text":"{}"}}"#, "x".repeat(9 * 1024 * 1024));
    for _ in 0..2 {
        let items = vec![item(large.clone())];
        store.append_items(T, &id, items, None, None).await.unwrap();
    }
    let page = newest(10);
    let reads = (0..2).map(|_| store.list_items(T, &id, &page));
    for page in futures::future::join_all(reads).await {
        let page = page.unwrap();
        assert_eq!((page.data.len(), page.has_more), (1, true));
    }
    // Every connection the pool can give, waiting for any still on its way back.
    let kept = store.page_readers.parked() + store.append_writer.parked();
    let free = pool.options().get_max_connections() - kept;
    let mut taken = Vec::new();
    for _ in 0..free {
        let mut conn = pool.acquire().await.unwrap();
        let mode: String =
            sqlx::query_scalar("show plan_cache_mode").fetch_one(&mut *conn).await.unwrap();
        assert_eq!(mode, "auto");
        taken.push(conn);
    }
}

/// The append queue's writer keeps its connection between transactions, which the pool
/// counts as idle.
#[sqlx::test(migrations = "./migrations/postgres")]
async fn appends_keep_their_connection_between_transactions(pool: PgPool) {
    let (store, id) = (PgStore::from_pool(pool.clone()), session("kept"));
    let append = |n: u32| append_n(&store, &id, n);
    append(0).await.unwrap();
    assert_eq!(store.append_writer.parked(), 1);
    let mut conn = store.append_writer.take().await.unwrap();
    sqlx::query("set application_name = 'kept writer'").execute(&mut *conn).await.unwrap();
    conn.keep();
    append(1).await.unwrap();
    assert_eq!(store.pool_stats().in_use, 0);
    // The marked connection made the second append.
    let last: String = sqlx::query_scalar(
        "select query from pg_stat_activity where application_name = 'kept writer'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(last, "COMMIT");
}

/// The server closes the writer's kept connection (a restart): an append alone on it
/// fails as transient, a combined one is made again one by one on a new connection, and
/// nothing is lost or doubled.
#[sqlx::test(migrations = "./migrations/postgres")]
async fn appends_recover_when_the_writers_connection_is_closed(pool: PgPool) {
    let (store, id) = (PgStore::from_pool(pool.clone()), session("restarted"));
    let append = |n: u32| append_n(&store, &id, n);
    append(0).await.unwrap();
    let mut conn = store.append_writer.take().await.unwrap();
    let pid: i32 =
        sqlx::query_scalar("select pg_backend_pid()").fetch_one(&mut *conn).await.unwrap();
    conn.keep();
    sqlx::query("select pg_terminate_backend($1)").bind(pid).execute(&pool).await.unwrap();
    // The backend exits a moment after the call returns; the kept connection stays
    // unchecked for half a second.
    while sqlx::query_scalar::<_, bool>(
        "select exists (select from pg_stat_activity where pid = $1)",
    )
    .bind(pid)
    .fetch_one(&pool)
    .await
    .unwrap()
    {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let mut made = 1;
    let mut failures = 0;
    for appended in futures::future::join_all((1..=8).map(append)).await {
        match appended {
            Ok(_) => made += 1,
            Err(error) => {
                assert!(error.is_transient(), "{error}");
                failures += 1;
            }
        }
    }
    // The closed connection was met: by an append alone (which failed), or by a
    // combined one made again one by one.
    let fallbacks = store.append_stats().fallbacks;
    assert_eq!(failures + fallbacks, 1, "{failures} failed, {fallbacks} made again");
    append(9).await.unwrap();
    made += 1;
    let page = PageRequest { limit: 100, order: Order::Asc, cursor: None, created_after: None };
    let seqs: Vec<i64> =
        store.list_items(T, &id, &page).await.unwrap().data.iter().map(|i| i.seq).collect();
    assert_eq!(seqs, (1..=made).collect::<Vec<i64>>());
}
