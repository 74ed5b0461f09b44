//! What a combined append batch reserves of its sessions on Postgres: seqs and
//! revisions, given out in one statement for every live session of the batch, with the
//! state of those whose appends change it.

use std::collections::HashMap;
use std::sync::LazyLock;

use sqlx::PgConnection;

use super::shared::binds::BindAll;
use super::{touch, NOW};
use crate::store::rows::live;
use crate::store::timestamp::Timestamp;
use crate::store::Result;

/// What an append batch adds to one session.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Counts {
    pub items: i64,
    /// Revisions: one per append.
    pub steps: i64,
    /// Whether an append changes the session's state.
    pub state: bool,
}

/// What a session's update gave the batch.
pub(super) struct Reserved {
    pub pk: i64,
    pub last_seq: i64,
    pub revision: i64,
    /// Sealed, when the batch changes it (none: the empty state).
    pub state: Option<String>,
}

/// Gives out the seqs and revisions `counts` asks of each live session in one statement,
/// with the state of those whose appends change it. Sessions absent or expired are not
/// in the answer.
/// Rows are locked in `pk` order, as a single append's one lock and any replica's
/// combined appends take them, so that two combined appends never deadlock.
pub(super) async fn reserve_many<'a>(
    conn: &mut PgConnection, counts: &HashMap<(&'a str, &'a str), Counts>, now: Timestamp,
) -> Result<HashMap<(&'a str, &'a str), Reserved>> {
    static RESERVE: LazyLock<String> = LazyLock::new(|| {
        format!(
            r"with wanted as (
                  select * from unnest($1::text[], $2::text[], $3::bigint[], $5::bigint[], $6::bool[]) with ordinality as w (tenant_id, id, added, steps, stateful, n)
              ), locked as (
                  select s.pk, w.added, w.steps, w.stateful, w.n from sessions s join wanted w on s.tenant_id = w.tenant_id and s.id = w.id
                  where {} order by s.pk for update of s
              )
              update sessions set last_seq = sessions.last_seq + locked.added,
                                  item_count = sessions.item_count + locked.added,
                                  revision = sessions.revision + locked.steps, updated_at = $4, {}
              from locked where sessions.pk = locked.pk
              returning locked.n, sessions.pk, sessions.last_seq, sessions.revision,
                        case when locked.stateful then sessions.state end",
            live("s", NOW),
            touch("$4"),
        )
    });
    let sessions: Vec<(&'a str, &'a str)> = counts.keys().copied().collect();
    let tenants: Vec<&str> = sessions.iter().map(|(tenant, _)| *tenant).collect();
    let ids: Vec<&str> = sessions.iter().map(|(_, id)| *id).collect();
    let added: Vec<i64> = sessions.iter().map(|session| counts[session].items).collect();
    let steps: Vec<i64> = sessions.iter().map(|session| counts[session].steps).collect();
    let stateful: Vec<bool> = sessions.iter().map(|session| counts[session].state).collect();
    let rows: Vec<(i64, i64, i64, i64, Option<String>)> = sqlx::query_as(&RESERVE)
        .bind_all((&tenants, &ids, &added, now, &steps, &stateful))
        .fetch_all(&mut *conn)
        .await?;
    // Each row names its session by its (1-based) place in the arrays.
    Ok(rows
        .into_iter()
        .map(|(n, pk, last_seq, revision, state)| {
            (sessions[n as usize - 1], Reserved { pk, last_seq, revision, state })
        })
        .collect())
}
