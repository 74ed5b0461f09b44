//! Appends combined into one transaction (group commit) keep every guarantee of an
//! append made alone. Each test holds the store's writes while its appends queue, so
//! that they are combined whatever the machine's speed; the stats prove they were.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use agent_sessions::model::{
    IdempotencyKey, IfMatch, Order, StateChange, StateChanges, StateDocument, StateWrite,
};
use agent_sessions::store::{Appended, PayloadCodec, SessionStore, StoreError};
use futures::future::join_all;
use tokio::task::JoinHandle;

use super::{bodies, new_session, page, sid, T};
use crate::helpers::{on_both_backends, TestDb};

on_both_backends!(
    appends_to_64_sessions_combine_and_keep_each_sessions_order,
    keyed_appends_to_one_session_combine_and_replay,
    one_poisoned_append_fails_alone,
    two_replicas_combining_on_one_database_never_deadlock,
    state_changes_conditions_and_plain_appends_combine_in_queue_order,
    state_deltas_combine_and_each_answers_the_state_it_made,
);

/// An append of `{"session":…,"client":…,"part":0|1}` pairs, spawned.
fn spawn_pair(
    store: &Arc<dyn SessionStore>, session: String, client: usize, key: Option<&str>,
) -> JoinHandle<Result<Appended, StoreError>> {
    let store = store.clone();
    let texts =
        [0, 1].map(|part| format!(r#"{{"session":"{session}","client":{client},"part":{part}}}"#));
    let items = bodies(&texts);
    let idempotency =
        key.map(|key| IdempotencyKey::new(key, &sid(&session), &items).expect("a valid key"));
    tokio::spawn(
        async move { store.append_items(T, &sid(&session), items, idempotency, None).await },
    )
}

/// Runs `appends` while the store's writes are held, so that they queue behind one
/// append and are then combined; returns their results in the order given.
async fn combined<F>(db: &TestDb, appends: F) -> Vec<Result<Appended, StoreError>>
where
    F: FnOnce() -> Vec<JoinHandle<Result<Appended, StoreError>>>,
{
    let held = db.hold_writes().await;
    let blocked = spawn_pair(&db.store, "held".into(), 0, None);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let tasks = appends();
    tokio::time::sleep(Duration::from_millis(150)).await;
    held.release().await;
    blocked.await.unwrap().expect("the held append succeeds");
    join_all(tasks).await.into_iter().map(|t| t.expect("the task ran")).collect()
}

/// The items of a session, oldest first, as `(client, part, seq)`.
async fn stored(db: &TestDb, session: &str) -> Vec<(i64, i64, i64)> {
    db.store
        .list_items(T, &sid(session), &page(1000, Order::Asc))
        .await
        .unwrap()
        .data
        .iter()
        .map(|i| {
            let v: serde_json::Value = serde_json::from_str(i.item.get()).unwrap();
            (v["client"].as_i64().unwrap(), v["part"].as_i64().unwrap(), i.seq)
        })
        .collect()
}

/// Checks that a session holds each of `clients`' pairs once, side by side, with seqs
/// 1 to 2n and an item count to match.
async fn assert_pairs(db: &TestDb, session: &str, clients: &[usize]) {
    let items = stored(db, session).await;
    assert_eq!(
        items.iter().map(|i| i.2).collect::<Vec<_>>(),
        (1..=2 * clients.len() as i64).collect::<Vec<_>>(),
        "seqs of {session}"
    );
    let mut seen: Vec<i64> = items
        .chunks(2)
        .map(|pair| {
            assert_eq!(pair[0].0, pair[1].0, "a pair of {session} was split");
            assert_eq!((pair[0].1, pair[1].1), (0, 1));
            pair[0].0
        })
        .collect();
    seen.sort();
    let mut expected: Vec<i64> = clients.iter().map(|&c| c as i64).collect();
    expected.sort();
    assert_eq!(seen, expected, "the pairs of {session}");
    let session = db.store.get_session(T, &sid(session)).await.unwrap();
    assert_eq!(session.item_count, 2 * clients.len() as i64);
}

/// 128 appends to 64 sessions (half made before, half made by the append) wait behind
/// a held one: they commit in a few combined transactions, and every session gets its
/// pairs whole, in contiguous seqs from 1, and the answers match what was stored.
async fn appends_to_64_sessions_combine_and_keep_each_sessions_order(db: TestDb) {
    for s in 0..32 {
        db.store.create_session(T, new_session(&format!("s{s}"), &[])).await.unwrap();
    }
    let before = db.store.append_stats();
    let results = combined(&db, || {
        (0..128)
            .map(|client| spawn_pair(&db.store, format!("s{}", client % 64), client, None))
            .collect()
    })
    .await;
    let stats = db.store.append_stats();
    let transactions = stats.transactions - before.transactions;
    let appends = stats.appends - before.appends;
    assert_eq!(appends, 129);
    assert!(transactions <= 10, "129 appends took {transactions} transactions");
    assert_eq!(stats.fallbacks, 0);

    let mut answered: HashMap<String, Vec<(usize, i64)>> = HashMap::new();
    for (client, result) in results.into_iter().enumerate() {
        let appended = result.expect("the append succeeds");
        assert!(!appended.replayed);
        assert_eq!(appended.items[1].seq, appended.items[0].seq + 1);
        answered
            .entry(format!("s{}", client % 64))
            .or_default()
            .push((client, appended.items[0].seq));
    }
    for s in 0..64 {
        let session = format!("s{s}");
        assert_pairs(&db, &session, &[s, s + 64]).await;
        // Each answer names the seqs its items were stored at.
        for &(client, seq) in &answered[&session] {
            let at = stored(&db, &session).await.into_iter().find(|i| i.2 == seq).unwrap();
            assert_eq!((at.0, at.1), (client as i64, 0));
        }
    }
}

/// 64 appends with Idempotency-Keys to one session, two of them sharing a key, are
/// combined: each key appends once, the second of the pair is a replay of the first,
/// and retries after the commit replay every append exactly.
async fn keyed_appends_to_one_session_combine_and_replay(db: TestDb) {
    // Client 63 sends client 62's request again, under the same key.
    let who = |client: usize| client.min(62);
    let key = |client: usize| format!("key-{}", who(client));
    let results = combined(&db, || {
        (0..64)
            .map(|client| spawn_pair(&db.store, "shared".into(), who(client), Some(&key(client))))
            .collect()
    })
    .await;
    let stats = db.store.append_stats();
    assert!(stats.transactions <= 12, "65 appends took {} transactions", stats.transactions);
    let results: Vec<Appended> =
        results.into_iter().map(|r| r.expect("the append succeeds")).collect();
    // One of the two requests with one key appended, the other got its answer.
    let (first, second) = (&results[62], &results[63]);
    assert_ne!(first.replayed, second.replayed);
    assert_eq!(first.items[0].id, second.items[0].id);
    assert_pairs(&db, "shared", &(0..63).collect::<Vec<_>>()).await;

    for (client, result) in results.iter().enumerate() {
        let items = bodies(&[0, 1].map(|part| {
            format!(r#"{{"session":"shared","client":{},"part":{part}}}"#, who(client))
        }));
        let retried = db
            .store
            .append_items(
                T,
                &sid("shared"),
                items.clone(),
                Some(IdempotencyKey::new(&key(client), &sid("shared"), &items).unwrap()),
                None,
            )
            .await
            .expect("the retry succeeds");
        assert!(retried.replayed);
        let ids = |a: &Appended| a.items.iter().map(|i| (i.id, i.seq)).collect::<Vec<_>>();
        assert_eq!(ids(&retried), ids(result), "the retry of client {client}");
    }
    assert_pairs(&db, "shared", &(0..63).collect::<Vec<_>>()).await;
}

/// One append among 64 combined ones is refused by the database (a trigger stands in
/// for any error of one request): the combined transaction is rolled back and made
/// again one append at a time, so that append fails alone and leaves nothing, and
/// every other append, to its own session or to the poisoned one's, is stored once.
async fn one_poisoned_append_fails_alone(db: TestDb) {
    db.execute_either(
        r"create function refuse_poison() returns trigger language plpgsql as $$
          begin raise exception 'poisoned item'; end $$",
        "select 1",
    )
    .await;
    db.execute_either(
        r"create trigger poison before insert on items for each row
          when (new.body like '%poison%') execute function refuse_poison()",
        r"create trigger poison before insert on items for each row
          when new.body like '%poison%' begin select raise(abort, 'poisoned item'); end",
    )
    .await;
    let results = combined(&db, || {
        let mut tasks: Vec<_> = (0..63)
            .map(|client| spawn_pair(&db.store, format!("p{}", client % 32), client, None))
            .collect();
        let store = db.store.clone();
        tasks.insert(
            31,
            tokio::spawn(async move {
                let items = bodies(&[r#"{"poison":true}"#.into()]);
                store.append_items(T, &sid("p5"), items, None, None).await
            }),
        );
        tasks
    })
    .await;
    assert!(db.store.append_stats().fallbacks >= 1);
    for (n, result) in results.into_iter().enumerate() {
        match (n, result) {
            (31, Err(StoreError::Database(error))) => {
                assert!(error.to_string().contains("poisoned item"), "{error}")
            }
            (31, other) => panic!("the poisoned append answered {other:?}"),
            (_, result) => {
                result.expect("an append beside the poisoned one succeeds");
            }
        }
    }
    for s in 0..32 {
        let clients: Vec<usize> = (0..63).filter(|c| c % 32 == s).collect();
        assert_pairs(&db, &format!("p{s}"), &clients).await;
    }
}

/// Two stores on one database (two replicas) each combine 96 appends to the same 8
/// sessions, held until both batches are queued and then written at once: neither
/// batch fails or falls back (a deadlock would make one), and every session's pairs
/// are whole, in contiguous seqs across both replicas' batches.
async fn two_replicas_combining_on_one_database_never_deadlock(db: TestDb) {
    let replica = db.reopen(PayloadCodec::default()).await;
    let stores = [db.store.clone(), replica.store.clone()];
    let held = db.hold_writes().await;
    let blocked: Vec<_> = stores
        .iter()
        .enumerate()
        .map(|(n, store)| spawn_pair(store, format!("held-{n}"), 0, None))
        .collect();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let appends: Vec<_> = (0..192)
        .map(|client| spawn_pair(&stores[client % 2], format!("r{}", client % 8), client, None))
        .collect();
    tokio::time::sleep(Duration::from_millis(150)).await;
    held.release().await;
    for appended in join_all(blocked.into_iter().chain(appends)).await {
        appended.unwrap().expect("the append succeeds");
    }
    let (ours, theirs) = (db.store.append_stats(), replica.store.append_stats());
    assert_eq!(ours.appends + theirs.appends, 194);
    assert!(ours.transactions + theirs.transactions <= 12);
    assert_eq!((ours.fallbacks, theirs.fallbacks), (0, 0));
    for s in 0..8 {
        let clients: Vec<usize> = (0..192).filter(|c| c % 8 == s).collect();
        assert_pairs(&db, &format!("r{s}"), &clients).await;
    }
}

/// A batch that holds appends with a state delta, a stale `If-Match` and plain ones: each
/// each append lands once, in one order for items and state, and the stale one fails
/// alone.
async fn state_changes_conditions_and_plain_appends_combine_in_queue_order(db: TestDb) {
    let delta = |n: i64| StateWrite {
        change: StateChange::Merge(StateDocument::stored(format!(r#"{{"n":{n}}}"#))),
        max_bytes: 1 << 20,
    };
    let before = db.store.append_stats();
    let results = combined(&db, || {
        (0..6)
            .map(|n: i64| {
                let store = db.store.clone();
                let items = bodies(&[format!(r#"{{"client":{n},"part":0}}"#)]);
                let (state, if_match) = match n {
                    1 | 4 => (Some(delta(n)), None),
                    3 => (None, Some(IfMatch::Revision(99))),
                    _ => (None, None),
                };
                let state = StateChanges { session: state, ..StateChanges::default() };
                tokio::spawn(async move {
                    store.append_with_state(T, &sid("mixed"), items, state, None, if_match).await
                })
            })
            .collect()
    })
    .await;
    assert!(db.store.append_stats().transactions - before.transactions < 7, "combined");
    for (n, result) in results.iter().enumerate() {
        match (n, result) {
            (3, Err(StoreError::RevisionMismatch { .. })) => {}
            (3, other) => panic!("the stale append answered {other:?}"),
            (_, other) => assert!(other.is_ok(), "{n}: {other:?}"),
        }
    }
    let mut clients: Vec<i64> = stored(&db, "mixed").await.iter().map(|i| i.0).collect();
    // The state is the delta of the later of the two in the session's order.
    let last_delta = *clients.iter().rev().find(|c| [1, 4].contains(*c)).unwrap();
    clients.sort_unstable();
    assert_eq!(clients, [0, 1, 2, 4, 5], "every append but the stale one");
    let read = db.store.session_state(T, &sid("mixed"), false).await.unwrap();
    assert_eq!(
        (read.state.as_str(), read.revision),
        (format!(r#"{{"n":{last_delta}}}"#).as_str(), 5)
    );
}

/// Appends with state deltas to three sessions combine like plain ones: each answers
/// the state as it left it (every delta of its session up to it, in the session's
/// order), a retry answers that state again, and a delta that makes a state too large
/// fails alone.
async fn state_deltas_combine_and_each_answers_the_state_it_made(db: TestDb) {
    const SESSIONS: [&str; 3] = ["a", "b", "c"];
    let spawn = |n: usize, max_bytes: usize| {
        let (store, session) = (db.store.clone(), sid(SESSIONS[n % 3]));
        let items = bodies(&[format!(r#"{{"client":{n},"part":0}}"#)]);
        let key = IdempotencyKey::new(&format!("delta-{n}"), &session, &items).unwrap();
        let change = StateChange::Merge(StateDocument::stored(format!(r#"{{"k{n}":{n}}}"#)));
        let state = StateWrite { change, max_bytes };
        let state = StateChanges { session: Some(state), ..StateChanges::default() };
        tokio::spawn(async move {
            store.append_with_state(T, &session, items, state, Some(key), None).await
        })
    };
    let keys = |appended: &Appended| -> BTreeSet<String> {
        let state = appended.state.as_ref().expect("the state it made");
        let state: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(state.as_str()).unwrap();
        state.keys().cloned().collect()
    };
    let before = db.store.append_stats();
    let results = combined(&db, || (0..24).map(|n| spawn(n, 1 << 20)).collect()).await;
    assert!(db.store.append_stats().transactions - before.transactions < 8, "combined");
    let results: Vec<Appended> = results.into_iter().map(|r| r.expect("appended")).collect();
    for (n, appended) in results.iter().enumerate() {
        let seq = appended.items[0].seq;
        let upto: BTreeSet<String> = (0..24)
            .filter(|m| m % 3 == n % 3 && results[*m].items[0].seq <= seq)
            .map(|m| format!("k{m}"))
            .collect();
        assert_eq!(keys(appended), upto, "the state append {n} made");
        assert_eq!(appended.revision, Some(seq), "one revision per append");
    }
    for session in SESSIONS {
        let read = db.store.session_state(T, &sid(session), false).await.unwrap();
        assert_eq!(read.revision, 8);
        let stored: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(read.state.as_str()).unwrap();
        assert_eq!(stored.len(), 8, "every delta of {session}");
    }
    let retried = spawn(0, 1 << 20).await.unwrap().expect("the retry succeeds");
    assert!(retried.replayed);
    assert_eq!(retried.state, results[0].state, "the retry answers the first state");

    let results =
        combined(&db, || vec![spawn(30, 1 << 20), spawn(33, 4), spawn(31, 1 << 20)]).await;
    assert!(matches!(results[1], Err(StoreError::StateTooLarge(_))), "{:?}", results[1]);
    assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
    let read = db.store.session_state(T, &sid("a"), false).await.unwrap();
    assert_eq!(read.revision, 9, "the too large delta left nothing");
    assert!(read.state.as_str().contains("k30") && !read.state.as_str().contains("k33"));
}
