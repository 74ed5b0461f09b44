//! Compactions of a session's history: the newest, what a run sends of the session,
//! storing one made from the history as it was, listing them. Forks are in `forks`.

use async_trait::async_trait;
use uuid::Uuid;

use super::backend::{Store, NOW};
use super::binds::BindAll;
use super::sessions::{read_session_pk, row_value, session_pk_at};
use super::{forks, Conn};
use crate::model::{Compaction, IfMatch, Item, NewFork, Page, PageRequest, SessionId};
use crate::store::pages::{beyond, direction, uuid_cursor};
use crate::store::payload::{Column, PayloadCodec};
use crate::store::rows::{
    live, open_items, CompactionRow, ItemRow, MarkedItemRow, COMPACTION_COLUMNS, ITEM_COLUMNS,
};
use crate::store::run_rows::UNFINISHED;
use crate::store::timestamp::Timestamp;
use crate::store::{CompactionStore, Context, Forked, HistoryMark, Result, StoreError};

/// The newest compaction of the session, its summary opened.
async fn latest(
    conn: &mut Conn, codec: &PayloadCodec, tenant: &str, session_id: &SessionId, session_pk: i64,
) -> Result<Option<Compaction>> {
    let row: Option<CompactionRow> = sqlx::query_as(&format!(
        r"select {COMPACTION_COLUMNS} from compactions
          where tenant_id = $1 and session_pk = $2 order by pk desc limit 1"
    ))
    .bind_all((tenant, session_pk))
    .fetch_optional(conn)
    .await?;
    row.map(|row| row.into_compaction(codec, tenant, session_id.as_str())).transpose()
}

/// Fails with `SessionBusy` while the session has an unfinished run.
async fn require_idle(conn: &mut Conn, tenant: &str, session_pk: i64) -> Result<()> {
    let active: Option<Uuid> = sqlx::query_scalar(&format!(
        r"select id from runs where tenant_id = $1 and session_pk = $2 and status in {UNFINISHED}
          order by pk limit 1"
    ))
    .bind_all((tenant, session_pk))
    .fetch_optional(conn)
    .await?;
    active.map_or(Ok(()), |run| Err(StoreError::SessionBusy(run)))
}

#[async_trait]
impl CompactionStore for Store {
    async fn latest_compaction(
        &self, tenant: &str, session_id: &SessionId,
    ) -> Result<Option<Compaction>> {
        let row: Option<CompactionRow> = sqlx::query_as(&format!(
            r"select {COMPACTION_COLUMNS} from compactions
              where tenant_id = $1 and session_pk = (
                  select pk from sessions where tenant_id = $1 and id = $2 and {})
              order by pk desc limit 1",
            live("sessions", NOW)
        ))
        .bind_all((tenant, session_id.as_str()))
        .fetch_optional(self.reader())
        .await?;
        row.map(|row| row.into_compaction(&self.codec, tenant, session_id.as_str())).transpose()
    }

    async fn context(&self, tenant: &str, session_id: &SessionId, idle: bool) -> Result<Context> {
        let mut conn = self.reader().acquire().await?;
        let session_pk = read_session_pk(&mut conn, tenant, session_id).await?;
        if idle {
            require_idle(&mut conn, tenant, session_pk).await?;
        }
        let compaction = latest(&mut conn, &self.codec, tenant, session_id, session_pk).await?;
        let after = compaction.as_ref().map_or(0, |c| c.through_seq);
        let rows: Vec<ItemRow> = sqlx::query_as(&format!(
            r"select {ITEM_COLUMNS} from items
              where tenant_id = $1 and session_pk = $2 and seq > $3 order by seq"
        ))
        .bind_all((tenant, session_pk, after))
        .fetch_all(&mut *conn)
        .await?;
        let items = open_items(&self.codec, tenant, rows)?;
        Ok(Context { compaction, items })
    }

    async fn appended_since(
        &self, tenant: &str, session_id: &SessionId, seq: i64,
    ) -> Result<(HistoryMark, Vec<Item>)> {
        // A left join: a session with nothing new still yields its mark, in one row.
        let rows: Vec<MarkedItemRow> = sqlx::query_as(&format!(
            r"select sessions.pk as session_pk, sessions.created_at as session_created_at,
                  sessions.rewrites,
                  i.id, i.seq, i.created_at, i.run_id, i.body
              from sessions left join items i
                on i.tenant_id = $1 and i.session_pk = sessions.pk and i.seq > $3
              where sessions.tenant_id = $1 and sessions.id = $2 and {}
              order by i.seq",
            live("sessions", NOW)
        ))
        .bind_all((tenant, session_id.as_str(), seq))
        .fetch_all(self.reader())
        .await?;
        let first = rows.first().ok_or(StoreError::SessionNotFound)?;
        let mark = HistoryMark {
            session_pk: first.session_pk,
            created_at: first.session_created_at.0,
            rewrites: first.rewrites,
        };
        let items = rows.into_iter().filter_map(MarkedItemRow::item_row).collect();
        Ok((mark, open_items(&self.codec, tenant, items)?))
    }

    async fn add_compaction(
        &self, tenant: &str, session_id: &SessionId, base: Option<&Compaction>, summarised: i64,
        compaction: &Compaction, if_match: Option<IfMatch>,
    ) -> Result<()> {
        let mut tx = self.writer().begin().await?;
        let session_pk = session_pk_at(&mut tx, tenant, session_id, if_match).await?;
        if compaction.run_id.is_none() {
            require_idle(&mut tx, tenant, session_pk).await?;
        }
        let usage = compaction.usage;
        let summary =
            self.codec.seal(tenant, Column::CompactionSummary, compaction.summary.as_str())?;
        let inserted = sqlx::query(
            r"insert into compactions (tenant_id, id, session_pk, created_at, run_id,
                  through_item_id, through_seq, items_compacted, model,
                  input_tokens, output_tokens, total_tokens, llm_calls, summary)
              select $1, $3, $2, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14
              where exists (select 1 from items where tenant_id = $1 and session_pk = $2
                              and id = $6 and seq = $7)
                and (select count(*) from items where tenant_id = $1 and session_pk = $2
                       and seq > $15 and seq <= $7) = $16
                and ($17 is null or exists (select 1 from compactions
                       where tenant_id = $1 and session_pk = $2 and id = $17))
                and not exists (select 1 from compactions
                       where tenant_id = $1 and session_pk = $2 and through_seq >= $7)",
        )
        .bind_all((
            tenant,
            session_pk,
            compaction.id,
            Timestamp(compaction.created_at),
            compaction.run_id,
            compaction.through_item_id,
            compaction.through_seq,
            compaction.items_compacted,
            &compaction.model,
            usage.input_tokens,
            usage.output_tokens,
            usage.total_tokens,
            usage.llm_calls,
            summary,
            base.map_or(0, |b| b.through_seq),
            summarised,
            base.map(|b| b.id),
        ))
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if inserted == 0 {
            return Err(StoreError::HistoryChanged);
        }
        // A run's compaction counts in the run's usage, which its turn adds.
        let usage = if compaction.run_id.is_none() { usage } else { Default::default() };
        sqlx::query(
            r"update sessions set input_tokens = input_tokens + $3,
                  output_tokens = output_tokens + $4, total_tokens = total_tokens + $5,
                  llm_calls = llm_calls + $6, updated_at = $7, revision = revision + 1,
                  rewrites = rewrites + 1
              where tenant_id = $1 and pk = $2",
        )
        .bind_all((
            tenant,
            session_pk,
            usage.input_tokens,
            usage.output_tokens,
            usage.total_tokens,
            usage.llm_calls,
            Timestamp::now(),
        ))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn list_compactions(
        &self, tenant: &str, session_id: &SessionId, page: &PageRequest,
    ) -> Result<Page<Compaction>> {
        let mut conn = self.reader().acquire().await?;
        let session_pk = read_session_pk(&mut conn, tenant, session_id).await?;
        let cursor = uuid_cursor(page);
        let cursor_pk: Option<i64> = match cursor {
            Some(id) => {
                let session = (tenant, session_pk);
                let pk = row_value(&mut conn, "select pk from compactions", "id", session, id);
                Some(pk.await?.ok_or(StoreError::UnknownCursor)?)
            }
            None => None,
        };
        let scan = page.scan_order();
        let rows: Vec<CompactionRow> = sqlx::query_as(&format!(
            r"select {COMPACTION_COLUMNS} from compactions
              where tenant_id = $1 and session_pk = $2 and ($3 is null or pk {} $3)
              order by pk {} limit $4",
            beyond(scan),
            direction(scan)
        ))
        .bind_all((tenant, session_pk, cursor_pk, page.fetch_limit()))
        .fetch_all(&mut *conn)
        .await?;
        let compactions = rows
            .into_iter()
            .map(|row| row.into_compaction(&self.codec, tenant, session_id.as_str()))
            .collect::<Result<Vec<_>>>()?;
        Ok(page.finish(compactions, false, |c| c.id.to_string()))
    }

    async fn fork_session(
        &self, tenant: &str, source: &SessionId, fork: NewFork,
    ) -> Result<Forked> {
        forks::fork(self, tenant, source, fork).await
    }
}
