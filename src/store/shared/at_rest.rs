//! Counting and rewriting encrypted values, on both backends. Rows are told apart by the
//! backend's physical row id, `RowId` (read as text on Postgres): `ROW_ID`, read with
//! `ROW_READ`, bound with `ROW_BIND`, starting after `FIRST_ROW`.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::backend::{count_by_key_id, RowId, Store, FIRST_ROW, ROW_BIND, ROW_ID, ROW_READ};
use super::binds::BindAll;
use crate::store::at_rest::{AtRestStore, PayloadColumn, Progress, PAYLOAD_COLUMNS};
use crate::store::Result;

#[async_trait]
impl AtRestStore for Store {
    async fn count_values_by_key(&self) -> Result<BTreeMap<Option<String>, u64>> {
        let mut counts = BTreeMap::new();
        for payload in &PAYLOAD_COLUMNS {
            for (key_id, values) in count_by_key_id(self.reader(), payload).await? {
                *counts.entry(key_id).or_default() += values;
            }
        }
        Ok(counts)
    }

    fn key_ids(&self) -> Vec<String> {
        self.codec.key_ids()
    }

    async fn reencrypt(
        &self, batch: usize, progress: &(dyn Fn(Progress) + Send + Sync),
    ) -> Result<u64> {
        let Some(prefix) = self.codec.current_prefix() else {
            return Ok(0);
        };
        let mut rewritten = 0;
        for payload in &PAYLOAD_COLUMNS {
            rewritten += self.reencrypt_column(payload, &prefix, batch, progress).await?;
        }
        Ok(rewritten)
    }
}

impl Store {
    /// Walks one column in physical row order, a batch at a time, so that no
    /// statement scans what an earlier batch did.
    // One body for both row ids: the conversion, borrow and clone that Postgres' text
    // `RowId` needs are needless for SQLite's `i64`.
    #[allow(
        clippy::useless_conversion,
        clippy::needless_borrows_for_generic_args,
        clippy::clone_on_copy
    )]
    async fn reencrypt_column(
        &self, payload: &PayloadColumn, prefix: &str, batch: usize,
        progress: &(dyn Fn(Progress) + Send + Sync),
    ) -> Result<u64> {
        let value = format!("{}.{}", payload.alias, payload.value);
        let stale =
            format!("{value} is not null and substr({value}, 1, {}) <> $1", prefix.chars().count());
        let total: i64 =
            sqlx::query_scalar(&format!("select count(*) from {} where {stale}", payload.from))
                .bind(prefix)
                .fetch_one(self.reader())
                .await?;
        let mut report = Progress { column: payload.column.name(), done: 0, total: total as u64 };
        let mut after: RowId = FIRST_ROW.into();
        loop {
            let rows: Vec<(RowId, String, String)> = sqlx::query_as(&format!(
                "select {row}{ROW_READ}, {}, {value} from {} where {stale} and {row} > $2{ROW_BIND} \
                 order by {row} limit $3",
                payload.tenant,
                payload.from,
                row = format!("{}.{ROW_ID}", payload.alias),
            ))
            .bind_all((prefix, &after, batch as i64))
            .fetch_all(self.reader())
            .await?;
            let Some((last, _, _)) = rows.last() else {
                return Ok(report.done);
            };
            after = last.clone();
            report.done += self.rewrite(payload, &rows).await?;
            progress(report);
        }
    }

    /// Seals each value again under the current key, in one short
    /// transaction; a value changed or deleted since it was read is left.
    async fn rewrite(
        &self, payload: &PayloadColumn, rows: &[(RowId, String, String)],
    ) -> Result<u64> {
        let sql = format!(
            "update {} set {value} = $2 where {ROW_ID} = $1{ROW_BIND} and {value} = $3",
            payload.table,
            value = payload.value,
        );
        let mut tx = self.writer().begin().await?;
        let mut rewritten = 0;
        for (row, tenant, stored) in rows {
            let plain = self.codec.open(tenant, payload.column, stored.clone())?;
            let sealed = self.codec.seal(tenant, payload.column, plain)?;
            rewritten += sqlx::query(&sql)
                .bind_all((row, &*sealed, stored))
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
        tx.commit().await?;
        Ok(rewritten)
    }
}
