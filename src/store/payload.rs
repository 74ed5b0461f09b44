//! The one seam every stored conversation payload passes through. What a conversation
//! says (item JSON, idempotency responses, run documents, run events, compaction
//! summaries) is written with
//! [`PayloadCodec::seal`] and read with [`PayloadCodec::open`], on both backends, so a
//! change to how it is kept at rest (encryption, compression) is made here alone.

use std::borrow::Cow;

use super::StoreError;

/// Where a payload is kept. A sealed value is bound to its tenant and its column, so
/// that it cannot be read back from anywhere else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    ItemBody,
    IdempotencyResponse,
    RunBody,
    RunEventData,
    CompactionSummary,
}

impl Column {
    /// The table and column, as a stable name.
    pub fn name(self) -> &'static str {
        match self {
            Self::ItemBody => "items.body",
            Self::IdempotencyResponse => "idempotency_keys.response",
            Self::RunBody => "runs.body",
            Self::RunEventData => "run_events.data",
            Self::CompactionSummary => "compactions.summary",
        }
    }
}

/// Turns payloads into what is stored and back. Today values are stored as they are.
#[derive(Debug, Clone, Default)]
pub struct PayloadCodec {}

impl PayloadCodec {
    /// The stored form of `plain` (borrowed or owned), a payload of `tenant` kept in
    /// `column`.
    pub fn seal<'a>(
        &self,
        _tenant: &str,
        _column: Column,
        plain: impl Into<Cow<'a, str>>,
    ) -> Result<Cow<'a, str>, StoreError> {
        Ok(plain.into())
    }

    /// The payload a stored value of `tenant` in `column` holds.
    pub fn open(
        &self,
        _tenant: &str,
        _column: Column,
        stored: String,
    ) -> Result<String, StoreError> {
        Ok(stored)
    }
}
