//! Reading a page of rows: the SQL of a scan order and of a cursor, and the statements
//! and byte budget of a page of a session's items, the hot path of every agent turn.

use std::future::Future;
use std::pin::pin;

use futures::{Stream, TryStreamExt};
use uuid::Uuid;

use super::rows::{live, ItemRow, ITEM_COLUMNS};
use super::{Result, SessionStore, StoreError};
use crate::model::{Order, PageRequest, SessionId};

/// `order by` direction for a scan.
pub(super) fn direction(order: Order) -> &'static str {
    match order {
        Order::Asc => "asc",
        Order::Desc => "desc",
    }
}

/// The comparison that selects the rows after a cursor, in scan order.
pub(super) fn beyond(order: Order) -> &'static str {
    match order {
        Order::Asc => ">",
        Order::Desc => "<",
    }
}

/// A cursor as the id (of an item or a run) it names; text that is no UUID names none.
pub(super) fn uuid_cursor(page: &PageRequest) -> Option<Uuid> {
    page.cursor_id().map(|id| Uuid::parse_str(id).unwrap_or(Uuid::nil()))
}

/// The statements that read one page of a session's items, the hot path of every agent
/// turn: one for each scan order, with and without a cursor and a `created_after`, made
/// once per backend so that a read builds no SQL. Each row carries the session's
/// revision, read in the same snapshot as the items. An unknown session or cursor yields
/// no rows; the caller then finds out which.
pub(super) struct ItemsPage([String; 8]);

impl ItemsPage {
    /// The statements for a backend whose SQL for the current time is `now`. They bind
    /// the tenant (`$1`), the session id (`$2`), the limit (`$3`), with a cursor the
    /// cursor's item id (`$4`), and then with `created_after` that instant.
    pub fn new(now: &str) -> Self {
        let statement = |n: usize| {
            let (scan, cursor, created_after) = Self::variant(n);
            let after = if cursor {
                format!(
                    " and seq {} (select c.seq from items c join sessions s on s.pk = c.session_pk \
                     where s.tenant_id = $1 and s.id = $2 and c.id = $4)",
                    beyond(scan)
                )
            } else {
                String::new()
            };
            let since = match created_after {
                true => format!(" and created_at > ${}", 4 + usize::from(cursor)),
                false => String::new(),
            };
            format!(
                "select {ITEM_COLUMNS}, \
                 (select revision from sessions where tenant_id = $1 and id = $2) as revision \
                 from items where tenant_id = $1 \
                 and session_pk = (select pk from sessions where tenant_id = $1 and id = $2 and {}){after}{since} \
                 order by seq {} limit $3",
                live("sessions", now),
                direction(scan)
            )
        };
        Self(std::array::from_fn(statement))
    }

    /// What the statement at `n` reads: its scan order, and whether it takes a cursor
    /// and a `created_after`.
    fn variant(n: usize) -> (Order, bool, bool) {
        let scan = if n & 1 == 1 { Order::Desc } else { Order::Asc };
        (scan, n & 2 == 2, n & 4 == 4)
    }

    pub fn sql(&self, scan: Order, cursor: bool, created_after: bool) -> &str {
        let n = usize::from(scan == Order::Desc)
            + 2 * usize::from(cursor)
            + 4 * usize::from(created_after);
        &self.0[n]
    }
}

/// The most item text one page carries, so a page of large items cannot exhaust memory.
/// A page holds at least one item whatever its size.
pub(super) const PAGE_BYTES: usize = 16 * 1024 * 1024;

/// Reads a page's rows as they arrive, stopping before the row that would take the page
/// over [`PAGE_BYTES`]. Returns the rows and whether the budget cut the page short.
pub(super) async fn read_item_rows(
    rows: impl Stream<Item = Result<ItemRow, sqlx::Error>>,
) -> Result<(Vec<ItemRow>, bool), StoreError> {
    let mut rows = pin!(rows);
    let mut read = Vec::new();
    let mut bytes = 0;
    while let Some(row) = rows.try_next().await? {
        bytes += row.body.len();
        if !read.is_empty() && bytes > PAGE_BYTES {
            return Ok((read, true));
        }
        read.push(row);
    }
    Ok((read, false))
}

/// Finds why a page of a session's items or runs came back empty: no such session, or a
/// cursor that names no row of it (`cursor_row` looks that row up). Neither means the
/// page is simply empty. Only empty pages pay for this.
pub(super) async fn explain_empty_page<T>(
    store: &dyn SessionStore, tenant: &str, session_id: &SessionId,
    cursor_row: Option<impl Future<Output = Result<T>>>,
) -> Result<i64> {
    if let Some(lookup) = cursor_row {
        cursor_named(lookup.await)?;
    }
    Ok(store.get_session(tenant, session_id).await?.revision)
}

/// Finds why a page of agents after or before `cursor` came back empty: the cursor names
/// no agent.
pub(super) async fn explain_empty_agent_page(
    store: &dyn SessionStore, tenant: &str, cursor: &str,
) -> Result<()> {
    cursor_named(store.get_agent(tenant, cursor).await)
}

/// What the lookup of the row a cursor names says of the cursor: a row not found is a
/// cursor that names nothing; a missing session, or a failure, stays what it is.
fn cursor_named<T>(lookup: Result<T>) -> Result<()> {
    match lookup {
        Err(StoreError::ItemNotFound | StoreError::RunNotFound | StoreError::AgentNotFound) => {
            Err(StoreError::UnknownCursor)
        }
        other => other.map(drop),
    }
}
