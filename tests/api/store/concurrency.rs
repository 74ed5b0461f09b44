use std::collections::HashSet;
use std::sync::Arc;

use agent_sessions::model::Order;
use agent_sessions::store::{SessionStore, StoreError};
use futures::future::join_all;

use super::{append_numbered, bodies, page, sid, T};
use crate::helpers::{on_both_backends, TestDb};

on_both_backends!(
    concurrent_appends_never_interleave_or_lose_items,
    concurrent_pops_return_each_item_once
);

/// 64 clients append a pair each to one session at once: 128 items, seqs 1 to 128, and
/// each pair side by side in the order it was sent.
async fn concurrent_appends_never_interleave_or_lose_items(db: TestDb) {
    let appends = (0..64).map(|client| {
        let store: Arc<dyn SessionStore> = db.store.clone();
        tokio::spawn(async move {
            let pair = [
                format!(r#"{{"client":{client},"part":0}}"#),
                format!(r#"{{"client":{client},"part":1}}"#),
            ];
            store.append_items(T, &sid("busy"), bodies(&pair), None, None).await
        })
    });
    for appended in join_all(appends).await {
        let appended = appended.expect("the task ran").expect("the append succeeded");
        assert_eq!(appended.items[1].seq, appended.items[0].seq + 1);
    }
    let items = db.store.list_items(T, &sid("busy"), &page(1000, Order::Asc)).await.unwrap().data;
    assert_eq!(items.len(), 128);
    assert_eq!(items.iter().map(|i| i.seq).collect::<Vec<_>>(), (1..=128).collect::<Vec<_>>());
    let mut clients = HashSet::new();
    for pair in items.chunks(2) {
        let first: serde_json::Value = serde_json::from_str(pair[0].item.get()).unwrap();
        let second: serde_json::Value = serde_json::from_str(pair[1].item.get()).unwrap();
        assert_eq!(first["client"], second["client"], "a pair was split");
        assert_eq!((first["part"].as_i64(), second["part"].as_i64()), (Some(0), Some(1)));
        assert!(clients.insert(first["client"].as_i64().unwrap()), "a pair was stored twice");
    }
    assert_eq!(clients.len(), 64);
    assert_eq!(db.store.get_session(T, &sid("busy")).await.unwrap().item_count, 128);
}

/// 30 pops race for 20 items: every item comes out exactly once, the rest find it empty.
async fn concurrent_pops_return_each_item_once(db: TestDb) {
    append_numbered(&*db.store, "race", 20).await;
    let pops = (0..30).map(|_| {
        let store = db.store.clone();
        tokio::spawn(async move { store.pop_last_item(T, &sid("race"), None, None).await })
    });
    let mut popped = HashSet::new();
    let mut empty = 0;
    for result in join_all(pops).await {
        match result.expect("the task ran") {
            Ok(item) => assert!(popped.insert(item.seq), "seq {} popped twice", item.seq),
            Err(StoreError::SessionEmpty) => empty += 1,
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
    assert_eq!(popped, (1..=20).collect::<HashSet<i64>>());
    assert_eq!(empty, 10);
    assert_eq!(db.store.get_session(T, &sid("race")).await.unwrap().item_count, 0);
}
