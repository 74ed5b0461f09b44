//! What the service may call for a tenant: the one allow-list of hosts
//! (`TOOL_WEBHOOK_ALLOWED_HOSTS`) every webhook tool, MCP server and completion webhook is
//! checked against, and the headers sent with those calls, which are credentials.

use std::collections::BTreeMap;

use super::field::InvalidField;

/// What an answer shows for a header's value, and what a PATCH sends back to keep the
/// stored one: the values are credentials, never echoed.
pub const REDACTED: &str = "[REDACTED]";

/// The hosts the service may call (`TOOL_WEBHOOK_ALLOWED_HOSTS`). Empty refuses every
/// one: the service must not become a proxy into the operator's network.
#[derive(Debug, Clone, Default)]
pub struct WebhookPolicy {
    /// `host` (any port) or `host:port`, lowercase.
    allowed: Vec<String>,
    /// `WEBHOOK_SIGNING_SECRET` is set: completion webhooks are signed, so allowed.
    signs_completions: bool,
}

impl WebhookPolicy {
    pub fn new(hosts: &[String]) -> Self {
        Self {
            allowed: hosts
                .iter()
                .map(|h| h.trim().to_ascii_lowercase())
                .filter(|h| !h.is_empty())
                .collect(),
            signs_completions: false,
        }
    }

    /// The policy when completion webhooks are signed (`WEBHOOK_SIGNING_SECRET`).
    pub fn signing_completions(self, signs: bool) -> Self {
        Self { signs_completions: signs, ..self }
    }

    pub fn signs_completions(&self) -> bool {
        self.signs_completions
    }

    pub fn allows(&self, host: &str, port: Option<u16>) -> bool {
        let host = host.to_ascii_lowercase();
        let with_port = port.map(|p| format!("{host}:{p}"));
        self.allowed.iter().any(|a| *a == host || Some(a) == with_port.as_ref())
    }

    /// Whether `url` is one the service may call now: the allow-list may have shrunk
    /// since a tool was configured.
    pub fn allows_url(&self, url: &str) -> bool {
        reqwest::Url::parse(url).is_ok_and(|url| {
            self.allows(url.host_str().unwrap_or_default(), url.port_or_known_default())
        })
    }

    /// Checks an `http(s)` URL on an allowed host, named `field`; `what` says what calls
    /// it (`webhook`, `MCP server`) and `who` whom the operator lists hosts for.
    pub fn check_url(
        &self, field: &str, url: &str, what: &str, who: &str,
    ) -> Result<(), InvalidField> {
        let url = reqwest::Url::parse(url)
            .map_err(|e| InvalidField::new(field, format!("not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(InvalidField::new(field, "must be http or https"));
        }
        let host = url.host_str().unwrap_or_default();
        if !self.allows(host, url.port_or_known_default()) {
            return Err(InvalidField::new(
                field,
                format!(
                    "{what} host `{host}` is not allowed; the operator lists the hosts {who} may call in TOOL_WEBHOOK_ALLOWED_HOSTS"
                ),
            ));
        }
        Ok(())
    }
}

/// Checks that every header is a valid HTTP header; `at` names the map.
pub fn check_headers(at: &str, headers: &BTreeMap<String, String>) -> Result<(), InvalidField> {
    for (name, value) in headers {
        let valid = reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_ok()
            && reqwest::header::HeaderValue::from_str(value).is_ok();
        if !valid {
            return Err(InvalidField::new(format!("{at}.{name}"), "is not a valid HTTP header"));
        }
    }
    Ok(())
}

/// Replaces every header value by [`REDACTED`].
pub fn redact(headers: &mut BTreeMap<String, String>) {
    for value in headers.values_mut() {
        *value = REDACTED.to_owned();
    }
}

/// Puts back the stored value of every header sent as [`REDACTED`]; a redacted header
/// with no stored value is refused, named `at.<header>`.
pub fn restore(
    headers: &mut BTreeMap<String, String>, stored: Option<&BTreeMap<String, String>>, at: &str,
) -> Result<(), InvalidField> {
    for (name, value) in headers {
        if value != REDACTED {
            continue;
        }
        match stored.and_then(|stored| stored.get(name)) {
            Some(kept) => kept.clone_into(value),
            None => {
                return Err(InvalidField::new(
                    format!("{at}.{name}"),
                    format!("`{REDACTED}` keeps a stored value, and this header has none"),
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_must_be_listed() {
        let policy = WebhookPolicy::new(&["tools.internal".into(), "127.0.0.1:9000".into()]);
        assert!(policy.allows("TOOLS.internal", Some(443)));
        assert!(policy.allows("127.0.0.1", Some(9000)));
        assert!(!policy.allows("127.0.0.1", Some(9001)));
        assert!(policy.allows_url("http://127.0.0.1:9000/mcp"));
        assert!(!policy.allows_url("not a url"));
        assert!(!WebhookPolicy::default().allows("tools.internal", Some(80)));
        let refused = policy.check_url("x.url", "http://other/", "MCP server", "the service");
        assert!(refused.unwrap_err().to_string().contains("MCP server host `other`"));
    }

    #[test]
    fn redacted_headers_are_restored_from_the_stored_ones() {
        let stored = BTreeMap::from([("Authorization".to_owned(), "Bearer s3cret".to_owned())]);
        let mut shown = stored.clone();
        redact(&mut shown);
        assert_eq!(shown["Authorization"], REDACTED);
        restore(&mut shown, Some(&stored), "h").unwrap();
        assert_eq!(shown, stored);
        let mut unknown = BTreeMap::from([("X-Key".to_owned(), REDACTED.to_owned())]);
        assert!(restore(&mut unknown, Some(&stored), "h").is_err());
    }
}
