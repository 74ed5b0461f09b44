//! The `DeliveryStore` of the backend: completion webhook deliveries claimed with
//! `skip locked` where the backend has it, so replicas never post one at once.

use std::time::Duration;

use async_trait::async_trait;
use uuid::Uuid;

use super::backend::{Store, SKIP_LOCKED};
use super::binds::BindAll;
use crate::store::payload::Column;
use crate::store::run_rows::DeliveryPayload;
use crate::store::timestamp::Timestamp;
use crate::store::{Attempt, Delivery, DeliveryStore, Result, StoreError};

#[async_trait]
impl DeliveryStore for Store {
    async fn claim_deliveries(&self, limit: i64, hold: Duration) -> Result<Vec<Delivery>> {
        let now = Timestamp::now();
        type Row = (i64, Uuid, String, String, i32, Timestamp, Timestamp);
        let rows: Vec<Row> = sqlx::query_as(&format!(
            r"update webhook_deliveries set next_attempt_at = $2
              where pk in (select pk from webhook_deliveries
                           where status = 'pending' and next_attempt_at <= $1
                           order by next_attempt_at limit $3{SKIP_LOCKED})
              returning pk, id, tenant_id, payload, attempts, created_at, next_attempt_at"
        ))
        .bind_all((now, Timestamp(now.0 + hold), limit))
        .fetch_all(self.writer())
        .await?;
        rows.into_iter()
            .map(|(pk, id, tenant, payload, attempts, created_at, held_until)| {
                let payload = self.codec.open(&tenant, Column::WebhookPayload, payload)?;
                let DeliveryPayload { url, body } = serde_json::from_str(&payload)
                    .map_err(|e| StoreError::Corrupt(format!("webhook delivery: {e}")))?;
                let attempts = u32::try_from(attempts).unwrap_or_default();
                let created_at = created_at.0;
                Ok(Delivery { pk, id, url, body, attempts, created_at, held_until })
            })
            .collect()
    }

    async fn record_delivery(&self, delivery: &Delivery, attempt: &Attempt) -> Result<()> {
        sqlx::query(
            r"update webhook_deliveries
              set status = $2, attempts = $3, last_status_code = $4, next_attempt_at = $5
              where pk = $1 and status = 'pending' and next_attempt_at = $6",
        )
        .bind_all((
            delivery.pk,
            attempt.status.as_str(),
            i32::try_from(attempt.attempts).unwrap_or(i32::MAX),
            attempt.last_status_code.map(i32::from),
            Timestamp(attempt.next_attempt_at),
            delivery.held_until,
        ))
        .execute(self.writer())
        .await?;
        Ok(())
    }
}
