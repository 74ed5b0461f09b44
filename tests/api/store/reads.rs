//! Pages of items are read on a few connections kept between reads (`store/held.rs`).

use agent_sessions::model::Order;
use sqlx::PgPool;

use super::{bodies, page, sid, T};
use crate::helpers::{on_both_backends, TestDb};

on_both_backends!(concurrent_page_reads_each_get_their_own_session);

fn texts(session: usize) -> Vec<String> {
    (0..5).map(|n| format!(r#"{{"session":{session},"n":{n}}}"#)).collect()
}

/// Far more reads at once than connections kept, some of them cut short by the byte
/// budget (which leaves rows unread on their connection): every page is whole and its
/// own session's.
async fn concurrent_page_reads_each_get_their_own_session(db: TestDb) {
    for s in 0..8 {
        let id = sid(&format!("s{s}"));
        db.store.append_items(T, &id, bodies(&texts(s)), None, None).await.unwrap();
    }
    let large = format!(r#"{{"text":"{}"}}"#, "x".repeat(9 * 1024 * 1024));
    for _ in 0..2 {
        db.store
            .append_items(T, &sid("large"), bodies(std::slice::from_ref(&large)), None, None)
            .await
            .unwrap();
    }
    let db = &db;
    let reads = (0..64).map(|i| async move {
        if i % 16 == 0 {
            let cut = db.store.list_items(T, &sid("large"), &page(100, Order::Asc)).await.unwrap();
            assert_eq!((cut.data.len(), cut.has_more), (1, true));
            return;
        }
        let s = i % 8;
        let listed =
            db.store.list_items(T, &sid(&format!("s{s}")), &page(100, Order::Asc)).await.unwrap();
        let read: Vec<&str> = listed.data.iter().map(|i| i.item.get()).collect();
        assert_eq!(read, texts(s));
    });
    futures::future::join_all(reads).await;
}

/// Kept connections that the server closed (a restart, an administrator) fail one read
/// each as a transient error, and are replaced.
#[sqlx::test(migrations = "./migrations/postgres")]
async fn page_reads_recover_when_kept_connections_are_closed(pool: PgPool) {
    let db = TestDb::postgres(pool.clone());
    let id = sid("kept");
    db.store.append_items(T, &id, bodies(&texts(0)), None, None).await.unwrap();
    let newest = page(100, Order::Asc);
    let read = || db.store.list_items(T, &id, &newest);
    // Reads at once take, and then keep, a connection each.
    for listed in futures::future::join_all((0..4).map(|_| read())).await {
        assert_eq!(listed.unwrap().data.len(), 5);
    }
    sqlx::query(
        "select pg_terminate_backend(pid) from pg_stat_activity \
         where datname = current_database() and pid <> pg_backend_pid()",
    )
    .execute(&pool)
    .await
    .unwrap();
    let mut failures = 0;
    for _ in 0..8 {
        match read().await {
            Ok(listed) => assert_eq!(listed.data.len(), 5),
            Err(error) => {
                assert!(error.is_transient(), "{error}");
                failures += 1;
            }
        }
    }
    assert!((1..=4).contains(&failures), "{failures} failed reads");
    assert_eq!(read().await.unwrap().data.len(), 5);
}
