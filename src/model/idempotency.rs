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

    pub fn new(
        key: &str,
        session_id: &SessionId,
        items: &[ItemBody],
    ) -> Result<Self, InvalidField> {
        if key.is_empty() || key.len() > Self::MAX_LEN || !key.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(InvalidField::new(
                "Idempotency-Key",
                "must be 1 to 255 visible ASCII characters",
            ));
        }
        let mut hasher = Sha256::new();
        hasher.update(session_id.as_str());
        for item in items {
            // JSON text never holds a NUL byte, so it marks item boundaries unambiguously.
            hasher.update([0]);
            hasher.update(item.as_str());
        }
        Ok(Self {
            key: key.to_owned(),
            fingerprint: hasher.finalize().to_vec(),
        })
    }
}
