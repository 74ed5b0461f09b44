//! What every change of a session's items does around its own statement: it begins at
//! the session's row (or answers a retry as the first request was answered), and it
//! removes with the items what was made from them, counting the change as a revision and
//! a rewrite of the history.

use uuid::Uuid;

use super::backend::{Db, Store};
use super::binds::BindAll;
use super::idempotency_keys::first_answer;
use super::sessions::session_pk_at;
use super::Conn;
use crate::model::{IdempotencyKey, IfMatch, SessionId};
use crate::store::run_rows::UNFINISHED;
use crate::store::timestamp::Timestamp;
use crate::store::{Result, StoreError};

/// A change of a session's items, begun: its transaction holding the session's row
/// lock, or the answer its key's first request got when this is a retry.
pub(super) enum Begun {
    Change(sqlx::Transaction<'static, Db>, i64),
    Retried(String),
}

pub(super) async fn begin(
    store: &Store, tenant: &str, session_id: &SessionId,
    (key, if_match): (Option<&IdempotencyKey>, Option<IfMatch>),
) -> Result<Begun> {
    let mut tx = store.writer().begin().await?;
    if let Some(first) = first_answer(&mut tx, &store.codec, tenant, key).await? {
        return Ok(Begun::Retried(first));
    }
    let session_pk = session_pk_at(&mut tx, tenant, session_id, if_match).await?;
    Ok(Begun::Change(tx, session_pk))
}

/// What goes with items removed from a session (or one replaced in place): the
/// compactions through `seq` and on, the finished runs that appended them, and the
/// session's count, less `removed`; the session's revision after it.
pub(super) async fn removed(
    conn: &mut Conn, (tenant, session_pk): (&str, i64), seq: i64, holding: RunsHolding,
    removed: i64,
) -> Result<i64> {
    drop_compactions(conn, tenant, session_pk, seq).await?;
    drop_runs(conn, tenant, session_pk, holding).await?;
    count_items(conn, tenant, session_pk, -removed).await
}

/// Moves the session's item count by `change` and marks it updated, as a revision and a
/// rewrite of its history (every caller changes items other than by an append); returns
/// the new revision.
pub(super) async fn count_items(
    conn: &mut Conn, tenant: &str, session_pk: i64, change: i64,
) -> Result<i64> {
    let revision = sqlx::query_scalar(
        r"update sessions set item_count = item_count + $3, updated_at = $4,
              revision = revision + 1, rewrites = rewrites + 1
          where tenant_id = $1 and pk = $2 returning revision",
    )
    .bind_all((tenant, session_pk, change, Timestamp::now()))
    .fetch_one(conn)
    .await?;
    Ok(revision)
}

/// Deletes the compactions that summarise the item at `seq` (every one from 0): a
/// summary must not outlive what it was made from.
pub(super) async fn drop_compactions(
    conn: &mut Conn, tenant: &str, session_pk: i64, seq: i64,
) -> Result<()> {
    sqlx::query(
        "delete from compactions where tenant_id = $1 and session_pk = $2 and through_seq >= $3",
    )
    .bind_all((tenant, session_pk, seq))
    .execute(conn)
    .await?;
    Ok(())
}

/// The finished runs that go with removed items.
pub(super) enum RunsHolding {
    /// Those of the removed item: the run that appended it, if one did. An item appended
    /// by a client belongs to no run.
    Item(Option<Uuid>),
    /// Every finished run of the session, when all its items go.
    All,
}

/// Deletes the finished runs holding removed items, with their events: a run keeps a
/// copy of the items it was given and made, which must not outlive them.
async fn drop_runs(
    conn: &mut Conn, tenant: &str, session_pk: i64, holding: RunsHolding,
) -> Result<()> {
    let run_id = match holding {
        RunsHolding::Item(None) => return Ok(()),
        RunsHolding::Item(Some(run_id)) => Some(run_id),
        RunsHolding::All => None,
    };
    sqlx::query(&format!(
        r"delete from runs where tenant_id = $1 and session_pk = $2
          and ($3 is null or id = $3) and status not in {UNFINISHED}"
    ))
    .bind_all((tenant, session_pk, run_id))
    .execute(conn)
    .await?;
    Ok(())
}

/// What a retry answers: the first answer, kept as JSON.
pub(super) fn replayed<T: serde::de::DeserializeOwned>(first: &str) -> Result<T> {
    serde_json::from_str(first)
        .map_err(|e| StoreError::Corrupt(format!("idempotency response: {e}")))
}
