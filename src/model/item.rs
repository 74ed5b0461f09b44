use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;
use uuid::Uuid;

use super::field::InvalidField;

/// One entry of a session's history.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "id": "019a9f0e-2b1c-7cc2-9a51-3f1f2f0c8a10",
    "seq": 1,
    "created_at": "2026-11-22T10:00:00.000000Z",
    "run_id": null,
    "item": {"role": "user", "content": "Hello"}
}))]
pub struct Item {
    /// A UUIDv7 given by the service.
    pub id: Uuid,
    /// Strictly increasing within the session; never reused, even after a pop.
    pub seq: i64,
    pub created_at: DateTime<Utc>,
    /// The run that produced the item; null for items appended by a client.
    #[schema(required = true)]
    pub run_id: Option<Uuid>,
    /// The stored JSON object, byte for byte as it was given.
    #[schema(value_type = Object)]
    pub item: Box<RawValue>,
}

/// A JSON object to append. It is kept as the client's own text, so that it comes back
/// exactly as given: key order, number precision and escapes included.
#[derive(Debug, Clone)]
pub struct ItemBody(Box<RawValue>);

impl ItemBody {
    pub fn new(field: &str, raw: Box<RawValue>) -> Result<Self, InvalidField> {
        if !raw.get().trim_start().starts_with('{') {
            return Err(InvalidField::new(field, "must be a JSON object"));
        }
        Ok(Self(raw))
    }

    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    pub fn into_raw(self) -> Box<RawValue> {
        self.0
    }
}
