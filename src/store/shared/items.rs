//! A session's items: read a page of them or one, delete one or all, pop the newest. A
//! change takes the session's row lock first, and removes with the items what was made
//! from them: their compactions and the finished runs that copied them.

use uuid::Uuid;

use super::backend::{Store, NOW};
use super::binds::BindAll;
use super::idempotency_keys::answered;
use super::item_changes::{begin, drop_compactions, removed, replayed, Begun, RunsHolding};
use super::sessions::{row_value, session_pk};
use super::Conn;
use crate::model::{IdempotencyKey, IfMatch, Item, ItemBody, Page, PageRequest, SessionId};
use crate::store::combined_writes::Replacing;
use crate::store::pages::{explain_empty_page, read_item_rows, uuid_cursor, ItemsPage};
use crate::store::payload::Column;
use crate::store::rows::{live, open_items, to_json, ItemRow, ITEM_COLUMNS};
use crate::store::run_rows::UNFINISHED;
use crate::store::timestamp::Timestamp;
use crate::store::{Result, StoreError};

pub(super) async fn list(
    store: &Store, tenant: &str, session_id: &SessionId, page: &PageRequest,
) -> Result<Page<Item>> {
    static ITEMS_PAGE: std::sync::LazyLock<ItemsPage> =
        std::sync::LazyLock::new(|| ItemsPage::new(NOW));
    let cursor = uuid_cursor(page);
    let since = page.created_after.map(Timestamp);
    let sql = ITEMS_PAGE.sql(page.scan_order(), cursor.is_some(), since.is_some());
    let mut query = sqlx::query_as(sql).bind_all((tenant, session_id.as_str(), page.fetch_limit()));
    if let Some(cursor) = cursor {
        query = query.bind(cursor);
    }
    if let Some(since) = since {
        query = query.bind(since);
    }
    let mut conn = store.page_readers.take().await?;
    let (rows, cut_short) = read_item_rows(query.fetch(&mut *conn)).await?;
    // A page cut short left rows unread on the connection: the pool's check on its
    // return flushes them, or (Postgres) it is closed.
    if !cut_short {
        conn.keep();
    }
    let revision = match rows.first() {
        Some(row) => row.revision,
        None => {
            let cursor_item = cursor.map(|id| get(store, tenant, session_id, id));
            Some(explain_empty_page(store, tenant, session_id, cursor_item).await?)
        }
    };
    let items = open_items(&store.codec, tenant, rows)?;
    let mut page = page.finish(items, cut_short, |i| i.id.to_string());
    page.revision = revision;
    Ok(page)
}

pub(super) async fn get(
    store: &Store, tenant: &str, session_id: &SessionId, item_id: Uuid,
) -> Result<Item> {
    let row: Option<ItemRow> = sqlx::query_as(&format!(
        r"select i.id, i.seq, i.created_at, i.run_id, i.body
          from items i join sessions s on s.pk = i.session_pk
          where s.tenant_id = $1 and s.id = $2 and i.tenant_id = $1 and i.id = $3 and {}",
        live("s", NOW)
    ))
    .bind_all((tenant, session_id.as_str(), item_id))
    .fetch_optional(store.reader())
    .await?;
    match row {
        Some(row) => row.into_item(&store.codec, tenant),
        None => {
            session_pk(&mut *store.reader().acquire().await?, tenant, session_id).await?;
            Err(StoreError::ItemNotFound)
        }
    }
}

/// What a removal takes from a session: one item, or every one.
pub(super) enum Removal {
    Item(Uuid),
    All,
}

pub(super) async fn delete(
    store: &Store, tenant: &str, session_id: &SessionId, removal: Removal,
    (key, if_match): (Option<&IdempotencyKey>, Option<IfMatch>),
) -> Result<()> {
    let Begun::Change(mut tx, session_pk) =
        begin(store, tenant, session_id, (key, if_match)).await?
    else {
        return Ok(());
    };
    let (seq, holding, count) = match removal {
        Removal::Item(item_id) => {
            let deleted: Option<(i64, Option<Uuid>)> = sqlx::query_as(
                "delete from items where tenant_id = $1 and session_pk = $2 and id = $3 returning seq, run_id",
            )
            .bind_all((tenant, session_pk, item_id))
            .fetch_optional(&mut *tx)
            .await?;
            let (seq, run_id) = deleted.ok_or(StoreError::ItemNotFound)?;
            (seq, RunsHolding::Item(run_id), 1)
        }
        Removal::All => {
            let cleared = sqlx::query("delete from items where tenant_id = $1 and session_pk = $2")
                .bind_all((tenant, session_pk))
                .execute(&mut *tx)
                .await?;
            (0, RunsHolding::All, cleared.rows_affected() as i64)
        }
    };
    removed(&mut tx, (tenant, session_pk), seq, holding, count).await?;
    answered(&mut tx, &store.codec, tenant, key, "{}").await?;
    tx.commit().await?;
    Ok(())
}

pub(super) async fn pop_last(
    store: &Store, tenant: &str, session_id: &SessionId,
    (key, if_match): (Option<&IdempotencyKey>, Option<IfMatch>),
) -> Result<Item> {
    let (mut tx, session_pk) = match begin(store, tenant, session_id, (key, if_match)).await? {
        Begun::Change(tx, session_pk) => (tx, session_pk),
        Begun::Retried(first) => return replayed(&first),
    };
    let row: Option<ItemRow> = sqlx::query_as(&format!(
        r"delete from items where tenant_id = $1 and session_pk = $2 and id = (
              select id from items where tenant_id = $1 and session_pk = $2
              order by seq desc limit 1
          )
          returning {ITEM_COLUMNS}"
    ))
    .bind_all((tenant, session_pk))
    .fetch_optional(&mut *tx)
    .await?;
    let row = row.ok_or(StoreError::SessionEmpty)?;
    let item = row.into_item(&store.codec, tenant)?;
    removed(&mut tx, (tenant, session_pk), item.seq, RunsHolding::Item(item.run_id), 1).await?;
    answered(&mut tx, &store.codec, tenant, key, &to_json(&item)?).await?;
    tx.commit().await?;
    Ok(item)
}

/// Removes what `replacing` names from the session `session_pk` (whose row the caller
/// has locked), with the compactions and finished runs made from it.
pub(super) async fn remove(
    conn: &mut Conn, tenant: &str, session_pk: i64, replacing: Replacing,
) -> Result<()> {
    let after = match replacing {
        Replacing::Nothing => return Ok(()),
        Replacing::All => 0,
        Replacing::After(item_id) => {
            let seq = row_value(conn, "select seq from items", "id", (tenant, session_pk), item_id);
            seq.await?.ok_or(StoreError::ItemNotFound)?
        }
    };
    sqlx::query(&format!(
        r"delete from runs where tenant_id = $1 and session_pk = $2 and status not in {UNFINISHED}
          and id in (select run_id from items where tenant_id = $1 and session_pk = $2 and seq > $3)"
    ))
    .bind_all((tenant, session_pk, after))
    .execute(&mut *conn)
    .await?;
    drop_compactions(conn, tenant, session_pk, after + 1).await?;
    let removed =
        sqlx::query("delete from items where tenant_id = $1 and session_pk = $2 and seq > $3")
            .bind_all((tenant, session_pk, after))
            .execute(&mut *conn)
            .await?
            .rows_affected();
    sqlx::query(
        r"update sessions set item_count = item_count - $3, rewrites = rewrites + 1
          where tenant_id = $1 and pk = $2",
    )
    .bind_all((tenant, session_pk, removed as i64))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Replaces one item's stored object in place, as one revision; what was made from the
/// item (compactions, the finished run that appended it) goes, as on a delete.
pub(super) async fn replace(
    store: &Store, tenant: &str, session_id: &SessionId, item_id: Uuid, body: &ItemBody,
    (key, if_match): (Option<&IdempotencyKey>, Option<IfMatch>),
) -> Result<(Item, i64)> {
    let (mut tx, session_pk) = match begin(store, tenant, session_id, (key, if_match)).await? {
        Begun::Change(tx, session_pk) => (tx, session_pk),
        Begun::Retried(first) => return replayed(&first),
    };
    let sealed = store.codec.seal(tenant, Column::ItemBody, body.as_str())?;
    let row: Option<ItemRow> = sqlx::query_as(&format!(
        r"update items set body = $4 where tenant_id = $1 and session_pk = $2 and id = $3
          returning {ITEM_COLUMNS}"
    ))
    .bind_all((tenant, session_pk, item_id, &*sealed))
    .fetch_optional(&mut *tx)
    .await?;
    let mut item = row.ok_or(StoreError::ItemNotFound)?.into_item(&store.codec, tenant)?;
    let holding = RunsHolding::Item(item.run_id);
    let revision = removed(&mut tx, (tenant, session_pk), item.seq, holding, 0).await?;
    item.item = body.to_raw();
    answered(&mut tx, &store.codec, tenant, key, &to_json(&(&item, revision))?).await?;
    tx.commit().await?;
    Ok((item, revision))
}
