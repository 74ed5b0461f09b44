//! The SQLite backend: the embedded default, for one process. All writes go through a
//! single connection, so transactions never contend for the write lock; reads use a pool
//! of their own and see committed data (WAL mode).

mod agents;
mod runs;

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use sqlx::types::Json;
use sqlx::{QueryBuilder, Sqlite};
use uuid::Uuid;

use super::rows::{
    beyond, direction, first_response, items, items_page_query, new_items, read_item_rows,
    replayed_items, to_json, uuid_cursor, ItemRow, SessionRow, ITEM_COLUMNS, ITEM_COLUMNS_OF_I,
    SESSION_COLUMNS,
};
use super::{explain_empty_page, now, Appended, PoolStats, Result, SessionStore, StoreError};
use crate::model::{
    AgentId, IdempotencyKey, Item, ItemBody, Metadata, NewSession, Page, PageRequest, Session,
    SessionId, SessionPatch,
};

static MIGRATOR: Migrator = sqlx::migrate!("./migrations/sqlite");

const READ_CONNECTIONS: u32 = 4;

pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating if needed) the database file of a `sqlite:` URL and migrates it.
    pub async fn connect(url: &str) -> Result<Self> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // An acknowledged write is on disk, not only in the OS cache.
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(5));
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options.clone())
            .await?;
        MIGRATOR.run(&writer).await?;
        // Every connection to an in-memory database opens a database of its own.
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        let reader = if in_memory {
            writer.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(READ_CONNECTIONS)
                .acquire_timeout(Duration::from_secs(5))
                .connect_with(options)
                .await?
        };
        Ok(Self { writer, reader })
    }

    async fn session_pk(&self, tenant: &str, id: &SessionId) -> Result<i64> {
        session_pk(&mut *self.reader.acquire().await?, tenant, id).await
    }
}

async fn session_pk(conn: &mut SqliteConnection, tenant: &str, id: &SessionId) -> Result<i64> {
    sqlx::query_scalar("select pk from sessions where tenant_id = ? and id = ?")
        .bind(tenant)
        .bind(id.as_str())
        .fetch_optional(conn)
        .await?
        .ok_or(StoreError::SessionNotFound)
}

/// Gives out `count` seqs of the session, creating it if absent, and returns its key and
/// the last seq given.
async fn reserve_seqs(
    conn: &mut SqliteConnection,
    tenant: &str,
    id: &SessionId,
    count: i64,
    now: i64,
) -> Result<(i64, i64)> {
    sqlx::query(
        r"insert into sessions (tenant_id, id, created_at, updated_at) values (?1, ?2, ?3, ?3)
          on conflict (tenant_id, id) do nothing",
    )
    .bind(tenant)
    .bind(id.as_str())
    .bind(now)
    .execute(&mut *conn)
    .await?;
    let reserved = sqlx::query_as(
        r"update sessions set last_seq = last_seq + ?3, item_count = item_count + ?3, updated_at = ?4
          where tenant_id = ?1 and id = ?2
          returning pk, last_seq",
    )
    .bind(tenant)
    .bind(id.as_str())
    .bind(count)
    .bind(now)
    .fetch_one(&mut *conn)
    .await?;
    Ok(reserved)
}

/// Claims an idempotency key for this transaction; `Some` answers a key claimed before.
async fn claim_key(
    conn: &mut SqliteConnection,
    tenant: &str,
    key: &IdempotencyKey,
    now: DateTime<Utc>,
) -> Result<Option<String>> {
    sqlx::query("delete from idempotency_keys where tenant_id = ? and key = ? and created_at < ?")
        .bind(tenant)
        .bind(&key.key)
        .bind((now - IdempotencyKey::ttl()).timestamp_micros())
        .execute(&mut *conn)
        .await?;
    let first: Option<(Vec<u8>, Option<String>)> = sqlx::query_as(
        "select fingerprint, response from idempotency_keys where tenant_id = ? and key = ?",
    )
    .bind(tenant)
    .bind(&key.key)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some((fingerprint, response)) = first {
        return first_response(key, fingerprint, response).map(Some);
    }
    sqlx::query("insert into idempotency_keys (tenant_id, key, fingerprint, created_at) values (?, ?, ?, ?)")
        .bind(tenant)
        .bind(&key.key)
        .bind(&key.fingerprint)
        .bind(now.timestamp_micros())
        .execute(&mut *conn)
        .await?;
    Ok(None)
}

/// Stores the response to the request that claimed `key`, for its retries.
async fn keep_response(
    conn: &mut SqliteConnection,
    tenant: &str,
    key: &IdempotencyKey,
    response: &str,
) -> Result<()> {
    sqlx::query("update idempotency_keys set response = ? where tenant_id = ? and key = ?")
        .bind(response)
        .bind(tenant)
        .bind(&key.key)
        .execute(conn)
        .await?;
    Ok(())
}

/// Moves the session's item count by `change` and marks it updated.
async fn count_items(
    conn: &mut SqliteConnection,
    tenant: &str,
    session_pk: i64,
    change: i64,
) -> Result<()> {
    sqlx::query(
        "update sessions set item_count = item_count + ?3, updated_at = ?4 where tenant_id = ?1 and pk = ?2",
    )
    .bind(tenant)
    .bind(session_pk)
    .bind(change)
    .bind(now().timestamp_micros())
    .execute(conn)
    .await?;
    Ok(())
}

#[async_trait]
impl SessionStore for SqliteStore {
    async fn create_session(&self, tenant: &str, session: NewSession) -> Result<Session> {
        let now = now().timestamp_micros();
        let row: Option<SessionRow> = sqlx::query_as(&format!(
            r"insert into sessions (tenant_id, id, created_at, updated_at, metadata, agent_id)
              values (?1, ?2, ?3, ?3, ?4, ?5)
              on conflict (tenant_id, id) do nothing
              returning {SESSION_COLUMNS}"
        ))
        .bind(tenant)
        .bind(session.id.as_str())
        .bind(now)
        .bind(Json(&session.metadata))
        .bind(session.agent_id.map(AgentId::into_string))
        .fetch_optional(&self.writer)
        .await?;
        row.map(Session::from).ok_or(StoreError::SessionExists)
    }

    async fn get_session(&self, tenant: &str, id: &SessionId) -> Result<Session> {
        let row: Option<SessionRow> = sqlx::query_as(&format!(
            "select {SESSION_COLUMNS} from sessions where tenant_id = ? and id = ?"
        ))
        .bind(tenant)
        .bind(id.as_str())
        .fetch_optional(&self.reader)
        .await?;
        row.map(Session::from).ok_or(StoreError::SessionNotFound)
    }

    async fn list_sessions(
        &self,
        tenant: &str,
        metadata: &[(String, String)],
        page: &PageRequest,
    ) -> Result<Page<Session>> {
        let cursor: Option<(i64, i64)> = match page.cursor_id() {
            Some(id) => Some(
                sqlx::query_as(
                    "select created_at, pk from sessions where tenant_id = ? and id = ?",
                )
                .bind(tenant)
                .bind(id)
                .fetch_optional(&self.reader)
                .await?
                .ok_or(StoreError::UnknownCursor)?,
            ),
            None => None,
        };
        let scan = page.scan_order();
        let mut query = QueryBuilder::<Sqlite>::new(format!(
            "select {SESSION_COLUMNS} from sessions where tenant_id = "
        ));
        query.push_bind(tenant);
        for (key, value) in metadata {
            query.push(" and exists (select 1 from json_each(sessions.metadata) where key = ");
            query
                .push_bind(key)
                .push(" and value = ")
                .push_bind(value)
                .push(")");
        }
        if let Some((created_at, pk)) = cursor {
            query.push(format!(" and (created_at, pk) {} (", beyond(scan)));
            query
                .push_bind(created_at)
                .push(", ")
                .push_bind(pk)
                .push(")");
        }
        let dir = direction(scan);
        query.push(format!(" order by created_at {dir}, pk {dir} limit "));
        query.push_bind(page.fetch_limit());
        let rows: Vec<SessionRow> = query.build_query_as().fetch_all(&self.reader).await?;
        Ok(
            page.finish(rows.into_iter().map(Session::from).collect(), false, |s| {
                s.id.clone()
            }),
        )
    }

    async fn update_session(
        &self,
        tenant: &str,
        id: &SessionId,
        patch: SessionPatch,
    ) -> Result<Session> {
        let mut tx = self.writer.begin().await?;
        let current: Option<(i64, Json<Metadata>, Option<String>)> = sqlx::query_as(
            "select pk, metadata, agent_id from sessions where tenant_id = ? and id = ?",
        )
        .bind(tenant)
        .bind(id.as_str())
        .fetch_optional(&mut *tx)
        .await?;
        let (pk, Json(metadata), agent_id) = current.ok_or(StoreError::SessionNotFound)?;
        let (metadata, agent_id) = patch.apply(metadata, agent_id)?;
        let row: SessionRow = sqlx::query_as(&format!(
            r"update sessions set metadata = ?3, agent_id = ?4, updated_at = ?5
              where tenant_id = ?1 and pk = ?2
              returning {SESSION_COLUMNS}"
        ))
        .bind(tenant)
        .bind(pk)
        .bind(Json(&metadata))
        .bind(agent_id)
        .bind(now().timestamp_micros())
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(row.into())
    }

    async fn delete_session(&self, tenant: &str, id: &SessionId) -> Result<()> {
        let deleted = sqlx::query("delete from sessions where tenant_id = ? and id = ?")
            .bind(tenant)
            .bind(id.as_str())
            .execute(&self.writer)
            .await?
            .rows_affected();
        if deleted == 0 {
            return Err(StoreError::SessionNotFound);
        }
        Ok(())
    }

    async fn append_items(
        &self,
        tenant: &str,
        session_id: &SessionId,
        bodies: Vec<ItemBody>,
        idempotency: Option<IdempotencyKey>,
    ) -> Result<Appended> {
        let now = now();
        let micros = now.timestamp_micros();
        let mut tx = self.writer.begin().await?;
        if let Some(key) = &idempotency {
            if let Some(first) = claim_key(&mut tx, tenant, key, now).await? {
                return replayed_items(key, &first);
            }
        }
        let (session_pk, last_seq) =
            reserve_seqs(&mut tx, tenant, session_id, bodies.len() as i64, micros).await?;
        let items = new_items(bodies, last_seq, now);
        let mut insert = QueryBuilder::<Sqlite>::new(
            "insert into items (id, tenant_id, session_pk, seq, created_at, body) ",
        );
        insert.push_values(&items, |mut row, item| {
            row.push_bind(item.id)
                .push_bind(tenant)
                .push_bind(session_pk)
                .push_bind(item.seq)
                .push_bind(micros)
                .push_bind(item.item.get());
        });
        insert.build().execute(&mut *tx).await?;
        if let Some(key) = &idempotency {
            keep_response(&mut tx, tenant, key, &to_json(&items)?).await?;
        }
        tx.commit().await?;
        Ok(Appended {
            items,
            replayed: false,
        })
    }

    async fn list_items(
        &self,
        tenant: &str,
        session_id: &SessionId,
        page: &PageRequest,
    ) -> Result<Page<Item>> {
        let cursor = uuid_cursor(page);
        let (rows, cut_short) = read_item_rows(
            items_page_query(tenant, session_id.as_str(), cursor, page)
                .build_query_as()
                .fetch(&self.reader),
        )
        .await?;
        if rows.is_empty() {
            explain_empty_page(self, tenant, session_id, cursor).await?;
        }
        Ok(page.finish(items(rows)?, cut_short, |i| i.id.to_string()))
    }

    async fn get_item(&self, tenant: &str, session_id: &SessionId, item_id: Uuid) -> Result<Item> {
        let row: Option<ItemRow> = sqlx::query_as(&format!(
            r"select {ITEM_COLUMNS_OF_I} from items i join sessions s on s.pk = i.session_pk
              where s.tenant_id = ?1 and s.id = ?2 and i.tenant_id = ?1 and i.id = ?3"
        ))
        .bind(tenant)
        .bind(session_id.as_str())
        .bind(item_id)
        .fetch_optional(&self.reader)
        .await?;
        match row {
            Some(row) => row.try_into(),
            None => {
                self.session_pk(tenant, session_id).await?;
                Err(StoreError::ItemNotFound)
            }
        }
    }

    async fn delete_item(&self, tenant: &str, session_id: &SessionId, item_id: Uuid) -> Result<()> {
        let mut tx = self.writer.begin().await?;
        let session_pk = session_pk(&mut tx, tenant, session_id).await?;
        let deleted =
            sqlx::query("delete from items where tenant_id = ? and session_pk = ? and id = ?")
                .bind(tenant)
                .bind(session_pk)
                .bind(item_id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        if deleted == 0 {
            return Err(StoreError::ItemNotFound);
        }
        count_items(&mut tx, tenant, session_pk, -1).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn pop_last_item(&self, tenant: &str, session_id: &SessionId) -> Result<Item> {
        let mut tx = self.writer.begin().await?;
        let session_pk = session_pk(&mut tx, tenant, session_id).await?;
        let row: Option<ItemRow> = sqlx::query_as(&format!(
            r"delete from items where tenant_id = ?1 and session_pk = ?2 and id = (
                  select id from items where tenant_id = ?1 and session_pk = ?2 order by seq desc limit 1
              )
              returning {ITEM_COLUMNS}"
        ))
        .bind(tenant)
        .bind(session_pk)
        .fetch_optional(&mut *tx)
        .await?;
        let item = Item::try_from(row.ok_or(StoreError::SessionEmpty)?)?;
        count_items(&mut tx, tenant, session_pk, -1).await?;
        tx.commit().await?;
        Ok(item)
    }

    async fn clear_items(&self, tenant: &str, session_id: &SessionId) -> Result<()> {
        let mut tx = self.writer.begin().await?;
        let session_pk = session_pk(&mut tx, tenant, session_id).await?;
        let cleared = sqlx::query("delete from items where tenant_id = ? and session_pk = ?")
            .bind(tenant)
            .bind(session_pk)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        count_items(&mut tx, tenant, session_pk, -(cleared as i64)).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn idempotency_key(
        &self,
        tenant: &str,
        key: &str,
        since: DateTime<Utc>,
    ) -> Result<Option<(Vec<u8>, Option<String>)>> {
        Ok(sqlx::query_as(
            r"select fingerprint, response from idempotency_keys where tenant_id = ? and key = ? and created_at >= ?",
        )
        .bind(tenant)
        .bind(key)
        .bind(since.timestamp_micros())
        .fetch_optional(&self.reader)
        .await?)
    }

    async fn purge_idempotency_keys(&self, cutoff: DateTime<Utc>) -> Result<u64> {
        let purged = sqlx::query("delete from idempotency_keys where created_at < ?")
            .bind(cutoff.timestamp_micros())
            .execute(&self.writer)
            .await?
            .rows_affected();
        Ok(purged)
    }

    async fn ping(&self) -> Result<()> {
        sqlx::query("select 1").execute(&self.reader).await?;
        Ok(())
    }

    fn pool_stats(&self) -> PoolStats {
        [&self.writer, &self.reader]
            .into_iter()
            .fold(PoolStats::default(), |stats, pool| {
                let size = pool.size();
                let idle = pool.num_idle() as u32;
                PoolStats {
                    in_use: stats.in_use + size.saturating_sub(idle),
                    idle: stats.idle + idle,
                }
            })
    }
}
