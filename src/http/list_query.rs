//! The query of a listing: paging, order and metadata filters, each checked and named
//! when it is wrong.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use utoipa::openapi::path::{Parameter, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::IntoParams;

use super::doc_params::query_param;
use super::error::ApiError;
use crate::model::{Cursor, Metadata, Order, OwnerId, Owners, PageRequest, SessionFilter};
use crate::store::StoreError;

/// The query of a listing: `limit`, `order`, `after`/`before` and, for sessions,
/// `metadata[KEY]=VALUE`, `app_id` and `user_id` filters. Unknown parameters never get
/// here (`query_params` refuses them).
pub struct ListQuery {
    limit: u32,
    order: Option<Order>,
    cursor: Option<Cursor>,
    metadata: Vec<(String, String)>,
    owners: Owners,
    created_after: Option<DateTime<Utc>>,
}

impl ListQuery {
    /// The sessions a listing keeps.
    pub fn session_filter(&self) -> SessionFilter {
        SessionFilter { metadata: self.metadata.clone(), owners: self.owners.clone() }
    }

    /// The page to read, in `default_order` unless the query chose one.
    pub fn page(&self, default_order: Order) -> PageRequest {
        PageRequest {
            limit: self.limit,
            order: self.order.unwrap_or(default_order),
            cursor: self.cursor.clone(),
            created_after: self.created_after,
        }
    }

    /// Maps a store error of this listing, naming the cursor parameter when the cursor
    /// is what was wrong.
    pub fn store_error(&self, error: StoreError, session_id: Option<&str>) -> ApiError {
        match (error, &self.cursor) {
            (StoreError::UnknownCursor, Some(Cursor::After(id))) => {
                ApiError::invalid("after", format!("no row with id `{id}` in this listing"))
            }
            (StoreError::UnknownCursor, Some(Cursor::Before(id))) => {
                ApiError::invalid("before", format!("no row with id `{id}` in this listing"))
            }
            (error, _) => match session_id {
                Some(session_id) => ApiError::from_store(error, session_id, None),
                None => error.into(),
            },
        }
    }

    pub fn parse(query: &str) -> Result<Self, ApiError> {
        let mut limit = PageRequest::DEFAULT_LIMIT;
        let mut order = None;
        let mut after = None;
        let mut before = None;
        let mut metadata = Vec::new();
        let mut owners = Owners::default();
        let mut created_after = None;
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            match &*name {
                "limit" => limit = page_limit(&value, PageRequest::MAX_LIMIT)?,
                "order" => order = Some(page_order(&value)?),
                "after" => after = Some(cursor_id("after", value.into_owned())?),
                "before" => before = Some(cursor_id("before", value.into_owned())?),
                "created_after" => created_after = Some(instant("created_after", &value)?),
                "app_id" => owners.app_id = Some(OwnerId::parse("app_id", value.into_owned())?),
                "user_id" => owners.user_id = Some(OwnerId::parse("user_id", value.into_owned())?),
                _ => {
                    if let Some(key) =
                        name.strip_prefix("metadata[").and_then(|rest| rest.strip_suffix(']'))
                    {
                        metadata.push(metadata_filter(key, value.into_owned())?);
                    }
                }
            }
        }
        if metadata.len() > Metadata::MAX_KEYS {
            return Err(ApiError::invalid(
                "metadata",
                format!("at most {} filters are allowed", Metadata::MAX_KEYS),
            ));
        }
        let cursor = match (after, before) {
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid("before", "cannot be combined with `after`"))
            }
            (Some(id), None) => Some(Cursor::After(id)),
            (None, Some(id)) => Some(Cursor::Before(id)),
            (None, None) => None,
        };
        Ok(Self { limit, order, cursor, metadata, owners, created_after })
    }
}

/// A `limit` parameter: a page size from 1 to `max`.
pub fn page_limit(value: &str, max: u32) -> Result<u32, ApiError> {
    value.parse().ok().filter(|n| (1..=max).contains(n)).ok_or_else(|| {
        ApiError::invalid("limit", format!("must be an integer from 1 to {max}, got `{value}`"))
    })
}

/// An instant in RFC 3339, such as `2026-11-22T10:00:00Z`.
fn instant(field: &str, value: &str) -> Result<DateTime<Utc>, ApiError> {
    DateTime::parse_from_rfc3339(value)
        .map(|at| at.with_timezone(&Utc))
        .map_err(|_| ApiError::invalid(field, format!("must be an RFC 3339 time, got `{value}`")))
}

/// An `order` parameter.
pub fn page_order(value: &str) -> Result<Order, ApiError> {
    match value {
        "asc" => Ok(Order::Asc),
        "desc" => Ok(Order::Desc),
        _ => Err(ApiError::invalid("order", format!("must be `asc` or `desc`, got `{value}`"))),
    }
}

/// An `after` or `before` parameter.
pub fn cursor_id(field: &str, id: String) -> Result<String, ApiError> {
    if id.is_empty() || id.contains('\0') {
        return Err(ApiError::invalid(field, "must be a non-empty id"));
    }
    Ok(id)
}

/// A `metadata[KEY]=VALUE` filter. A pair that no metadata can hold would match nothing;
/// it is refused instead, as is a query with more filters than a session can have keys.
fn metadata_filter(key: &str, value: String) -> Result<(String, String), ApiError> {
    let field = format!("metadata[{key}]");
    let pair = Metadata::new(BTreeMap::from([(key.to_owned(), value)]))
        .map_err(|e| ApiError::invalid(&field, e.message))?;
    let (key, value) = pair.iter().next().expect("one pair");
    Ok((key.clone(), value.clone()))
}

impl<S: Send + Sync> FromRequestParts<S> for ListQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        ListQuery::parse(parts.uri.query().unwrap_or_default())
    }
}

/// Documents the paging parameters for the OpenAPI document.
impl IntoParams for ListQuery {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let limit = ObjectBuilder::new()
            .schema_type(Type::Integer)
            .minimum(Some(1))
            .maximum(Some(PageRequest::MAX_LIMIT))
            .default(Some(PageRequest::DEFAULT_LIMIT.into()));
        let order = string().enum_values(Some(["asc", "desc"]));
        vec![
            query_param("limit", limit, "How many rows a page holds."),
            query_param(
                "order",
                order,
                "Sessions are listed newest first (`desc`) and items oldest first (`asc`) unless this says otherwise.",
            ),
            query_param("after", cursor(), "Return the page that follows the row with this id."),
            query_param("before", cursor(), "Return the page that precedes the row with this id."),
        ]
    }
}

pub(super) fn string() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String)
}

/// A cursor: the id of a row, never empty nor holding NUL.
pub(super) fn cursor() -> ObjectBuilder {
    string().min_length(Some(1)).pattern(Some("^[^\\u0000]+$"))
}
