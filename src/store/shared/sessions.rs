//! Sessions: create, read, list, patch, delete and sweep them, and the lookups of a
//! session that the other flows compose within their transactions.

use sqlx::types::Json;
use sqlx::{Database, QueryBuilder};

use super::backend::{push_listed_sessions, Db, Store, FOR_UPDATE, NOW, SKIP_LOCKED};
use super::binds::BindAll;
use super::Conn;
use crate::model::{
    AgentId, Anchor, IfMatch, Metadata, NewSession, Page, PageRequest, Session, SessionFilter,
    SessionId, SessionPatch,
};
use crate::store::pages::{beyond, direction};
use crate::store::rows::{
    expiry_columns, live, stored_expiry, ExpiryColumns, SessionRow, SESSION_COLUMNS,
};
use crate::store::run_rows::UNFINISHED;
use crate::store::timestamp::Timestamp;
use crate::store::{Result, StoreError, Swept};

/// Binds a session's retention columns, in their order.
pub(super) trait BindExpiry {
    fn bind_expiry(self, columns: ExpiryColumns) -> Self;
}

impl<'q, S: BindAll<'q>> BindExpiry for S {
    fn bind_expiry(self, columns: ExpiryColumns) -> Self {
        self.bind_all((columns.anchor, columns.seconds, columns.expires_at))
    }
}

/// The session's key, its row locked (where the backend locks rows) for the rest of the
/// transaction, so that changes to one session queue.
pub(super) async fn session_pk(conn: &mut Conn, tenant: &str, id: &SessionId) -> Result<i64> {
    find_pk(conn, tenant, id, FOR_UPDATE).await
}

/// The session's key as `session_pk` finds it (with its row lock), for a write that
/// `if_match` allows only at one revision.
pub(super) async fn session_pk_at(
    conn: &mut Conn, tenant: &str, id: &SessionId, if_match: Option<IfMatch>,
) -> Result<i64> {
    let Some(if_match) = if_match else {
        return session_pk(conn, tenant, id).await;
    };
    let live = live("sessions", NOW);
    let sql = format!(
        "select pk, revision from sessions where tenant_id = $1 and id = $2 and {live}{FOR_UPDATE}"
    );
    let found: Option<(i64, i64)> =
        sqlx::query_as(&sql).bind_all((tenant, id.as_str())).fetch_optional(conn).await?;
    precondition(Some(if_match), found.map(|(_, revision)| revision))?;
    Ok(found.expect("a session that met If-Match").0)
}

/// Checks `if_match` against the revision a write found the session at (none: absent).
pub(super) fn precondition(if_match: Option<IfMatch>, current: Option<i64>) -> Result<()> {
    match if_match {
        Some(if_match) if !if_match.admits(current) => {
            Err(StoreError::RevisionMismatch { current })
        }
        _ => Ok(()),
    }
}

/// The session's key, for a read: unlike `session_pk`, it takes no row lock, which on
/// Postgres would make every read write and flush.
pub(super) async fn read_session_pk(conn: &mut Conn, tenant: &str, id: &SessionId) -> Result<i64> {
    find_pk(conn, tenant, id, "").await
}

/// The key of the live session `id`, taking `lock` (a row lock's SQL, or none) on it.
async fn find_pk(conn: &mut Conn, tenant: &str, id: &SessionId, lock: &str) -> Result<i64> {
    let live = live("sessions", NOW);
    let sql = format!("select pk from sessions where tenant_id = $1 and id = $2 and {live}{lock}");
    let found = sqlx::query_scalar(&sql).bind_all((tenant, id.as_str())).fetch_optional(conn);
    found.await?.ok_or(StoreError::SessionNotFound)
}

/// The one column that `select` (`select <column> from <table>`) reads from a row of the
/// session `session_pk` whose `key` is `value`: a table of a session's rows, such as
/// items, runs or compactions.
pub(super) async fn row_value<T, V>(
    conn: &mut Conn, select: &'static str, key: &'static str, (tenant, session_pk): (&str, i64),
    value: V,
) -> Result<Option<T>>
where
    (T,): for<'r> sqlx::FromRow<'r, <Db as Database>::Row>,
    T: Send + Unpin,
    V: Send + for<'q> sqlx::Encode<'q, Db> + sqlx::Type<Db>,
{
    let sql = format!("{select} where tenant_id = $1 and session_pk = $2 and {key} = $3");
    let query = sqlx::query_scalar(&sql).bind_all((tenant, session_pk, value));
    Ok(query.fetch_optional(conn).await?)
}

/// Deletes the session `id` if it has expired, so that its id can start a new session at
/// once, before the sweeper comes by; true when it did.
pub(super) async fn forget_expired(conn: &mut Conn, tenant: &str, id: &SessionId) -> Result<bool> {
    let live = live("sessions", NOW);
    let sql = format!("delete from sessions where tenant_id = $1 and id = $2 and not {live}");
    let forgotten = sqlx::query(&sql).bind_all((tenant, id.as_str())).execute(conn).await?;
    Ok(forgotten.rows_affected() > 0)
}

pub(super) async fn create(store: &Store, tenant: &str, session: NewSession) -> Result<Session> {
    let now = Timestamp::now();
    let expiry = session.expires_after.unwrap_or(store.default_expiry);
    let retention = expiry_columns(expiry, now, now);
    let mut tx = store.writer().begin().await?;
    // Taken by an expired session, the id is freed and the insert made again.
    let row = loop {
        let row: Option<SessionRow> = sqlx::query_as(&format!(
            r"insert into sessions (tenant_id, id, created_at, updated_at, last_active_at, metadata, agent_id,
                                    expires_anchor, expires_seconds, expires_at, app_id, user_id)
              values ($1, $2, $3, $3, $3, $4, $5, $6, $7, $8, $9, $10)
              on conflict (tenant_id, id) do nothing
              returning {SESSION_COLUMNS}"
        ))
        .bind_all((tenant, session.id.as_str(), now, Json(&session.metadata), session.agent_id.as_ref().map(AgentId::as_str)))
        .bind_expiry(retention)
        .bind_all((session.owners.app(), session.owners.user()))
        .fetch_optional(&mut *tx)
        .await?;
        if row.is_some() || !forget_expired(&mut tx, tenant, &session.id).await? {
            break row;
        }
    };
    tx.commit().await?;
    row.map(Session::from).ok_or(StoreError::SessionExists)
}

pub(super) async fn get(store: &Store, tenant: &str, id: &SessionId) -> Result<Session> {
    let row: Option<SessionRow> = sqlx::query_as(&format!(
        "select {SESSION_COLUMNS} from sessions where tenant_id = $1 and id = $2 and {}",
        live("sessions", NOW)
    ))
    .bind_all((tenant, id.as_str()))
    .fetch_optional(store.reader())
    .await?;
    row.map(Session::from).ok_or(StoreError::SessionNotFound)
}

pub(super) async fn list(
    store: &Store, tenant: &str, filter: &SessionFilter, page: &PageRequest,
) -> Result<Page<Session>> {
    let cursor: Option<(Timestamp, i64)> = match page.cursor_id() {
        Some(id) => Some(
            sqlx::query_as(&format!(
                "select created_at, pk from sessions where tenant_id = $1 and id = $2 and {}",
                live("sessions", NOW)
            ))
            .bind_all((tenant, id))
            .fetch_optional(store.reader())
            .await?
            .ok_or(StoreError::UnknownCursor)?,
        ),
        None => None,
    };
    let scan = page.scan_order();
    let mut query = QueryBuilder::<Db>::new(format!("select {SESSION_COLUMNS} from "));
    let [created_at_column, pk_column] = push_listed_sessions(&mut query, tenant, &filter.metadata);
    if let Some(app) = filter.owners.app() {
        query.push(" and sessions.app_id = ").push_bind(app.to_owned());
    }
    if let Some(user) = filter.owners.user() {
        query.push(" and sessions.user_id = ").push_bind(user.to_owned());
    }
    query.push(format!(" and {}", live("sessions", NOW)));
    if let Some((created_at, pk)) = cursor {
        query.push(format!(" and ({created_at_column}, {pk_column}) {} (", beyond(scan)));
        query.push_bind(created_at).push(", ").push_bind(pk).push(")");
    }
    let dir = direction(scan);
    query.push(format!(" order by {created_at_column} {dir}, {pk_column} {dir} limit "));
    query.push_bind(page.fetch_limit());
    // A filter is planned for its values: on Postgres a plan kept for the statement would
    // serve a filter most sessions match the way it serves one few match (a scan of the
    // matches and a sort, where the listing index finds a page at once), or the reverse.
    let persistent = filter.metadata.is_empty() && filter.owners.is_empty();
    let rows: Vec<SessionRow> =
        query.build_query_as().persistent(persistent).fetch_all(store.reader()).await?;
    let sessions = rows.into_iter().map(Session::from).collect();
    Ok(page.finish(sessions, false, |s| s.id.clone()))
}

/// A session as a patch finds it.
#[derive(sqlx::FromRow)]
struct PatchedRow {
    pk: i64,
    revision: i64,
    metadata: Json<Metadata>,
    agent_id: Option<String>,
    created_at: Timestamp,
    last_active_at: Timestamp,
    expires_anchor: Option<String>,
    expires_seconds: Option<i64>,
}

pub(super) async fn update(
    store: &Store, tenant: &str, id: &SessionId, patch: SessionPatch, if_match: Option<IfMatch>,
) -> Result<Session> {
    let mut tx = store.writer().begin().await?;
    let current: Option<PatchedRow> = sqlx::query_as(&format!(
        r"select pk, revision, metadata, agent_id, created_at, last_active_at, expires_anchor, expires_seconds
          from sessions where tenant_id = $1 and id = $2 and {}{FOR_UPDATE}",
        live("sessions", NOW)
    ))
    .bind_all((tenant, id.as_str()))
    .fetch_optional(&mut *tx)
    .await?;
    precondition(if_match, current.as_ref().map(|c| c.revision))?;
    let current = current.ok_or(StoreError::SessionNotFound)?;
    let now = Timestamp::now();
    let expiry = match patch.expires_after {
        Some(expiry) => expiry,
        None => stored_expiry(current.expires_anchor.as_deref(), current.expires_seconds),
    };
    // A new retention counts from now when it counts from activity: the change itself is
    // no append, but an expiry in the past would delete a session its owner just chose to
    // keep.
    let last_active = match expiry {
        Some(e) if e.anchor == Anchor::LastActiveAt && patch.expires_after.is_some() => now,
        _ => current.last_active_at,
    };
    let retention = expiry_columns(expiry, current.created_at, last_active);
    let (metadata, agent_id) = patch.apply(current.metadata.0, current.agent_id)?;
    let row: SessionRow = sqlx::query_as(&format!(
        r"update sessions set metadata = $3, agent_id = $4, updated_at = $5, last_active_at = $6,
              expires_anchor = $7, expires_seconds = $8, expires_at = $9, revision = revision + 1
          where tenant_id = $1 and pk = $2
          returning {SESSION_COLUMNS}"
    ))
    .bind_all((tenant, current.pk, Json(&metadata), agent_id, now, last_active))
    .bind_expiry(retention)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(row.into())
}

pub(super) async fn delete(
    store: &Store, tenant: &str, id: &SessionId, if_match: Option<IfMatch>,
) -> Result<()> {
    // A delete without a condition stays one statement; a condition is checked on the
    // row its transaction locks.
    let delete = format!(
        "delete from sessions where tenant_id = $1 and id = $2 and {}",
        live("sessions", NOW)
    );
    let delete = sqlx::query(&delete).bind_all((tenant, id.as_str()));
    let deleted = match if_match {
        None => delete.execute(store.writer()).await?.rows_affected(),
        Some(_) => {
            let mut tx = store.writer().begin().await?;
            session_pk_at(&mut tx, tenant, id, if_match).await?;
            let deleted = delete.execute(&mut *tx).await?.rows_affected();
            tx.commit().await?;
            deleted
        }
    };
    if deleted == 0 {
        return Err(StoreError::SessionNotFound);
    }
    Ok(())
}

pub(super) async fn sweep_expired(store: &Store, batch: i64) -> Result<Swept> {
    let counts: Vec<i64> = sqlx::query_scalar(&format!(
        r"delete from sessions where pk in (
              select pk from sessions
              where expires_at <= {NOW} and not exists (
                  select 1 from runs r where r.session_pk = sessions.pk and r.status in {UNFINISHED})
              order by expires_at limit $1{SKIP_LOCKED})
          returning item_count"
    ))
    .bind(batch)
    .fetch_all(store.writer())
    .await?;
    Ok(Swept { sessions: counts.len() as u64, items: counts.iter().sum::<i64>() as u64 })
}
