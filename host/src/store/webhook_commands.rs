//! The writer's webhook commands as the rest of the host calls them
//! (`store::domain::webhooks` holds their rules).

use uuid::Uuid;

use super::StoreError;
use super::commands::WriterHandle;
use super::domain::{
    AttemptOutcome, ClaimDeliveries, CreateWebhook, DeleteWebhook, FinishAttempt, PurgeDeliveries,
    ReleaseDeliveries, ResendDelivery, RotateWebhook,
};
use super::records::SecretRecord;
use super::webhook_records::{DeliveryAttempt, DeliveryRecord, WebhookRecord};

impl WriterHandle {
    /// Saves a new endpoint (`record.app`, a slug or id, resolved: 404 if unknown).
    pub async fn create_webhook(&self, record: WebhookRecord) -> Result<WebhookRecord, StoreError> {
        self.call(CreateWebhook { record }).await
    }

    /// Removes an endpoint and its deliveries (404 if unknown).
    pub async fn delete_webhook(&self, id: Uuid) -> Result<(), StoreError> {
        self.call(DeleteWebhook(id)).await
    }

    /// A new signing secret; the old one keeps signing until `grace_until_ms`.
    pub async fn rotate_webhook(
        &self,
        id: Uuid,
        secret: SecretRecord,
        grace_until_ms: u64,
    ) -> Result<WebhookRecord, StoreError> {
        (self.call(RotateWebhook {
            id,
            secret,
            grace_until_ms,
        }))
        .await
    }

    /// Claims due deliveries for this host until `lease_until_ms`.
    pub async fn claim_deliveries(
        &self,
        ids: Vec<Uuid>,
        now_ms: u64,
        lease_until_ms: u64,
    ) -> Result<Vec<(DeliveryRecord, WebhookRecord)>, StoreError> {
        (self.call(ClaimDeliveries {
            ids,
            host: self.boot,
            now_ms,
            lease_until_ms,
        }))
        .await
    }

    /// Records an attempt of a delivery this host claimed.
    pub async fn finish_attempt(
        &self,
        id: Uuid,
        attempt: DeliveryAttempt,
        outcome: AttemptOutcome,
    ) -> Result<(), StoreError> {
        (self.call(FinishAttempt {
            id,
            host: self.boot,
            attempt,
            outcome,
        }))
        .await
    }

    /// Frees the leases of these deliveries (their host is gone); how many were held.
    pub async fn release_deliveries(&self, ids: Vec<Uuid>) -> Result<usize, StoreError> {
        self.call(ReleaseDeliveries(ids)).await
    }

    /// Forgets up to `limit` finished deliveries made before `before_ms`.
    pub async fn purge_deliveries(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> Result<usize, StoreError> {
        self.call(PurgeDeliveries { before_ms, limit }).await
    }

    /// Sends a finished delivery again.
    pub async fn resend_delivery(
        &self,
        webhook: Uuid,
        id: Uuid,
    ) -> Result<DeliveryRecord, StoreError> {
        self.call(ResendDelivery { webhook, id }).await
    }
}
