//! Values the service hands to clients sealed, to take back later: opaque,
//! tamper-evident and bound to the tenant and to what they are. Sealed under the first
//! key of `ENCRYPTION_KEYS`; without it, under a key made from the secret the database
//! created when it was migrated, so every replica opens what any other sealed.

use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

use std::sync::Arc;

use crate::store::{Keyring, SessionStore, StoreError};

/// The key id of the key made from the database's secret.
const SERVER_KEY_ID: &str = "server";

pub struct Sealer {
    store: Arc<dyn SessionStore>,
    /// `ENCRYPTION_KEYS` as configured; taken into `keyring` on first use.
    configured: std::sync::Mutex<Option<Keyring>>,
    keyring: OnceCell<Keyring>,
}

/// Why a sealed value is refused.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("is not a value this service sealed for this tenant, or it was altered")]
    Forged,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Sealer {
    pub fn new(store: Arc<dyn SessionStore>, configured: Option<Keyring>) -> Self {
        Self { store, configured: std::sync::Mutex::new(configured), keyring: OnceCell::new() }
    }

    async fn keyring(&self) -> Result<&Keyring, StoreError> {
        self.keyring
            .get_or_try_init(|| async {
                let secret = self.store.server_secret("sealing").await?;
                let key: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
                let configured = self.configured.lock().expect("not poisoned").take();
                Ok(Keyring::with_key(configured, SERVER_KEY_ID, &key))
            })
            .await
    }

    /// `plain`, sealed for `tenant` as a value of `kind`.
    pub async fn seal(&self, tenant: &str, kind: &str, plain: &str) -> Result<String, StoreError> {
        self.keyring().await?.seal(&aad(tenant, kind), plain)
    }

    /// What `sealed` holds, if this service sealed it for `tenant` as a value of `kind`.
    pub async fn open(&self, tenant: &str, kind: &str, sealed: &str) -> Result<String, SealError> {
        if !Keyring::is_sealed(sealed) {
            return Err(SealError::Forged);
        }
        let keyring = self.keyring().await?;
        Keyring::open(Some(keyring), &aad(tenant, kind), sealed.to_owned()).map_err(|error| {
            match error {
                StoreError::Corrupt(_) => SealError::Forged,
                // A key id no longer configured: as good as forged for the client.
                StoreError::EncryptionKeyMissing(_) => SealError::Forged,
                other => SealError::Store(other),
            }
        })
    }
}

fn aad(tenant: &str, kind: &str) -> String {
    format!("sealed:{kind}:{tenant}")
}
