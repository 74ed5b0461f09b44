//! Completion webhooks: where the service tells a backend that a run finished or waits
//! for it, and how far the telling got.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::field::InvalidField;
use super::outbound::WebhookPolicy;

/// Where the service POSTs the run, signed as Standard Webhooks sign, whenever it
/// finishes or pauses for the client (`requires_action`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompletionWebhook {
    /// `http` or `https`, on a host listed in `TOOL_WEBHOOK_ALLOWED_HOSTS`.
    #[schema(pattern = "^[Hh][Tt][Tt][Pp][Ss]?://[^/?#]")]
    pub url: String,
}

impl CompletionWebhook {
    pub fn validate(&self, at: &str, policy: &WebhookPolicy) -> Result<(), InvalidField> {
        policy.check_url(&format!("{at}.url"), &self.url, "webhook", "the service")?;
        if !policy.signs_completions() {
            return Err(InvalidField::new(
                at,
                "completion webhooks are off: the operator sets WEBHOOK_SIGNING_SECRET to sign them",
            ));
        }
        Ok(())
    }
}

/// How the run's latest webhook delivery stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookDelivery {
    pub status: DeliveryStatus,
    /// POSTs made so far.
    pub attempts: u32,
    /// The HTTP status of the last answer; null before one, or when the last attempt got
    /// none (a timeout, a refused connection).
    #[schema(required = true)]
    pub last_status_code: Option<u16>,
}

/// `pending` until a 2xx answer (`delivered`), or until an hour of retries has passed
/// (`failed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    Pending,
    Delivered,
    Failed,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::Pending, Self::Delivered, Self::Failed].into_iter().find(|s| s.as_str() == text)
    }
}
