//! What the parts of the service are built with, as the options say; the options the
//! service refuses to start with.

use std::time::Duration;

use super::Config;
use crate::secret::Secret;

impl Config {
    pub fn llm_settings(&self) -> crate::llm::LlmSettings {
        crate::llm::LlmSettings {
            base_url: self.llm_base_url.clone(),
            api_key: self.llm_api_key.clone().filter(|key| !key.expose().is_empty()),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(self.llm_timeout_secs),
            idle_timeout: Duration::from_secs(self.llm_idle_timeout_secs),
            max_retries: self.llm_max_retries,
            retry_base_delay: Duration::from_millis(500),
            retry_max_delay: Duration::from_secs(30),
        }
    }

    pub fn run_settings(&self) -> crate::runs::RunSettings {
        crate::runs::RunSettings {
            workers: self.run_workers,
            lease: Duration::from_secs(self.run_lease_secs),
            max_attempts: self.run_max_attempts,
            webhooks: crate::model::WebhookPolicy::new(&self.tool_webhook_allowed_hosts)
                .signing_completions(
                    self.webhook_signing_secret.as_ref().is_some_and(|s| !s.expose().is_empty()),
                ),
            webhook_signing_secret: (self.webhook_signing_secret.clone())
                .filter(|secret| !secret.expose().is_empty()),
            default_model: self.llm_model.clone().filter(|m| !m.is_empty()),
            tenant_max_active_runs: self.tenant_max_active_runs,
            mcp_call_timeout: Duration::from_secs(self.mcp_call_timeout_secs),
            history_cache_bytes: self.history_cache_mb.saturating_mul(1 << 20),
            ..crate::runs::RunSettings::default()
        }
    }

    /// Authentication as configured; an admin key that is too short is refused.
    pub fn auth_settings(&self) -> Result<crate::auth::AuthSettings, StartupError> {
        let admin_key = self.admin_api_key.as_ref().map(|key| key.expose().to_owned());
        let admin_key = admin_key.filter(|key| !key.is_empty());
        if admin_key.as_ref().is_some_and(|key| key.chars().count() < 32) {
            return Err(StartupError::ShortAdminKey);
        }
        Ok(crate::auth::AuthSettings {
            admin_key,
            cache_ttl: Duration::from_secs(self.auth_cache_secs),
            rate_limit_per_key: self.rate_limit_per_key,
        })
    }

    /// How stored payloads are kept: encrypted under `ENCRYPTION_KEYS`, or plain.
    pub fn payload_codec(&self) -> Result<crate::store::PayloadCodec, StartupError> {
        Ok(crate::store::PayloadCodec::new(self.keyring()?))
    }

    /// How the store opens and uses the database, with payloads kept by `codec`.
    pub fn store_options(&self, codec: crate::store::PayloadCodec) -> crate::store::Options {
        crate::store::Options {
            timeout: Duration::from_secs(self.database_timeout_secs),
            codec,
            default_expiry: self.default_expiry(),
            ..crate::store::Options::new(self.database_max_connections)
        }
    }

    /// The keys of `ENCRYPTION_KEYS`, if any.
    pub fn keyring(&self) -> Result<Option<crate::store::Keyring>, StartupError> {
        let keys = self.encryption_keys.as_ref().map_or("", Secret::expose);
        Ok(crate::store::Keyring::parse(keys)?)
    }

    /// The retention of sessions created without `expires_after`.
    pub fn default_expiry(&self) -> Option<crate::model::ExpiresAfter> {
        self.session_expires_after_secs.map(crate::model::ExpiresAfter::inactivity)
    }
}

/// A configuration the service refuses to start with.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("ADMIN_API_KEY must be at least 32 characters long")]
    ShortAdminKey,
    #[error(
        "refusing to listen on {0} without authentication: set ADMIN_API_KEY to turn \
         authentication on, or pass --allow-unauthenticated (ALLOW_UNAUTHENTICATED=true) to \
         serve every caller as one tenant"
    )]
    Unauthenticated(std::net::SocketAddr),
    #[error(transparent)]
    EncryptionKeys(#[from] crate::store::KeyringError),
}
