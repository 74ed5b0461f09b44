//! A listing's metadata filter follows every way a session's metadata changes, and pages
//! through the matches newest first whichever pair leads.

use std::collections::BTreeMap;

use agent_sessions::model::{
    Cursor, ForkPoint, Metadata, MetadataPatch, NewFork, Order, PageRequest, SessionPatch,
};

use super::{metadata_filter, new_session, page, sid, T};
use crate::helpers::{on_both_backends, TestDb};

on_both_backends!(
    metadata_filters_follow_creation_patch_fork_and_delete,
    filtered_listings_page_newest_first_in_both_orders,
);

async fn listed(db: &TestDb, tenant: &str, filter: &[(&str, &str)]) -> Vec<String> {
    let listed =
        db.store.list_sessions(tenant, &metadata_filter(filter), &page(100, Order::Asc)).await;
    listed.unwrap().data.into_iter().map(|s| s.id).collect()
}

async fn metadata_filters_follow_creation_patch_fork_and_delete(db: TestDb) {
    let store = &db.store;
    store.create_session(T, new_session("a", &[("team", "red"), ("user", "ann")])).await.unwrap();
    store.create_session(T, new_session("b", &[("team", "red")])).await.unwrap();
    store.create_session("other", new_session("a", &[("team", "red")])).await.unwrap();
    assert_eq!(listed(&db, T, &[("team", "red")]).await, ["a", "b"]);
    assert_eq!(listed(&db, "other", &[("team", "red")]).await, ["a"]);

    let change = BTreeMap::from([("team".to_owned(), Some("blue".to_owned()))]);
    let patch = SessionPatch {
        metadata: Some(MetadataPatch::Merge(change)),
        agent_id: None,
        expires_after: None,
    };
    store.update_session(T, &sid("a"), patch, None).await.unwrap();
    assert_eq!(listed(&db, T, &[("team", "red")]).await, ["b"]);
    assert_eq!(listed(&db, T, &[("team", "blue"), ("user", "ann")]).await, ["a"]);
    assert_eq!(listed(&db, T, &[("user", "ann"), ("team", "blue")]).await, ["a"]);
    assert!(listed(&db, T, &[("user", "ann"), ("team", "red")]).await.is_empty());

    let fork = |id: &str, metadata: Option<Metadata>| NewFork {
        id: sid(id),
        metadata,
        point: ForkPoint::All,
        idempotency: None,
    };
    store.fork_session(T, &sid("a"), fork("a-copy", None)).await.unwrap();
    let own = Metadata::new(BTreeMap::from([("team".to_owned(), "green".to_owned())])).unwrap();
    store.fork_session(T, &sid("a"), fork("a-green", Some(own))).await.unwrap();
    assert_eq!(listed(&db, T, &[("team", "blue")]).await, ["a", "a-copy"]);
    assert_eq!(listed(&db, T, &[("team", "green")]).await, ["a-green"]);

    let clear =
        SessionPatch { metadata: Some(MetadataPatch::Clear), agent_id: None, expires_after: None };
    store.update_session(T, &sid("a-copy"), clear, None).await.unwrap();
    store.delete_session(T, &sid("a"), None).await.unwrap();
    assert!(listed(&db, T, &[("team", "blue")]).await.is_empty());
    store.create_session(T, new_session("a", &[("team", "red")])).await.unwrap();
    assert_eq!(listed(&db, T, &[("team", "red")]).await, ["b", "a"]);
    assert_eq!(listed(&db, "other", &[("team", "red")]).await, ["a"]);
}

async fn filtered_listings_page_newest_first_in_both_orders(db: TestDb) {
    for n in 0..7 {
        let team = if n % 2 == 0 { "even" } else { "odd" };
        let id = format!("s{n}");
        db.store
            .create_session(T, new_session(&id, &[("team", team), ("all", "yes")]))
            .await
            .unwrap();
    }
    for (order, expected) in
        [(Order::Desc, ["s6", "s4", "s2", "s0"]), (Order::Asc, ["s0", "s2", "s4", "s6"])]
    {
        for filter in [&[("team", "even")][..], &[("all", "yes"), ("team", "even")][..]] {
            let mut seen = Vec::new();
            let mut cursor = None;
            loop {
                let request =
                    PageRequest { limit: 3, order, cursor: cursor.take(), created_after: None };
                let got =
                    db.store.list_sessions(T, &metadata_filter(filter), &request).await.unwrap();
                seen.extend(got.data.iter().map(|s| s.id.clone()));
                if !got.has_more {
                    break;
                }
                cursor = Some(Cursor::After(got.last_id.unwrap()));
            }
            assert_eq!(seen, expected, "{order:?} {filter:?}");
        }
    }
}
