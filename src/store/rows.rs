//! Rows as both backends return them, and the SQL fragments they share.

use std::pin::pin;

use chrono::{DateTime, Utc};
use futures::{Stream, TryStreamExt};
use serde_json::value::RawValue;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgTypeInfo, PgValueRef};
use sqlx::sqlite::{SqliteTypeInfo, SqliteValueRef};
use sqlx::types::Json;
use sqlx::{Database, Decode, Encode, Postgres, QueryBuilder, Sqlite, Type};
use uuid::Uuid;

use super::{Appended, StoreError};
use crate::model::{IdempotencyKey, Item, ItemBody, Metadata, Order, PageRequest, Session, Usage};

pub(super) const SESSION_COLUMNS: &str =
    "id, created_at, updated_at, metadata, agent_id, item_count, \
     input_tokens, output_tokens, total_tokens, llm_calls";
pub(super) const ITEM_COLUMNS: &str = "id, seq, created_at, run_id, body";
pub(super) const ITEM_COLUMNS_OF_I: &str = "i.id, i.seq, i.created_at, i.run_id, i.body";

/// A point in time as a backend stores it: `timestamptz` in Postgres, microseconds since
/// the epoch in SQLite (which has no timestamp type that sorts reliably).
pub(super) struct Timestamp(DateTime<Utc>);

impl Timestamp {
    pub(super) fn into_inner(self) -> DateTime<Utc> {
        self.0
    }
}

impl Type<Postgres> for Timestamp {
    fn type_info() -> PgTypeInfo {
        <DateTime<Utc> as Type<Postgres>>::type_info()
    }
}

impl<'r> Decode<'r, Postgres> for Timestamp {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        Ok(Self(<DateTime<Utc> as Decode<Postgres>>::decode(value)?))
    }
}

impl Type<Sqlite> for Timestamp {
    fn type_info() -> SqliteTypeInfo {
        <i64 as Type<Sqlite>>::type_info()
    }
}

impl<'r> Decode<'r, Sqlite> for Timestamp {
    fn decode(value: SqliteValueRef<'r>) -> Result<Self, BoxDynError> {
        let micros = <i64 as Decode<Sqlite>>::decode(value)?;
        DateTime::from_timestamp_micros(micros)
            .map(Self)
            .ok_or_else(|| format!("timestamp out of range: {micros}").into())
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct SessionRow {
    id: String,
    created_at: Timestamp,
    updated_at: Timestamp,
    metadata: Json<Metadata>,
    agent_id: Option<String>,
    item_count: i64,
    input_tokens: i64,
    output_tokens: i64,
    total_tokens: i64,
    llm_calls: i64,
}

impl From<SessionRow> for Session {
    fn from(row: SessionRow) -> Self {
        Session {
            id: row.id,
            created_at: row.created_at.0,
            updated_at: row.updated_at.0,
            metadata: row.metadata.0,
            agent_id: row.agent_id,
            item_count: row.item_count,
            usage: Usage {
                input_tokens: row.input_tokens,
                output_tokens: row.output_tokens,
                total_tokens: row.total_tokens,
                llm_calls: row.llm_calls,
            },
        }
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct ItemRow {
    id: Uuid,
    seq: i64,
    created_at: Timestamp,
    run_id: Option<Uuid>,
    body: String,
}

impl TryFrom<ItemRow> for Item {
    type Error = StoreError;

    fn try_from(row: ItemRow) -> Result<Self, StoreError> {
        let item = RawValue::from_string(row.body)
            .map_err(|e| StoreError::Corrupt(format!("item {} is not JSON: {e}", row.id)))?;
        Ok(Item {
            id: row.id,
            seq: row.seq,
            created_at: row.created_at.0,
            run_id: row.run_id,
            item,
        })
    }
}

pub(super) fn items(rows: Vec<ItemRow>) -> Result<Vec<Item>, StoreError> {
    rows.into_iter().map(Item::try_from).collect()
}

/// One page of a session's items in one statement, the hot path of every agent turn.
/// An unknown session or cursor yields no rows; the caller then finds out which.
pub(super) fn items_page_query<'a, DB>(
    tenant: &'a str,
    session_id: &'a str,
    cursor: Option<Uuid>,
    page: &PageRequest,
) -> QueryBuilder<'a, DB>
where
    DB: Database,
    DB::Arguments<'a>: Default,
    &'a str: Encode<'a, DB> + Type<DB>,
    Uuid: Encode<'a, DB> + Type<DB>,
    i64: Encode<'a, DB> + Type<DB>,
{
    let scan = page.scan_order();
    let mut query = QueryBuilder::new(format!(
        "select {ITEM_COLUMNS} from items where tenant_id = "
    ));
    query
        .push_bind(tenant)
        .push(" and session_pk = (select pk from sessions where tenant_id = ")
        .push_bind(tenant)
        .push(" and id = ")
        .push_bind(session_id)
        .push(")");
    if let Some(cursor) = cursor {
        query
            .push(format!(
                " and seq {} (select c.seq from items c join sessions s on s.pk = c.session_pk where s.tenant_id = ",
                beyond(scan)
            ))
            .push_bind(tenant)
            .push(" and s.id = ")
            .push_bind(session_id)
            .push(" and c.id = ")
            .push_bind(cursor)
            .push(")");
    }
    query.push(format!(" order by seq {} limit ", direction(scan)));
    query.push_bind(page.fetch_limit());
    query
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

/// A cursor as the id (of an item or a run) it names; text that is no UUID names none.
pub(super) fn uuid_cursor(page: &PageRequest) -> Option<Uuid> {
    page.cursor_id()
        .map(|id| Uuid::parse_str(id).unwrap_or(Uuid::nil()))
}

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

/// Answers a repeated idempotency key from what the first request stored.
pub(super) fn first_response(
    key: &IdempotencyKey,
    fingerprint: Vec<u8>,
    response: Option<String>,
) -> Result<String, StoreError> {
    if fingerprint != key.fingerprint {
        return Err(StoreError::IdempotencyKeyReused);
    }
    // The claim and its response are written in one transaction, so a visible claim
    // always has its response.
    response
        .ok_or_else(|| StoreError::Corrupt(format!("idempotency key {} has no response", key.key)))
}

/// An append's first response, answered again.
pub(super) fn replayed_items(key: &IdempotencyKey, response: &str) -> Result<Appended, StoreError> {
    let items = serde_json::from_str(response)
        .map_err(|e| StoreError::Corrupt(format!("idempotency key {}: {e}", key.key)))?;
    Ok(Appended {
        items,
        replayed: true,
    })
}

/// The items of an append whose seqs end at `last_seq`, ready to be inserted.
pub(super) fn new_items(bodies: Vec<ItemBody>, last_seq: i64, now: DateTime<Utc>) -> Vec<Item> {
    let first_seq = last_seq - bodies.len() as i64 + 1;
    bodies
        .into_iter()
        .zip(first_seq..)
        .map(|(body, seq)| Item {
            id: Uuid::now_v7(),
            seq,
            created_at: now,
            run_id: None,
            item: body.into_raw(),
        })
        .collect()
}

pub(super) fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(format!("cannot encode: {e}")))
}
