use sha2::{Digest, Sha256};

use super::field::InvalidField;
use super::item::ItemBody;
use super::session::SessionId;

/// An `Idempotency-Key` with the fingerprint of the request it came with: a retry must
/// carry the same key and the same request to be answered with the first response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey {
    pub key: String,
    pub fingerprint: Vec<u8>,
}

impl IdempotencyKey {
    const MAX_LEN: usize = 255;

    /// How long a key is remembered.
    pub fn ttl() -> chrono::TimeDelta {
        chrono::TimeDelta::hours(24)
    }

    /// The key of an append of `items` to the session.
    pub fn new(
        key: &str, session_id: &SessionId, items: &[ItemBody],
    ) -> Result<Self, InvalidField> {
        Self::for_append(key, session_id, items, None)
    }

    /// The key of an append of `items` with the `rest` of its request (a state change,
    /// a condition), which none of the plain appends before it had.
    pub fn for_append(
        key: &str, session_id: &SessionId, items: &[ItemBody], rest: Option<&str>,
    ) -> Result<Self, InvalidField> {
        let mut hasher = Sha256::new();
        hasher.update(session_id.as_str());
        for item in items {
            // JSON text never holds a NUL byte, so it marks item boundaries unambiguously.
            hasher.update([0]);
            hasher.update(item.as_str());
        }
        if let Some(rest) = rest {
            hasher.update([0, 0]);
            hasher.update(rest);
        }
        Self::checked(key, hasher)
    }

    /// The key of a new run on the session, asked for with the JSON `body`.
    pub fn for_run(key: &str, session_id: &SessionId, body: &str) -> Result<Self, InvalidField> {
        Self::for_request(b"run\0", key, session_id, body)
    }

    /// The key of a fork of the session, asked for with the JSON `body`.
    pub fn for_fork(key: &str, session_id: &SessionId, body: &str) -> Result<Self, InvalidField> {
        Self::for_request(b"fork\0", key, session_id, body)
    }

    /// The key of another write on the session: `target` names the route and what of the
    /// session it writes, `body` is the request's JSON (empty without one).
    pub fn for_write(
        key: &str, session_id: &SessionId, target: &str, body: &str,
    ) -> Result<Self, InvalidField> {
        Self::for_request(format!("write\0{target}\0").as_bytes(), key, session_id, body)
    }

    /// The key of a request of `kind` on the session. The kind marks it apart from
    /// appends and other kinds, whose keys share the tenant's key space.
    fn for_request(
        kind: &[u8], key: &str, session_id: &SessionId, body: &str,
    ) -> Result<Self, InvalidField> {
        let mut hasher = Sha256::new();
        hasher.update(kind);
        hasher.update(session_id.as_str());
        hasher.update([0]);
        hasher.update(body);
        Self::checked(key, hasher)
    }

    fn checked(key: &str, request: Sha256) -> Result<Self, InvalidField> {
        if key.is_empty() || key.len() > Self::MAX_LEN || !key.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(InvalidField::new(
                "Idempotency-Key",
                "must be 1 to 255 visible ASCII characters",
            ));
        }
        Ok(Self { key: key.to_owned(), fingerprint: request.finalize().to_vec() })
    }
}
