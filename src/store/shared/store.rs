//! What a store is made with, the same on both backends.

use super::backend::{Store, MIGRATOR};
use crate::model::ExpiresAfter;
use crate::store::payload::PayloadCodec;

impl Store {
    /// Keeps payloads with `codec` from now on.
    pub fn with_codec(mut self, codec: PayloadCodec) -> Self {
        self.codec = codec;
        self
    }

    /// Gives sessions created without `expires_after` this retention.
    pub fn with_default_expiry(mut self, expiry: Option<ExpiresAfter>) -> Self {
        self.default_expiry = expiry;
        self
    }

    pub fn schema_version() -> i64 {
        MIGRATOR.migrations.last().map_or(0, |m| m.version)
    }
}
