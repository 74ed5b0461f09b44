//! The store conformance suite: every test runs on Postgres and on SQLite.

mod combined;
mod concurrency;
mod history_marks;
mod idempotency;
mod items;
mod listing;
mod reads;
mod sessions;
mod storage_full;

use std::collections::BTreeMap;

use agent_sessions::model::{
    ItemBody, Metadata, NewSession, Order, PageRequest, SessionFilter, SessionId, DEFAULT_TENANT,
};
use agent_sessions::store::SessionStore;
use serde_json::value::RawValue;

pub const T: &str = DEFAULT_TENANT;

pub fn sid(id: &str) -> SessionId {
    SessionId::parse("id", id.to_owned()).expect("a valid session id")
}

pub fn new_session(id: &str, metadata: &[(&str, &str)]) -> NewSession {
    let pairs: BTreeMap<String, String> =
        metadata.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    NewSession {
        id: sid(id),
        metadata: Metadata::new(pairs).expect("valid metadata"),
        agent_id: None,
        owners: Default::default(),
        expires_after: None,
    }
}

/// A listing's filter by metadata pairs.
pub fn metadata_filter(pairs: &[(&str, &str)]) -> SessionFilter {
    let metadata = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    SessionFilter { metadata, ..SessionFilter::default() }
}

pub fn body(json: &str) -> ItemBody {
    ItemBody::new("item", RawValue::from_string(json.to_owned()).expect("valid JSON"))
        .expect("a JSON object")
}

pub fn bodies(jsons: &[String]) -> Vec<ItemBody> {
    jsons.iter().map(|j| body(j)).collect()
}

pub fn page(limit: u32, order: Order) -> PageRequest {
    PageRequest { limit, order, cursor: None, created_after: None }
}

/// Appends `n` items `{"n": i}` and returns their JSON texts.
pub async fn append_numbered(store: &dyn SessionStore, session: &str, n: usize) -> Vec<String> {
    let texts: Vec<String> = (0..n).map(|i| format!(r#"{{"n":{i}}}"#)).collect();
    store
        .append_items(T, &sid(session), bodies(&texts), None, None)
        .await
        .expect("the append succeeds");
    texts
}
