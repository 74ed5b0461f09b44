//! A session's owners and the state documents they share: a session takes its owners
//! once and keeps them; an owner's document has a revision of its own.

use super::backend::FOR_UPDATE;
use super::binds::BindAll;
use super::documents::open_state;
use super::sessions::precondition;
use super::Conn;
use crate::model::{IfMatch, Owners, StateChanges, StateDocument, StateWrite};
use crate::store::payload::{Column, PayloadCodec};
use crate::store::timestamp::Timestamp;
use crate::store::{Result, StoreError};

/// An owner document's key: the app's id and the user's (empty for the app's own).
pub(super) type DocumentKey<'a> = (&'a str, &'a str);

/// The owners of the session `session_pk` (whose row the caller has locked) once it
/// has taken those `named` that it lacks; one that differs from the session's is
/// refused.
pub(super) async fn take_owners(
    conn: &mut Conn, session_pk: i64, named: &Owners,
) -> Result<(Option<String>, Option<String>)> {
    let (app, user): (Option<String>, Option<String>) = sqlx::query_as(
        r"update sessions set app_id = coalesce(app_id, $2), user_id = coalesce(user_id, $3)
          where pk = $1 returning app_id, user_id",
    )
    .bind_all((session_pk, named.app(), named.user()))
    .fetch_one(conn)
    .await?;
    kept("app_id", &app, named.app())?;
    kept("user_id", &user, named.user())?;
    Ok((app, user))
}

/// Whether the session kept the owner a write named (`field`).
fn kept(field: &'static str, stored: &Option<String>, named: Option<&str>) -> Result<()> {
    match (stored, named) {
        (Some(stored), Some(named)) if stored != named => {
            Err(StoreError::OwnerMismatch { field, stored: stored.clone() })
        }
        _ => Ok(()),
    }
}

/// Makes the changes to the documents of the session's owners, `(app, user)`.
pub(super) async fn write_owner_documents(
    conn: &mut Conn, codec: &PayloadCodec, tenant: &str, (app, user): (Option<&str>, Option<&str>),
    changes: &StateChanges, now: Timestamp,
) -> Result<()> {
    let missing = |field, owner| StoreError::NoOwner { field, owner };
    if let Some(write) = &changes.user {
        let user = user.ok_or(missing("user_state_delta", "user_id"))?;
        let app = app.ok_or(missing("user_state_delta", "app_id"))?;
        write_document(conn, codec, tenant, (app, user), write, None, now).await?;
    }
    if let Some(write) = &changes.app {
        let app = app.ok_or(missing("app_state_delta", "app_id"))?;
        write_document(conn, codec, tenant, (app, ""), write, None, now).await?;
    }
    Ok(())
}

/// Changes one owner document under its row lock, creating it if absent; returns the
/// new document and revision.
pub(super) async fn write_document(
    conn: &mut Conn, codec: &PayloadCodec, tenant: &str, (app, user): DocumentKey<'_>,
    write: &StateWrite, if_match: Option<IfMatch>, now: Timestamp,
) -> Result<(StateDocument, i64)> {
    // An absent document is made at revision 0 first, so that the lock below always has
    // a row to take: two first writes then queue instead of both starting from `{}`.
    // Revision 0 never commits.
    sqlx::query(
        r"insert into owner_states (tenant_id, app_id, user_id, revision, updated_at)
          values ($1, $2, $3, 0, $4) on conflict (tenant_id, app_id, user_id) do nothing",
    )
    .bind_all((tenant, app, user, now))
    .execute(&mut *conn)
    .await?;
    let (stored, revision): (Option<String>, i64) = sqlx::query_as(&format!(
        "select state, revision from owner_states \
         where tenant_id = $1 and app_id = $2 and user_id = $3{FOR_UPDATE}"
    ))
    .bind_all((tenant, app, user))
    .fetch_one(&mut *conn)
    .await?;
    precondition(if_match, (revision > 0).then_some(revision))?;
    let state = write.apply(&open_state(codec, tenant, Column::OwnerState, stored)?)?;
    let sealed = codec.seal(tenant, Column::OwnerState, state.as_str())?;
    let revision = sqlx::query_scalar(
        r"update owner_states set state = $4, revision = revision + 1, updated_at = $5
          where tenant_id = $1 and app_id = $2 and user_id = $3 returning revision",
    )
    .bind_all((tenant, app, user, sealed, now))
    .fetch_one(&mut *conn)
    .await?;
    Ok((state, revision))
}
