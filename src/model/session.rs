use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::field::{check_identifier, InvalidField};
use super::metadata::{Metadata, MetadataPatch};
use super::owner::Owners;
use super::retention::ExpiresAfter;

/// The tenant every request acts as until API-key authentication exists.
pub const DEFAULT_TENANT: &str = "default";

/// A session id: chosen by the client or a generated UUIDv7.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionId(String);

impl SessionId {
    pub fn parse(field: &str, value: String) -> Result<Self, InvalidField> {
        check_identifier(field, &value)?;
        Ok(Self(value))
    }

    /// A UUIDv7, so generated ids sort by creation time.
    pub fn generate() -> Self {
        Self(Uuid::now_v7().to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The id of the agent a session runs with by default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentId(String);

impl AgentId {
    pub fn parse(field: &str, value: String) -> Result<Self, InvalidField> {
        check_identifier(field, &value)?;
        Ok(Self(value))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// Token and call counts, summed over the runs of a session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub total_tokens: i64,
    pub llm_calls: i64,
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.total_tokens += other.total_tokens;
        self.llm_calls += other.llm_calls;
    }
}

/// A forked session's origin: the session it copied and the newest item it copied
/// (null when it copied none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkedFrom {
    pub session_id: String,
    #[schema(required = true)]
    pub item_id: Option<Uuid>,
}

/// A conversation: its metadata, its agent and counters over its items and runs.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "id": "support-4711",
    "created_at": "2026-11-22T10:00:00.000000Z",
    "updated_at": "2026-11-22T10:05:00.000000Z",
    "metadata": {"user": "alice"},
    "agent_id": null,
    "app_id": "support-bot",
    "user_id": "alice",
    "item_count": 2,
    "forked_from": null,
    "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "llm_calls": 0},
    "last_active_at": "2026-11-22T10:05:00.000000Z",
    "expires_after": {"anchor": "last_active_at", "seconds": 2592000},
    "expires_at": "2026-12-22T10:05:00.000000Z"
}))]
pub struct Session {
    pub id: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub metadata: Metadata,
    #[schema(required = true)]
    pub agent_id: Option<String>,
    /// The app the session belongs to, whose state document its appends may change.
    #[schema(required = true)]
    pub app_id: Option<String>,
    /// The user of that app the session belongs to.
    #[schema(required = true)]
    pub user_id: Option<String>,
    pub item_count: i64,
    /// Set when the session was made by forking another.
    #[schema(required = true)]
    pub forked_from: Option<ForkedFrom>,
    pub usage: Usage,
    /// The last append or run.
    pub last_active_at: DateTime<Utc>,
    /// When the session is deleted, counted from `created_at` or `last_active_at`; null
    /// keeps it until it is deleted.
    #[schema(required = true)]
    pub expires_after: Option<ExpiresAfter>,
    /// From this time on the session is gone (404), unless a run of it is still
    /// unfinished; null when it never expires.
    #[schema(required = true)]
    pub expires_at: Option<DateTime<Utc>>,
    /// Raised by one with every committed change to the session, its state or its
    /// items; the `ETag` of its reads and writes, what `If-Match` compares.
    pub revision: i64,
}

/// What a new session starts with.
#[derive(Debug, Clone)]
pub struct NewSession {
    pub id: SessionId,
    pub metadata: Metadata,
    pub agent_id: Option<AgentId>,
    pub owners: Owners,
    /// `None` takes the server's default; `Some(None)` keeps the session forever.
    pub expires_after: Option<Option<ExpiresAfter>>,
}

/// What a listing of sessions keeps: those whose metadata holds every pair, of the
/// owners named.
#[derive(Debug, Clone, Default)]
pub struct SessionFilter {
    pub metadata: Vec<(String, String)>,
    pub owners: Owners,
}

/// A change to a session: `None` leaves a field alone.
#[derive(Debug, Clone, Default)]
pub struct SessionPatch {
    pub metadata: Option<MetadataPatch>,
    /// `Some(None)` detaches the agent.
    pub agent_id: Option<Option<AgentId>>,
    /// `Some(None)` keeps the session until it is deleted.
    pub expires_after: Option<Option<ExpiresAfter>>,
}

impl SessionPatch {
    /// The metadata and agent a session has after this patch.
    pub fn apply(
        self, mut metadata: Metadata, agent_id: Option<String>,
    ) -> Result<(Metadata, Option<String>), InvalidField> {
        if let Some(patch) = self.metadata {
            metadata.apply(patch)?;
        }
        let agent_id = match self.agent_id {
            Some(new) => new.map(AgentId::into_string),
            None => agent_id,
        };
        Ok((metadata, agent_id))
    }
}
