use agent_sessions::model::{Cursor, Order, PageRequest};
use agent_sessions::store::StoreError;
use uuid::Uuid;

use super::{append_numbered, bodies, new_session, page, sid, T};
use crate::helpers::{on_both_backends, TestDb};

on_both_backends!(
    items_read_back_exactly_as_given,
    append_creates_the_session_and_numbers_items,
    items_page_in_both_orders_with_cursors,
    get_and_delete_one_item,
    pop_returns_the_newest_and_never_reuses_its_seq,
    clear_keeps_the_session,
    pages_of_large_items_stop_at_the_byte_budget,
);

async fn items_read_back_exactly_as_given(db: TestDb) {
    let texts: Vec<String> = [
        r#"{"role":"user","content":"Grüße, 世界 🌍","z":1,"a":2}"#,
        r#"{"big":123456789012345678901234567890,"over53":9007199254740993,"neg":-9223372036854775809}"#,
        r#"{"f":1.50,"e":1e300,"tiny":-0.0,"exp":2.5E-3}"#,
        r#"{"nested":{"deep":[1,[2,[3,{"x":null}]]],"t":true,"f":false},"empty":{},"list":[]}"#,
        r#"{"escaped":"line\nbreak \"quoted\" \u00e9 \ud83c\udf0d","dup":1,"dup":2}"#,
        r#"{ "spaced" : [ 1 , 2 ] }"#,
    ]
    .map(String::from)
    .to_vec();
    let appended =
        db.store.append_items(T, &sid("exact"), bodies(&texts), None, None).await.unwrap();
    let returned: Vec<&str> = appended.items.iter().map(|i| i.item.get()).collect();
    assert_eq!(returned, texts);
    let listed = db.store.list_items(T, &sid("exact"), &page(100, Order::Asc)).await.unwrap();
    let stored: Vec<&str> = listed.data.iter().map(|i| i.item.get()).collect();
    assert_eq!(stored, texts);
    for item in &listed.data {
        let one = db.store.get_item(T, &sid("exact"), item.id).await.unwrap();
        assert_eq!(one.item.get(), item.item.get());
        assert_eq!(one.seq, item.seq);
        assert_eq!(one.created_at, item.created_at);
    }
}

async fn append_creates_the_session_and_numbers_items(db: TestDb) {
    assert!(matches!(
        db.store.get_session(T, &sid("auto")).await,
        Err(StoreError::SessionNotFound)
    ));
    let first = db
        .store
        .append_items(
            T,
            &sid("auto"),
            bodies(&[r#"{"a":1}"#.into(), r#"{"b":2}"#.into()]),
            None,
            None,
        )
        .await
        .unwrap();
    assert!(!first.replayed);
    assert_eq!(first.items.iter().map(|i| i.seq).collect::<Vec<_>>(), [1, 2]);
    assert!(first.items.iter().all(|i| i.run_id.is_none()));
    assert!(first.items.iter().all(|i| i.id.get_version_num() == 7));
    let second = db
        .store
        .append_items(T, &sid("auto"), bodies(&[r#"{"c":3}"#.into()]), None, None)
        .await
        .unwrap();
    assert_eq!(second.items[0].seq, 3);
    let session = db.store.get_session(T, &sid("auto")).await.unwrap();
    assert_eq!(session.item_count, 3);
    assert!(session.metadata.is_empty());
    assert!(session.updated_at >= second.items[0].created_at);

    // Appending to a session created with metadata keeps the metadata.
    db.store.create_session(T, new_session("made", &[("k", "v")])).await.unwrap();
    append_numbered(&*db.store, "made", 1).await;
    assert_eq!(db.store.get_session(T, &sid("made")).await.unwrap().metadata.len(), 1);
}

async fn items_page_in_both_orders_with_cursors(db: TestDb) {
    let texts = append_numbered(&*db.store, "paged", 10).await;
    let all = db.store.list_items(T, &sid("paged"), &page(100, Order::Asc)).await.unwrap();
    assert_eq!(all.data.iter().map(|i| i.item.get()).collect::<Vec<_>>(), texts);
    assert!(!all.has_more);
    let id = |n: usize| all.data[n].id.to_string();

    let request = |limit, order, cursor| PageRequest { limit, order, cursor, created_after: None };
    let seqs = |page: &agent_sessions::model::Page<agent_sessions::model::Item>| {
        page.data.iter().map(|i| i.seq).collect::<Vec<_>>()
    };
    let store = &db.store;
    let s = sid("paged");

    let got = store.list_items(T, &s, &request(3, Order::Asc, None)).await.unwrap();
    assert_eq!((seqs(&got), got.has_more), (vec![1, 2, 3], true));
    assert_eq!(got.first_id, Some(id(0)));
    assert_eq!(got.last_id, Some(id(2)));

    let got =
        store.list_items(T, &s, &request(3, Order::Asc, Some(Cursor::After(id(7))))).await.unwrap();
    assert_eq!((seqs(&got), got.has_more), (vec![9, 10], false));

    // The SDKs' get_items(limit=3): newest three, newest first.
    let got = store.list_items(T, &s, &request(3, Order::Desc, None)).await.unwrap();
    assert_eq!((seqs(&got), got.has_more), (vec![10, 9, 8], true));
    let got = store
        .list_items(T, &s, &request(3, Order::Desc, Some(Cursor::After(id(7)))))
        .await
        .unwrap();
    assert_eq!((seqs(&got), got.has_more), (vec![7, 6, 5], true));

    let got = store
        .list_items(T, &s, &request(3, Order::Asc, Some(Cursor::Before(id(5)))))
        .await
        .unwrap();
    assert_eq!((seqs(&got), got.has_more), (vec![3, 4, 5], true));
    let got = store
        .list_items(T, &s, &request(3, Order::Asc, Some(Cursor::Before(id(2)))))
        .await
        .unwrap();
    assert_eq!((seqs(&got), got.has_more), (vec![1, 2], false));
    let got = store
        .list_items(T, &s, &request(3, Order::Desc, Some(Cursor::Before(id(5)))))
        .await
        .unwrap();
    assert_eq!((seqs(&got), got.has_more), (vec![9, 8, 7], true));

    for cursor in ["not-a-uuid".to_string(), Uuid::now_v7().to_string()] {
        let got =
            store.list_items(T, &s, &request(3, Order::Asc, Some(Cursor::After(cursor)))).await;
        assert!(matches!(got, Err(StoreError::UnknownCursor)), "{got:?}");
    }
    // An item of another session is no cursor here.
    append_numbered(&**store, "other", 1).await;
    let other = store.list_items(T, &sid("other"), &page(1, Order::Asc)).await.unwrap();
    let foreign = Some(Cursor::After(other.data[0].id.to_string()));
    assert!(matches!(
        store.list_items(T, &s, &request(3, Order::Asc, foreign)).await,
        Err(StoreError::UnknownCursor)
    ));

    let empty_session = store.create_session(T, new_session("empty", &[])).await.unwrap();
    let got = store.list_items(T, &sid(&empty_session.id), &page(5, Order::Asc)).await.unwrap();
    assert!(
        got.data.is_empty() && !got.has_more && got.first_id.is_none() && got.last_id.is_none()
    );
}

async fn get_and_delete_one_item(db: TestDb) {
    append_numbered(&*db.store, "one", 3).await;
    let items = db.store.list_items(T, &sid("one"), &page(10, Order::Asc)).await.unwrap().data;
    let middle = items[1].id;
    assert_eq!(db.store.get_item(T, &sid("one"), middle).await.unwrap().seq, 2);
    db.store.delete_item(T, &sid("one"), middle, None, None).await.unwrap();
    assert!(matches!(
        db.store.get_item(T, &sid("one"), middle).await,
        Err(StoreError::ItemNotFound)
    ));
    assert!(matches!(
        db.store.delete_item(T, &sid("one"), middle, None, None).await,
        Err(StoreError::ItemNotFound)
    ));
    assert!(matches!(
        db.store.get_item(T, &sid("none"), middle).await,
        Err(StoreError::SessionNotFound)
    ));
    assert!(matches!(
        db.store.delete_item(T, &sid("none"), middle, None, None).await,
        Err(StoreError::SessionNotFound)
    ));
    let left = db.store.list_items(T, &sid("one"), &page(10, Order::Asc)).await.unwrap().data;
    assert_eq!(left.iter().map(|i| i.seq).collect::<Vec<_>>(), [1, 3]);
    assert_eq!(db.store.get_session(T, &sid("one")).await.unwrap().item_count, 2);
}

async fn pop_returns_the_newest_and_never_reuses_its_seq(db: TestDb) {
    let texts = append_numbered(&*db.store, "stack", 2).await;
    let popped = db.store.pop_last_item(T, &sid("stack"), None, None).await.unwrap();
    assert_eq!((popped.seq, popped.item.get()), (2, texts[1].as_str()));
    assert!(matches!(
        db.store.get_item(T, &sid("stack"), popped.id).await,
        Err(StoreError::ItemNotFound)
    ));
    let next = append_numbered(&*db.store, "stack", 1).await;
    let items = db.store.list_items(T, &sid("stack"), &page(10, Order::Asc)).await.unwrap().data;
    assert_eq!(items.iter().map(|i| i.seq).collect::<Vec<_>>(), [1, 3]);
    assert_eq!(items[1].item.get(), next[0]);
    db.store.pop_last_item(T, &sid("stack"), None, None).await.unwrap();
    db.store.pop_last_item(T, &sid("stack"), None, None).await.unwrap();
    assert!(matches!(
        db.store.pop_last_item(T, &sid("stack"), None, None).await,
        Err(StoreError::SessionEmpty)
    ));
    assert!(matches!(
        db.store.pop_last_item(T, &sid("nobody"), None, None).await,
        Err(StoreError::SessionNotFound)
    ));
    assert_eq!(db.store.get_session(T, &sid("stack")).await.unwrap().item_count, 0);
}

async fn clear_keeps_the_session(db: TestDb) {
    db.store.create_session(T, new_session("wipe", &[("k", "v")])).await.unwrap();
    append_numbered(&*db.store, "wipe", 5).await;
    db.store.clear_items(T, &sid("wipe"), None, None).await.unwrap();
    let session = db.store.get_session(T, &sid("wipe")).await.unwrap();
    assert_eq!(session.item_count, 0);
    assert_eq!(session.metadata.len(), 1);
    assert!(db
        .store
        .list_items(T, &sid("wipe"), &page(10, Order::Asc))
        .await
        .unwrap()
        .data
        .is_empty());
    assert!(matches!(
        db.store.clear_items(T, &sid("nobody"), None, None).await,
        Err(StoreError::SessionNotFound)
    ));
    let after = append_numbered(&*db.store, "wipe", 1).await;
    let items = db.store.list_items(T, &sid("wipe"), &page(10, Order::Asc)).await.unwrap().data;
    assert_eq!((items.len(), items[0].seq, items[0].item.get()), (1, 6, after[0].as_str()));
}

/// Three 7 MiB items: a page takes two (14 MiB) and says more follow, as the third would
/// pass the 16 MiB budget; the next page takes the third.
async fn pages_of_large_items_stop_at_the_byte_budget(db: TestDb) {
    let large = |n: usize| format!(r#"{{"n":{n},"text":"{}"}}"#, "x".repeat(7 * 1024 * 1024));
    for n in 0..3 {
        db.store.append_items(T, &sid("large"), bodies(&[large(n)]), None, None).await.unwrap();
    }
    let first = db.store.list_items(T, &sid("large"), &page(100, Order::Asc)).await.unwrap();
    assert_eq!(first.data.iter().map(|i| i.seq).collect::<Vec<_>>(), [1, 2]);
    assert!(first.has_more);
    let next = PageRequest {
        limit: 100,
        order: Order::Asc,
        cursor: Some(Cursor::After(first.last_id.unwrap())),
        created_after: None,
    };
    let second = db.store.list_items(T, &sid("large"), &next).await.unwrap();
    assert_eq!(second.data.iter().map(|i| i.seq).collect::<Vec<_>>(), [3]);
    assert!(!second.has_more);
    // Read backwards from the last one, the page fits and nothing precedes it.
    let before = PageRequest {
        limit: 100,
        order: Order::Asc,
        cursor: Some(Cursor::Before(second.first_id.unwrap())),
        created_after: None,
    };
    let back = db.store.list_items(T, &sid("large"), &before).await.unwrap();
    assert_eq!(back.data.iter().map(|i| i.seq).collect::<Vec<_>>(), [1, 2]);
    assert!(!back.has_more);
}
