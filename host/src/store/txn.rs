//! Small typed helpers over a write transaction, shared by the writer's commands.

use redb::{ReadableTable, WriteTransaction};
use uuid::Uuid;

use super::batch::EventsTable;
use super::error::{corrupt, storage};
use super::records::{ApiKeyRecord, AppRecord, SessionRecord};
use super::writer::CachedSession;
use super::{StoreError, tables};

/// A session's record and next seq; `events` is the batch's open journal table.
pub(super) fn load_session(
    txn: &WriteTransaction,
    events: &EventsTable<'_>,
    id: Uuid,
) -> Result<CachedSession, StoreError> {
    let record: SessionRecord =
        get_json(txn, tables::SESSIONS, id)?.ok_or_else(|| StoreError::not_found("session", id))?;
    let key = id.as_u128();
    let next_seq = match events
        .range((key, 0)..=(key, u64::MAX))
        .map_err(storage)?
        .next_back()
    {
        Some(row) => row.map_err(storage)?.0.value().1 + 1,
        None => 0,
    };
    Ok(CachedSession { record, next_seq })
}

pub(super) fn get_json<T: serde::de::DeserializeOwned>(
    txn: &WriteTransaction,
    table: redb::TableDefinition<u128, &[u8]>,
    id: Uuid,
) -> Result<Option<T>, StoreError> {
    let table = txn.open_table(table).map_err(storage)?;
    let value = table.get(id.as_u128()).map_err(storage)?;
    match value {
        Some(v) => serde_json::from_slice(v.value()).map(Some).map_err(corrupt),
        None => Ok(None),
    }
}

pub(super) fn put_api_key(txn: &WriteTransaction, record: &ApiKeyRecord) -> Result<(), StoreError> {
    let bytes = serde_json::to_vec(record).map_err(corrupt)?;
    let mut table = txn.open_table(tables::API_KEYS).map_err(storage)?;
    table
        .insert(record.id.as_str(), bytes.as_slice())
        .map_err(storage)?;
    Ok(())
}

pub(super) fn put_json(
    txn: &WriteTransaction,
    table: redb::TableDefinition<u128, &[u8]>,
    key: u128,
    value: &impl serde::Serialize,
) -> Result<(), StoreError> {
    let bytes = serde_json::to_vec(value).map_err(corrupt)?;
    let mut table = txn.open_table(table).map_err(storage)?;
    table.insert(key, bytes.as_slice()).map_err(storage)?;
    Ok(())
}

pub(super) fn find_app(
    txn: &WriteTransaction,
    id_or_slug: &str,
) -> Result<Option<AppRecord>, StoreError> {
    let id = match Uuid::parse_str(id_or_slug) {
        Ok(id) => id,
        Err(_) => {
            let slugs = txn.open_table(tables::APP_SLUGS).map_err(storage)?;
            let id = slugs.get(id_or_slug).map_err(storage)?.map(|v| v.value());
            match id {
                Some(id) => Uuid::from_u128(id),
                None => return Ok(None),
            }
        }
    };
    get_json(txn, tables::APPS, id)
}
