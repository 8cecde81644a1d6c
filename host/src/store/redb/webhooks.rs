//! The webhooks' tables on redb (`store::domain::webhooks`): endpoints,
//! deliveries, and the pending deliveries by endpoint (the cap's count and
//! the sender's scan, both bounded by the per-endpoint cap).

use redb::{ReadTransaction, ReadableTable, WriteTransaction};
use uuid::Uuid;

use super::{storage, tables};
use crate::store::StoreError;
use crate::store::error::corrupt;
use crate::store::webhook_records::{DeliveryRecord, DeliveryState, WebhookRecord};

fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(corrupt)
}

fn all_webhooks(
    table: &impl ReadableTable<u128, &'static [u8]>,
) -> Result<Vec<WebhookRecord>, StoreError> {
    let mut out = Vec::new();
    for row in table.iter().map_err(storage)? {
        out.push(decode(row.map_err(storage)?.1.value())?);
    }
    Ok(out)
}

pub(super) fn webhooks(txn: &ReadTransaction) -> Result<Vec<WebhookRecord>, StoreError> {
    all_webhooks(&txn.open_table(tables::WEBHOOKS).map_err(storage)?)
}

pub(super) fn due(
    txn: &ReadTransaction,
    now_ms: u64,
    limit: usize,
) -> Result<Vec<DeliveryRecord>, StoreError> {
    let pending = txn.open_table(tables::WEBHOOK_PENDING).map_err(storage)?;
    let deliveries = txn
        .open_table(tables::WEBHOOK_DELIVERIES)
        .map_err(storage)?;
    let mut out: Vec<DeliveryRecord> = Vec::new();
    for row in pending.iter().map_err(storage)? {
        let (key, _) = row.map_err(storage)?;
        let (_, id) = key.value();
        let Some(value) = deliveries.get(id).map_err(storage)? else {
            continue;
        };
        let record: DeliveryRecord = decode(value.value())?;
        if record.next_at_ms <= now_ms && record.lease_until_ms < now_ms {
            out.push(record);
        }
    }
    // Approval events first (an operator waits for them), then the oldest.
    out.sort_by_key(|d| (!d.event_type.starts_with("approval."), d.next_at_ms));
    out.truncate(limit);
    Ok(out)
}

pub(super) fn deliveries(
    txn: &ReadTransaction,
    webhook: Uuid,
    before: Option<Uuid>,
    limit: usize,
) -> Result<Vec<DeliveryRecord>, StoreError> {
    let index = txn
        .open_table(tables::WEBHOOK_BY_ENDPOINT)
        .map_err(storage)?;
    let deliveries = txn
        .open_table(tables::WEBHOOK_DELIVERIES)
        .map_err(storage)?;
    let key = webhook.as_u128();
    let upper = before.map_or(u128::MAX, |b| b.as_u128());
    let mut out = Vec::new();
    for row in index.range((key, 0)..(key, upper)).map_err(storage)?.rev() {
        let (entry, _) = row.map_err(storage)?;
        if let Some(value) = deliveries.get(entry.value().1).map_err(storage)? {
            out.push(decode(value.value())?);
        }
        if out.len() >= limit {
            break;
        }
    }
    Ok(out)
}

pub(super) fn tx_webhooks(txn: &WriteTransaction) -> Result<Vec<WebhookRecord>, StoreError> {
    all_webhooks(&txn.open_table(tables::WEBHOOKS).map_err(storage)?)
}

pub(super) fn tx_webhook(
    txn: &WriteTransaction,
    id: Uuid,
) -> Result<Option<WebhookRecord>, StoreError> {
    let table = txn.open_table(tables::WEBHOOKS).map_err(storage)?;
    let value = table.get(id.as_u128()).map_err(storage)?;
    value.map(|v| decode(v.value())).transpose()
}

pub(super) fn put_webhook(
    txn: &WriteTransaction,
    record: &WebhookRecord,
) -> Result<(), StoreError> {
    let bytes = serde_json::to_vec(record).map_err(corrupt)?;
    let mut table = txn.open_table(tables::WEBHOOKS).map_err(storage)?;
    table
        .insert(record.id.as_u128(), bytes.as_slice())
        .map_err(storage)?;
    Ok(())
}

pub(super) fn remove_webhook(txn: &WriteTransaction, id: Uuid) -> Result<bool, StoreError> {
    let key = id.as_u128();
    let removed = (txn.open_table(tables::WEBHOOKS).map_err(storage)?)
        .remove(key)
        .map_err(storage)?
        .is_some();
    let mut index = txn
        .open_table(tables::WEBHOOK_BY_ENDPOINT)
        .map_err(storage)?;
    let mut pending = txn.open_table(tables::WEBHOOK_PENDING).map_err(storage)?;
    let mut deliveries = txn
        .open_table(tables::WEBHOOK_DELIVERIES)
        .map_err(storage)?;
    let ids: Vec<u128> = (index.range((key, 0)..=(key, u128::MAX)).map_err(storage)?)
        .map(|row| row.map(|(k, _)| k.value().1).map_err(storage))
        .collect::<Result<_, _>>()?;
    for delivery in ids {
        index.remove((key, delivery)).map_err(storage)?;
        pending.remove((key, delivery)).map_err(storage)?;
        deliveries.remove(delivery).map_err(storage)?;
    }
    Ok(removed)
}

pub(super) fn delivery(
    txn: &WriteTransaction,
    id: Uuid,
) -> Result<Option<DeliveryRecord>, StoreError> {
    let table = txn
        .open_table(tables::WEBHOOK_DELIVERIES)
        .map_err(storage)?;
    let value = table.get(id.as_u128()).map_err(storage)?;
    value.map(|v| decode(v.value())).transpose()
}

pub(super) fn put_delivery(
    txn: &WriteTransaction,
    record: &DeliveryRecord,
) -> Result<(), StoreError> {
    let bytes = serde_json::to_vec(record).map_err(corrupt)?;
    let key = (record.webhook_id.as_u128(), record.id.as_u128());
    let mut table = txn
        .open_table(tables::WEBHOOK_DELIVERIES)
        .map_err(storage)?;
    table
        .insert(record.id.as_u128(), bytes.as_slice())
        .map_err(storage)?;
    let mut index = txn
        .open_table(tables::WEBHOOK_BY_ENDPOINT)
        .map_err(storage)?;
    index.insert(key, ()).map_err(storage)?;
    let mut pending = txn.open_table(tables::WEBHOOK_PENDING).map_err(storage)?;
    if record.state == DeliveryState::Pending {
        pending.insert(key, ()).map_err(storage)?;
    } else {
        pending.remove(key).map_err(storage)?;
    }
    Ok(())
}

pub(super) fn pending_count(txn: &WriteTransaction, webhook: Uuid) -> Result<u64, StoreError> {
    let key = webhook.as_u128();
    let pending = txn.open_table(tables::WEBHOOK_PENDING).map_err(storage)?;
    let mut n = 0;
    for row in pending
        .range((key, 0)..=(key, u128::MAX))
        .map_err(storage)?
    {
        row.map_err(storage)?;
        n += 1;
    }
    Ok(n)
}

/// Removes up to `limit` finished deliveries whose (UUIDv7) id was made
/// before `before_ms`, oldest first.
pub(super) fn purge(
    txn: &WriteTransaction,
    before_ms: u64,
    limit: usize,
) -> Result<usize, StoreError> {
    let bound = u128::from(before_ms) << 80;
    let mut deliveries = txn
        .open_table(tables::WEBHOOK_DELIVERIES)
        .map_err(storage)?;
    let mut old = Vec::new();
    for row in deliveries.range(..bound).map_err(storage)? {
        if old.len() == limit {
            break;
        }
        let (key, value) = row.map_err(storage)?;
        let record: DeliveryRecord = decode(value.value())?;
        if record.state != DeliveryState::Pending {
            old.push((key.value(), record.webhook_id.as_u128()));
        }
    }
    let mut index = txn
        .open_table(tables::WEBHOOK_BY_ENDPOINT)
        .map_err(storage)?;
    for (id, webhook) in &old {
        deliveries.remove(*id).map_err(storage)?;
        index.remove((*webhook, *id)).map_err(storage)?;
    }
    Ok(old.len())
}
