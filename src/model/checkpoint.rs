//! Checkpoints of an agent's execution, as LangGraph keeps them: per session and
//! namespace, each with a client-chosen id, a parent, an opaque typed payload, JSON
//! metadata, the versions of the channels it holds (their values stored once per
//! version, as blobs) and the pending writes of its tasks.

use std::collections::BTreeMap;

use base64::engine::{GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;
use utoipa::{PartialSchema, ToSchema};

use super::InvalidField;

/// The most characters of a checkpoint's id, its namespace, or a task's id or path.
const MAX_NAME_CHARS: usize = 1024;

/// Characters a name may hold: any but control characters.
pub const NAME_PATTERN: &str = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$";

/// Standard base64 with its padding.
const BASE64_PATTERN: &str = "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$";

/// Decodes what [`BASE64_PATTERN`] admits, unused bits of the last symbol included.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
);

/// The schema of a checkpoint's id, a namespace, a task's id or path or a run id: at
/// most 1024 characters, none a control character (a namespace or a task path may be
/// empty: `min_length` 0).
pub struct CheckpointName;

impl CheckpointName {
    pub fn schema_with(min_length: usize) -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(min_length))
            .max_length(Some(MAX_NAME_CHARS))
            .pattern(Some(NAME_PATTERN))
            .into()
    }
}

impl PartialSchema for CheckpointName {
    fn schema() -> RefOr<Schema> {
        Self::schema_with(1)
    }
}

impl ToSchema for CheckpointName {}

/// The schema of a namespace or a task's path: a [`CheckpointName`] that may be empty.
pub struct CheckpointPath;

impl PartialSchema for CheckpointPath {
    fn schema() -> RefOr<Schema> {
        CheckpointName::schema_with(0)
    }
}

impl ToSchema for CheckpointPath {}

/// Base64 data, as its schema says it.
pub struct Base64Data;

impl PartialSchema for Base64Data {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(BASE64_PATTERN))
            .content_encoding("base64")
            .into()
    }
}

impl ToSchema for Base64Data {}

/// A value in the framework's own serialization: its type tag and its bytes in base64,
/// kept byte for byte (none for a value of no bytes, such as an empty channel).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TypedValue {
    /// The serializer's type tag, such as `msgpack` or `json`.
    #[serde(rename = "type")]
    #[schema(value_type = CheckpointName)]
    pub kind: String,
    /// The bytes, in standard base64 (with padding).
    #[schema(required = true, value_type = Option<Base64Data>)]
    pub data: Option<String>,
}

/// One channel's value at one version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChannelBlob {
    pub channel: String,
    pub version: String,
    #[serde(flatten)]
    pub value: TypedValue,
}

/// A write of a task, pending on a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PendingWrite {
    #[schema(value_type = CheckpointName)]
    pub task_id: String,
    #[serde(default)]
    #[schema(value_type = CheckpointPath)]
    pub task_path: String,
    /// Its place among the task's writes; a negative one (an error, an interrupt)
    /// replaces an earlier write at that place, a positive one keeps the first.
    pub idx: i64,
    pub channel: String,
    #[serde(flatten)]
    pub value: TypedValue,
}

/// A checkpoint to store.
#[derive(Debug, Clone)]
pub struct NewCheckpoint {
    pub namespace: String,
    pub id: String,
    pub parent_id: Option<String>,
    pub payload: TypedValue,
    pub metadata: Map<String, Value>,
    pub channel_versions: BTreeMap<String, String>,
    /// Values of the channels this checkpoint changed; those it did not change were
    /// stored with an earlier one.
    pub blobs: Vec<ChannelBlob>,
}

/// A stored checkpoint with its channel values and pending writes.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Checkpoint {
    pub session_id: String,
    pub namespace: String,
    pub id: String,
    #[schema(required = true)]
    pub parent_id: Option<String>,
    pub checkpoint: TypedValue,
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    pub channel_versions: BTreeMap<String, String>,
    /// The values of the channels in `channel_versions`, each at its version.
    pub blobs: Vec<ChannelBlob>,
    /// The pending writes, by task and place.
    pub writes: Vec<PendingWrite>,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// Which checkpoints a listing keeps, newest first.
#[derive(Debug, Clone, Default)]
pub struct CheckpointFilter {
    /// One namespace; none: every namespace.
    pub namespace: Option<String>,
    /// Only checkpoints whose id sorts before this one.
    pub before: Option<String>,
    /// Only checkpoints whose metadata has each of these top-level members, equal as JSON.
    pub metadata: Map<String, Value>,
    pub limit: Option<u32>,
}

impl CheckpointFilter {
    /// Whether a checkpoint's metadata passes the filter: a member filtered for `null`
    /// also passes where the metadata lacks it.
    pub fn admits(&self, metadata: &Map<String, Value>) -> bool {
        self.metadata.iter().all(|(key, value)| metadata.get(key).unwrap_or(&Value::Null) == value)
    }
}

/// Checks a name (`field`): 1 to 1024 bytes without control characters; a namespace
/// (`empty_ok`) may be empty.
pub fn check_name(field: &str, value: &str, empty_ok: bool) -> Result<(), InvalidField> {
    if value.is_empty() && !empty_ok {
        return Err(InvalidField::new(field, "must not be empty"));
    }
    if value.chars().count() > MAX_NAME_CHARS || value.chars().any(char::is_control) {
        return Err(InvalidField::new(
            field,
            format!("must be at most {MAX_NAME_CHARS} characters without control characters"),
        ));
    }
    Ok(())
}

impl TypedValue {
    /// Checks the value at `field`: a type tag, and base64 that decodes.
    pub fn check(&self, field: &str) -> Result<(), InvalidField> {
        check_name(&format!("{field}.type"), &self.kind, false)?;
        if let Some(data) = &self.data {
            if BASE64.decode(data).is_err() {
                return Err(InvalidField::new(format!("{field}.data"), "must be standard base64"));
            }
        }
        Ok(())
    }
}

impl NewCheckpoint {
    /// Checks every part; a blob must be of a channel at the version this checkpoint
    /// names for it.
    pub fn check(&self) -> Result<(), InvalidField> {
        check_name("namespace", &self.namespace, true)?;
        check_name("checkpoint_id", &self.id, false)?;
        if let Some(parent) = &self.parent_id {
            check_name("parent_id", parent, false)?;
        }
        self.payload.check("checkpoint")?;
        if self.payload.data.is_none() {
            return Err(InvalidField::new("checkpoint.data", "is required"));
        }
        for (n, blob) in self.blobs.iter().enumerate() {
            let field = format!("blobs[{n}]");
            blob.value.check(&field)?;
            if self.channel_versions.get(&blob.channel) != Some(&blob.version) {
                return Err(InvalidField::new(
                    field,
                    format!(
                        "channel `{}` at version `{}` is not in this checkpoint's channel_versions",
                        blob.channel, blob.version
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl PendingWrite {
    /// Checks the write at `field`.
    pub fn check(&self, field: &str) -> Result<(), InvalidField> {
        check_name("task_id", &self.task_id, false)?;
        check_name("task_path", &self.task_path, true)?;
        self.value.check(field)
    }
}
