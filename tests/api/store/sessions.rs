use std::collections::BTreeMap;

use agent_sessions::model::{
    AgentId, Cursor, MetadataPatch, Order, PageRequest, SessionId, SessionPatch,
};
use agent_sessions::store::StoreError;

use super::{append_numbered, metadata_filter, new_session, page, sid, T};
use crate::helpers::{on_both_backends, TestDb};

on_both_backends!(
    created_session_reads_back,
    taken_id_is_refused,
    sessions_list_newest_first_across_pages,
    listing_is_deterministic_when_timestamps_tie,
    unknown_cursor_is_refused,
    metadata_filters_combine_with_and,
    patch_merges_metadata_and_sets_agent,
    patch_over_the_key_limit_changes_nothing,
    delete_removes_the_session_with_its_items,
    tenants_never_see_each_other,
);

async fn created_session_reads_back(db: TestDb) {
    let mut session = new_session("s-1", &[("user", "alice"), ("topic", "billing")]);
    session.agent_id = Some(AgentId::parse("agent_id", "triage".into()).unwrap());
    let created = db.store.create_session(T, session).await.unwrap();
    assert_eq!(created.id, "s-1");
    assert_eq!(created.agent_id.as_deref(), Some("triage"));
    assert_eq!(created.item_count, 0);
    assert_eq!(created.created_at, created.updated_at);
    assert_eq!(created.metadata.len(), 2);
    let read = db.store.get_session(T, &sid("s-1")).await.unwrap();
    assert_eq!(read, created);

    let generated = SessionId::generate();
    let created = db.store.create_session(T, new_session(generated.as_str(), &[])).await.unwrap();
    assert!(uuid::Uuid::parse_str(&created.id).is_ok(), "{}", created.id);
    assert!(matches!(
        db.store.get_session(T, &sid("missing")).await,
        Err(StoreError::SessionNotFound)
    ));
}

async fn taken_id_is_refused(db: TestDb) {
    db.store.create_session(T, new_session("dup", &[("v", "1")])).await.unwrap();
    let again = db.store.create_session(T, new_session("dup", &[("v", "2")])).await;
    assert!(matches!(again, Err(StoreError::SessionExists)), "{again:?}");
    let kept = db.store.get_session(T, &sid("dup")).await.unwrap();
    assert_eq!(kept.metadata.iter().next(), Some((&"v".to_string(), &"1".to_string())));
}

async fn sessions_list_newest_first_across_pages(db: TestDb) {
    for i in 0..7 {
        db.store.create_session(T, new_session(&format!("s{i}"), &[])).await.unwrap();
    }
    // Newest first, three at a time.
    let mut seen = Vec::new();
    let mut request = page(3, Order::Desc);
    loop {
        let got = db.store.list_sessions(T, &Default::default(), &request).await.unwrap();
        assert!(got.data.len() <= 3);
        seen.extend(got.data.iter().map(|s| s.id.clone()));
        assert_eq!(got.first_id, got.data.first().map(|s| s.id.clone()));
        assert_eq!(got.last_id, got.data.last().map(|s| s.id.clone()));
        if !got.has_more {
            break;
        }
        request.cursor = Some(Cursor::After(got.last_id.unwrap()));
    }
    assert_eq!(seen, ["s6", "s5", "s4", "s3", "s2", "s1", "s0"]);

    let oldest =
        db.store.list_sessions(T, &Default::default(), &page(2, Order::Asc)).await.unwrap();
    assert_eq!(ids(&oldest.data), ["s0", "s1"]);
    assert!(oldest.has_more);

    // The page before s2 in newest-first order holds the sessions newer than s2.
    let before = PageRequest {
        limit: 2,
        order: Order::Desc,
        cursor: Some(Cursor::Before("s2".into())),
        created_after: None,
    };
    let got = db.store.list_sessions(T, &Default::default(), &before).await.unwrap();
    assert_eq!(ids(&got.data), ["s4", "s3"]);
    assert!(got.has_more, "s5 and s6 precede this page");
    let before_all = PageRequest { cursor: Some(Cursor::Before("s5".into())), ..before };
    let got = db.store.list_sessions(T, &Default::default(), &before_all).await.unwrap();
    assert_eq!(ids(&got.data), ["s6"]);
    assert!(!got.has_more);
}

async fn listing_is_deterministic_when_timestamps_tie(db: TestDb) {
    for i in 0..5 {
        db.store.create_session(T, new_session(&format!("t{i}"), &[])).await.unwrap();
    }
    db.execute("update sessions set created_at = (select min(created_at) from sessions)").await;
    let first =
        db.store.list_sessions(T, &Default::default(), &page(2, Order::Desc)).await.unwrap();
    let second = db
        .store
        .list_sessions(
            T,
            &Default::default(),
            &PageRequest {
                limit: 10,
                order: Order::Desc,
                cursor: Some(Cursor::After(first.last_id.clone().unwrap())),
                created_after: None,
            },
        )
        .await
        .unwrap();
    let mut all = ids(&first.data);
    all.extend(ids(&second.data));
    assert_eq!(all, ["t4", "t3", "t2", "t1", "t0"], "insertion order breaks the tie");
}

async fn unknown_cursor_is_refused(db: TestDb) {
    let request = PageRequest {
        limit: 10,
        order: Order::Desc,
        cursor: Some(Cursor::After("nobody".into())),
        created_after: None,
    };
    let got = db.store.list_sessions(T, &Default::default(), &request).await;
    assert!(matches!(got, Err(StoreError::UnknownCursor)), "{got:?}");
}

async fn metadata_filters_combine_with_and(db: TestDb) {
    db.store
        .create_session(T, new_session("a", &[("user", "alice"), ("tier", "pro")]))
        .await
        .unwrap();
    db.store
        .create_session(T, new_session("b", &[("user", "alice"), ("tier", "free")]))
        .await
        .unwrap();
    db.store.create_session(T, new_session("c", &[("user", "bob")])).await.unwrap();
    let filter = metadata_filter;
    let all = page(100, Order::Asc);
    let alice = db.store.list_sessions(T, &filter(&[("user", "alice")]), &all).await.unwrap();
    assert_eq!(ids(&alice.data), ["a", "b"]);
    let alice_pro = db
        .store
        .list_sessions(T, &filter(&[("user", "alice"), ("tier", "pro")]), &all)
        .await
        .unwrap();
    assert_eq!(ids(&alice_pro.data), ["a"]);
    let nobody = db
        .store
        .list_sessions(T, &filter(&[("user", "alice"), ("user", "bob")]), &all)
        .await
        .unwrap();
    assert!(nobody.data.is_empty());
    let quoted = db.store.list_sessions(T, &filter(&[("us\"er", "alice")]), &all).await.unwrap();
    assert!(quoted.data.is_empty(), "keys are matched literally");
}

async fn patch_merges_metadata_and_sets_agent(db: TestDb) {
    let created = db
        .store
        .create_session(T, new_session("p", &[("keep", "1"), ("drop", "2"), ("change", "3")]))
        .await
        .unwrap();
    let changes = BTreeMap::from([
        ("drop".to_string(), None),
        ("change".to_string(), Some("33".to_string())),
        ("add".to_string(), Some("4".to_string())),
    ]);
    let patched = db
        .store
        .update_session(
            T,
            &sid("p"),
            SessionPatch {
                metadata: Some(MetadataPatch::Merge(changes)),
                agent_id: Some(Some(AgentId::parse("agent_id", "helper".into()).unwrap())),
                expires_after: None,
            },
            None,
        )
        .await
        .unwrap();
    let pairs: Vec<(&str, &str)> =
        patched.metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(pairs, [("add", "4"), ("change", "33"), ("keep", "1")]);
    assert_eq!(patched.agent_id.as_deref(), Some("helper"));
    assert!(patched.updated_at >= created.updated_at);
    assert_eq!(patched.created_at, created.created_at);

    let untouched =
        db.store.update_session(T, &sid("p"), SessionPatch::default(), None).await.unwrap();
    assert_eq!(untouched.metadata, patched.metadata);
    assert_eq!(untouched.agent_id.as_deref(), Some("helper"));

    let cleared = db
        .store
        .update_session(
            T,
            &sid("p"),
            SessionPatch {
                metadata: Some(MetadataPatch::Clear),
                agent_id: Some(None),
                expires_after: None,
            },
            None,
        )
        .await
        .unwrap();
    assert!(cleared.metadata.is_empty());
    assert_eq!(cleared.agent_id, None);
    let missing = db.store.update_session(T, &sid("nope"), SessionPatch::default(), None).await;
    assert!(matches!(missing, Err(StoreError::SessionNotFound)));
}

async fn patch_over_the_key_limit_changes_nothing(db: TestDb) {
    let full: Vec<(String, String)> = (0..64).map(|i| (format!("k{i}"), "v".to_string())).collect();
    let pairs: Vec<(&str, &str)> = full.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    db.store.create_session(T, new_session("full", &pairs)).await.unwrap();
    let one_more = BTreeMap::from([("k64".to_string(), Some("v".to_string()))]);
    let result = db
        .store
        .update_session(
            T,
            &sid("full"),
            SessionPatch {
                metadata: Some(MetadataPatch::Merge(one_more)),
                agent_id: None,
                expires_after: None,
            },
            None,
        )
        .await;
    match result {
        Err(StoreError::Invalid(field)) => assert_eq!(field.field, "metadata"),
        other => panic!("expected a metadata error, got {other:?}"),
    }
    assert_eq!(db.store.get_session(T, &sid("full")).await.unwrap().metadata.len(), 64);
}

async fn delete_removes_the_session_with_its_items(db: TestDb) {
    append_numbered(&*db.store, "gone", 3).await;
    append_numbered(&*db.store, "kept", 2).await;
    db.store.delete_session(T, &sid("gone"), None).await.unwrap();
    assert!(matches!(
        db.store.get_session(T, &sid("gone")).await,
        Err(StoreError::SessionNotFound)
    ));
    assert!(matches!(
        db.store.list_items(T, &sid("gone"), &page(10, Order::Asc)).await,
        Err(StoreError::SessionNotFound)
    ));
    assert!(matches!(
        db.store.delete_session(T, &sid("gone"), None).await,
        Err(StoreError::SessionNotFound)
    ));
    let kept = db.store.list_items(T, &sid("kept"), &page(10, Order::Asc)).await.unwrap();
    assert_eq!(kept.data.len(), 2);
    // A session created again under the old id starts empty.
    append_numbered(&*db.store, "gone", 1).await;
    let again = db.store.list_items(T, &sid("gone"), &page(10, Order::Asc)).await.unwrap();
    assert_eq!(again.data.len(), 1);
}

async fn tenants_never_see_each_other(db: TestDb) {
    let store = &db.store;
    store.create_session("acme", new_session("shared-id", &[("owner", "acme")])).await.unwrap();
    store
        .append_items(
            "acme",
            &sid("shared-id"),
            super::bodies(&[r#"{"secret":true}"#.into()]),
            None,
            None,
        )
        .await
        .unwrap();

    assert!(matches!(
        store.get_session("umbrella", &sid("shared-id")).await,
        Err(StoreError::SessionNotFound)
    ));
    let listed = store
        .list_sessions("umbrella", &Default::default(), &page(100, Order::Desc))
        .await
        .unwrap();
    assert!(listed.data.is_empty());
    let filtered = store
        .list_sessions("umbrella", &metadata_filter(&[("owner", "acme")]), &page(100, Order::Desc))
        .await
        .unwrap();
    assert!(filtered.data.is_empty());
    assert!(matches!(
        store.list_items("umbrella", &sid("shared-id"), &page(10, Order::Asc)).await,
        Err(StoreError::SessionNotFound)
    ));
    assert!(matches!(
        store.pop_last_item("umbrella", &sid("shared-id"), None, None).await,
        Err(StoreError::SessionNotFound)
    ));
    assert!(matches!(
        store.clear_items("umbrella", &sid("shared-id"), None, None).await,
        Err(StoreError::SessionNotFound)
    ));
    assert!(matches!(
        store.delete_session("umbrella", &sid("shared-id"), None).await,
        Err(StoreError::SessionNotFound)
    ));
    let acme_items =
        store.list_items("acme", &sid("shared-id"), &page(10, Order::Asc)).await.unwrap();
    let item_id = acme_items.data[0].id;
    assert!(matches!(
        store.get_item("umbrella", &sid("shared-id"), item_id).await,
        Err(StoreError::SessionNotFound)
    ));
    // The same id in another tenant is another session.
    store.create_session("umbrella", new_session("shared-id", &[])).await.unwrap();
    assert!(matches!(
        store.get_item("umbrella", &sid("shared-id"), item_id).await,
        Err(StoreError::ItemNotFound)
    ));
    assert!(matches!(
        store.delete_item("umbrella", &sid("shared-id"), item_id, None, None).await,
        Err(StoreError::ItemNotFound)
    ));
    assert_eq!(store.get_session("acme", &sid("shared-id")).await.unwrap().item_count, 1);
    assert_eq!(store.get_session("umbrella", &sid("shared-id")).await.unwrap().item_count, 0);
}

fn ids(sessions: &[agent_sessions::model::Session]) -> Vec<String> {
    sessions.iter().map(|s| s.id.clone()).collect()
}
