//! Tools an agent offers the model, and the webhooks that answer them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::field::InvalidField;
use super::whole_number;

const DEFAULT_WEBHOOK_TIMEOUT_MS: u64 = 10_000;
const MAX_WEBHOOK_TIMEOUT_MS: u64 = 300_000;

/// A function the model may call. With a `webhook` the service calls it; without, the
/// run pauses as `requires_action` and the client answers with the tool's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    #[serde(rename = "type")]
    pub kind: ToolKind,
    /// 1 to 64 characters of `A-Za-z0-9_-`, unique within the agent.
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A JSON Schema object describing the arguments.
    #[serde(default = "empty_parameters")]
    #[schema(value_type = Object)]
    pub parameters: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<Webhook>,
    /// `always`: a person approves each call of this webhook tool before it runs (the
    /// run pauses with `required_action.type` `approve_tool_calls`).
    #[serde(default, skip_serializing_if = "RequireApproval::is_never")]
    pub require_approval: RequireApproval,
}

/// Whether a server-side tool's calls wait for a person's approval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RequireApproval {
    Always,
    #[default]
    Never,
}

impl RequireApproval {
    fn is_never(&self) -> bool {
        *self == Self::Never
    }
}

/// What an answer shows for a webhook header's value, and what a PATCH sends back to
/// keep the stored one: the values are credentials, never echoed.
pub const REDACTED: &str = "[REDACTED]";

impl Tool {
    /// The tool as answers show it: webhook header values replaced by [`REDACTED`].
    pub fn redacted(mut self) -> Self {
        if let Some(webhook) = &mut self.webhook {
            for value in webhook.headers.values_mut() {
                *value = REDACTED.to_owned();
            }
        }
        self
    }

    /// Puts back the stored value of every header sent as [`REDACTED`], taken from the
    /// stored tool of the same name; a redacted header with no stored value is refused.
    pub fn restore_redacted(&mut self, stored: &[Tool], at: &str) -> Result<(), InvalidField> {
        let Some(webhook) = &mut self.webhook else {
            return Ok(());
        };
        let previous = stored
            .iter()
            .find(|tool| tool.name == self.name)
            .and_then(|tool| tool.webhook.as_ref());
        for (name, value) in &mut webhook.headers {
            if value != REDACTED {
                continue;
            }
            match previous.and_then(|webhook| webhook.headers.get(name)) {
                Some(kept) => kept.clone_into(value),
                None => {
                    return Err(InvalidField::new(
                        format!("{at}.webhook.headers.{name}"),
                        format!("`{REDACTED}` keeps a stored value, and this header has none"),
                    ))
                }
            }
        }
        Ok(())
    }
}

fn empty_parameters() -> serde_json::Value {
    serde_json::json!({"type": "object", "properties": {}})
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    Function,
}

/// Where the service POSTs `{call_id, name, arguments, session_id, run_id}`; the
/// response body becomes the tool's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// `http` or `https`, on a host listed in `TOOL_WEBHOOK_ALLOWED_HOSTS`.
    #[schema(pattern = "^[Hh][Tt][Tt][Pp][Ss]?://[^/?#]")]
    pub url: String,
    #[serde(default = "default_webhook_timeout", deserialize_with = "whole_number::required")]
    #[schema(minimum = 1, maximum = 300000, default = 10000)]
    pub timeout_ms: u64,
    /// Sent with every call, e.g. an `Authorization` the webhook expects. Answers show
    /// each value as `[REDACTED]`; a PATCH that sends `[REDACTED]` keeps the stored value.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

fn default_webhook_timeout() -> u64 {
    DEFAULT_WEBHOOK_TIMEOUT_MS
}

impl Tool {
    pub(super) fn validate(&self, at: &str, webhooks: &WebhookPolicy) -> Result<(), InvalidField> {
        let name_ok = (1..=64).contains(&self.name.len())
            && self.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !name_ok {
            return Err(InvalidField::new(
                format!("{at}.name"),
                "must be 1 to 64 characters of A-Z, a-z, 0-9, _ and -",
            ));
        }
        if !self.parameters.is_object() {
            return Err(InvalidField::new(
                format!("{at}.parameters"),
                "must be a JSON Schema object",
            ));
        }
        if let Some(webhook) = &self.webhook {
            webhook.validate(&format!("{at}.webhook"), webhooks)?;
        } else if self.require_approval == RequireApproval::Always {
            return Err(InvalidField::new(
                format!("{at}.require_approval"),
                "applies only to a tool with a webhook: the client runs the others",
            ));
        }
        Ok(())
    }
}

impl Webhook {
    fn validate(&self, at: &str, policy: &WebhookPolicy) -> Result<(), InvalidField> {
        let url = reqwest::Url::parse(&self.url)
            .map_err(|e| InvalidField::new(format!("{at}.url"), format!("not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(InvalidField::new(format!("{at}.url"), "must be http or https"));
        }
        let host = url.host_str().unwrap_or_default();
        if !policy.allows(host, url.port_or_known_default()) {
            return Err(InvalidField::new(
                format!("{at}.url"),
                format!(
                    "webhook host `{host}` is not allowed; the operator lists the hosts tools may call in TOOL_WEBHOOK_ALLOWED_HOSTS"
                ),
            ));
        }
        if !(1..=MAX_WEBHOOK_TIMEOUT_MS).contains(&self.timeout_ms) {
            return Err(InvalidField::new(
                format!("{at}.timeout_ms"),
                format!("must be between 1 and {MAX_WEBHOOK_TIMEOUT_MS}"),
            ));
        }
        for (name, value) in &self.headers {
            let valid = reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_ok()
                && reqwest::header::HeaderValue::from_str(value).is_ok();
            if !valid {
                return Err(InvalidField::new(
                    format!("{at}.headers.{name}"),
                    "is not a valid HTTP header",
                ));
            }
        }
        Ok(())
    }
}

/// The hosts webhook tools may call (`TOOL_WEBHOOK_ALLOWED_HOSTS`). Empty refuses every
/// webhook: the service must not become a proxy into the operator's network.
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_hosts_must_be_listed() {
        let policy = WebhookPolicy::new(&["tools.internal".into(), "127.0.0.1:9000".into()]);
        assert!(policy.allows("TOOLS.internal", Some(443)));
        assert!(policy.allows("127.0.0.1", Some(9000)));
        assert!(!policy.allows("127.0.0.1", Some(9001)));
        assert!(!WebhookPolicy::default().allows("tools.internal", Some(80)));
    }
}
