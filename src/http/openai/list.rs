//! The paging of OpenAI's lists: `after`, `limit` (1–100, default 20), `order` (default
//! `desc`) and `include`, which is accepted (these lists have nothing more to include)
//! and may come as `include[]`, the way OpenAI's clients send arrays.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::Serialize;
use utoipa::openapi::path::{Parameter, ParameterIn};
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
use utoipa::{IntoParams, ToSchema};

use crate::http::doc_params::query_param;
use crate::http::list_query::{cursor, cursor_id, page_limit, page_order, string};
use crate::http::ApiError;
use crate::model::{Cursor, Order, PageRequest};

const DEFAULT_LIMIT: u32 = 20;
const MAX_LIMIT: u32 = 100;

pub struct ListQuery {
    pub after: Option<String>,
    pub limit: u32,
    pub order: Order,
}

impl ListQuery {
    pub fn page(&self) -> PageRequest {
        PageRequest {
            limit: self.limit,
            order: self.order,
            cursor: self.after.clone().map(Cursor::After),
            created_after: None,
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ListQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let mut query = Self { after: None, limit: DEFAULT_LIMIT, order: Order::Desc };
        let text = parts.uri.query().unwrap_or_default();
        for (name, value) in form_urlencoded::parse(text.as_bytes()) {
            match &*name {
                "after" => query.after = Some(cursor_id("after", value.into_owned())?),
                "limit" => query.limit = page_limit(&value, MAX_LIMIT)?,
                "order" => query.order = page_order(&value)?,
                _ => {}
            }
        }
        Ok(query)
    }
}

impl IntoParams for ListQuery {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let limit = ObjectBuilder::new()
            .schema_type(Type::Integer)
            .minimum(Some(1))
            .maximum(Some(MAX_LIMIT))
            .default(Some(DEFAULT_LIMIT.into()));
        vec![
            query_param(
                "after",
                cursor(),
                "Return the items after this item id, in the order asked for.",
            ),
            query_param("limit", limit, "How many items a page holds."),
            query_param(
                "order",
                string().enum_values(Some(["asc", "desc"])).default(Some("desc".into())),
                "`desc` (newest first, the default) or `asc`.",
            ),
            include(),
        ]
    }
}

/// `include` alone, as reads of one item take it.
pub struct IncludeQuery;

impl IntoParams for IncludeQuery {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        vec![include()]
    }
}

fn include() -> Parameter {
    query_param(
        "include",
        ArrayBuilder::new().items(string()),
        "Accepted for OpenAI's clients; these items hold everything already.",
    )
}

/// A page of an OpenAI list.
#[derive(Serialize, ToSchema)]
#[schema(as = OpenAiList)]
pub struct List<T: Serialize> {
    /// `list`.
    pub object: &'static str,
    pub data: Vec<T>,
    #[schema(required = true)]
    pub first_id: Option<String>,
    #[schema(required = true)]
    pub last_id: Option<String>,
    pub has_more: bool,
}

impl List<serde_json::Value> {
    /// A page of items in OpenAI's shape, its ends named by their `id`s.
    pub fn of_items(data: Vec<serde_json::Value>, has_more: bool) -> Self {
        let id = |item: Option<&serde_json::Value>| {
            item.and_then(|i| i["id"].as_str()).map(str::to_owned)
        };
        let (first, last) = (id(data.first()), id(data.last()));
        Self::new(data, first, last, has_more)
    }
}

impl<T: Serialize> List<T> {
    pub fn new(
        data: Vec<T>, first_id: Option<String>, last_id: Option<String>, more: bool,
    ) -> Self {
        Self { object: "list", data, first_id, last_id, has_more: more }
    }
}
