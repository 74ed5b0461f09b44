//! API keys, on both backends.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::backend::Store;
use super::binds::BindAll;
use crate::model::{ApiKey, KeyHash, Page, PageRequest};
use crate::store::pages::{beyond, direction};
use crate::store::rows::{scopes_text, ApiKeyRow};
use crate::store::timestamp::Timestamp;
use crate::store::{ApiKeyStore, Result, StoreError};

const COLUMNS: &str =
    "k.id, k.tenant_id, k.name, k.prefix, k.scopes, k.created_at, k.expires_at, k.last_used_at";

#[async_trait]
impl ApiKeyStore for Store {
    async fn create_api_key(&self, key: &ApiKey, hash: &KeyHash) -> Result<()> {
        sqlx::query(
            r"insert into api_keys (id, tenant_id, name, prefix, key_hash, scopes, created_at, expires_at)
              values ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind_all((key.id, &key.tenant, &key.name, &key.prefix, hash.hex(), scopes_text(&key.scopes), Timestamp(key.created_at), key.expires_at.map(Timestamp)))
        .execute(self.writer())
        .await?;
        Ok(())
    }

    async fn list_api_keys(
        &self, tenant: Option<&str>, page: &PageRequest,
    ) -> Result<Page<ApiKey>> {
        let cursor = page.cursor_id().map(Uuid::parse_str).transpose();
        let Ok(cursor) = cursor else {
            return Err(StoreError::UnknownCursor);
        };
        if let Some(cursor) = cursor {
            let known: Option<i64> = sqlx::query_scalar(
                "select pk from api_keys where id = $1 and ($2 is null or tenant_id = $2)",
            )
            .bind_all((cursor, tenant))
            .fetch_optional(self.reader())
            .await?;
            if known.is_none() {
                return Err(StoreError::UnknownCursor);
            }
        }
        let scan = page.scan_order();
        let rows: Vec<ApiKeyRow> = sqlx::query_as(&format!(
            r"select {COLUMNS} from api_keys k
              where ($1 is null or k.tenant_id = $1)
                and ($2 is null or (k.created_at, k.pk) {} (
                    select c.created_at, c.pk from api_keys c where c.id = $2))
              order by k.created_at {dir}, k.pk {dir} limit $3",
            beyond(scan),
            dir = direction(scan)
        ))
        .bind_all((tenant, cursor, page.fetch_limit()))
        .fetch_all(self.reader())
        .await?;
        let keys = rows.into_iter().map(ApiKey::try_from).collect::<Result<Vec<_>>>()?;
        Ok(page.finish(keys, false, |k| k.id.to_string()))
    }

    async fn delete_api_key(&self, id: Uuid) -> Result<()> {
        let deleted = sqlx::query("delete from api_keys where id = $1")
            .bind(id)
            .execute(self.writer())
            .await?;
        if deleted.rows_affected() == 0 {
            return Err(StoreError::ApiKeyNotFound);
        }
        Ok(())
    }

    async fn find_api_key(&self, hash: &KeyHash) -> Result<Option<ApiKey>> {
        let row: Option<ApiKeyRow> =
            sqlx::query_as(&format!("select {COLUMNS} from api_keys k where k.key_hash = $1"))
                .bind(hash.hex())
                .fetch_optional(self.reader())
                .await?;
        row.map(ApiKey::try_from).transpose()
    }

    async fn touch_api_key(&self, id: Uuid, at: DateTime<Utc>) -> Result<()> {
        sqlx::query("update api_keys set last_used_at = $2 where id = $1")
            .bind_all((id, Timestamp(at)))
            .execute(self.writer())
            .await?;
        Ok(())
    }
}
