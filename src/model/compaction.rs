//! Compactions and forks: a session's older items summarised, and a session started from
//! a copy of another's history.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::field::InvalidField;
use super::idempotency::IdempotencyKey;
use super::metadata::Metadata;
use super::session::{SessionId, Usage};

/// `keep_recent_items` when neither the request nor the agent sets it.
pub const DEFAULT_KEEP_RECENT_ITEMS: u32 = 10;
/// The most recent items a compaction may be asked to keep.
pub const MAX_KEEP_RECENT_ITEMS: u32 = 1000;

/// A summary of a session's items up to and including `through_seq`. The items stay; the
/// summary stands in for them in what runs send to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Compaction {
    pub id: Uuid,
    pub session_id: String,
    pub created_at: DateTime<Utc>,
    /// The run that compacted before calling the model; null for `POST …/compact`.
    #[schema(required = true)]
    pub run_id: Option<Uuid>,
    /// The newest item the summary covers.
    pub through_item_id: Uuid,
    pub through_seq: i64,
    /// How many items the summary stands for, those of a folded-in earlier summary
    /// included.
    pub items_compacted: i64,
    pub summary: String,
    /// The model that wrote the summary.
    pub model: String,
    /// The summarising call's usage.
    pub usage: Usage,
}

/// Where a fork's copy of the history ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForkPoint {
    /// Every item.
    All,
    /// The items up to and including this one.
    ThroughItem(Uuid),
    /// The history as it stood before this run's turn was appended.
    BeforeRun(Uuid),
    /// The history as it stood once this run's turn was appended.
    AfterRun(Uuid),
}

impl ForkPoint {
    /// The point a request names with at most one of its two selectors.
    pub fn from_request(
        through_item_id: Option<Uuid>, before_run_id: Option<Uuid>,
    ) -> Result<Self, InvalidField> {
        match (through_item_id, before_run_id) {
            (Some(_), Some(_)) => Err(InvalidField::new(
                "before_run_id",
                "give through_item_id or before_run_id, not both",
            )),
            (Some(item), None) => Ok(Self::ThroughItem(item)),
            (None, Some(run)) => Ok(Self::BeforeRun(run)),
            (None, None) => Ok(Self::All),
        }
    }
}

/// A fork to make of a session.
#[derive(Debug, Clone)]
pub struct NewFork {
    pub id: SessionId,
    /// The source's metadata when absent.
    pub metadata: Option<Metadata>,
    pub point: ForkPoint,
    pub idempotency: Option<IdempotencyKey>,
}
