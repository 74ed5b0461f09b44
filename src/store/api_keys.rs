use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::Result;
use crate::model::{ApiKey, KeyHash, Page, PageRequest};

/// API keys of every tenant: the admin key manages them across tenants.
#[async_trait]
pub trait ApiKeyStore: Send + Sync {
    async fn create_api_key(&self, key: &ApiKey, hash: &KeyHash) -> Result<()>;

    /// Oldest first unless the page asks otherwise; all tenants' keys without `tenant`.
    async fn list_api_keys(&self, tenant: Option<&str>, page: &PageRequest)
        -> Result<Page<ApiKey>>;

    /// Fails with [`super::StoreError::ApiKeyNotFound`].
    async fn delete_api_key(&self, id: Uuid) -> Result<()>;

    /// The key with this hash, expired or not.
    async fn find_api_key(&self, hash: &KeyHash) -> Result<Option<ApiKey>>;

    async fn touch_api_key(&self, id: Uuid, at: DateTime<Utc>) -> Result<()>;
}
