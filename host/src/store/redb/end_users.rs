//! The redb side of end users' rows (`store::domain::end_users`): their
//! not-before (revoked tokens) and their recent turns.

use redb::{ReadableDatabase, ReadableTable, WriteTransaction};

use super::{RedbEngine, storage, tables};
use crate::store::StoreError;

pub(super) fn not_before(engine: &RedbEngine, user_key: &str) -> Result<Option<u64>, StoreError> {
    let txn = engine.db.begin_read().map_err(storage)?;
    let table = txn
        .open_table(tables::ENDUSERS_NOT_BEFORE)
        .map_err(storage)?;
    Ok(table.get(user_key).map_err(storage)?.map(|v| v.value()))
}

pub(super) fn tx_not_before(
    txn: &WriteTransaction,
    user_key: &str,
) -> Result<Option<u64>, StoreError> {
    let table = txn
        .open_table(tables::ENDUSERS_NOT_BEFORE)
        .map_err(storage)?;
    Ok(table.get(user_key).map_err(storage)?.map(|v| v.value()))
}

pub(super) fn put_not_before(
    txn: &WriteTransaction,
    user_key: &str,
    not_before_ms: u64,
) -> Result<(), StoreError> {
    let mut table = txn
        .open_table(tables::ENDUSERS_NOT_BEFORE)
        .map_err(storage)?;
    table.insert(user_key, not_before_ms).map_err(storage)?;
    Ok(())
}

pub(super) fn turns(txn: &WriteTransaction, user_key: &str) -> Result<Vec<u64>, StoreError> {
    let table = txn.open_table(tables::ENDUSERS_TURNS).map_err(storage)?;
    let Some(value) = table.get(user_key).map_err(storage)? else {
        return Ok(Vec::new());
    };
    Ok(value
        .value()
        .chunks_exact(8)
        .map(|chunk| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(chunk);
            u64::from_le_bytes(bytes)
        })
        .collect())
}

pub(super) fn put_turns(
    txn: &WriteTransaction,
    user_key: &str,
    turns_ms: &[u64],
) -> Result<(), StoreError> {
    let mut table = txn.open_table(tables::ENDUSERS_TURNS).map_err(storage)?;
    if turns_ms.is_empty() {
        table.remove(user_key).map_err(storage)?;
        return Ok(());
    }
    let bytes: Vec<u8> = turns_ms.iter().flat_map(|ms| ms.to_le_bytes()).collect();
    table.insert(user_key, bytes.as_slice()).map_err(storage)?;
    Ok(())
}
