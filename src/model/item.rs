use chrono::{DateTime, Utc};
use std::fmt;

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;
use uuid::Uuid;

use super::field::{json_error_message, InvalidField};

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
    /// Given by the service: a UUIDv7, or for an item a run appended a UUID derived from
    /// the run and the item's place in its turn (the id its response showed).
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
    /// The most items one request may add.
    pub const MAX_BATCH: usize = 1000;

    /// A batch of 1 to [`Self::MAX_BATCH`] items, named `field[i]` when one is refused.
    pub fn batch(field: &str, items: Vec<Box<RawValue>>) -> Result<Vec<Self>, InvalidField> {
        if items.is_empty() || items.len() > Self::MAX_BATCH {
            return Err(InvalidField::new(
                field,
                format!("must hold 1 to {} items, got {}", Self::MAX_BATCH, items.len()),
            ));
        }
        items
            .into_iter()
            .enumerate()
            .map(|(i, raw)| Self::new(&format!("{field}[{i}]"), raw))
            .collect()
    }

    /// Accepts a JSON object that any JSON library can read back: the raw text was only
    /// checked for syntax, so escapes, nesting depth and number range are checked here.
    pub fn new(field: &str, raw: Box<RawValue>) -> Result<Self, InvalidField> {
        if !raw.get().trim_start().starts_with('{') {
            return Err(InvalidField::new(field, "must be a JSON object"));
        }
        serde_json::from_str::<Readable>(raw.get())
            .map_err(|e| InvalidField::new(field, json_error_message(&e)))?;
        Ok(Self(raw))
    }

    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    pub fn into_raw(self) -> Box<RawValue> {
        self.0
    }

    pub fn to_raw(&self) -> Box<RawValue> {
        self.0.clone()
    }
}

/// Reads a whole JSON value without keeping it, so the parser decodes every string
/// (rejecting lone surrogates), applies its nesting limit (128) and converts every number
/// (rejecting those beyond the range of a double).
struct Readable;

impl<'de> Deserialize<'de> for Readable {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(Readable)
    }
}

impl<'de> Visitor<'de> for Readable {
    type Value = Readable;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Readable, E> {
        Ok(Readable)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Readable, E> {
        Ok(Readable)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Readable, E> {
        Ok(Readable)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Readable, E> {
        Ok(Readable)
    }

    fn visit_str<E>(self, _: &str) -> Result<Readable, E> {
        Ok(Readable)
    }

    fn visit_unit<E>(self) -> Result<Readable, E> {
        Ok(Readable)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Readable, A::Error> {
        while seq.next_element::<Readable>()?.is_some() {}
        Ok(Readable)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Readable, A::Error> {
        while map.next_entry::<Readable, Readable>()?.is_some() {}
        Ok(Readable)
    }
}
