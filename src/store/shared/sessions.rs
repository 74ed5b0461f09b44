//! Sessions, items and idempotency keys, written once for both backends.
//!
//! Longer than most files: a macro holds the whole `SessionStore` impl, which Rust
//! wants in one block, and splitting the queries it shares from it would scatter one
//! backend's flow across files.

/// The queries of sessions and items on one connection, and the `SessionStore` of
/// `$store`. The backend module provides `FOR_UPDATE` (the row lock its transactions
/// take, if any), `insert_items` and `push_metadata_filter`; `$store` provides
/// `writer()`, `reader()`, `page_readers()`, `append_writer()` and `codec`.
macro_rules! session_store {
    ($store:ident, $db:ty, $conn:ty) => {
        mod session_flows {
            use async_trait::async_trait;
            use chrono::{DateTime, Utc};
            use sqlx::types::Json;
            use sqlx::QueryBuilder;
            use uuid::Uuid;

            use super::*;
            use $crate::model::{
                AgentId, Anchor, ExpiresAfter, IdempotencyKey, Item, ItemBody, Metadata, NewSession,
                Page, PageRequest, Session, SessionId, SessionPatch,
            };
            use $crate::store::payload::{Column, PayloadCodec};
            use $crate::store::pages::{
                beyond, direction, explain_empty_page, read_item_rows, uuid_cursor, ItemsPage,
            };
            use $crate::store::rows::{
                expiry_columns, live, new_items, stored_expiry, ItemRow, SessionRow, ITEM_COLUMNS,
                SESSION_COLUMNS,
            };
            use $crate::store::idempotency::{first_append, first_response, AppendedSeqs, FirstAppend};
            use $crate::store::timestamp::Timestamp;
            use $crate::store::run_rows::UNFINISHED;
            use $crate::store::combiner::{Append, Appender, BatchFailed, Combiner};
            use $crate::store::{AppendStats, Appended, PoolStats, Result, SessionStore, StoreError, Swept};

            /// A session as a patch finds it.
            #[derive(sqlx::FromRow)]
            struct PatchedRow {
                pk: i64,
                metadata: Json<Metadata>,
                agent_id: Option<String>,
                created_at: Timestamp,
                last_active_at: Timestamp,
                expires_anchor: Option<String>,
                expires_seconds: Option<i64>,
            }

            pub(super) async fn session_pk(conn: &mut $conn, tenant: &str, id: &SessionId) -> Result<i64> {
                sqlx::query_scalar(&format!(
                    "select pk from sessions where tenant_id = $1 and id = $2 and {}{FOR_UPDATE}",
                    live("sessions", NOW)
                ))
                .bind(tenant)
                .bind(id.as_str())
                .fetch_optional(conn)
                .await?
                .ok_or(StoreError::SessionNotFound)
            }

            /// Moves the session's item count by `change` and marks it updated.
            async fn count_items(
                conn: &mut $conn,
                tenant: &str,
                session_pk: i64,
                change: i64,
            ) -> Result<()> {
                sqlx::query(
                    r"update sessions set item_count = item_count + $3, updated_at = $4
                      where tenant_id = $1 and pk = $2",
                )
                .bind(tenant)
                .bind(session_pk)
                .bind(change)
                .bind(Timestamp::now())
                .execute(conn)
                .await?;
                Ok(())
            }

            /// Deletes the compactions that summarise the item at `seq` (every one from 0):
            /// a summary must not outlive what it was made from.
            async fn drop_compactions(
                conn: &mut $conn,
                tenant: &str,
                session_pk: i64,
                seq: i64,
            ) -> Result<()> {
                sqlx::query(
                    "delete from compactions where tenant_id = $1 and session_pk = $2 and through_seq >= $3",
                )
                .bind(tenant)
                .bind(session_pk)
                .bind(seq)
                .execute(conn)
                .await?;
                Ok(())
            }

            /// Deletes the session `id` if it has expired, so that its id can start a new
            /// session at once, before the sweeper comes by; true when it did.
            pub(super) async fn forget_expired(conn: &mut $conn, tenant: &str, id: &SessionId) -> Result<bool> {
                let forgotten = sqlx::query(&format!(
                    "delete from sessions where tenant_id = $1 and id = $2 and not {}",
                    live("sessions", NOW)
                ))
                .bind(tenant)
                .bind(id.as_str())
                .execute(conn)
                .await?
                .rows_affected();
                Ok(forgotten > 0)
            }

            /// Deletes the finished run `run_id`, or every finished run of the session
            /// when none is named, with its events: a run keeps a copy of the items it was
            /// given and made, which must not outlive them.
            async fn drop_runs(
                conn: &mut $conn,
                tenant: &str,
                session_pk: i64,
                run_id: Option<Uuid>,
            ) -> Result<()> {
                sqlx::query(&format!(
                    r"delete from runs where tenant_id = $1 and session_pk = $2
                      and ($3 is null or id = $3) and status not in {UNFINISHED}"
                ))
                .bind(tenant)
                .bind(session_pk)
                .bind(run_id)
                .execute(conn)
                .await?;
                Ok(())
            }

            /// Gives out `count` seqs of the session, creating it (with retention
            /// `expiry`) if absent, and returns its key and the last seq given. The update
            /// takes the row lock (Postgres) that orders concurrent appends.
            pub(super) async fn reserve_seqs(
                conn: &mut $conn,
                tenant: &str,
                id: &SessionId,
                count: i64,
                now: Timestamp,
                expiry: Option<ExpiresAfter>,
            ) -> Result<(i64, i64)> {
                // The append's hot path: its statement is made once.
                static BUMP: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
                    format!(
                        r"update sessions set last_seq = last_seq + $3, item_count = item_count + $3, updated_at = $4, {}
                          where tenant_id = $1 and id = $2 and {}
                          returning pk, last_seq",
                        touch("$4"),
                        live("sessions", NOW)
                    )
                });
                let (anchor, seconds, expires_at) = expiry_columns(expiry, now, now);
                loop {
                    let bumped = sqlx::query_as(&BUMP)
                    .bind(tenant)
                    .bind(id.as_str())
                    .bind(count)
                    .bind(now)
                    .fetch_optional(&mut *conn)
                    .await?;
                    if let Some(reserved) = bumped {
                        return Ok(reserved);
                    }
                    // A concurrent insert of the same session makes this one wait, then do
                    // nothing; the next update then finds the row.
                    let created = sqlx::query_as(
                        r"insert into sessions (tenant_id, id, created_at, updated_at, last_active_at, item_count, last_seq,
                                                expires_anchor, expires_seconds, expires_at)
                          values ($1, $2, $4, $4, $4, $3, $3, $5, $6, $7)
                          on conflict (tenant_id, id) do nothing
                          returning pk, last_seq",
                    )
                    .bind(tenant)
                    .bind(id.as_str())
                    .bind(count)
                    .bind(now)
                    .bind(anchor)
                    .bind(seconds)
                    .bind(expires_at)
                    .fetch_optional(&mut *conn)
                    .await?;
                    if let Some(reserved) = created {
                        return Ok(reserved);
                    }
                    // The id is taken by a session that expired: it goes now.
                    forget_expired(conn, tenant, id).await?;
                }
            }

            /// Claims an idempotency key for this transaction. `Some` answers a key that an
            /// earlier request claimed, with that request's response and the time of its
            /// claim: a concurrent claim of the same key waits here for that request's
            /// transaction, so the two can never both write.
            pub(super) async fn claim_key(
                conn: &mut $conn,
                codec: &PayloadCodec,
                tenant: &str,
                key: &IdempotencyKey,
                now: Timestamp,
            ) -> Result<Option<(String, Timestamp)>> {
                // Loops only if the key expires and is purged between the insert and the select.
                loop {
                    sqlx::query(
                        "delete from idempotency_keys where tenant_id = $1 and key = $2 and created_at < $3",
                    )
                    .bind(tenant)
                    .bind(&key.key)
                    .bind(Timestamp(now.0 - IdempotencyKey::ttl()))
                    .execute(&mut *conn)
                    .await?;
                    let claimed = sqlx::query(
                        r"insert into idempotency_keys (tenant_id, key, fingerprint, created_at) values ($1, $2, $3, $4)
                          on conflict (tenant_id, key) do nothing",
                    )
                    .bind(tenant)
                    .bind(&key.key)
                    .bind(&key.fingerprint)
                    .bind(now)
                    .execute(&mut *conn)
                    .await?
                    .rows_affected()
                        == 1;
                    if claimed {
                        return Ok(None);
                    }
                    let first: Option<(Vec<u8>, Option<String>, Timestamp)> = sqlx::query_as(
                        "select fingerprint, response, created_at from idempotency_keys where tenant_id = $1 and key = $2",
                    )
                    .bind(tenant)
                    .bind(&key.key)
                    .fetch_optional(&mut *conn)
                    .await?;
                    if let Some((fingerprint, response, claimed_at)) = first {
                        let response = first_response(key, fingerprint, response)?;
                        let response = codec.open(tenant, Column::IdempotencyResponse, response)?;
                        return Ok(Some((response, claimed_at)));
                    }
                }
            }

            /// Stores the response to the request that claimed `key`, for its retries.
            pub(super) async fn keep_response(
                conn: &mut $conn,
                codec: &PayloadCodec,
                tenant: &str,
                key: &IdempotencyKey,
                response: &str,
            ) -> Result<()> {
                sqlx::query("update idempotency_keys set response = $3 where tenant_id = $1 and key = $2")
                    .bind(tenant)
                    .bind(&key.key)
                    .bind(codec.seal(tenant, Column::IdempotencyResponse, response)?)
                    .execute(conn)
                    .await?;
                Ok(())
            }

            /// The stored response to `key` within its lifetime.
            pub(super) async fn kept_response(
                pool: &sqlx::Pool<$db>,
                codec: &PayloadCodec,
                tenant: &str,
                key: &IdempotencyKey,
            ) -> Result<Option<String>> {
                let stored: Option<(Vec<u8>, Option<String>)> = sqlx::query_as(
                    r"select fingerprint, response from idempotency_keys
                       where tenant_id = $1 and key = $2 and created_at >= $3",
                )
                .bind(tenant)
                .bind(&key.key)
                .bind(Timestamp($crate::store::now() - IdempotencyKey::ttl()))
                .fetch_optional(pool)
                .await?;
                let Some((fingerprint, response)) = stored else {
                    return Ok(None);
                };
                let response = first_response(key, fingerprint, response)?;
                codec
                    .open(tenant, Column::IdempotencyResponse, response)
                    .map(Some)
            }

            /// Items from their rows, their payloads opened.
            fn open_items(codec: &PayloadCodec, tenant: &str, rows: Vec<ItemRow>) -> Result<Vec<Item>> {
                rows.into_iter()
                    .map(|row| row.into_item(codec, tenant))
                    .collect()
            }

            /// The items of an earlier append that still exist.
            async fn appended_items(
                conn: &mut $conn,
                codec: &PayloadCodec,
                tenant: &str,
                seqs: AppendedSeqs,
            ) -> Result<Vec<Item>> {
                let rows: Vec<ItemRow> = sqlx::query_as(&format!(
                    r"select {ITEM_COLUMNS} from items
                      where tenant_id = $1 and session_pk = $2 and seq between $3 and $4 order by seq"
                ))
                .bind(tenant)
                .bind(seqs.session_pk)
                .bind(seqs.first_seq)
                .bind(seqs.last_seq)
                .fetch_all(conn)
                .await?;
                open_items(codec, tenant, rows)
            }

            /// Makes one append within the transaction on `conn`: claims its key, gives
            /// out its seqs (creating the session with retention `default_expiry` if
            /// absent), writes its items and keeps the key's response.
            pub(super) async fn append_in(
                conn: &mut $conn,
                codec: &PayloadCodec,
                default_expiry: Option<ExpiresAfter>,
                append: &Append,
                now: Timestamp,
            ) -> Result<Appended> {
                let tenant = append.tenant.as_str();
                if let Some(key) = &append.idempotency {
                    if let Some((first, _)) = claim_key(conn, codec, tenant, key, now).await? {
                        let items = match first_append(key, &first)? {
                            FirstAppend::Items(items) => items,
                            FirstAppend::Seqs(seqs) => appended_items(conn, codec, tenant, seqs).await?,
                        };
                        return Ok(Appended { items, replayed: true });
                    }
                }
                let count = append.bodies.len() as i64;
                let (session_pk, last_seq) =
                    reserve_seqs(conn, tenant, &append.session_id, count, now, default_expiry).await?;
                let items = new_items(&append.bodies, last_seq, now.0);
                let sealed = items
                    .iter()
                    .map(|i| codec.seal(tenant, Column::ItemBody, i.item.get()))
                    .collect::<Result<Vec<_>>>()?;
                insert_items(conn, tenant, session_pk, &items, &sealed, now).await?;
                if let Some(key) = &append.idempotency {
                    let response = $crate::store::rows::to_json(&AppendedSeqs::of(session_pk, &items))?;
                    keep_response(conn, codec, tenant, key, &response).await?;
                }
                Ok(Appended {
                    items,
                    replayed: false,
                })
            }

            /// What the append queue's writer task writes with: the connection it keeps
            /// (or, keeping none, the writer pool's), codec and default retention.
            struct Writes {
                connection: Arc<HeldConnections<$db>>,
                codec: PayloadCodec,
                default_expiry: Option<ExpiresAfter>,
            }

            #[async_trait]
            impl Appender for Writes {
                async fn append_one(&self, append: &Append) -> Result<Appended> {
                    let mut conn = self.connection.take().await?;
                    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
                    let appended =
                        append_in(&mut tx, &self.codec, self.default_expiry, append, Timestamp::now()).await?;
                    tx.commit().await?;
                    conn.keep();
                    Ok(appended)
                }

                async fn append_many(
                    &self,
                    appends: &[Append],
                ) -> std::result::Result<Vec<Option<Appended>>, BatchFailed> {
                    let before = |e: StoreError| BatchFailed::BeforeCommit(e);
                    let mut conn = self.connection.take().await.map_err(|e| before(e.into()))?;
                    let mut tx = sqlx::Connection::begin(&mut *conn)
                        .await
                        .map_err(|e| before(e.into()))?;
                    let appended =
                        append_many(&mut tx, &self.codec, self.default_expiry, appends, Timestamp::now())
                            .await
                            .map_err(before)?;
                    tx.commit().await.map_err(|e| BatchFailed::AtCommit(e.into()))?;
                    conn.keep();
                    Ok(appended)
                }
            }

            #[async_trait]
            impl SessionStore for $store {
                async fn create_session(&self, tenant: &str, session: NewSession) -> Result<Session> {
                    let now = Timestamp::now();
                    let expiry = session.expires_after.unwrap_or(self.default_expiry);
                    let (anchor, seconds, expires_at) = expiry_columns(expiry, now, now);
                    let mut tx = self.writer().begin().await?;
                    // Taken by an expired session, the id is freed and the insert made again.
                    let row = loop {
                    let row: Option<SessionRow> = sqlx::query_as(&format!(
                        r"insert into sessions (tenant_id, id, created_at, updated_at, last_active_at, metadata, agent_id,
                                                expires_anchor, expires_seconds, expires_at)
                          values ($1, $2, $3, $3, $3, $4, $5, $6, $7, $8)
                          on conflict (tenant_id, id) do nothing
                          returning {SESSION_COLUMNS}"
                    ))
                    .bind(tenant)
                    .bind(session.id.as_str())
                    .bind(now)
                    .bind(Json(&session.metadata))
                    .bind(session.agent_id.as_ref().map(AgentId::as_str))
                    .bind(anchor)
                    .bind(seconds)
                    .bind(expires_at)
                    .fetch_optional(&mut *tx)
                    .await?;
                    if row.is_some() || !forget_expired(&mut tx, tenant, &session.id).await? {
                        break row;
                    }
                    };
                    tx.commit().await?;
                    row.map(Session::from).ok_or(StoreError::SessionExists)
                }

                async fn get_session(&self, tenant: &str, id: &SessionId) -> Result<Session> {
                    let row: Option<SessionRow> = sqlx::query_as(&format!(
                        "select {SESSION_COLUMNS} from sessions where tenant_id = $1 and id = $2 and {}",
                        live("sessions", NOW)
                    ))
                    .bind(tenant)
                    .bind(id.as_str())
                    .fetch_optional(self.reader())
                    .await?;
                    row.map(Session::from).ok_or(StoreError::SessionNotFound)
                }

                async fn list_sessions(
                    &self,
                    tenant: &str,
                    metadata: &[(String, String)],
                    page: &PageRequest,
                ) -> Result<Page<Session>> {
                    let cursor: Option<(Timestamp, i64)> = match page.cursor_id() {
                        Some(id) => Some(
                            sqlx::query_as(&format!(
                                "select created_at, pk from sessions where tenant_id = $1 and id = $2 and {}",
                                live("sessions", NOW)
                            ))
                            .bind(tenant)
                            .bind(id)
                            .fetch_optional(self.reader())
                            .await?
                            .ok_or(StoreError::UnknownCursor)?,
                        ),
                        None => None,
                    };
                    let scan = page.scan_order();
                    let mut query = QueryBuilder::<$db>::new(format!(
                        "select {SESSION_COLUMNS} from sessions where tenant_id = "
                    ));
                    query.push_bind(tenant);
                    query.push(format!(" and {}", live("sessions", NOW)));
                    for (key, value) in metadata {
                        push_metadata_filter(&mut query, key, value);
                    }
                    if let Some((created_at, pk)) = cursor {
                        query.push(format!(" and (created_at, pk) {} (", beyond(scan)));
                        query.push_bind(created_at).push(", ").push_bind(pk).push(")");
                    }
                    let dir = direction(scan);
                    query.push(format!(" order by created_at {dir}, pk {dir} limit "));
                    query.push_bind(page.fetch_limit());
                    let rows: Vec<SessionRow> =
                        query.build_query_as().fetch_all(self.reader()).await?;
                    let sessions = rows.into_iter().map(Session::from).collect();
                    Ok(page.finish(sessions, false, |s| s.id.clone()))
                }

                async fn update_session(
                    &self,
                    tenant: &str,
                    id: &SessionId,
                    patch: SessionPatch,
                ) -> Result<Session> {
                    let mut tx = self.writer().begin().await?;
                    let current: Option<PatchedRow> =
                        sqlx::query_as(&format!(
                            r"select pk, metadata, agent_id, created_at, last_active_at, expires_anchor, expires_seconds
                              from sessions where tenant_id = $1 and id = $2 and {}{FOR_UPDATE}",
                            live("sessions", NOW)
                        ))
                        .bind(tenant)
                        .bind(id.as_str())
                        .fetch_optional(&mut *tx)
                        .await?;
                    let current = current.ok_or(StoreError::SessionNotFound)?;
                    let now = Timestamp::now();
                    let expiry = match patch.expires_after {
                        Some(expiry) => expiry,
                        None => stored_expiry(current.expires_anchor.as_deref(), current.expires_seconds),
                    };
                    // A new retention counts from now when it counts from activity: the
                    // change itself is no append, but an expiry in the past would delete a
                    // session its owner just chose to keep.
                    let last_active = match expiry {
                        Some(e) if e.anchor == Anchor::LastActiveAt && patch.expires_after.is_some() => now,
                        _ => current.last_active_at,
                    };
                    let (anchor, seconds, expires_at) = expiry_columns(expiry, current.created_at, last_active);
                    let (metadata, agent_id) = patch.apply(current.metadata.0, current.agent_id)?;
                    let row: SessionRow = sqlx::query_as(&format!(
                        r"update sessions set metadata = $3, agent_id = $4, updated_at = $5, last_active_at = $6,
                              expires_anchor = $7, expires_seconds = $8, expires_at = $9
                          where tenant_id = $1 and pk = $2
                          returning {SESSION_COLUMNS}"
                    ))
                    .bind(tenant)
                    .bind(current.pk)
                    .bind(Json(&metadata))
                    .bind(agent_id)
                    .bind(now)
                    .bind(last_active)
                    .bind(anchor)
                    .bind(seconds)
                    .bind(expires_at)
                    .fetch_one(&mut *tx)
                    .await?;
                    tx.commit().await?;
                    Ok(row.into())
                }

                async fn delete_session(&self, tenant: &str, id: &SessionId) -> Result<()> {
                    let deleted = sqlx::query(&format!(
                        "delete from sessions where tenant_id = $1 and id = $2 and {}",
                        live("sessions", NOW)
                    ))
                        .bind(tenant)
                        .bind(id.as_str())
                        .execute(self.writer())
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
                    let append = Append {
                        tenant: tenant.to_owned(),
                        session_id: session_id.clone(),
                        bodies,
                        idempotency,
                    };
                    self.appends().append(append).await
                }

                async fn list_items(
                    &self,
                    tenant: &str,
                    session_id: &SessionId,
                    page: &PageRequest,
                ) -> Result<Page<Item>> {
                    static ITEMS_PAGE: std::sync::LazyLock<ItemsPage> =
                        std::sync::LazyLock::new(|| ItemsPage::new(NOW));
                    let cursor = uuid_cursor(page);
                    let mut query = sqlx::query_as(ITEMS_PAGE.sql(page.scan_order(), cursor.is_some()))
                        .bind(tenant)
                        .bind(session_id.as_str())
                        .bind(page.fetch_limit());
                    if let Some(cursor) = cursor {
                        query = query.bind(cursor);
                    }
                    let mut conn = self.page_readers().take().await?;
                    let (rows, cut_short) = read_item_rows(query.fetch(&mut *conn)).await?;
                    // A page cut short left rows unread on the connection: the pool's
                    // check on its return flushes them, or (Postgres) it is closed.
                    if !cut_short {
                        conn.keep();
                    }
                    if rows.is_empty() {
                        let cursor_item = cursor.map(|id| self.get_item(tenant, session_id, id));
                        explain_empty_page(self, tenant, session_id, cursor_item).await?;
                    }
                    let items = self.items(tenant, rows)?;
                    Ok(page.finish(items, cut_short, |i| i.id.to_string()))
                }

                async fn get_item(
                    &self,
                    tenant: &str,
                    session_id: &SessionId,
                    item_id: Uuid,
                ) -> Result<Item> {
                    let row: Option<ItemRow> = sqlx::query_as(&format!(
                        r"select i.id, i.seq, i.created_at, i.run_id, i.body
                          from items i join sessions s on s.pk = i.session_pk
                          where s.tenant_id = $1 and s.id = $2 and i.tenant_id = $1 and i.id = $3 and {}",
                        live("s", NOW)
                    ))
                    .bind(tenant)
                    .bind(session_id.as_str())
                    .bind(item_id)
                    .fetch_optional(self.reader())
                    .await?;
                    match row {
                        Some(row) => row.into_item(&self.codec, tenant),
                        None => {
                            session_pk(&mut *self.reader().acquire().await?, tenant, session_id).await?;
                            Err(StoreError::ItemNotFound)
                        }
                    }
                }

                async fn delete_item(
                    &self,
                    tenant: &str,
                    session_id: &SessionId,
                    item_id: Uuid,
                ) -> Result<()> {
                    let mut tx = self.writer().begin().await?;
                    let session_pk = session_pk(&mut tx, tenant, session_id).await?;
                    let deleted: Option<(i64, Option<Uuid>)> = sqlx::query_as(
                        "delete from items where tenant_id = $1 and session_pk = $2 and id = $3 returning seq, run_id",
                    )
                    .bind(tenant)
                    .bind(session_pk)
                    .bind(item_id)
                    .fetch_optional(&mut *tx)
                    .await?;
                    let (seq, run_id) = deleted.ok_or(StoreError::ItemNotFound)?;
                    drop_compactions(&mut tx, tenant, session_pk, seq).await?;
                    drop_runs(&mut tx, tenant, session_pk, run_id).await?;
                    count_items(&mut tx, tenant, session_pk, -1).await?;
                    tx.commit().await?;
                    Ok(())
                }

                async fn pop_last_item(&self, tenant: &str, session_id: &SessionId) -> Result<Item> {
                    let mut tx = self.writer().begin().await?;
                    let session_pk = session_pk(&mut tx, tenant, session_id).await?;
                    let row: Option<ItemRow> = sqlx::query_as(&format!(
                        r"delete from items where tenant_id = $1 and session_pk = $2 and id = (
                              select id from items where tenant_id = $1 and session_pk = $2
                              order by seq desc limit 1
                          )
                          returning {ITEM_COLUMNS}"
                    ))
                    .bind(tenant)
                    .bind(session_pk)
                    .fetch_optional(&mut *tx)
                    .await?;
                    let row = row.ok_or(StoreError::SessionEmpty)?;
                    let item = row.into_item(&self.codec, tenant)?;
                    drop_compactions(&mut tx, tenant, session_pk, item.seq).await?;
                    drop_runs(&mut tx, tenant, session_pk, item.run_id).await?;
                    count_items(&mut tx, tenant, session_pk, -1).await?;
                    tx.commit().await?;
                    Ok(item)
                }

                async fn clear_items(&self, tenant: &str, session_id: &SessionId) -> Result<()> {
                    let mut tx = self.writer().begin().await?;
                    let session_pk = session_pk(&mut tx, tenant, session_id).await?;
                    let cleared =
                        sqlx::query("delete from items where tenant_id = $1 and session_pk = $2")
                            .bind(tenant)
                            .bind(session_pk)
                            .execute(&mut *tx)
                            .await?
                            .rows_affected();
                    drop_compactions(&mut tx, tenant, session_pk, 0).await?;
                    drop_runs(&mut tx, tenant, session_pk, None).await?;
                    count_items(&mut tx, tenant, session_pk, -(cleared as i64)).await?;
                    tx.commit().await?;
                    Ok(())
                }

                async fn purge_idempotency_keys(&self, cutoff: DateTime<Utc>) -> Result<u64> {
                    let purged = sqlx::query("delete from idempotency_keys where created_at < $1")
                        .bind(Timestamp(cutoff))
                        .execute(self.writer())
                        .await?
                        .rows_affected();
                    Ok(purged)
                }

                async fn sweep_expired(&self, batch: i64) -> Result<Swept> {
                    let counts: Vec<i64> = sqlx::query_scalar(&format!(
                        r"delete from sessions where pk in (
                              select pk from sessions
                              where expires_at <= {NOW} and not exists (
                                  select 1 from runs r where r.session_pk = sessions.pk and r.status in {UNFINISHED})
                              order by expires_at limit $1{SKIP_LOCKED})
                          returning item_count"
                    ))
                    .bind(batch)
                    .fetch_all(self.writer())
                    .await?;
                    Ok(Swept {
                        sessions: counts.len() as u64,
                        items: counts.iter().sum::<i64>() as u64,
                    })
                }

                async fn ping(&self) -> Result<()> {
                    sqlx::query("select 1").execute(self.reader()).await?;
                    Ok(())
                }

                fn append_stats(&self) -> AppendStats {
                    self.appends.get().map(Combiner::stats).unwrap_or_default()
                }

                fn pool_stats(&self) -> PoolStats {
                    let pooled = self.pools()
                        .into_iter()
                        .fold(PoolStats::default(), |stats, pool| {
                            let size = pool.size();
                            let idle = pool.num_idle() as u32;
                            PoolStats {
                                in_use: stats.in_use + size.saturating_sub(idle),
                                idle: stats.idle + idle,
                            }
                        });
                    let parked = self.page_readers().parked() + self.append_writer().parked();
                    PoolStats {
                        in_use: pooled.in_use.saturating_sub(parked),
                        idle: pooled.idle + parked,
                    }
                }
            }

            impl $store {
                /// The queue that combines appends, started by the first one.
                fn appends(&self) -> &Combiner {
                    self.appends.get_or_init(|| {
                        Combiner::start(Writes {
                            connection: self.append_writer().clone(),
                            codec: self.codec.clone(),
                            default_expiry: self.default_expiry,
                        })
                    })
                }

                /// Items from their rows, their payloads opened.
                fn items(&self, tenant: &str, rows: Vec<ItemRow>) -> Result<Vec<Item>> {
                    open_items(&self.codec, tenant, rows)
                }
            }
        }
        use session_flows::{claim_key, forget_expired, keep_response, kept_response, session_pk};
    };
}

pub(crate) use session_store;
