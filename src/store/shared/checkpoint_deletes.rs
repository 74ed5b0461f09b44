//! Deleting checkpoints: by run, or pruning a session's, with the writes and blobs that
//! no remaining checkpoint needs.

use sqlx::QueryBuilder;

use super::backend::{json_members, Db, Store};
use super::Conn;
use crate::store::{Keep, Result};

/// Deletes the tenant's checkpoints whose `metadata.run_id` is one of `run_ids`.
pub(super) async fn of_runs(store: &Store, tenant: &str, run_ids: &[String]) -> Result<u64> {
    if run_ids.is_empty() {
        return Ok(0);
    }
    let mut tx = store.writer().begin().await?;
    let mut query = QueryBuilder::<Db>::new("delete from checkpoints where tenant_id = ");
    query.push_bind(tenant).push(" and run_id in (");
    let mut ids = query.separated(", ");
    for id in run_ids {
        ids.push_bind(id);
    }
    query.push(") returning session_pk, namespace");
    let gone: Vec<(i64, String)> = query.build_query_as().fetch_all(&mut *tx).await?;
    let mut touched = gone.clone();
    touched.sort();
    touched.dedup();
    for (pk, namespace) in &touched {
        forget_orphans(&mut tx, *pk, Some(namespace)).await?;
    }
    tx.commit().await?;
    Ok(gone.len() as u64)
}

/// Deletes of the session `session_pk` all checkpoints but the newest of each namespace
/// (or all), with the writes and blobs that only they had; returns how many went.
pub(super) async fn prune_session(conn: &mut Conn, session_pk: i64, keep: Keep) -> Result<u64> {
    let older = match keep {
        Keep::Latest => {
            " and id < (select max(n.id) from checkpoints n \
             where n.session_pk = checkpoints.session_pk and n.namespace = checkpoints.namespace)"
        }
        Keep::Nothing => "",
    };
    let deleted = sqlx::query(&format!("delete from checkpoints where session_pk = $1{older}"))
        .bind(session_pk)
        .execute(&mut *conn)
        .await?
        .rows_affected();
    forget_orphans(conn, session_pk, None).await?;
    Ok(deleted)
}

/// Deletes the writes of checkpoints that are gone and the blobs no checkpoint names, of
/// one namespace of the session (or of all).
async fn forget_orphans(conn: &mut Conn, session_pk: i64, namespace: Option<&str>) -> Result<()> {
    let within = match namespace {
        Some(_) => " and namespace = $2",
        None => "",
    };
    let statements = [
        format!(
            "delete from checkpoint_writes where session_pk = $1{within} and not exists (\
             select 1 from checkpoints c where c.session_pk = checkpoint_writes.session_pk \
             and c.namespace = checkpoint_writes.namespace and c.id = checkpoint_writes.checkpoint_id)"
        ),
        format!(
            "delete from checkpoint_blobs where session_pk = $1{within} and not exists (\
             select 1 from checkpoints c cross join {} v \
             where c.session_pk = checkpoint_blobs.session_pk and c.namespace = checkpoint_blobs.namespace \
             and v.key = checkpoint_blobs.channel and v.value = checkpoint_blobs.version)",
            json_members("c.channel_versions")
        ),
    ];
    for sql in statements {
        let mut query = sqlx::query(&sql).bind(session_pk);
        if let Some(namespace) = namespace {
            query = query.bind(namespace);
        }
        query.execute(&mut *conn).await?;
    }
    Ok(())
}
