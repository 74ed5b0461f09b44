//! Where encrypted values are kept, counted by key id, and rewritten under the newest
//! key (`agent-sessions reencrypt`).

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::payload::Column;
use super::Result;

/// Every column that holds conversation payloads: where it is read from and which
/// tenant each row belongs to.
pub(super) struct PayloadColumn {
    pub column: Column,
    pub table: &'static str,
    pub value: &'static str,
    /// The table under its alias, joined to what gives the row's tenant.
    pub from: &'static str,
    pub alias: &'static str,
    pub tenant: &'static str,
}

pub(super) const PAYLOAD_COLUMNS: [PayloadColumn; 13] = [
    PayloadColumn {
        column: Column::SessionState,
        table: "sessions",
        value: "state",
        from: "sessions p",
        alias: "p",
        tenant: "p.tenant_id",
    },
    PayloadColumn {
        column: Column::CheckpointPayload,
        table: "checkpoints",
        value: "payload",
        from: "checkpoints p",
        alias: "p",
        tenant: "p.tenant_id",
    },
    PayloadColumn {
        column: Column::CheckpointBlob,
        table: "checkpoint_blobs",
        value: "data",
        from: "checkpoint_blobs p",
        alias: "p",
        tenant: "p.tenant_id",
    },
    PayloadColumn {
        column: Column::CheckpointWrite,
        table: "checkpoint_writes",
        value: "data",
        from: "checkpoint_writes p",
        alias: "p",
        tenant: "p.tenant_id",
    },
    PayloadColumn {
        column: Column::OwnerState,
        table: "owner_states",
        value: "state",
        from: "owner_states p",
        alias: "p",
        tenant: "p.tenant_id",
    },
    PayloadColumn {
        column: Column::ItemBody,
        table: "items",
        value: "body",
        from: "items p",
        alias: "p",
        tenant: "p.tenant_id",
    },
    PayloadColumn {
        column: Column::IdempotencyResponse,
        table: "idempotency_keys",
        value: "response",
        from: "idempotency_keys p",
        alias: "p",
        tenant: "p.tenant_id",
    },
    PayloadColumn {
        column: Column::RunBody,
        table: "runs",
        value: "body",
        from: "runs p",
        alias: "p",
        tenant: "p.tenant_id",
    },
    PayloadColumn {
        column: Column::RunEventData,
        table: "run_events",
        value: "data",
        from: "run_events p join runs r on r.pk = p.run_pk",
        alias: "p",
        tenant: "r.tenant_id",
    },
    PayloadColumn {
        column: Column::CompactionSummary,
        table: "compactions",
        value: "summary",
        from: "compactions p",
        alias: "p",
        tenant: "p.tenant_id",
    },
    PayloadColumn {
        column: Column::AgentBody,
        table: "agents",
        value: "body",
        from: "agents p",
        alias: "p",
        tenant: "p.tenant_id",
    },
    PayloadColumn {
        column: Column::SteeringBody,
        table: "run_steering",
        value: "body",
        from: "run_steering p join runs r on r.pk = p.run_pk",
        alias: "p",
        tenant: "r.tenant_id",
    },
    PayloadColumn {
        column: Column::WebhookPayload,
        table: "webhook_deliveries",
        value: "payload",
        from: "webhook_deliveries p",
        alias: "p",
        tenant: "p.tenant_id",
    },
];

/// How far `reencrypt` has come: values rewritten of those it found not under the
/// current key, and the column it is working on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub column: &'static str,
    pub done: u64,
    pub total: u64,
}

#[async_trait]
pub trait AtRestStore: Send + Sync {
    /// The stored payload values by the id of the key they are under (`None`: plain).
    /// Scans every payload column.
    async fn count_values_by_key(&self) -> Result<BTreeMap<Option<String>, u64>>;

    /// The configured key ids, the one that encrypts first.
    fn key_ids(&self) -> Vec<String>;

    /// Rewrites every value not under the current key, `batch` values per short
    /// transaction; reports after each batch. A value changed or deleted meanwhile is
    /// left as it is (what replaced it is under the current key), so this may run beside
    /// the service, and again after a kill. Returns how many values it rewrote.
    async fn reencrypt(
        &self, batch: usize, progress: &(dyn Fn(Progress) + Send + Sync),
    ) -> Result<u64>;
}
