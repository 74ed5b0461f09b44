use agent_sessions::model::{IdempotencyKey, ItemBody, Order};
use agent_sessions::store::{Appended, StoreError};
use futures::future::join_all;

use super::{bodies, page, sid, T};
use crate::helpers::{on_both_backends, TestDb};

on_both_backends!(
    a_repeated_key_returns_the_first_append,
    a_key_with_another_request_is_refused,
    concurrent_requests_with_one_key_append_once,
    keys_expire_after_a_day,
);

fn key(key: &str, session: &str, items: &[ItemBody]) -> Option<IdempotencyKey> {
    Some(IdempotencyKey::new(key, &sid(session), items).expect("a valid key"))
}

/// Appends `items` to `session` with the Idempotency-Key `key`.
async fn append_keyed(
    db: &TestDb, session: &str, key_text: &str, items: &[ItemBody],
) -> Result<Appended, StoreError> {
    let idempotency = key(key_text, session, items);
    db.store.append_items(T, &sid(session), items.to_vec(), idempotency, None).await
}

async fn a_repeated_key_returns_the_first_append(db: TestDb) {
    let items = bodies(&[r#"{"a":1}"#.into(), r#"{"b":2}"#.into()]);
    let first = append_keyed(&db, "idem", "k-1", &items).await.unwrap();
    assert!(!first.replayed);
    let again = append_keyed(&db, "idem", "k-1", &items).await.unwrap();
    assert!(again.replayed);
    let ids = |a: &Appended| a.items.iter().map(|i| (i.id, i.seq)).collect::<Vec<_>>();
    assert_eq!(ids(&again), ids(&first));
    assert_eq!(again.items[0].item.get(), r#"{"a":1}"#);
    assert_eq!(again.items[0].created_at, first.items[0].created_at);
    assert_eq!(db.store.get_session(T, &sid("idem")).await.unwrap().item_count, 2);

    // After a pop, the answer holds what is left of the first append, and nothing is
    // appended again; once the items are all gone, it holds none (deletion sticks: the
    // key keeps no copy of them).
    db.store.pop_last_item(T, &sid("idem"), None, None).await.unwrap();
    let after_pop = append_keyed(&db, "idem", "k-1", &items).await.unwrap();
    assert!(after_pop.replayed);
    assert_eq!(ids(&after_pop), ids(&first)[..1]);
    db.store.clear_items(T, &sid("idem"), None, None).await.unwrap();
    let later = append_keyed(&db, "idem", "k-1", &items).await.unwrap();
    assert!(later.replayed && later.items.is_empty());
    assert_eq!(db.store.get_session(T, &sid("idem")).await.unwrap().item_count, 0);
}

async fn a_key_with_another_request_is_refused(db: TestDb) {
    let items = bodies(&[r#"{"a":1}"#.into()]);
    append_keyed(&db, "s1", "k", &items).await.unwrap();
    let other_items = bodies(&[r#"{"a":2}"#.into()]);
    let reused = append_keyed(&db, "s1", "k", &other_items).await;
    assert!(matches!(reused, Err(StoreError::IdempotencyKeyReused)), "{reused:?}");
    // The same body for another session is another request too.
    let elsewhere = append_keyed(&db, "s2", "k", &items).await;
    assert!(matches!(elsewhere, Err(StoreError::IdempotencyKeyReused)), "{elsewhere:?}");
    assert!(matches!(db.store.get_session(T, &sid("s2")).await, Err(StoreError::SessionNotFound)));
    assert_eq!(db.store.get_session(T, &sid("s1")).await.unwrap().item_count, 1);
}

async fn concurrent_requests_with_one_key_append_once(db: TestDb) {
    let items = bodies(&[r#"{"once":true}"#.into()]);
    let attempts = (0..16).map(|_| {
        let store = db.store.clone();
        let items = items.clone();
        tokio::spawn(async move {
            let key = key("retry", "once", &items);
            store.append_items(T, &sid("once"), items, key, None).await
        })
    });
    let results: Vec<_> = join_all(attempts)
        .await
        .into_iter()
        .map(|r| r.expect("the task ran").expect("every attempt succeeds"))
        .collect();
    assert_eq!(results.iter().filter(|a| !a.replayed).count(), 1);
    let first_id = results[0].items[0].id;
    assert!(results.iter().all(|a| a.items[0].id == first_id));
    let stored = db.store.list_items(T, &sid("once"), &page(10, Order::Asc)).await.unwrap();
    assert_eq!(stored.data.len(), 1);
}

async fn keys_expire_after_a_day(db: TestDb) {
    let items = bodies(&[r#"{"a":1}"#.into()]);
    append_keyed(&db, "old", "aged", &items).await.unwrap();
    append_keyed(&db, "old", "fresh", &items).await.unwrap();
    // Nothing is a day old yet.
    let cutoff = || chrono::Utc::now() - IdempotencyKey::ttl();
    assert_eq!(db.store.purge_idempotency_keys(cutoff()).await.unwrap(), 0);

    age_key(&db, "aged").await;
    let retried = append_keyed(&db, "old", "aged", &items).await.unwrap();
    assert!(!retried.replayed, "an expired key is a new key");
    assert_eq!(db.store.get_session(T, &sid("old")).await.unwrap().item_count, 3);

    age_key(&db, "fresh").await;
    assert_eq!(db.store.purge_idempotency_keys(cutoff()).await.unwrap(), 1);
    let after_purge = append_keyed(&db, "old", "fresh", &items).await.unwrap();
    assert!(!after_purge.replayed);
    let replayed = append_keyed(&db, "old", "aged", &items).await.unwrap();
    assert!(replayed.replayed, "the key renewed by its retry is kept");
}

/// Makes a key two days old.
async fn age_key(db: &TestDb, key: &str) {
    db.execute_either(
        &format!("update idempotency_keys set created_at = created_at - interval '2 days' where key = '{key}'"),
        &format!("update idempotency_keys set created_at = created_at - 172800000000 where key = '{key}'"),
    )
    .await;
}
