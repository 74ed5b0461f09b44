//! What an Idempotency-Key keeps: the first request's fingerprint and its response.

use serde_json::json;
use uuid::Uuid;

use super::{Appended, StoreError};
use crate::model::IdempotencyKey;

/// Answers a repeated idempotency key from what the first request stored.
pub(super) fn first_response(
    key: &IdempotencyKey,
    fingerprint: Vec<u8>,
    response: Option<String>,
) -> Result<String, StoreError> {
    if fingerprint != key.fingerprint {
        return Err(StoreError::IdempotencyKeyReused);
    }
    // The claim and its response are written in one transaction, so a visible claim
    // always has its response.
    response
        .ok_or_else(|| StoreError::Corrupt(format!("idempotency key {} has no response", key.key)))
}

/// An append's first response, answered again.
pub(super) fn replayed_items(key: &IdempotencyKey, response: &str) -> Result<Appended, StoreError> {
    let items = serde_json::from_str(response)
        .map_err(|e| StoreError::Corrupt(format!("idempotency key {}: {e}", key.key)))?;
    Ok(Appended {
        items,
        replayed: true,
    })
}

/// What a key's response records of the run its request created.
pub(super) fn run_response(run_id: Uuid) -> String {
    json!({ "run_id": run_id }).to_string()
}

/// The run a request with an Idempotency-Key created, from the key's stored response.
pub(super) fn replayed_run_id(response: &str) -> Result<Uuid, StoreError> {
    serde_json::from_str::<serde_json::Value>(response)
        .ok()
        .and_then(|first| {
            first["run_id"]
                .as_str()
                .and_then(|id| Uuid::parse_str(id).ok())
        })
        .ok_or_else(|| StoreError::Corrupt(format!("idempotency response `{response}`")))
}
