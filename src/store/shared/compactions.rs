//! Compactions and forks, written once for both backends.

/// The `CompactionStore` of `$store`. The backend module provides `new_id` (the SQL of
/// a UUIDv7 from a prefix and a rank) and `SNAPSHOT` (the statement that makes a
/// transaction read one snapshot, if its default does not); the session flows provide
/// `session_pk`, `forget_expired`, `claim_key` and `keep_response`; the parent `NOW`.
macro_rules! compaction_store {
    ($store:ident, $conn:ty) => {
        mod compaction_flows {
            use async_trait::async_trait;
            use sqlx::types::Json;
            use uuid::Uuid;

            use super::*;
            use $crate::model::{
                Compaction, ForkPoint, Metadata, NewFork, Page, PageRequest, SessionId,
            };
            use $crate::store::compactions::{fork_response, replayed_fork};
            use $crate::store::payload::Column;
            use $crate::store::pages::{beyond, direction, uuid_cursor};
            use $crate::store::rows::{
                expiry_columns, id_prefix, live, stored_expiry, CompactionRow, ItemRow, SessionRow,
                COMPACTION_COLUMNS, ITEM_COLUMNS, SESSION_COLUMNS,
            };
            use $crate::store::run_rows::UNFINISHED;
            use $crate::store::timestamp::Timestamp;
            use $crate::store::{
                CompactionStore, Context, Forked, Result, SessionStore, StoreError,
            };

            /// The session's key, for a read: unlike `session_pk`, it takes no row lock,
            /// which on Postgres would make every read write and flush.
            async fn read_session_pk(conn: &mut $conn, tenant: &str, id: &SessionId) -> Result<i64> {
                sqlx::query_scalar(&format!(
                    "select pk from sessions where tenant_id = $1 and id = $2 and {}",
                    live("sessions", NOW)
                ))
                    .bind(tenant)
                    .bind(id.as_str())
                    .fetch_optional(conn)
                    .await?
                    .ok_or(StoreError::SessionNotFound)
            }

            /// The newest compaction of the session.
            async fn latest(
                conn: &mut $conn,
                tenant: &str,
                session_pk: i64,
            ) -> Result<Option<CompactionRow>> {
                Ok(sqlx::query_as(&format!(
                    r"select {COMPACTION_COLUMNS} from compactions
                      where tenant_id = $1 and session_pk = $2 order by pk desc limit 1"
                ))
                .bind(tenant)
                .bind(session_pk)
                .fetch_optional(conn)
                .await?)
            }

            /// Fails with `SessionBusy` while the session has an unfinished run.
            async fn require_idle(conn: &mut $conn, tenant: &str, session_pk: i64) -> Result<()> {
                let active: Option<Uuid> = sqlx::query_scalar(&format!(
                    r"select id from runs where tenant_id = $1 and session_pk = $2 and status in {UNFINISHED}
                      order by pk limit 1"
                ))
                .bind(tenant)
                .bind(session_pk)
                .fetch_optional(conn)
                .await?;
                active.map_or(Ok(()), |run| Err(StoreError::SessionBusy(run)))
            }

            /// The seq of the newest item a fork copies.
            async fn fork_through(
                conn: &mut $conn,
                tenant: &str,
                source_pk: i64,
                point: ForkPoint,
            ) -> Result<i64> {
                match point {
                    ForkPoint::All => Ok(i64::MAX),
                    ForkPoint::ThroughItem(item) => sqlx::query_scalar(
                        "select seq from items where tenant_id = $1 and session_pk = $2 and id = $3",
                    )
                    .bind(tenant)
                    .bind(source_pk)
                    .bind(item)
                    .fetch_optional(conn)
                    .await?
                    .ok_or(StoreError::ItemNotFound),
                    ForkPoint::BeforeRun(run) => {
                        let found: Option<i64> = sqlx::query_scalar(
                            "select pk from runs where tenant_id = $1 and session_pk = $2 and id = $3",
                        )
                        .bind(tenant)
                        .bind(source_pk)
                        .bind(run)
                        .fetch_optional(&mut *conn)
                        .await?;
                        found.ok_or(StoreError::RunNotFound)?;
                        // A turn is appended whole, so its first item marks where it began.
                        let first: Option<i64> = sqlx::query_scalar(
                            "select min(seq) from items where tenant_id = $1 and session_pk = $2 and run_id = $3",
                        )
                        .bind(tenant)
                        .bind(source_pk)
                        .bind(run)
                        .fetch_one(conn)
                        .await?;
                        Ok(first.map_or(i64::MAX, |seq| seq - 1))
                    }
                }
            }

            #[async_trait]
            impl CompactionStore for $store {
                async fn latest_compaction(
                    &self,
                    tenant: &str,
                    session_id: &SessionId,
                ) -> Result<Option<Compaction>> {
                    let mut conn = self.reader().acquire().await?;
                    let session_pk = read_session_pk(&mut conn, tenant, session_id).await?;
                    latest(&mut conn, tenant, session_pk)
                        .await?
                        .map(|row| row.into_compaction(&self.codec, tenant, session_id.as_str()))
                        .transpose()
                }

                async fn context(
                    &self,
                    tenant: &str,
                    session_id: &SessionId,
                    idle: bool,
                ) -> Result<Context> {
                    let mut conn = self.reader().acquire().await?;
                    let session_pk = read_session_pk(&mut conn, tenant, session_id).await?;
                    if idle {
                        require_idle(&mut conn, tenant, session_pk).await?;
                    }
                    let compaction = latest(&mut conn, tenant, session_pk)
                        .await?
                        .map(|row| row.into_compaction(&self.codec, tenant, session_id.as_str()))
                        .transpose()?;
                    let after = compaction.as_ref().map_or(0, |c| c.through_seq);
                    let rows: Vec<ItemRow> = sqlx::query_as(&format!(
                        r"select {ITEM_COLUMNS} from items
                          where tenant_id = $1 and session_pk = $2 and seq > $3 order by seq"
                    ))
                    .bind(tenant)
                    .bind(session_pk)
                    .bind(after)
                    .fetch_all(&mut *conn)
                    .await?;
                    let items = rows
                        .into_iter()
                        .map(|row| row.into_item(&self.codec, tenant))
                        .collect::<Result<Vec<_>>>()?;
                    Ok(Context { compaction, items })
                }

                async fn add_compaction(
                    &self,
                    tenant: &str,
                    session_id: &SessionId,
                    base: Option<&Compaction>,
                    summarised: i64,
                    compaction: &Compaction,
                ) -> Result<()> {
                    let mut tx = self.writer().begin().await?;
                    let session_pk = session_pk(&mut tx, tenant, session_id).await?;
                    if compaction.run_id.is_none() {
                        require_idle(&mut tx, tenant, session_pk).await?;
                    }
                    let usage = compaction.usage;
                    let summary =
                        self.codec
                            .seal(tenant, Column::CompactionSummary, compaction.summary.as_str())?;
                    let inserted = sqlx::query(
                        r"insert into compactions (tenant_id, id, session_pk, created_at, run_id,
                              through_item_id, through_seq, items_compacted, model,
                              input_tokens, output_tokens, total_tokens, llm_calls, summary)
                          select $1, $3, $2, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14
                          where exists (select 1 from items where tenant_id = $1 and session_pk = $2
                                          and id = $6 and seq = $7)
                            and (select count(*) from items where tenant_id = $1 and session_pk = $2
                                   and seq > $15 and seq <= $7) = $16
                            and ($17 is null or exists (select 1 from compactions
                                   where tenant_id = $1 and session_pk = $2 and id = $17))
                            and not exists (select 1 from compactions
                                   where tenant_id = $1 and session_pk = $2 and through_seq >= $7)",
                    )
                    .bind(tenant)
                    .bind(session_pk)
                    .bind(compaction.id)
                    .bind(Timestamp(compaction.created_at))
                    .bind(compaction.run_id)
                    .bind(compaction.through_item_id)
                    .bind(compaction.through_seq)
                    .bind(compaction.items_compacted)
                    .bind(&compaction.model)
                    .bind(usage.input_tokens)
                    .bind(usage.output_tokens)
                    .bind(usage.total_tokens)
                    .bind(usage.llm_calls)
                    .bind(summary)
                    .bind(base.map_or(0, |b| b.through_seq))
                    .bind(summarised)
                    .bind(base.map(|b| b.id))
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                    if inserted == 0 {
                        return Err(StoreError::HistoryChanged);
                    }
                    if compaction.run_id.is_none() {
                        sqlx::query(
                            r"update sessions set input_tokens = input_tokens + $3,
                                  output_tokens = output_tokens + $4, total_tokens = total_tokens + $5,
                                  llm_calls = llm_calls + $6, updated_at = $7
                              where tenant_id = $1 and pk = $2",
                        )
                        .bind(tenant)
                        .bind(session_pk)
                        .bind(usage.input_tokens)
                        .bind(usage.output_tokens)
                        .bind(usage.total_tokens)
                        .bind(usage.llm_calls)
                        .bind(Timestamp::now())
                        .execute(&mut *tx)
                        .await?;
                    }
                    tx.commit().await?;
                    Ok(())
                }

                async fn list_compactions(
                    &self,
                    tenant: &str,
                    session_id: &SessionId,
                    page: &PageRequest,
                ) -> Result<Page<Compaction>> {
                    let mut conn = self.reader().acquire().await?;
                    let session_pk = read_session_pk(&mut conn, tenant, session_id).await?;
                    let cursor = uuid_cursor(page);
                    let cursor_pk: Option<i64> = match cursor {
                        Some(id) => Some(
                            sqlx::query_scalar(
                                "select pk from compactions where tenant_id = $1 and session_pk = $2 and id = $3",
                            )
                            .bind(tenant)
                            .bind(session_pk)
                            .bind(id)
                            .fetch_optional(&mut *conn)
                            .await?
                            .ok_or(StoreError::UnknownCursor)?,
                        ),
                        None => None,
                    };
                    let scan = page.scan_order();
                    let rows: Vec<CompactionRow> = sqlx::query_as(&format!(
                        r"select {COMPACTION_COLUMNS} from compactions
                          where tenant_id = $1 and session_pk = $2 and ($3 is null or pk {} $3)
                          order by pk {} limit $4",
                        beyond(scan),
                        direction(scan)
                    ))
                    .bind(tenant)
                    .bind(session_pk)
                    .bind(cursor_pk)
                    .bind(page.fetch_limit())
                    .fetch_all(&mut *conn)
                    .await?;
                    let compactions = rows
                        .into_iter()
                        .map(|row| row.into_compaction(&self.codec, tenant, session_id.as_str()))
                        .collect::<Result<Vec<_>>>()?;
                    Ok(page.finish(compactions, false, |c| c.id.to_string()))
                }

                async fn fork_session(
                    &self,
                    tenant: &str,
                    source: &SessionId,
                    fork: NewFork,
                ) -> Result<Forked> {
                    let now = Timestamp::now();
                    let mut tx = self.writer().begin().await?;
                    if let Some(snapshot) = SNAPSHOT {
                        sqlx::query(snapshot).execute(&mut *tx).await?;
                    }
                    if let Some(key) = &fork.idempotency {
                        if let Some((first, _)) = claim_key(&mut tx, &self.codec, tenant, key, now).await? {
                            drop(tx);
                            let id = SessionId::parse("id", replayed_fork(&first)?)?;
                            let session = self.get_session(tenant, &id).await?;
                            return Ok(Forked { session, replayed: true });
                        }
                    }
                    type Source = (i64, Json<Metadata>, Option<String>, Option<String>, Option<i64>);
                    let found: Option<Source> = sqlx::query_as(&format!(
                        r"select pk, metadata, agent_id, expires_anchor, expires_seconds
                          from sessions where tenant_id = $1 and id = $2 and {}",
                        live("sessions", NOW)
                    ))
                    .bind(tenant)
                    .bind(source.as_str())
                    .fetch_optional(&mut *tx)
                    .await?;
                    let (source_pk, Json(metadata), agent_id, anchor, seconds) =
                        found.ok_or(StoreError::SessionNotFound)?;
                    // The fork keeps its source's retention, counted from now.
                    let (anchor, seconds, expires_at) =
                        expiry_columns(stored_expiry(anchor.as_deref(), seconds), now, now);
                    // An expired session under the fork's id frees it.
                    forget_expired(&mut tx, tenant, &fork.id).await?;
                    let through = fork_through(&mut tx, tenant, source_pk, fork.point).await?;
                    let (copied, newest): (i64, Option<i64>) = sqlx::query_as(
                        "select count(*), max(seq) from items where tenant_id = $1 and session_pk = $2 and seq <= $3",
                    )
                    .bind(tenant)
                    .bind(source_pk)
                    .bind(through)
                    .fetch_one(&mut *tx)
                    .await?;
                    let newest_id: Option<Uuid> = match newest {
                        Some(seq) => sqlx::query_scalar(
                            "select id from items where tenant_id = $1 and session_pk = $2 and seq = $3",
                        )
                        .bind(tenant)
                        .bind(source_pk)
                        .bind(seq)
                        .fetch_optional(&mut *tx)
                        .await?,
                        None => None,
                    };
                    let created: Option<SessionRow> = sqlx::query_as(&format!(
                        r"insert into sessions (tenant_id, id, created_at, updated_at, last_active_at, metadata, agent_id,
                              item_count, last_seq, forked_from_session_id, forked_from_item_id,
                              expires_anchor, expires_seconds, expires_at)
                          values ($1, $2, $3, $3, $3, $4, $5, $6, $6, $7, $8, $9, $10, $11)
                          on conflict (tenant_id, id) do nothing
                          returning pk, {SESSION_COLUMNS}"
                    ))
                    .bind(tenant)
                    .bind(fork.id.as_str())
                    .bind(now)
                    .bind(Json(fork.metadata.as_ref().unwrap_or(&metadata)))
                    .bind(agent_id)
                    .bind(copied)
                    .bind(source.as_str())
                    .bind(newest_id)
                    .bind(anchor)
                    .bind(seconds)
                    .bind(expires_at)
                    .fetch_optional(&mut *tx)
                    .await?;
                    let created = created.ok_or(StoreError::SessionExists)?;
                    let fork_pk = created.pk.ok_or_else(|| StoreError::Corrupt("a new session without pk".into()))?;
                    // Copies are made by the database: no row passes through the service.
                    sqlx::query(&format!(
                        r"insert into items (id, tenant_id, session_pk, seq, created_at, run_id, body)
                          select {}, tenant_id, $3, n, created_at, null, body
                          from (select row_number() over (order by seq) as n, tenant_id, created_at, body
                                from items where tenant_id = $1 and session_pk = $2 and seq <= $4) as copied",
                        new_id("$5", "n")
                    ))
                    .bind(tenant)
                    .bind(source_pk)
                    .bind(fork_pk)
                    .bind(through)
                    .bind(id_prefix())
                    .execute(&mut *tx)
                    .await?;
                    // A copied compaction ends at the copy of its item: the item's rank
                    // among the source's items is its seq in the fork.
                    sqlx::query(&format!(
                        r"insert into compactions (tenant_id, id, session_pk, created_at, run_id,
                              through_item_id, through_seq, items_compacted, model,
                              input_tokens, output_tokens, total_tokens, llm_calls, summary)
                          select c.tenant_id, {}, $3, c.created_at, null, n.id, n.seq,
                              c.items_compacted, c.model, c.input_tokens, c.output_tokens,
                              c.total_tokens, c.llm_calls, c.summary
                          from compactions c join items n on n.tenant_id = $1 and n.session_pk = $3
                              and n.seq = (select count(*) from items o where o.tenant_id = $1
                                             and o.session_pk = $2 and o.seq <= c.through_seq)
                          where c.tenant_id = $1 and c.session_pk = $2 and c.through_seq <= $4
                          order by c.pk",
                        new_id("$5", "row_number() over (order by c.pk)")
                    ))
                    .bind(tenant)
                    .bind(source_pk)
                    .bind(fork_pk)
                    .bind(through)
                    .bind(id_prefix())
                    .execute(&mut *tx)
                    .await?;
                    if let Some(key) = &fork.idempotency {
                        let response = fork_response(fork.id.as_str());
                        keep_response(&mut tx, &self.codec, tenant, key, &response).await?;
                    }
                    tx.commit().await?;
                    Ok(Forked {
                        session: created.into(),
                        replayed: false,
                    })
                }
            }
        }
    };
}

pub(crate) use compaction_store;
