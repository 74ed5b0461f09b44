//! Run creations combined on Postgres: a batch's sessions in one statement and its runs
//! in another, whatever their number, so that the batch costs about what one creation
//! does.

use std::collections::HashMap;
use std::sync::LazyLock;

use sqlx::PgConnection;
use uuid::Uuid;

use super::shared::binds::BindAll;
use super::{touch, NOW};
use crate::model::IfBusy;
use crate::store::combined_writes::Creation;
use crate::store::event_rows::stored_events;
use crate::store::payload::{Column, PayloadCodec};
use crate::store::rows::{live, to_json, ExpiryColumns};
use crate::store::run_rows::{InsertedRun, NewRunRow, UNFINISHED};
use crate::store::timestamp::Timestamp;
use crate::store::Result;

/// Upserts the sessions of `creations` (one creation per session) as a creation alone
/// does, and answers each one's session key and whether it holds no items. None for a
/// creation whose session has expired or has an agent, or is busy when its run would not
/// queue: that session is left as it was, for the creation to be made alone.
///
/// The sessions that exist are locked first, in `pk` order as a combined append locks
/// its sessions, so that the two batches never wait for each other in a circle. A busy
/// session is told from what was committed when the upsert began; `insert_runs` looks
/// again under the lock.
pub(super) async fn upsert_run_sessions(
    conn: &mut PgConnection, creations: &[Creation], retention: ExpiryColumns, now: Timestamp,
) -> Result<Vec<Option<(i64, bool)>>> {
    static UPSERT: LazyLock<String> = LazyLock::new(|| {
        format!(
            r"insert into sessions (tenant_id, id, created_at, updated_at, last_active_at,
                                    expires_anchor, expires_seconds, expires_at)
              select t.tenant, t.id, $4, $4, $4, $5, $6, $7
              from unnest($1::text[], $2::text[], $3::bool[]) as t (tenant, id, reject)
              where not (t.reject and exists (
                  select 1 from sessions s join runs r on r.session_pk = s.pk
                  where s.tenant_id = t.tenant and s.id = t.id and r.status in {UNFINISHED}))
              on conflict (tenant_id, id) do update set {} where {} and sessions.agent_id is null
              returning tenant_id, id, pk, item_count = 0",
            touch("$4"),
            live("sessions", NOW)
        )
    });
    let tenants: Vec<&str> = creations.iter().map(|c| c.tenant.as_str()).collect();
    let ids: Vec<&str> = creations.iter().map(|c| c.session_id.as_str()).collect();
    // One session's upsert takes its lock itself.
    if creations.len() > 1 {
        sqlx::query(
            r"select 1 from sessions s join unnest($1::text[], $2::text[]) as t (tenant, id)
                  on s.tenant_id = t.tenant and s.id = t.id
              order by s.pk for no key update of s",
        )
        .bind_all((&tenants, &ids))
        .execute(&mut *conn)
        .await?;
    }
    let upserted: Vec<(String, String, i64, bool)> = sqlx::query_as(&UPSERT)
        .bind_all((
            &tenants,
            &ids,
            creations.iter().map(|c| c.if_busy != IfBusy::Enqueue).collect::<Vec<_>>(),
            now,
            retention.anchor,
            retention.seconds,
            retention.expires_at,
        ))
        .fetch_all(conn)
        .await?;
    let found: HashMap<(&str, &str), (i64, bool)> = upserted
        .iter()
        .map(|(tenant, id, pk, empty)| ((tenant.as_str(), id.as_str()), (*pk, *empty)))
        .collect();
    Ok(creations
        .iter()
        .map(|c| found.get(&(c.tenant.as_str(), c.session_id.as_str())).copied())
        .collect())
}

/// Inserts the runs and their first events in one statement, each as `insert_run` does
/// (the sessions' row locks, taken by `upsert_run_sessions`, order them). None for a run
/// that was not inserted: its session is busy and it would not queue.
pub(super) async fn insert_runs(
    conn: &mut PgConnection, codec: &PayloadCodec, runs: &[NewRunRow<'_>],
) -> Result<Vec<Option<InsertedRun>>> {
    static INSERT: LazyLock<String> = LazyLock::new(|| {
        format!(
            r"with q as (
                  select q.*, q.lease_owner is not null and not q.busy as go
                  from (select t.*, exists (
                            select 1 from runs where runs.session_pk = t.session_pk
                            and runs.status in {UNFINISHED}) as busy
                        from unnest($1::text[], $2::uuid[], $3::bigint[], $4::text[], $5::uuid[],
                                    $6::timestamptz[], $7::bool[], $8::bigint[], $9::text[],
                                    $10::text[], $11::timestamptz[], $12::timestamptz[])
                             as t (tenant, id, session_pk, body, lease_owner, lease_expires_at,
                                   enqueue, seq, event, data, created_at, started_at)) q
                  where q.enqueue or not q.busy),
              r as (
                  insert into runs (tenant_id, id, session_pk, status, created_at, last_event_seq,
                      body, lease_owner, lease_expires_at, attempts, started_at)
                  select tenant, id, session_pk, case when go then 'running' else 'queued' end,
                      created_at, 1, body, case when go then lease_owner end,
                      case when go then lease_expires_at end, case when go then 1 else 0 end,
                      case when go then started_at end
                  from q returning pk, id, status),
              e as (
                  insert into run_events (run_pk, seq, event, data, created_at)
                  select r.pk, q.seq, q.event, q.data, q.created_at from r join q on q.id = r.id)
              select id, pk, status = 'running' from r"
        )
    });
    let mut bodies = Vec::with_capacity(runs.len());
    let mut events = Vec::with_capacity(runs.len());
    for run in runs {
        bodies.push(codec.seal(run.tenant, Column::RunBody, to_json(run.record)?)?);
        let first = std::slice::from_ref(run.first_event);
        events.extend(stored_events(codec, run.tenant, first)?);
    }
    let inserted: Vec<(Uuid, i64, bool)> = sqlx::query_as(&INSERT)
        .bind_all((
            runs.iter().map(|r| r.tenant).collect::<Vec<_>>(),
            runs.iter().map(|r| r.record.run.id).collect::<Vec<_>>(),
            runs.iter().map(|r| r.session_pk).collect::<Vec<_>>(),
            bodies.iter().map(|b| &**b).collect::<Vec<_>>(),
            runs.iter().map(NewRunRow::lease_owner).collect::<Vec<_>>(),
            runs.iter().map(|r| r.lease_expires_at().map(|t| t.0)).collect::<Vec<_>>(),
            runs.iter().map(NewRunRow::enqueue).collect::<Vec<_>>(),
            events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            events.iter().map(|e| e.name).collect::<Vec<_>>(),
            events.iter().map(|e| &*e.data).collect::<Vec<_>>(),
            runs.iter().map(|r| r.created_at.0).collect::<Vec<_>>(),
            runs.iter().map(|r| r.started_at.0).collect::<Vec<_>>(),
        ))
        .fetch_all(conn)
        .await?;
    let mut by_id: HashMap<Uuid, InsertedRun> =
        inserted.into_iter().map(|(id, pk, started)| (id, InsertedRun { pk, started })).collect();
    Ok(runs.iter().map(|r| by_id.remove(&r.record.run.id)).collect())
}
