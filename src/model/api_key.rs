//! API keys: who may call, for which tenant, with which scopes.

use std::fmt::Write as _;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;
use uuid::Uuid;

use super::field::InvalidField;

/// What a key may do: `read` only GETs, `write` also POST, PATCH and DELETE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Read,
    Write,
}

/// A stored API key: never the key itself, only its prefix.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ApiKey {
    /// A UUIDv7 given by the service.
    pub id: Uuid,
    pub tenant: String,
    pub name: String,
    /// The first 8 characters of the key, to tell keys apart.
    #[schema(example = "ask_Xy3q")]
    pub prefix: String,
    pub scopes: Vec<Scope>,
    pub created_at: DateTime<Utc>,
    #[schema(required = true)]
    pub expires_at: Option<DateTime<Utc>>,
    /// When the key was last used, to the minute.
    #[schema(required = true)]
    pub last_used_at: Option<DateTime<Utc>>,
}

impl ApiKey {
    pub fn can_write(&self) -> bool {
        self.scopes.contains(&Scope::Write)
    }

    pub fn is_expired(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|expires| expires <= now)
    }
}

/// The characters of a tenant name besides letters and digits.
pub const TENANT_PATTERN: &str = "^[A-Za-z0-9_.-]{1,64}$";

/// Checks a tenant name: 1–64 of `A-Za-z0-9_.-`.
pub fn check_tenant(field: &str, tenant: &str) -> Result<(), InvalidField> {
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
    if tenant.is_empty() || tenant.len() > 64 || !tenant.chars().all(valid) {
        return Err(InvalidField::new(field, "must be 1-64 characters of A-Za-z0-9_.-"));
    }
    Ok(())
}

/// Scopes as given: `read`, or `write` with or without `read` (writing includes
/// reading); absent means both.
pub fn check_scopes(scopes: Option<Vec<Scope>>) -> Result<Vec<Scope>, InvalidField> {
    let mut scopes = scopes.unwrap_or_else(|| vec![Scope::Read, Scope::Write]);
    let given = scopes.len();
    scopes.sort();
    scopes.dedup();
    if scopes.len() != given {
        return Err(InvalidField::new("scopes", "lists a scope twice"));
    }
    match scopes.as_slice() {
        [] => Err(InvalidField::new("scopes", "must name at least one scope")),
        [Scope::Write] => Ok(vec![Scope::Read, Scope::Write]),
        _ => Ok(scopes),
    }
}

/// A new secret key, shown once: `ask_` and 256 random bits, url-safe.
pub struct NewKey {
    pub secret: String,
    pub hash: KeyHash,
}

impl NewKey {
    pub fn generate() -> Self {
        let mut bits = [0u8; 32];
        getrandom::getrandom(&mut bits).expect("the operating system provides randomness");
        let secret = format!("ask_{}", URL_SAFE_NO_PAD.encode(bits));
        let hash = KeyHash::of(&secret);
        Self { secret, hash }
    }

    pub fn prefix(&self) -> String {
        self.secret.chars().take(8).collect()
    }
}

/// The SHA-256 of a key: what is stored and compared, never the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyHash(pub [u8; 32]);

impl KeyHash {
    pub fn of(secret: &str) -> Self {
        Self(Sha256::digest(secret.as_bytes()).into())
    }

    pub fn hex(&self) -> String {
        self.0.iter().fold(String::with_capacity(64), |mut hex, b| {
            let _ = write!(hex, "{b:02x}");
            hex
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_long_random_and_url_safe() {
        let (a, b) = (NewKey::generate(), NewKey::generate());
        assert_ne!(a.secret, b.secret);
        assert!(a.secret.starts_with("ask_") && a.secret.len() == 4 + 43);
        assert!(a.secret[4..].chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        assert_eq!(a.hash, KeyHash::of(&a.secret));
        assert_eq!(a.hash.hex().len(), 64);
        assert!(a.secret.starts_with(&a.prefix()) && a.prefix().len() == 8);
    }

    #[test]
    fn tenants_and_scopes_are_checked() {
        assert!(check_tenant("tenant", "acme-1.eu_west").is_ok());
        for bad in ["", "a b", "ü", &"x".repeat(65)] {
            assert!(check_tenant("tenant", bad).is_err(), "{bad:?}");
        }
        assert_eq!(check_scopes(None).unwrap(), [Scope::Read, Scope::Write]);
        assert_eq!(
            check_scopes(Some(vec![Scope::Write, Scope::Read])).unwrap(),
            [Scope::Read, Scope::Write]
        );
        assert!(check_scopes(Some(vec![Scope::Read, Scope::Read])).is_err());
        assert_eq!(check_scopes(Some(vec![Scope::Write])).unwrap(), [Scope::Read, Scope::Write]);
        assert!(check_scopes(Some(vec![])).is_err());
    }
}
