//! What an Idempotency-Key keeps: the first request's fingerprint and its response.

use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

use super::StoreError;
use crate::model::{IdempotencyKey, Item};

/// Answers a repeated idempotency key from what the first request stored.
pub(super) fn first_response(
    key: &IdempotencyKey, fingerprint: Vec<u8>, response: Option<String>,
) -> Result<String, StoreError> {
    if fingerprint != key.fingerprint {
        return Err(StoreError::IdempotencyKeyReused);
    }
    // The claim and its response are written in one transaction, so a visible claim
    // always has its response.
    response
        .ok_or_else(|| StoreError::Corrupt(format!("idempotency key {} has no response", key.key)))
}

/// What a key's response records of the append its request made: where the items
/// went, not what they say, so that deleting them leaves no copy here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct AppendedSeqs {
    pub session_pk: i64,
    pub first_seq: i64,
    pub last_seq: i64,
    /// The session's revision after the append; absent in responses kept before
    /// 2026-11-29.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// The session's state after a write that changed it, which a state write answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

impl AppendedSeqs {
    /// Where the items of one append, all in session `session_pk`, went, and the
    /// revision it made.
    pub fn of(session_pk: i64, items: &[Item], revision: i64) -> Self {
        Self {
            session_pk,
            first_seq: items.first().map_or(0, |i| i.seq),
            last_seq: items.last().map_or(0, |i| i.seq),
            revision: Some(revision),
            state: None,
        }
    }
}

/// An append's first response: the seqs its items were given, or (kept before
/// 2026-11-24) the items themselves.
pub(super) enum FirstAppend {
    Seqs(AppendedSeqs),
    Items(Vec<Item>),
}

pub(super) fn first_append(
    key: &IdempotencyKey, response: &str,
) -> Result<FirstAppend, StoreError> {
    let corrupt =
        |e: serde_json::Error| StoreError::Corrupt(format!("idempotency key {}: {e}", key.key));
    if response.starts_with('[') {
        return serde_json::from_str(response).map(FirstAppend::Items).map_err(corrupt);
    }
    serde_json::from_str(response).map(FirstAppend::Seqs).map_err(corrupt)
}

/// What a key's response records of the run its request created.
pub(super) fn run_response(run_id: Uuid) -> String {
    json!({ "run_id": run_id }).to_string()
}

/// The run a request with an Idempotency-Key created, from the key's stored response.
pub(super) fn replayed_run_id(response: &str) -> Result<Uuid, StoreError> {
    serde_json::from_str::<serde_json::Value>(response)
        .ok()
        .and_then(|first| first["run_id"].as_str().and_then(|id| Uuid::parse_str(id).ok()))
        .ok_or_else(|| StoreError::Corrupt(format!("idempotency response `{response}`")))
}
