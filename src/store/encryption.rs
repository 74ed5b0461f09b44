//! Encryption at rest: AES-256-GCM (RustCrypto's `aes-gcm`) under the keys of
//! `ENCRYPTION_KEYS`. The first key encrypts; every key decrypts.
//!
//! A value is stored as `enc:v1:<key id>:<base64 of nonce ‖ ciphertext ‖ tag>`: a fresh
//! random 96-bit nonce from the OS for each value, and the tenant and column as
//! associated data, so a value moved to another tenant or column does not decrypt.
//! Values without the prefix were stored before encryption was turned on and are read
//! as they are.

use aes_gcm::aead::{Aead, KeyInit, OsRng, Payload};
use aes_gcm::{AeadCore, Aes256Gcm, Nonce};
use base64::engine::general_purpose::STANDARD_NO_PAD;
use base64::Engine as _;

use super::StoreError;

const PREFIX: &str = "enc:v1:";
const NONCE_BYTES: usize = 12;

/// The configured keys, newest (the one that encrypts) first. Never printed.
pub struct Keyring {
    keys: Vec<(String, Aes256Gcm)>,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|(id, _)| id.as_str()).collect();
        f.debug_struct("Keyring").field("key_ids", &ids).finish()
    }
}

/// Why `ENCRYPTION_KEYS` cannot be used; names the entry, never its key material.
#[derive(Debug, thiserror::Error)]
pub enum KeyringError {
    #[error("ENCRYPTION_KEYS: entry {0} is not `key_id:BASE64` with a key id of 1-32 characters of A-Za-z0-9_.-")]
    Malformed(usize),
    #[error("ENCRYPTION_KEYS: the key of `{0}` is not valid base64")]
    NotBase64(String),
    #[error("ENCRYPTION_KEYS: the key of `{0}` is {1} bytes; AES-256 needs 32")]
    WrongLength(String, usize),
    #[error("ENCRYPTION_KEYS: the key id `{0}` is listed twice")]
    Duplicate(String),
}

impl Keyring {
    /// Parses `kid:BASE64,kid:BASE64,…`; none when the list is empty.
    pub fn parse(list: &str) -> Result<Option<Self>, KeyringError> {
        let mut keys: Vec<(String, Aes256Gcm)> = Vec::new();
        for (n, entry) in list.split(',').map(str::trim).filter(|e| !e.is_empty()).enumerate() {
            let (id, material) = entry.split_once(':').ok_or(KeyringError::Malformed(n + 1))?;
            let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
            if id.is_empty() || id.len() > 32 || !id.chars().all(valid) {
                return Err(KeyringError::Malformed(n + 1));
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(material.trim())
                .map_err(|_| KeyringError::NotBase64(id.to_owned()))?;
            if bytes.len() != 32 {
                return Err(KeyringError::WrongLength(id.to_owned(), bytes.len()));
            }
            if keys.iter().any(|(known, _)| known == id) {
                return Err(KeyringError::Duplicate(id.to_owned()));
            }
            let cipher = Aes256Gcm::new_from_slice(&bytes).expect("a 32-byte key");
            keys.push((id.to_owned(), cipher));
        }
        Ok((!keys.is_empty()).then_some(Self { keys }))
    }

    /// `keyring` with one more key, which only decrypts when `keyring` has keys and else
    /// encrypts too.
    pub fn with_key(keyring: Option<Self>, id: &str, key: &[u8; 32]) -> Self {
        let mut keys = keyring.map_or_else(Vec::new, |k| k.keys);
        keys.push((id.to_owned(), Aes256Gcm::new_from_slice(key).expect("a 32-byte key")));
        Self { keys }
    }

    /// Whether `value` is a sealed value at all, rather than one stored in the clear.
    pub fn is_sealed(value: &str) -> bool {
        value.starts_with(PREFIX)
    }

    /// The id of the key new values are encrypted under.
    pub fn current_id(&self) -> &str {
        &self.keys[0].0
    }

    /// Every configured key id, the current one first.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|(id, _)| id.as_str())
    }

    /// How every value under the current key begins.
    pub fn current_prefix(&self) -> String {
        format!("{PREFIX}{}:", self.current_id())
    }

    pub fn seal(&self, aad: &str, plain: &str) -> Result<String, StoreError> {
        let (id, cipher) = &self.keys[0];
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let sealed = cipher
            .encrypt(&nonce, Payload { msg: plain.as_bytes(), aad: aad.as_bytes() })
            .map_err(|_| StoreError::Corrupt("a value could not be encrypted".into()))?;
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&sealed);
        Ok(format!("{PREFIX}{id}:{}", STANDARD_NO_PAD.encode(bytes)))
    }

    /// The plain text of a stored value; a value stored before encryption as it is.
    pub fn open(keyring: Option<&Self>, aad: &str, stored: String) -> Result<String, StoreError> {
        let Some(rest) = stored.strip_prefix(PREFIX) else {
            return Ok(stored);
        };
        let corrupt =
            || StoreError::Corrupt(format!("an encrypted value of {aad} does not decrypt"));
        let (id, body) = rest.split_once(':').ok_or_else(corrupt)?;
        let cipher = keyring
            .and_then(|ring| ring.keys.iter().find(|(known, _)| known == id))
            .map(|(_, cipher)| cipher)
            .ok_or_else(|| StoreError::EncryptionKeyMissing(id.to_owned()))?;
        let bytes = STANDARD_NO_PAD.decode(body).map_err(|_| corrupt())?;
        if bytes.len() < NONCE_BYTES {
            return Err(corrupt());
        }
        let (nonce, sealed) = bytes.split_at(NONCE_BYTES);
        let plain = cipher
            .decrypt(Nonce::from_slice(nonce), Payload { msg: sealed, aad: aad.as_bytes() })
            .map_err(|_| corrupt())?;
        String::from_utf8(plain).map_err(|_| corrupt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K1: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    const K2: &str = "k2:HxweHRwbGhkYFxYVFBMSERAPDg0MCwoJCAcGBQQDAgE=";

    #[test]
    fn values_decrypt_only_where_they_were_sealed() {
        let ring = Keyring::parse(K1).unwrap().unwrap();
        let plain = r#"{"z":1,"big":123456789012345678901234567890,"ü":"😀"}"#;
        let sealed = ring.seal("acme/items.body", plain).unwrap();
        assert!(sealed.starts_with("enc:v1:k1:") && !sealed.contains("big"));
        assert_ne!(sealed, ring.seal("acme/items.body", plain).unwrap(), "a fresh nonce");
        assert_eq!(Keyring::open(Some(&ring), "acme/items.body", sealed.clone()).unwrap(), plain);
        for aad in ["other/items.body", "acme/runs.body"] {
            let error = Keyring::open(Some(&ring), aad, sealed.clone()).unwrap_err();
            assert!(matches!(error, StoreError::Corrupt(_)), "{aad}: {error}");
        }
        // Plain values of before encryption read as they are.
        assert_eq!(Keyring::open(Some(&ring), "a", "{}".into()).unwrap(), "{}");
    }

    #[test]
    fn old_keys_decrypt_and_a_missing_key_is_named() {
        let old = Keyring::parse(K1).unwrap().unwrap();
        let sealed = old.seal("t/c", "secret").unwrap();
        let rotated = Keyring::parse(&format!("{K2},{K1}")).unwrap().unwrap();
        assert_eq!(rotated.current_id(), "k2");
        assert_eq!(Keyring::open(Some(&rotated), "t/c", sealed.clone()).unwrap(), "secret");
        assert!(rotated.seal("t/c", "x").unwrap().starts_with("enc:v1:k2:"));
        let only_new = Keyring::parse(K2).unwrap().unwrap();
        for ring in [Some(&only_new), None] {
            match Keyring::open(ring, "t/c", sealed.clone()) {
                Err(StoreError::EncryptionKeyMissing(id)) => assert_eq!(id, "k1"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn bad_key_lists_name_the_entry_and_never_the_material() {
        assert!(Keyring::parse("").unwrap().is_none());
        let short = "k1:c2hvcnQ=";
        let errors = [
            (Keyring::parse(short), "`k1` is 5 bytes"),
            (Keyring::parse("k1:not*base64"), "`k1` is not valid base64"),
            (Keyring::parse("nocolon"), "entry 1"),
            (Keyring::parse(&format!("{K1},{K1}")), "listed twice"),
        ];
        for (result, expected) in errors {
            let message = result.unwrap_err().to_string();
            assert!(message.contains(expected), "{message}");
            assert!(!message.contains("c2hvcnQ") && !message.contains("AAECAw"), "{message}");
        }
        assert!(!format!("{:?}", Keyring::parse(K1).unwrap().unwrap()).contains("AAECAw"));
    }
}
