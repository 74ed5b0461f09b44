//! Combined appends on Postgres: a batch's appends to any sessions, with the changes of
//! their sessions' states, in a fixed number of statements, whatever their number, so
//! that the batch costs about what one append does.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use sqlx::PgConnection;
use uuid::Uuid;

use super::append_seqs::{reserve_many, Counts, Reserved};
use super::append_states::States;
use super::shared::appends::{append_in, reserve_seqs};
use super::shared::binds::BindAll;
use crate::model::{ExpiresAfter, IdempotencyKey, Item, StateDocument};
use crate::store::combined_writes::Append;
use crate::store::idempotency::AppendedSeqs;
use crate::store::payload::{Column, PayloadCodec};
use crate::store::rows::{new_items, to_json};
use crate::store::timestamp::Timestamp;
use crate::store::{Appended, Result};

/// Makes the appends in the transaction on `conn`. An append whose idempotency key an
/// earlier request claimed is left out (`None`), for its caller to answer alone.
pub(super) async fn append_many(
    conn: &mut PgConnection, codec: &PayloadCodec, default_expiry: Option<ExpiresAfter>,
    appends: &[Append], now: Timestamp,
) -> Result<Vec<Option<Appended>>> {
    if !appends.iter().all(Append::is_bulk) {
        // An append the bulk statements do not make (a condition, owners, an owner's
        // state, a replacement, nothing at all): each as a single one, in queue order, after the
        // batch's sessions are locked in `pk` order as the bulk path locks them, so that
        // two batches never deadlock.
        lock_sessions(conn, appends).await?;
        let mut made = Vec::with_capacity(appends.len());
        for append in appends {
            made.push(Some(append_in(conn, codec, default_expiry, append, now).await?));
        }
        return Ok(made);
    }
    let claimed = claim_keys(conn, appends, now).await?;
    let writing: Vec<&Append> = appends
        .iter()
        .zip(&claimed)
        .filter_map(|(append, claimed)| claimed.then_some(append))
        .collect();

    // Each session's seqs and revisions (one per append), and its state when an append
    // changes it, in one update for the sessions that exist.
    let mut counts: HashMap<(&str, &str), Counts> = HashMap::new();
    for append in &writing {
        let count = counts.entry((&append.tenant, append.session_id.as_str())).or_default();
        count.items += append.bodies.len() as i64;
        count.steps += 1;
        count.state |= append.state.session.is_some();
    }
    let mut reserved = reserve_many(conn, &counts, now).await?;
    for (&(tenant, id), &count) in &counts {
        // Absent or expired: made (again) the way a single append makes it.
        if let Entry::Vacant(absent) = reserved.entry((tenant, id)) {
            let session_id = &writing
                .iter()
                .find(|a| a.tenant == tenant && a.session_id.as_str() == id)
                .expect("a session of the batch")
                .session_id;
            let counts = (count.items, count.steps);
            let (pk, last_seq, revision) =
                reserve_seqs(conn, tenant, session_id, counts, now, default_expiry).await?;
            absent.insert(Reserved { pk, last_seq, revision, state: None });
        }
    }
    let mut states = States::default();
    for (&session, reserved) in reserved.iter_mut() {
        if counts[&session].state {
            states.begin(codec, session, reserved.pk, reserved.state.take())?;
        }
    }

    // Seqs and revisions given out in queue order: an append's first seq follows the
    // last of the one before it in the same session, its revision that one's.
    let mut next: HashMap<(&str, &str), (i64, i64)> = reserved
        .iter()
        .map(|(&session, reserved)| {
            let Counts { items, steps, .. } = counts[&session];
            (session, (reserved.last_seq - items + 1, reserved.revision - steps + 1))
        })
        .collect();
    let mut made = Vec::with_capacity(writing.len());
    for append in &writing {
        let session = (append.tenant.as_str(), append.session_id.as_str());
        let (first_seq, revision) = next[&session];
        let last_seq = first_seq + append.bodies.len() as i64 - 1;
        next.insert(session, (last_seq + 1, revision + 1));
        let items = new_items(&append.bodies, last_seq, now.0);
        let state = match &append.state.session {
            Some(write) => Some(states.apply(session, write)?),
            None => None,
        };
        made.push(Made { session_pk: reserved[&session].pk, items, revision, state });
    }
    states.write(conn, codec).await?;

    let mut rows = Rows::default();
    for (append, made) in writing.iter().zip(&made) {
        for item in &made.items {
            rows.ids.push(item.id);
            rows.tenants.push(&append.tenant);
            rows.session_pks.push(made.session_pk);
            rows.seqs.push(item.seq);
            rows.bodies.push(codec.seal(&append.tenant, Column::ItemBody, item.item.get())?);
        }
    }
    insert_rows(conn, rows, now).await?;
    keep_responses(conn, codec, &writing, &made).await?;

    let mut made = made.into_iter();
    Ok(claimed
        .into_iter()
        .map(|claimed| {
            claimed.then(|| {
                let Made { items, revision, state, .. } = made.next().expect("one per append");
                Appended { items, replayed: false, revision: Some(revision), state }
            })
        })
        .collect())
}

/// Locks the live sessions the appends name, in `pk` order.
async fn lock_sessions(conn: &mut PgConnection, appends: &[Append]) -> Result<()> {
    let tenants: Vec<&str> = appends.iter().map(|a| a.tenant.as_str()).collect();
    let ids: Vec<&str> = appends.iter().map(|a| a.session_id.as_str()).collect();
    sqlx::query(
        r"select s.pk from sessions s join unnest($1::text[], $2::text[]) as w (tenant_id, id)
              on s.tenant_id = w.tenant_id and s.id = w.id
          order by s.pk for update of s",
    )
    .bind_all((&tenants, &ids))
    .execute(conn)
    .await?;
    Ok(())
}

/// Claims the appends' idempotency keys; false for an append whose key an earlier
/// request holds. Appends without a key are always true.
async fn claim_keys(
    conn: &mut PgConnection, appends: &[Append], now: Timestamp,
) -> Result<Vec<bool>> {
    let keyed: Vec<(&str, &IdempotencyKey)> =
        appends.iter().filter_map(|a| Some((a.tenant.as_str(), a.idempotency.as_ref()?))).collect();
    if keyed.is_empty() {
        return Ok(vec![true; appends.len()]);
    }
    let tenants: Vec<&str> = keyed.iter().map(|(tenant, _)| *tenant).collect();
    let keys: Vec<&str> = keyed.iter().map(|(_, key)| key.key.as_str()).collect();
    let fingerprints: Vec<&[u8]> =
        keyed.iter().map(|(_, key)| key.fingerprint.as_slice()).collect();
    sqlx::query(
        r"delete from idempotency_keys k using unnest($1::text[], $2::text[]) as c (tenant_id, key)
          where k.tenant_id = c.tenant_id and k.key = c.key and k.created_at < $3",
    )
    .bind_all((&tenants, &keys, Timestamp(now.0 - IdempotencyKey::ttl())))
    .execute(&mut *conn)
    .await?;
    let claimed: Vec<(String, String)> = sqlx::query_as(
        r"insert into idempotency_keys (tenant_id, key, fingerprint, created_at)
          select tenant_id, key, fingerprint, $4 from unnest($1::text[], $2::text[], $3::bytea[]) as c (tenant_id, key, fingerprint)
          on conflict (tenant_id, key) do nothing
          returning tenant_id, key",
    )
    .bind_all((&tenants, &keys, &fingerprints, now))
    .fetch_all(&mut *conn)
    .await?;
    Ok(appends
        .iter()
        .map(|append| match &append.idempotency {
            None => true,
            Some(key) => claimed
                .iter()
                .any(|(tenant, claimed)| *tenant == append.tenant && *claimed == key.key),
        })
        .collect())
}

/// One append as the batch made it.
struct Made {
    session_pk: i64,
    items: Vec<Item>,
    revision: i64,
    state: Option<StateDocument>,
}

/// The columns of the items of a batch, as the insert binds them.
#[derive(Default)]
struct Rows<'a> {
    ids: Vec<Uuid>,
    tenants: Vec<&'a str>,
    session_pks: Vec<i64>,
    seqs: Vec<i64>,
    bodies: Vec<std::borrow::Cow<'a, str>>,
}

async fn insert_rows(conn: &mut PgConnection, rows: Rows<'_>, now: Timestamp) -> Result<()> {
    let bodies: Vec<&str> = rows.bodies.iter().map(|b| &**b).collect();
    sqlx::query(
        r"insert into items (id, tenant_id, session_pk, seq, created_at, body)
          select id, tenant_id, session_pk, seq, $6, body
          from unnest($1::uuid[], $2::text[], $3::bigint[], $4::bigint[], $5::text[]) as t (id, tenant_id, session_pk, seq, body)",
    )
    .bind_all((&rows.ids, &rows.tenants, &rows.session_pks, &rows.seqs, &bodies, now))
    .execute(conn)
    .await?;
    Ok(())
}

/// Stores, for each append written with a key, where its items went.
async fn keep_responses(
    conn: &mut PgConnection, codec: &PayloadCodec, written: &[&Append], made: &[Made],
) -> Result<()> {
    let mut tenants = Vec::new();
    let mut keys = Vec::new();
    let mut responses = Vec::new();
    for (append, made) in written.iter().zip(made) {
        let Some(key) = &append.idempotency else {
            continue;
        };
        let mut seqs = AppendedSeqs::of(made.session_pk, &made.items, made.revision);
        seqs.state = made.state.as_ref().map(|s| s.as_str().to_owned());
        let response = to_json(&seqs)?;
        tenants.push(append.tenant.as_str());
        keys.push(key.key.as_str());
        responses
            .push(codec.seal(&append.tenant, Column::IdempotencyResponse, &response)?.into_owned());
    }
    if keys.is_empty() {
        return Ok(());
    }
    sqlx::query(
        r"update idempotency_keys k set response = r.response
          from unnest($1::text[], $2::text[], $3::text[]) as r (tenant_id, key, response)
          where k.tenant_id = r.tenant_id and k.key = r.key",
    )
    .bind_all((&tenants, &keys, &responses))
    .execute(conn)
    .await?;
    Ok(())
}
