use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

/// The direction of a listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Asc,
    Desc,
}

impl Order {
    pub fn reverse(self) -> Self {
        match self {
            Order::Asc => Order::Desc,
            Order::Desc => Order::Asc,
        }
    }
}

/// Where a page starts: the rows that follow an id, or the rows that precede it,
/// in the listing's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cursor {
    After(String),
    Before(String),
}

/// One page request of a cursor-paginated listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    pub limit: u32,
    pub order: Order,
    pub cursor: Option<Cursor>,
    /// Only rows created after this instant (items' `created_after`).
    pub created_after: Option<DateTime<Utc>>,
}

impl PageRequest {
    pub const DEFAULT_LIMIT: u32 = 100;
    pub const MAX_LIMIT: u32 = 1000;

    /// The first page of `limit` rows in `order`.
    pub fn first(limit: u32, order: Order) -> Self {
        Self { limit, order, cursor: None, created_after: None }
    }

    /// The order the store reads rows in: a `before` page is read backwards from its
    /// cursor, then turned around by [`PageRequest::finish`].
    pub fn scan_order(&self) -> Order {
        match self.cursor {
            Some(Cursor::Before(_)) => self.order.reverse(),
            _ => self.order,
        }
    }

    pub fn cursor_id(&self) -> Option<&str> {
        match &self.cursor {
            Some(Cursor::After(id) | Cursor::Before(id)) => Some(id),
            None => None,
        }
    }

    /// One row more than the page holds, to learn whether more follow.
    pub fn fetch_limit(&self) -> i64 {
        i64::from(self.limit) + 1
    }

    /// Turns rows read in [`PageRequest::scan_order`], up to [`PageRequest::fetch_limit`]
    /// of them, into the page. `cut_short` says the store stopped reading before the limit
    /// although more rows were there.
    pub fn finish<T>(
        &self, mut rows: Vec<T>, cut_short: bool, id: impl Fn(&T) -> String,
    ) -> Page<T> {
        let has_more = cut_short || rows.len() > self.limit as usize;
        rows.truncate(self.limit as usize);
        if matches!(self.cursor, Some(Cursor::Before(_))) {
            rows.reverse();
        }
        Page {
            first_id: rows.first().map(&id),
            last_id: rows.last().map(&id),
            has_more,
            data: rows,
            revision: None,
        }
    }
}

/// A page of a listing. `has_more` says whether rows lie beyond this page in the
/// direction it was read: after `last_id`, or before `first_id` for a `before` page.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Page<T> {
    pub data: Vec<T>,
    #[schema(required = true)]
    pub first_id: Option<String>,
    #[schema(required = true)]
    pub last_id: Option<String>,
    pub has_more: bool,
    /// The revision of the session whose rows these are, read with them: the answer's
    /// `ETag`, not part of the body.
    #[serde(skip)]
    pub revision: Option<i64>,
}

impl<T> Page<T> {
    /// The request of the page after this one in a listing read to its end with `page`,
    /// or `None` at the end.
    pub fn next(&self, page: &PageRequest) -> Option<PageRequest> {
        let last = self.last_id.clone().filter(|_| self.has_more)?;
        Some(PageRequest { cursor: Some(Cursor::After(last)), ..page.clone() })
    }

    /// The same page with every row changed by `f`; ids and paging stay.
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            data: self.data.into_iter().map(f).collect(),
            first_id: self.first_id,
            last_id: self.last_id,
            has_more: self.has_more,
            revision: self.revision,
        }
    }
}
