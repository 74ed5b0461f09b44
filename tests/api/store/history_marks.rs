//! A session's history mark stays through appends and moves with every other change to
//! its items: what a process that keeps a history relies on to know it may read only the
//! items appended since.

use agent_sessions::model::Order;
use agent_sessions::store::{HistoryMark, StoreError};

use super::{append_numbered, body, page, sid, T};
use crate::helpers::{on_both_backends, TestDb};

on_both_backends!(the_mark_stays_through_appends_and_moves_with_every_rewrite);

async fn mark(db: &TestDb) -> (HistoryMark, Vec<i64>) {
    let (mark, items) = db.store.appended_since(T, &sid("m"), 2).await.unwrap();
    (mark, items.iter().map(|item| item.seq).collect())
}

async fn the_mark_stays_through_appends_and_moves_with_every_rewrite(db: TestDb) {
    let missing = db.store.appended_since(T, &sid("m"), 0).await;
    assert!(matches!(missing, Err(StoreError::SessionNotFound)));
    append_numbered(&*db.store, "m", 4).await;
    let (first, after_two) = mark(&db).await;
    assert_eq!(after_two, [3, 4], "only the items after the seq asked");
    append_numbered(&*db.store, "m", 1).await;
    assert_eq!(mark(&db).await, (first, vec![3, 4, 5]), "an append keeps the mark");

    let mut seen = vec![first];
    let mut moved = |mark: HistoryMark, what: &str| {
        assert!(!seen.contains(&mark), "{what} moves the mark: {mark:?} after {seen:?}");
        seen.push(mark);
    };
    let items = db.store.list_items(T, &sid("m"), &page(100, Order::Asc)).await;
    let items = items.unwrap().data;
    db.store.delete_item(T, &sid("m"), items[0].id, None, None).await.unwrap();
    moved(mark(&db).await.0, "a delete");
    db.store.pop_last_item(T, &sid("m"), None, None).await.unwrap();
    moved(mark(&db).await.0, "a pop");
    let new = body(r#"{"role":"user","content":"changed"}"#);
    db.store.replace_item(T, &sid("m"), items[1].id, new, None, None).await.unwrap();
    moved(mark(&db).await.0, "a replaced item");
    let tail = vec![body(r#"{"n":9}"#)];
    db.store.replace_items(T, &sid("m"), tail, Some(items[1].id), None, None).await.unwrap();
    moved(mark(&db).await.0, "a replaced suffix");
    db.store.replace_items(T, &sid("m"), vec![body(r#"{"n":1}"#)], None, None, None).await.unwrap();
    moved(mark(&db).await.0, "a replaced history");
    db.store.clear_items(T, &sid("m"), None, None).await.unwrap();
    moved(mark(&db).await.0, "a clear");
    db.store.delete_session(T, &sid("m"), None).await.unwrap();
    append_numbered(&*db.store, "m", 1).await;
    moved(mark(&db).await.0, "a session deleted and made again");
}
