//! A full disk: every write answered with success is stored, every other one fails
//! with `StorageFull`, and writes succeed again once space returns, without a restart.
//! SQLite is made full on demand by a cap on its file's pages.

use std::sync::Arc;

use agent_sessions::model::{Cursor, Order};
use agent_sessions::store::{SessionStore, SqliteStore, StoreError, DEFAULT_TIMEOUT};
use tempfile::TempDir;

use super::{body, page, sid, T};

/// A store whose file may not grow past `pages` pages of 4 KiB.
async fn capped(dir: &TempDir, pages: u32) -> Arc<dyn SessionStore> {
    let url = format!("sqlite://{}", dir.path().join("full.db").display());
    let store = SqliteStore::connect_tuned(&url, DEFAULT_TIMEOUT, move |options| {
        options.pragma("max_page_count", pages.to_string())
    })
    .await
    .expect("SQLite opens");
    Arc::new(store)
}

/// Appends 1 KiB items to `session` until `failures` appends have failed; returns the
/// texts of those acknowledged and the errors of the others.
async fn append_until_full(
    store: Arc<dyn SessionStore>, session: String, failures: usize,
) -> (Vec<String>, Vec<StoreError>) {
    let (mut acknowledged, mut errors) = (Vec::new(), Vec::new());
    let mut n = 0;
    while errors.len() < failures {
        n += 1;
        let text = format!(r#"{{"session":"{session}","n":{n},"pad":"{}"}}"#, "x".repeat(1024));
        match store.append_items(T, &sid(&session), vec![body(&text)], None, None).await {
            Ok(_) => acknowledged.push(text),
            Err(error) => errors.push(error),
        }
        assert!(n < 20_000, "the cap never filled the file");
    }
    (acknowledged, errors)
}

async fn stored(store: &dyn SessionStore, session: &str) -> Vec<String> {
    let mut texts = Vec::new();
    let mut request = page(100, Order::Asc);
    loop {
        let items = store.list_items(T, &sid(session), &request).await.expect("a page");
        texts.extend(items.data.iter().map(|i| i.item.get().to_owned()));
        match items.last_id {
            Some(last) if items.has_more => request.cursor = Some(Cursor::After(last)),
            _ => return texts,
        }
    }
}

#[tokio::test]
async fn a_full_disk_acknowledges_only_what_it_stored_and_heals() {
    let dir = TempDir::new().expect("a temp dir");
    let store = capped(&dir, 400).await;
    let clients: Vec<_> = (0..8)
        .map(|c| tokio::spawn(append_until_full(store.clone(), format!("client-{c}"), 20)))
        .collect();
    let mut outcomes = Vec::new();
    for client in clients {
        outcomes.push(client.await.expect("the client ran"));
    }
    for (c, (acknowledged, errors)) in outcomes.iter().enumerate() {
        assert_eq!(stored(&*store, &format!("client-{c}")).await, *acknowledged, "client {c}");
        for error in errors {
            assert!(matches!(error, StoreError::StorageFull), "client {c}: {error:?}");
        }
    }
    // Space returns: a deleted session's pages are free for new items.
    store.delete_session(T, &sid("client-0"), None).await.expect("a delete needs no new pages");
    let text = r#"{"after":"space returned"}"#;
    store
        .append_items(T, &sid("client-1"), vec![body(text)], None, None)
        .await
        .expect("appends again");
    let mut expected = outcomes[1].0.clone();
    expected.push(text.to_owned());
    assert_eq!(stored(&*store, "client-1").await, expected);
}
