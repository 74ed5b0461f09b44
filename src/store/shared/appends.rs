//! One append within a transaction: the steps that both backends make for it, and that
//! a combined append on Postgres (`postgres/appends.rs`) makes for a session it finds
//! absent.

use super::backend::{insert_items, touch, NOW};
use super::binds::BindAll;
use super::documents::open_state;
use super::idempotency_keys::{claim_key, keep_response};
use super::items::remove;
use super::owners::{take_owners, write_owner_documents};
use super::sessions::{forget_expired, precondition, BindExpiry};
use super::Conn;
use crate::model::{ExpiresAfter, Item, SessionId, StateDocument, StateWrite};
use crate::store::combined_writes::Append;
use crate::store::idempotency::{first_append, AppendedSeqs, FirstAppend};
use crate::store::payload::{Column, PayloadCodec};
use crate::store::rows::{
    expiry_columns, live, new_items, open_items, to_json, ItemRow, ITEM_COLUMNS,
};
use crate::store::timestamp::Timestamp;
use crate::store::{Appended, Result};

/// Gives out `count` seqs of the session for `steps` appends, each a revision, creating
/// it (with retention `expiry`) if absent, and returns its key, the last seq given and
/// its new revision.
/// The update takes the row lock (Postgres) that orders concurrent appends.
pub(crate) async fn reserve_seqs(
    conn: &mut Conn, tenant: &str, id: &SessionId, (count, steps): (i64, i64), now: Timestamp,
    expiry: Option<ExpiresAfter>,
) -> Result<(i64, i64, i64)> {
    // The append's hot path: its statement is made once.
    static BUMP: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            r"update sessions set last_seq = last_seq + $3, item_count = item_count + $3, updated_at = $4,
                                  revision = revision + $5, {}
              where tenant_id = $1 and id = $2 and {}
              returning pk, last_seq, revision",
            touch("$4"),
            live("sessions", NOW)
        )
    });
    let retention = expiry_columns(expiry, now, now);
    loop {
        let bump = sqlx::query_as(&BUMP).bind_all((tenant, id.as_str(), count, now, steps));
        if let Some(reserved) = bump.fetch_optional(&mut *conn).await? {
            return Ok(reserved);
        }
        // A concurrent insert of the same session makes this one wait, then do nothing;
        // the next update then finds the row.
        let created = sqlx::query_as(
            r"insert into sessions (tenant_id, id, created_at, updated_at, last_active_at, item_count, last_seq,
                                    revision, expires_anchor, expires_seconds, expires_at)
              values ($1, $2, $4, $4, $4, $3, $3, $5, $6, $7, $8)
              on conflict (tenant_id, id) do nothing
              returning pk, last_seq, revision",
        )
        .bind_all((tenant, id.as_str(), count, now, steps))
        .bind_expiry(retention)
        .fetch_optional(&mut *conn)
        .await?;
        if let Some(reserved) = created {
            return Ok(reserved);
        }
        // The id is taken by a session that expired: it goes now.
        forget_expired(conn, tenant, id).await?;
    }
}

/// The items of an earlier append that still exist.
async fn appended_items(
    conn: &mut Conn, codec: &PayloadCodec, tenant: &str, seqs: &AppendedSeqs,
) -> Result<Vec<Item>> {
    let rows: Vec<ItemRow> = sqlx::query_as(&format!(
        r"select {ITEM_COLUMNS} from items
          where tenant_id = $1 and session_pk = $2 and seq between $3 and $4 order by seq"
    ))
    .bind_all((tenant, seqs.session_pk, seqs.first_seq, seqs.last_seq))
    .fetch_all(conn)
    .await?;
    open_items(codec, tenant, rows)
}

/// Makes one append within the transaction on `conn`: claims its key, gives out its seqs
/// (creating the session with retention `default_expiry` if absent), writes its items
/// and keeps the key's response.
pub(crate) async fn append_in(
    conn: &mut Conn, codec: &PayloadCodec, default_expiry: Option<ExpiresAfter>, append: &Append,
    now: Timestamp,
) -> Result<Appended> {
    let tenant = append.tenant.as_str();
    if let Some(key) = &append.idempotency {
        if let Some((first, _)) = claim_key(conn, codec, tenant, key, now).await? {
            let (items, revision, state) = match first_append(key, &first)? {
                FirstAppend::Items(items) => (items, None, None),
                FirstAppend::Seqs(seqs) => {
                    let state = seqs.state.clone().map(StateDocument::stored);
                    (appended_items(conn, codec, tenant, &seqs).await?, seqs.revision, state)
                }
            };
            return Ok(Appended { items, replayed: true, revision, state });
        }
    }
    if append.is_empty() {
        return record_nothing(conn, codec, append).await;
    }
    let count = append.bodies.len() as i64;
    let (session_pk, last_seq, revision) =
        reserve_seqs(conn, tenant, &append.session_id, (count, 1), now, default_expiry).await?;
    // At 1, the append made the session. On a mismatch the caller rolls back: nothing
    // of the append stays, not even its key.
    precondition(append.if_match, (revision > 1).then_some(revision - 1))?;
    remove(conn, tenant, session_pk, append.replacing).await?;
    let items = new_items(&append.bodies, last_seq, now.0);
    if !items.is_empty() {
        let sealed = items
            .iter()
            .map(|i| codec.seal(tenant, Column::ItemBody, i.item.get()))
            .collect::<Result<Vec<_>>>()?;
        insert_items(conn, tenant, session_pk, &items, &sealed, now).await?;
    }
    let changes = &append.state;
    if !changes.owners.is_empty() || changes.user.is_some() || changes.app.is_some() {
        let (app, user) = take_owners(conn, session_pk, &changes.owners).await?;
        let owners = (app.as_deref(), user.as_deref());
        write_owner_documents(conn, codec, tenant, owners, changes, now).await?;
    }
    let state = match &changes.session {
        Some(write) => Some(write_state(conn, codec, tenant, session_pk, write).await?),
        None => None,
    };
    if let Some(key) = &append.idempotency {
        let mut seqs = AppendedSeqs::of(session_pk, &items, revision);
        seqs.state = state.as_ref().map(|s| s.as_str().to_owned());
        keep_response(conn, codec, tenant, key, &to_json(&seqs)?).await?;
    }
    Ok(Appended { items, replayed: false, revision: Some(revision), state })
}

/// An append of no items and no state: it changes nothing, not even the revision, but
/// records its key, so that a client can make an empty operation once.
async fn record_nothing(
    conn: &mut Conn, codec: &PayloadCodec, append: &Append,
) -> Result<Appended> {
    let tenant = append.tenant.as_str();
    let found: Option<(i64, i64)> = sqlx::query_as(&format!(
        "select pk, revision from sessions where tenant_id = $1 and id = $2 and {}",
        live("sessions", NOW)
    ))
    .bind_all((tenant, append.session_id.as_str()))
    .fetch_optional(&mut *conn)
    .await?;
    let revision = found.map(|(_, revision)| revision);
    precondition(append.if_match, revision)?;
    if let Some(key) = &append.idempotency {
        let session_pk = found.map_or(0, |(pk, _)| pk);
        let mut seqs = AppendedSeqs::of(session_pk, &[], 0);
        seqs.revision = revision;
        keep_response(conn, codec, tenant, key, &to_json(&seqs)?).await?;
    }
    Ok(Appended { items: Vec::new(), replayed: false, revision, state: None })
}

/// Changes the state of the session `session_pk`, whose row the caller has locked;
/// returns the new state.
async fn write_state(
    conn: &mut Conn, codec: &PayloadCodec, tenant: &str, session_pk: i64, write: &StateWrite,
) -> Result<StateDocument> {
    let stored: Option<String> = sqlx::query_scalar("select state from sessions where pk = $1")
        .bind(session_pk)
        .fetch_one(&mut *conn)
        .await?;
    let state = write.apply(&open_state(codec, tenant, Column::SessionState, stored)?)?;
    let sealed = codec.seal(tenant, Column::SessionState, state.as_str())?;
    sqlx::query("update sessions set state = $2 where pk = $1")
        .bind_all((session_pk, sealed))
        .execute(&mut *conn)
        .await?;
    Ok(state)
}
