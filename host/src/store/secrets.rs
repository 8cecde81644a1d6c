//! The writer's secret commands: put (create or rotate) and delete.

use redb::{ReadableTable, WriteTransaction};

use super::error::{corrupt, storage};
use super::records::SecretRecord;
use super::{StoreError, tables};

/// Stores a sealed secret; returns whether it is new.
pub(super) fn put_secret(
    txn: &WriteTransaction,
    record: &SecretRecord,
) -> Result<bool, StoreError> {
    let bytes = serde_json::to_vec(record).map_err(corrupt)?;
    let mut table = txn.open_table(tables::SECRETS).map_err(storage)?;
    let previous = table
        .insert(record.name.as_str(), bytes.as_slice())
        .map_err(storage)?;
    Ok(previous.is_none())
}

/// The creation time of an existing secret (kept across rotations).
pub(super) fn created_at(txn: &WriteTransaction, name: &str) -> Result<Option<String>, StoreError> {
    let table = txn.open_table(tables::SECRETS).map_err(storage)?;
    let value = table.get(name).map_err(storage)?;
    match value {
        Some(v) => Ok(Some(
            serde_json::from_slice::<SecretRecord>(v.value())
                .map_err(corrupt)?
                .created_at,
        )),
        None => Ok(None),
    }
}

pub(super) fn delete_secret(txn: &WriteTransaction, name: &str) -> Result<(), StoreError> {
    let mut table = txn.open_table(tables::SECRETS).map_err(storage)?;
    match table.remove(name).map_err(storage)? {
        Some(_) => Ok(()),
        None => Err(StoreError::not_found("secret", name)),
    }
}
