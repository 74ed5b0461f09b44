//! How long a session is kept: `expires_after` and the server's default for it.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::field::InvalidField;

/// The longest retention a session may ask for: 100 years, so that an expiry time
/// always fits both databases' timestamps.
pub const MAX_EXPIRES_AFTER_SECS: u64 = 100 * 365 * 24 * 3600;

/// What a session's expiry counts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Anchor {
    /// The last append or run: the session expires after `seconds` of inactivity.
    LastActiveAt,
    /// The session's creation: it expires `seconds` after it was made, whatever happens.
    CreatedAt,
}

impl Anchor {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LastActiveAt => "last_active_at",
            Self::CreatedAt => "created_at",
        }
    }

    pub fn parse(stored: &str) -> Option<Self> {
        match stored {
            "last_active_at" => Some(Self::LastActiveAt),
            "created_at" => Some(Self::CreatedAt),
            _ => None,
        }
    }
}

/// A session's retention: it is deleted `seconds` after its anchor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"anchor": "last_active_at", "seconds": 2592000}))]
pub struct ExpiresAfter {
    pub anchor: Anchor,
    /// 1 to 3153600000 (100 years).
    #[serde(deserialize_with = "super::whole_number::required")]
    #[schema(minimum = 1, maximum = 3153600000_u64)]
    pub seconds: u64,
}

impl ExpiresAfter {
    /// The server default of `SESSION_EXPIRES_AFTER_SECS`, anchored on activity.
    pub fn inactivity(seconds: u64) -> Self {
        Self { anchor: Anchor::LastActiveAt, seconds }
    }

    pub fn check(self, field: &str) -> Result<Self, InvalidField> {
        if !(1..=MAX_EXPIRES_AFTER_SECS).contains(&self.seconds) {
            return Err(InvalidField::new(
                format!("{field}.seconds"),
                format!("must be from 1 to {MAX_EXPIRES_AFTER_SECS} (100 years)"),
            ));
        }
        Ok(self)
    }

    /// When a session with this retention, made at `created_at` and last active at
    /// `last_active_at`, expires.
    pub fn expires_at(
        self, created_at: DateTime<Utc>, last_active_at: DateTime<Utc>,
    ) -> DateTime<Utc> {
        let from = match self.anchor {
            Anchor::LastActiveAt => last_active_at,
            Anchor::CreatedAt => created_at,
        };
        from + Duration::seconds(self.seconds as i64)
    }
}
