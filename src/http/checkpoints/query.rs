//! The query of the checkpoint routes.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::Json;
use utoipa::openapi::path::{Parameter, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::{IntoParams, PartialSchema};

use super::CheckpointList;
use crate::http::doc_params::query_param as param;
use crate::http::error::{ApiError, Result};
use crate::http::list_query::page_limit;
use crate::model::{check_name, Checkpoint, CheckpointFilter, CheckpointName, CheckpointPath};

/// The query of checkpoint routes: `namespace` (absent on a listing: every namespace),
/// and on listings `before`, `limit` and a `metadata` filter.
#[derive(Debug, Default)]
pub struct CheckpointQuery {
    namespace: Option<String>,
    pub filter: CheckpointFilter,
    limit: u32,
}

impl<S: Send + Sync> FromRequestParts<S> for CheckpointQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self> {
        let mut query = Self { limit: 100, ..Self::default() };
        for (name, value) in
            form_urlencoded::parse(parts.uri.query().unwrap_or_default().as_bytes())
        {
            let value = value.into_owned();
            match &*name {
                "namespace" => {
                    check_name("namespace", &value, true)?;
                    query.namespace = Some(value);
                }
                "before" => {
                    check_name("before", &value, false)?;
                    query.filter.before = Some(value);
                }
                "limit" => query.limit = page_limit(&value, 1000)?,
                "metadata" => {
                    query.filter.metadata = serde_json::from_str(&value)
                        .map_err(|_| ApiError::invalid("metadata", "must be a JSON object"))?;
                }
                _ => {}
            }
        }
        query.filter.namespace = query.namespace.clone();
        query.filter.limit = Some(query.limit + 1);
        Ok(query)
    }
}

impl IntoParams for CheckpointQuery {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let limit =
            ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)).maximum(Some(1000));
        vec![
            param("namespace", CheckpointPath::schema(), "Only this namespace (empty: the root one); absent, every namespace"),
            param("before", CheckpointName::schema(), "Only checkpoints whose id sorts before this one"),
            param("limit", limit, "1 to 1000 (default 100)"),
            param("metadata", ObjectBuilder::new().schema_type(Type::String), "A JSON object: only checkpoints whose metadata has each of its members, equal as JSON (null also matches a missing member)"),
        ]
    }
}

impl CheckpointQuery {
    pub fn namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or_default()
    }

    /// The answer of a listing that read up to one more than its limit.
    pub fn answer(&self, mut data: Vec<Checkpoint>) -> Json<CheckpointList> {
        let has_more = data.len() > self.limit as usize;
        data.truncate(self.limit as usize);
        Json(CheckpointList::new(data, has_more))
    }
}
