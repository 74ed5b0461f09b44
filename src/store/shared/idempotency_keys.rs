//! Idempotency keys: claimed by the transaction that makes a request's change, which
//! keeps the response there for the request's retries (`store::idempotency` says what a
//! response records).

use chrono::{DateTime, Utc};

use super::backend::{Db, Store};
use super::binds::BindAll;
use super::Conn;
use crate::model::IdempotencyKey;
use crate::store::idempotency::first_response;
use crate::store::payload::{Column, PayloadCodec};
use crate::store::timestamp::Timestamp;
use crate::store::Result;

/// Claims an idempotency key for this transaction. `Some` answers a key that an earlier
/// request claimed, with that request's response and the time of its claim: a
/// concurrent claim of the same key waits here for that request's transaction, so the
/// two can never both write.
pub(super) async fn claim_key(
    conn: &mut Conn, codec: &PayloadCodec, tenant: &str, key: &IdempotencyKey, now: Timestamp,
) -> Result<Option<(String, Timestamp)>> {
    // Loops only if the key expires and is purged between the insert and the select.
    loop {
        sqlx::query(
            "delete from idempotency_keys where tenant_id = $1 and key = $2 and created_at < $3",
        )
        .bind_all((tenant, &key.key, Timestamp(now.0 - IdempotencyKey::ttl())))
        .execute(&mut *conn)
        .await?;
        let claimed = sqlx::query(
            r"insert into idempotency_keys (tenant_id, key, fingerprint, created_at) values ($1, $2, $3, $4)
              on conflict (tenant_id, key) do nothing",
        )
        .bind_all((tenant, &key.key, &key.fingerprint, now))
        .execute(&mut *conn)
        .await?
        .rows_affected()
            == 1;
        if claimed {
            return Ok(None);
        }
        let first: Option<(Vec<u8>, Option<String>, Timestamp)> = sqlx::query_as(
            "select fingerprint, response, created_at from idempotency_keys where tenant_id = $1 and key = $2",
        )
        .bind_all((tenant, &key.key))
        .fetch_optional(&mut *conn)
        .await?;
        if let Some((fingerprint, response, claimed_at)) = first {
            let response = first_response(key, fingerprint, response)?;
            let response = codec.open(tenant, Column::IdempotencyResponse, response)?;
            return Ok(Some((response, claimed_at)));
        }
    }
}

/// Stores the response to the request that claimed `key`, for its retries.
pub(super) async fn keep_response(
    conn: &mut Conn, codec: &PayloadCodec, tenant: &str, key: &IdempotencyKey, response: &str,
) -> Result<()> {
    sqlx::query("update idempotency_keys set response = $3 where tenant_id = $1 and key = $2")
        .bind_all((tenant, &key.key, codec.seal(tenant, Column::IdempotencyResponse, response)?))
        .execute(conn)
        .await?;
    Ok(())
}

/// The stored response to `key` within its lifetime.
pub(super) async fn kept_response(
    pool: &sqlx::Pool<Db>, codec: &PayloadCodec, tenant: &str, key: &IdempotencyKey,
) -> Result<Option<String>> {
    let stored: Option<(Vec<u8>, Option<String>)> = sqlx::query_as(
        r"select fingerprint, response from idempotency_keys
           where tenant_id = $1 and key = $2 and created_at >= $3",
    )
    .bind_all((tenant, &key.key, Timestamp(crate::store::now() - IdempotencyKey::ttl())))
    .fetch_optional(pool)
    .await?;
    let Some((fingerprint, response)) = stored else {
        return Ok(None);
    };
    let response = first_response(key, fingerprint, response)?;
    codec.open(tenant, Column::IdempotencyResponse, response).map(Some)
}

/// Forgets the keys first used before `cutoff`; returns how many.
pub(super) async fn purge(store: &Store, cutoff: DateTime<Utc>) -> Result<u64> {
    let purged = sqlx::query("delete from idempotency_keys where created_at < $1")
        .bind(Timestamp(cutoff))
        .execute(store.writer())
        .await?
        .rows_affected();
    Ok(purged)
}

/// The first response to a retry of `key` (none: no key, or the first request), the key
/// claimed in the transaction on `conn` otherwise.
pub(super) async fn first_answer(
    conn: &mut Conn, codec: &PayloadCodec, tenant: &str, key: Option<&IdempotencyKey>,
) -> Result<Option<String>> {
    match key {
        Some(key) => {
            Ok(claim_key(conn, codec, tenant, key, Timestamp::now()).await?.map(|(r, _)| r))
        }
        None => Ok(None),
    }
}

/// Keeps the response to the request that claimed `key`, if it has one.
pub(super) async fn answered(
    conn: &mut Conn, codec: &PayloadCodec, tenant: &str, key: Option<&IdempotencyKey>,
    response: &str,
) -> Result<()> {
    match key {
        Some(key) => keep_response(conn, codec, tenant, key, response).await,
        None => Ok(()),
    }
}
