use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::timestamp::Timestamp;
use super::Result;
use crate::model::DeliveryStatus;

/// Completion webhook deliveries: rows the runs' writes queue, claimed by the delivery
/// workers of any replica and written back after each attempt.
#[async_trait]
pub trait DeliveryStore: Send + Sync {
    /// Up to `limit` pending deliveries that are due, held for `hold` so that no other
    /// worker takes them meanwhile, oldest due first.
    async fn claim_deliveries(&self, limit: i64, hold: Duration) -> Result<Vec<Delivery>>;

    /// Records an attempt on a delivery still held by its claim: the delivery is
    /// `delivered`, `failed`, or `pending` again from `next_attempt_at`. A claim that
    /// lapsed (the attempt outlasted it, and another worker took the delivery) records
    /// nothing.
    async fn record_delivery(&self, delivery: &Delivery, attempt: &Attempt) -> Result<()>;
}

/// A delivery claimed for an attempt.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub pk: i64,
    /// The `webhook-id` header: the same on every attempt.
    pub id: Uuid,
    pub url: String,
    pub body: String,
    /// Attempts made before this one.
    pub attempts: u32,
    pub created_at: DateTime<Utc>,
    /// Until when the claim holds the delivery, as stored: what tells this claim from a
    /// later one.
    pub(super) held_until: Timestamp,
}

/// What an attempt left.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub status: DeliveryStatus,
    pub attempts: u32,
    pub last_status_code: Option<u16>,
    pub next_attempt_at: DateTime<Utc>,
}
