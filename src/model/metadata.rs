use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Schema, SchemaType, Type};
use utoipa::openapi::RefOr;
use utoipa::{PartialSchema, ToSchema};

use super::field::InvalidField;

const MAX_KEY_CHARS: usize = 64;
const MAX_VALUE_CHARS: usize = 512;

/// String key-value pairs a client attaches to a session, to find it again by them.
/// Always within the limits: at most 64 keys of 1–64 characters, values of at most 512.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Metadata(BTreeMap<String, String>);

impl Metadata {
    pub const MAX_KEYS: usize = 64;

    pub fn new(pairs: BTreeMap<String, String>) -> Result<Self, InvalidField> {
        let metadata = Self(pairs);
        metadata.check()?;
        Ok(metadata)
    }

    /// Applies a JSON merge patch (RFC 7396): a string sets a key, null removes it.
    pub fn apply(&mut self, patch: MetadataPatch) -> Result<(), InvalidField> {
        match patch {
            MetadataPatch::Clear => self.0.clear(),
            MetadataPatch::Merge(changes) => {
                for (key, value) in changes {
                    match value {
                        Some(value) => self.0.insert(key, value),
                        None => self.0.remove(&key),
                    };
                }
            }
        }
        self.check()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &String)> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn check(&self) -> Result<(), InvalidField> {
        if self.0.len() > Self::MAX_KEYS {
            return Err(InvalidField::new(
                "metadata",
                format!("at most {} keys are allowed, got {}", Self::MAX_KEYS, self.0.len()),
            ));
        }
        for (key, value) in &self.0 {
            let key_chars = key.chars().count();
            if key_chars == 0 || key_chars > MAX_KEY_CHARS {
                return Err(InvalidField::new(
                    "metadata",
                    format!(
                        "keys must be 1 to {MAX_KEY_CHARS} characters, `{key}` has {key_chars}"
                    ),
                ));
            }
            // Postgres cannot store U+0000 in text or jsonb.
            if key.contains('\0') {
                return Err(InvalidField::new("metadata", "keys must not contain U+0000"));
            }
            if value.contains('\0') {
                return Err(InvalidField::new(
                    format!("metadata.{key}"),
                    "values must not contain U+0000",
                ));
            }
            if value.chars().count() > MAX_VALUE_CHARS {
                return Err(InvalidField::new(
                    format!("metadata.{key}"),
                    format!("values must be at most {MAX_VALUE_CHARS} characters"),
                ));
            }
        }
        Ok(())
    }
}

impl PartialSchema for Metadata {
    fn schema() -> RefOr<Schema> {
        metadata_schema(false).into()
    }
}

impl ToSchema for Metadata {}

/// A JSON merge patch of metadata, as PATCH receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataPatch {
    /// `"metadata": null` removes every key.
    Clear,
    /// A string value sets its key, a null value removes it.
    Merge(BTreeMap<String, Option<String>>),
}

impl MetadataPatch {
    /// The patch a PATCH body's `metadata` gives (`null`: clear), each entry held to the
    /// limits of stored metadata; a null value checks its key only.
    pub fn from_request(
        patch: Option<BTreeMap<String, Option<String>>>,
    ) -> Result<Self, InvalidField> {
        let Some(changes) = patch else {
            return Ok(Self::Clear);
        };
        for (key, value) in &changes {
            let probe = value.clone().unwrap_or_default();
            Metadata::new(BTreeMap::from([(key.clone(), probe)]))?;
        }
        Ok(Self::Merge(changes))
    }
}

impl PartialSchema for MetadataPatch {
    fn schema() -> RefOr<Schema> {
        metadata_schema(true).into()
    }
}

impl ToSchema for MetadataPatch {}

fn metadata_schema(patch: bool) -> Schema {
    // A patch removes with null what the metadata holds as a string or an object.
    let null_in_patch = |kind: Type| {
        if patch {
            SchemaType::from_iter([kind, Type::Null])
        } else {
            SchemaType::new(kind)
        }
    };
    let value = ObjectBuilder::new()
        .schema_type(null_in_patch(Type::String))
        .max_length(Some(MAX_VALUE_CHARS))
        .pattern(Some("^[^\\u0000]*$"));
    let names = ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(MAX_KEY_CHARS))
        .pattern(Some("^[^\\u0000]*$"));
    let description = if patch {
        "A JSON merge patch of the metadata: a string sets a key, null removes it; \
         `null` for the whole object removes every key."
    } else {
        "String key-value pairs: at most 64 keys of 1 to 64 characters, values of at most 512."
    };
    let object = ObjectBuilder::new()
        .schema_type(null_in_patch(Type::Object))
        .description(Some(description))
        // A patch may name more keys than the limit (removals); the merged result may not.
        .max_properties((!patch).then_some(Metadata::MAX_KEYS))
        .property_names(Some(names))
        .additional_properties(Some(AdditionalProperties::RefOr(RefOr::T(value.into()))));
    object.into()
}
