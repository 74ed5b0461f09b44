//! Run creations combined on SQLite: one statement per creation, as a creation alone
//! makes them, in the batch's one transaction. The single writer connection serialises
//! writes, so nothing changes a session between the statements that read it.

use std::sync::LazyLock;

use sqlx::SqliteConnection;

use super::runs::insert_run;
use super::shared::binds::BindAll;
use super::{touch, NOW};
use crate::model::IfBusy;
use crate::store::combined_writes::Creation;
use crate::store::payload::PayloadCodec;
use crate::store::rows::{live, ExpiryColumns};
use crate::store::run_rows::{InsertedRun, NewRunRow, UNFINISHED};
use crate::store::timestamp::Timestamp;
use crate::store::Result;

/// Upserts the sessions of `creations` (one creation per session) as a creation alone
/// does, and answers each one's session key and whether it holds no items. None for a
/// creation whose session has expired or has an agent, or is busy when its run would not
/// queue: that session is left as it was, for the creation to be made alone.
pub(super) async fn upsert_run_sessions(
    conn: &mut SqliteConnection, creations: &[Creation], retention: ExpiryColumns, now: Timestamp,
) -> Result<Vec<Option<(i64, bool)>>> {
    static UPSERT: LazyLock<String> = LazyLock::new(|| {
        format!(
            r"insert into sessions (tenant_id, id, created_at, updated_at, last_active_at,
                                    expires_anchor, expires_seconds, expires_at)
              select $1, $2, $4, $4, $4, $5, $6, $7
              where not ($3 and exists (
                  select 1 from sessions s join runs r on r.session_pk = s.pk
                  where s.tenant_id = $1 and s.id = $2 and r.status in {UNFINISHED}))
              on conflict (tenant_id, id) do update set {} where {} and sessions.agent_id is null
              returning pk, item_count = 0",
            touch("$4"),
            live("sessions", NOW)
        )
    });
    let mut answers = Vec::with_capacity(creations.len());
    for creation in creations {
        let upserted = sqlx::query_as(&UPSERT)
            .bind_all((
                &creation.tenant,
                creation.session_id.as_str(),
                creation.if_busy != IfBusy::Enqueue,
                now,
                retention.anchor,
                retention.seconds,
                retention.expires_at,
            ))
            .fetch_optional(&mut *conn)
            .await?;
        answers.push(upserted);
    }
    Ok(answers)
}

/// Inserts the runs and their first events, each as `insert_run` does. None for a run
/// that was not inserted: its session is busy and it would not queue.
pub(super) async fn insert_runs(
    conn: &mut SqliteConnection, codec: &PayloadCodec, runs: &[NewRunRow<'_>],
) -> Result<Vec<Option<InsertedRun>>> {
    let mut answers = Vec::with_capacity(runs.len());
    for run in runs {
        answers.push(insert_run(conn, codec, *run).await?);
    }
    Ok(answers)
}
