//! Creating a run: answering a retry of its Idempotency-Key, its If-Match, the session's
//! upsert under its row lock, and the insert that queues the run or starts it at once.
//! Creations with no key, no If-Match and no input to steer queue to be combined (`creation_writer`); what a
//! combined transaction leaves to its caller is made here alone.

use std::borrow::Cow;

use super::backend::runs::insert_run;
use super::backend::{touch, Store, NOW};
use super::binds::BindAll;
use super::idempotency_keys::{claim_key, keep_response};
use super::runs::find_run;
use super::sessions::{forget_expired, session_pk_at, BindExpiry};
use super::steering::join;
use super::Conn;
use crate::model::{IdempotencyKey, IfBusy, NewRun, Run, SessionId};
use crate::store::combined_writes::Creation;
use crate::store::idempotency::{replayed_run_id, run_response};
use crate::store::payload::PayloadCodec;
use crate::store::rows::{expiry_columns, live};
use crate::store::run_rows::{self, NewRunRow, UNFINISHED};
use crate::store::timestamp::Timestamp;
use crate::store::{CreatedRun, Result, StartNow, StoreError};

/// Binds a new run's columns as both backends' inserts number them, `$1` to `$8`: its
/// tenant, id, session, creation, stored body, start, and the lease it starts under.
pub(in crate::store) trait BindNewRun<'q> {
    fn bind_new_run(self, run: &NewRunRow<'q>, body: Cow<'q, str>) -> Self;
}

impl<'q, S: BindAll<'q>> BindNewRun<'q> for S {
    fn bind_new_run(self, run: &NewRunRow<'q>, body: Cow<'q, str>) -> Self {
        self.bind_all((
            run.tenant,
            run.record.run.id,
            run.session_pk,
            run.created_at,
            body,
            run.started_at,
            run.lease_owner(),
            run.lease_expires_at(),
        ))
    }
}

/// The run that an earlier request with `key` created, or None with the key
/// claimed for this request. A key whose run has been deleted since (with its
/// session) is claimed afresh, so that the retry creates the run again rather
/// than failing for a day.
async fn replay_run(
    conn: &mut Conn, codec: &PayloadCodec, tenant: &str, session_id: &SessionId,
    key: &IdempotencyKey, now: Timestamp,
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
                .bind_all((tenant, &key.key, claimed_at))
                .execute(&mut *conn)
                .await?;
            }
            Err(error) => return Err(error),
        }
    }
}

/// Creates the run (see `RunStore::create_run`).
pub(super) async fn create(
    store: &Store, tenant: &str, session_id: &SessionId, run: NewRun, if_busy: IfBusy,
    start: Option<StartNow>, agentless: bool,
) -> Result<CreatedRun> {
    if run.idempotency.is_none() && run.if_match.is_none() && if_busy != IfBusy::Steer {
        let (tenant, session_id) = (tenant.to_owned(), session_id.clone());
        let creation = Creation { tenant, session_id, run: run.clone(), if_busy, start };
        if let Some(created) = store.creations().submit(creation).await? {
            return Ok(created);
        }
    }
    let now = Timestamp::now();
    let mut tx = store.writer().begin().await?;
    let key = run.idempotency.clone();
    if let Some(key) = &key {
        let replayed = replay_run(&mut tx, &store.codec, tenant, session_id, key, now).await?;
        if let Some(run) = replayed {
            return Ok(CreatedRun { run, claim: None, replayed: true });
        }
    }
    if run.if_match.is_some() {
        // Under the session's row lock, which the upsert below then holds: the session
        // cannot change between the check and the run's insert.
        session_pk_at(&mut tx, tenant, session_id, run.if_match).await?;
    }
    // The upsert takes the session's row lock (Postgres), which orders
    // concurrent run creation. A run is activity; an expired session is
    // forgotten and its id starts a new one.
    let retention = expiry_columns(store.default_expiry, now, now);
    // The session's item count and agent, read under that lock: a run started
    // on an empty session has no history to read.
    static UPSERT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            r"insert into sessions (tenant_id, id, created_at, updated_at, last_active_at,
                                    expires_anchor, expires_seconds, expires_at)
              values ($1, $2, $3, $3, $3, $4, $5, $6)
              on conflict (tenant_id, id) do update set {} where {}
              returning pk, item_count = 0, agent_id",
            touch("$3"),
            live("sessions", NOW)
        )
    });
    let (session_pk, empty, agent): (i64, bool, Option<String>) = loop {
        let upserted = sqlx::query_as(&UPSERT)
            .bind_all((tenant, session_id.as_str(), now))
            .bind_expiry(retention)
            .fetch_optional(&mut *tx)
            .await?;
        match upserted {
            Some(upserted) => break upserted,
            None => {
                forget_expired(&mut tx, tenant, session_id).await?;
            }
        }
    };
    if if_busy == IfBusy::Steer {
        if let Some(active) = join(&mut tx, &store.codec, tenant, session_pk, &run, now).await? {
            if let Some(key) = &key {
                keep_response(&mut tx, &store.codec, tenant, key, &run_response(active.id)).await?;
            }
            tx.commit().await?;
            return Ok(CreatedRun { run: active, claim: None, replayed: false });
        }
    }
    if let Some(agent) = agent.filter(|_| agentless) {
        return Err(StoreError::SessionHasAgent(agent));
    }
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
    let Some(inserted) = insert_run(&mut tx, &store.codec, new).await? else {
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
        keep_response(&mut tx, &store.codec, tenant, key, &response).await?;
    }
    tx.commit().await?;
    let claim = start.map(|s| {
        let record = record.clone();
        run_rows::claim_new(tenant, inserted.pk, s.worker, record, started.0, empty)
    });
    Ok(CreatedRun { run: record.run, claim, replayed: false })
}
