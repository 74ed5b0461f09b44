//! Runs and their events, written once for both backends.
//!
//! Longer than most files: the macro holds the whole `RunStore` impl, which Rust wants
//! in one block.

/// The `RunStore` of `$store`. The backend's runs module provides the statements that
/// differ by dialect: `insert_run`, `write_run`, `finish`, `claim_next`, `save_events`;
/// its parent provides `FOR_UPDATE`, `SKIP_LOCKED`, `NOW`, `touch`, `claim_key`,
/// `forget_expired`, `keep_response` and `kept_response`.
macro_rules! run_store {
    ($store:ident, $conn:ty) => {
        mod run_flows {
            use std::time::Duration;

            use async_trait::async_trait;
            use uuid::Uuid;

            use super::*;
            use $crate::model::{
                IdempotencyKey, IfBusy, NewRun, Page, PageRequest, Run, RunEvent, RunRecord,
                RunStatus, SessionId, ToolOutput,
            };
            use $crate::store::idempotency::{replayed_run_id, run_response};
            use $crate::store::payload::PayloadCodec;
            use $crate::store::pages::{beyond, direction, explain_empty_page, uuid_cursor};
            use $crate::store::rows::{expiry_columns, live};
            use $crate::store::run_rows::{
                self, EventRow, LockedRunRow, RunRow, LOCKED_COLUMNS, RUN_COLUMNS, UNFINISHED,
            };
            use $crate::store::timestamp::Timestamp;
            use $crate::store::{
                Claim, CreatedRun, Result, RunStore, StartNow, StoreError,
            };

            /// The run with its bookkeeping, locked for the rest of the transaction where
            /// the backend locks rows.
            async fn find_run(
                conn: &mut $conn,
                tenant: &str,
                session_id: &SessionId,
                run_id: Uuid,
            ) -> Result<LockedRunRow> {
                let row = sqlx::query_as(&format!(
                    r"select {LOCKED_COLUMNS}, {RUN_COLUMNS} from runs r
                      where r.tenant_id = $1 and r.id = $3
                        and r.session_pk = (select pk from sessions where tenant_id = $1 and id = $2 and {live}){FOR_UPDATE}",
                    live = live("sessions", NOW)
                ))
                .bind(tenant)
                .bind(session_id.as_str())
                .bind(run_id)
                .fetch_optional(&mut *conn)
                .await?;
                match row {
                    Some(row) => Ok(row),
                    None => Err(missing_run(conn, tenant, session_id).await),
                }
            }

            /// Why a run lookup found nothing: the session or only the run is missing.
            async fn missing_run(conn: &mut $conn, tenant: &str, session_id: &SessionId) -> StoreError {
                match session_pk(conn, tenant, session_id).await {
                    Ok(_) => StoreError::RunNotFound,
                    Err(error) => error,
                }
            }

            /// The run that an earlier request with `key` created, or None with the key
            /// claimed for this request. A key whose run has been deleted since (with its
            /// session) is claimed afresh, so that the retry creates the run again rather
            /// than failing for a day.
            async fn replay_run(
                conn: &mut $conn,
                codec: &PayloadCodec,
                tenant: &str,
                session_id: &SessionId,
                key: &IdempotencyKey,
                now: Timestamp,
            ) -> Result<Option<Run>> {
                loop {
                    let Some((first, claimed_at)) = claim_key(conn, codec, tenant, key, now).await? else {
                        return Ok(None);
                    };
                    let run_id = replayed_run_id(&first)?;
                    match find_run(conn, tenant, session_id, run_id).await {
                        Ok(found) => return Ok(Some(found.run.into_record(codec, tenant)?.run)),
                        Err(StoreError::RunNotFound | StoreError::SessionNotFound) => {
                            // Only the claim that named the missing run: a concurrent retry
                            // that claimed the key afresh already is replayed on the next turn.
                            sqlx::query(
                                "delete from idempotency_keys where tenant_id = $1 and key = $2 and created_at = $3",
                            )
                            .bind(tenant)
                            .bind(&key.key)
                            .bind(claimed_at)
                            .execute(&mut *conn)
                            .await?;
                        }
                        Err(error) => return Err(error),
                    }
                }
            }

            #[async_trait]
            impl RunStore for $store {
                async fn create_run(
                    &self,
                    tenant: &str,
                    session_id: &SessionId,
                    run: NewRun,
                    if_busy: IfBusy,
                    start: Option<StartNow>,
                ) -> Result<CreatedRun> {
                    let now = Timestamp::now();
                    let mut tx = self.writer().begin().await?;
                    let key = run.idempotency.clone();
                    if let Some(key) = &key {
                        let replayed =
                            replay_run(&mut tx, &self.codec, tenant, session_id, key, now).await?;
                        if let Some(run) = replayed {
                            return Ok(CreatedRun {
                                run,
                                claim: None,
                                replayed: true,
                            });
                        }
                    }
                    // The upsert takes the session's row lock (Postgres), which orders
                    // concurrent run creation. A run is activity; an expired session is
                    // forgotten and its id starts a new one.
                    let (anchor, seconds, expires_at) = expiry_columns(self.default_expiry, now, now);
                    // The session's item count, read under that lock: a run started on an
                    // empty session has no history to read.
                    static UPSERT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
                        format!(
                            r"insert into sessions (tenant_id, id, created_at, updated_at, last_active_at,
                                                    expires_anchor, expires_seconds, expires_at)
                              values ($1, $2, $3, $3, $3, $4, $5, $6)
                              on conflict (tenant_id, id) do update set {} where {}
                              returning pk, item_count = 0",
                            touch("$3"),
                            live("sessions", NOW)
                        )
                    });
                    let (session_pk, empty): (i64, bool) = loop {
                        let upserted = sqlx::query_as(&UPSERT)
                        .bind(tenant)
                        .bind(session_id.as_str())
                        .bind(now)
                        .bind(anchor)
                        .bind(seconds)
                        .bind(expires_at)
                        .fetch_optional(&mut *tx)
                        .await?;
                        match upserted {
                            Some(upserted) => break upserted,
                            None => {
                                forget_expired(&mut tx, tenant, session_id).await?;
                            }
                        }
                    };
                    // The lease runs from now: the session lock may have kept this request
                    // waiting.
                    let started = Timestamp::now();
                    let (record, created) = run_rows::new_run(session_id, run, now.0);
                    let new = run_rows::NewRunRow {
                        tenant,
                        session_pk,
                        record: &record,
                        first_event: &created,
                        start,
                        if_busy,
                        created_at: now,
                        started_at: started,
                    };
                    let Some(inserted) = insert_run(&mut tx, &self.codec, new).await? else {
                        let active = sqlx::query_scalar(&format!(
                            "select id from runs where session_pk = $1 and status in {UNFINISHED} order by pk limit 1"
                        ))
                        .bind(session_pk)
                        .fetch_one(&mut *tx)
                        .await?;
                        return Err(StoreError::SessionBusy(active));
                    };
                    let start = start.filter(|_| inserted.started);
                    if let Some(key) = &key {
                        let response = run_response(record.run.id);
                        keep_response(&mut tx, &self.codec, tenant, key, &response).await?;
                    }
                    tx.commit().await?;
                    let claim = start.map(|s| {
                        let record = record.clone();
                        run_rows::claim_new(tenant, inserted.pk, s.worker, record, started.0, empty)
                    });
                    Ok(CreatedRun {
                        run: record.run,
                        claim,
                        replayed: false,
                    })
                }

                async fn get_run(&self, tenant: &str, session_id: &SessionId, run_id: Uuid) -> Result<Run> {
                    let mut conn = self.reader().acquire().await?;
                    let row: Option<RunRow> = sqlx::query_as(&format!(
                        r"select {RUN_COLUMNS} from runs r
                          where r.tenant_id = $1 and r.id = $3
                            and r.session_pk = (select pk from sessions where tenant_id = $1 and id = $2 and {live})",
                        live = live("sessions", NOW)
                    ))
                    .bind(tenant)
                    .bind(session_id.as_str())
                    .bind(run_id)
                    .fetch_optional(&mut *conn)
                    .await?;
                    match row {
                        Some(row) => Ok(row.into_record(&self.codec, tenant)?.run),
                        None => Err(missing_run(&mut conn, tenant, session_id).await),
                    }
                }

                async fn replayed_run_id(&self, tenant: &str, key: &IdempotencyKey) -> Result<Option<Uuid>> {
                    kept_response(self.reader(), &self.codec, tenant, key)
                        .await?
                        .map(|response| replayed_run_id(&response))
                        .transpose()
                }

                async fn list_runs(
                    &self,
                    tenant: &str,
                    session_id: &SessionId,
                    page: &PageRequest,
                ) -> Result<Page<Run>> {
                    let cursor = uuid_cursor(page);
                    let scan = page.scan_order();
                    let rows: Vec<RunRow> = sqlx::query_as(&format!(
                        r"select {RUN_COLUMNS} from runs r
                          where r.tenant_id = $1
                            and r.session_pk = (select pk from sessions where tenant_id = $1 and id = $2 and {live})
                            and ($3 is null or r.pk {} (select c.pk from runs c where c.tenant_id = $1 and c.id = $3
                                                        and c.session_pk = r.session_pk))
                          order by r.pk {} limit $4",
                        beyond(scan),
                        direction(scan),
                        live = live("sessions", NOW)
                    ))
                    .bind(tenant)
                    .bind(session_id.as_str())
                    .bind(cursor)
                    .bind(page.fetch_limit())
                    .fetch_all(self.reader())
                    .await?;
                    if rows.is_empty() {
                        let cursor_run = cursor.map(|id| self.get_run(tenant, session_id, id));
                        explain_empty_page(self, tenant, session_id, cursor_run).await?;
                    }
                    let runs = rows
                        .into_iter()
                        .map(|row| row.into_record(&self.codec, tenant).map(|r| r.run))
                        .collect::<Result<Vec<_>>>()?;
                    Ok(page.finish(runs, false, |r| r.id.to_string()))
                }

                async fn run_events(
                    &self,
                    tenant: &str,
                    session_id: &SessionId,
                    run_id: Uuid,
                    after: i64,
                ) -> Result<(Vec<RunEvent>, RunStatus)> {
                    let mut conn = self.reader().acquire().await?;
                    let run: Option<(i64, String)> = sqlx::query_as(&format!(
                        r"select r.pk, r.status from runs r
                          where r.tenant_id = $1 and r.id = $3
                            and r.session_pk = (select pk from sessions where tenant_id = $1 and id = $2 and {live})",
                        live = live("sessions", NOW)
                    ))
                    .bind(tenant)
                    .bind(session_id.as_str())
                    .bind(run_id)
                    .fetch_optional(&mut *conn)
                    .await?;
                    let Some((run_pk, status)) = run else {
                        return Err(missing_run(&mut conn, tenant, session_id).await);
                    };
                    // The status is read first: events committed with a final status are
                    // then certainly among those read next.
                    let status = RunStatus::parse(&status)
                        .ok_or_else(|| StoreError::Corrupt(format!("run status `{status}`")))?;
                    let rows: Vec<EventRow> = sqlx::query_as(
                        "select seq, event, data from run_events where run_pk = $1 and seq > $2 order by seq",
                    )
                    .bind(run_pk)
                    .bind(after)
                    .fetch_all(&mut *conn)
                    .await?;
                    Ok((run_rows::events(rows, &self.codec, tenant)?, status))
                }

                async fn cancel_run(&self, tenant: &str, session_id: &SessionId, run_id: Uuid) -> Result<Run> {
                    let now = Timestamp::now();
                    let mut tx = self.writer().begin().await?;
                    let locked = find_run(&mut tx, tenant, session_id, run_id).await?;
                    let mut record = locked.run.into_record(&self.codec, tenant)?;
                    let event = run_rows::cancel(&mut record, locked.last_event_seq, now.0)?;
                    write_run(&mut tx, &self.codec, tenant, locked.pk, &record, &[event], None, now).await?;
                    tx.commit().await?;
                    Ok(record.run)
                }

                async fn submit_tool_outputs(
                    &self,
                    tenant: &str,
                    session_id: &SessionId,
                    run_id: Uuid,
                    outputs: &[ToolOutput],
                ) -> Result<(Run, i64)> {
                    let mut tx = self.writer().begin().await?;
                    let locked = find_run(&mut tx, tenant, session_id, run_id).await?;
                    let mut record = locked.run.into_record(&self.codec, tenant)?;
                    run_rows::resume(&mut record, outputs)?;
                    write_run(&mut tx, &self.codec, tenant, locked.pk, &record, &[], None, Timestamp::now()).await?;
                    tx.commit().await?;
                    Ok((record.run, locked.last_event_seq))
                }

                async fn claim_run(
                    &self,
                    worker: Uuid,
                    lease: Duration,
                    tenant_limit: Option<std::num::NonZeroU32>,
                ) -> Result<Option<Claim>> {
                    let now = Timestamp::now();
                    let limit = tenant_limit.map(|n| i64::from(n.get()));
                    let row = claim_next(self.writer(), worker, Timestamp(now.0 + lease), now, limit).await?;
                    row.map(|row| row.into_claim(&self.codec, worker)).transpose()
                }

                async fn renew_lease(&self, claim: &Claim, lease: Duration) -> Result<bool> {
                    let renewed = sqlx::query(
                        r"update runs set lease_expires_at = $3
                          where pk = $1 and lease_owner = $2 and status = 'running'",
                    )
                    .bind(claim.run_pk)
                    .bind(claim.worker)
                    .bind(Timestamp($crate::store::now() + lease))
                    .execute(self.writer())
                    .await?;
                    Ok(renewed.rows_affected() == 1)
                }

                async fn save_run_events(&self, claim: &Claim, events: &[RunEvent]) -> Result<bool> {
                    save_events(self.writer(), &self.codec, claim, events).await
                }

                async fn finish_run(
                    &self,
                    claim: &Claim,
                    record: &RunRecord,
                    events: &[RunEvent],
                ) -> Result<bool> {
                    finish(self.writer(), &self.codec, claim, record, events, Timestamp::now()).await
                }

                async fn recover_expired_runs(&self, max_attempts: u32) -> Result<(u64, u64)> {
                    let now = Timestamp::now();
                    let mut tx = self.writer().begin().await?;
                    // `status in …` is spelled as in runs_active_idx, which SQLite uses only then.
                    let expired: Vec<LockedRunRow> = sqlx::query_as(&format!(
                        r"select {LOCKED_COLUMNS}, {RUN_COLUMNS} from runs r
                          where r.status in {UNFINISHED} and r.status = 'running'
                            and r.lease_owner is not null and r.lease_expires_at < $1{SKIP_LOCKED}"
                    ))
                    .bind(now)
                    .fetch_all(&mut *tx)
                    .await?;
                    let (mut requeued, mut failed) = (0, 0);
                    for row in expired {
                        if row.attempts < i64::from(max_attempts) {
                            sqlx::query(
                                r"update runs set status = 'queued', lease_owner = null, lease_expires_at = null
                                  where pk = $1",
                            )
                            .bind(row.pk)
                            .execute(&mut *tx)
                            .await?;
                            requeued += 1;
                        } else {
                            let (pk, seq) = (row.pk, row.last_event_seq);
                            let tenant = row.tenant_id.clone();
                            let mut record = row.run.into_record(&self.codec, &tenant)?;
                            let event = run_rows::lost(&mut record, seq, now.0);
                            write_run(&mut tx, &self.codec, &tenant, pk, &record, &[event], None, now).await?;
                            failed += 1;
                        }
                    }
                    tx.commit().await?;
                    Ok((requeued, failed))
                }
            }
        }
    };
}

pub(crate) use run_store;
