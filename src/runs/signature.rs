//! Standard Webhooks signatures (standardwebhooks.com): `v1,<base64 of the HMAC-SHA256
//! of "{id}.{timestamp}.{body}">`, keyed with the secret. A `whsec_` secret is base64,
//! as the specification's libraries make them; any other is used as its bytes.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The `webhook-signature` header of a message.
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &str) -> String {
    let key = secret
        .strip_prefix("whsec_")
        .and_then(|encoded| STANDARD.decode(encoded).ok())
        .unwrap_or_else(|| secret.as_bytes().to_vec());
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("HMAC takes a key of any length");
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the specification's reference implementations.
    #[test]
    fn signs_as_the_specification_does() {
        let signature = sign(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            r#"{"test": 2432232314}"#,
        );
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }
}
