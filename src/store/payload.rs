//! The one seam every stored conversation payload passes through. What a conversation
//! says (item JSON, idempotency responses, run documents, run events, compaction
//! summaries) is written with
//! [`PayloadCodec::seal`] and read with [`PayloadCodec::open`], on both backends, so a
//! change to how it is kept at rest (encryption, compression) is made here alone.

use std::borrow::Cow;
use std::sync::Arc;

use super::encryption::Keyring;
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
    AgentBody,
    SteeringBody,
    WebhookPayload,
    SessionState,
    OwnerState,
    CheckpointPayload,
    CheckpointBlob,
    CheckpointWrite,
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
            Self::AgentBody => "agents.body",
            Self::SteeringBody => "run_steering.body",
            Self::WebhookPayload => "webhook_deliveries.payload",
            Self::SessionState => "sessions.state",
            Self::OwnerState => "owner_states.state",
            Self::CheckpointPayload => "checkpoints.payload",
            Self::CheckpointBlob => "checkpoint_blobs.data",
            Self::CheckpointWrite => "checkpoint_writes.data",
        }
    }
}

/// Turns payloads into what is stored and back: encrypted under `ENCRYPTION_KEYS` when
/// it is set (see `encryption.rs`), else as they are.
#[derive(Debug, Clone, Default)]
pub struct PayloadCodec {
    keyring: Option<Arc<Keyring>>,
}

impl PayloadCodec {
    pub fn new(keyring: Option<Keyring>) -> Self {
        Self { keyring: keyring.map(Arc::new) }
    }

    /// The stored form of `plain` (borrowed or owned), a payload of `tenant` kept in
    /// `column`.
    pub fn seal<'a>(
        &self, tenant: &str, column: Column, plain: impl Into<Cow<'a, str>>,
    ) -> Result<Cow<'a, str>, StoreError> {
        let plain = plain.into();
        match &self.keyring {
            Some(keyring) => Ok(Cow::Owned(keyring.seal(&aad(tenant, column), &plain)?)),
            None => Ok(plain),
        }
    }

    /// The ids of the configured keys, the one that encrypts first.
    pub fn key_ids(&self) -> Vec<String> {
        self.keyring.iter().flat_map(|ring| ring.ids().map(str::to_owned)).collect()
    }

    /// How a value sealed now begins; none when values are stored plain.
    pub fn current_prefix(&self) -> Option<String> {
        self.keyring.as_ref().map(|ring| ring.current_prefix())
    }

    /// The payload a stored value of `tenant` in `column` holds.
    pub fn open(&self, tenant: &str, column: Column, stored: String) -> Result<String, StoreError> {
        Keyring::open(self.keyring.as_deref(), &aad(tenant, column), stored)
    }
}

/// What a sealed value is bound to: its tenant and its column.
fn aad(tenant: &str, column: Column) -> String {
    format!("{tenant}/{}", column.name())
}
