//! The writer's API-key commands: revoke (never the last platform key) and
//! the rate-limited last-used write.

use redb::{ReadableTable, WriteTransaction};

use super::error::{corrupt, storage};
use super::records::{ApiKeyRecord, KeyClass};
use super::txn::put_api_key;
use super::{StoreError, tables};

pub(super) fn delete_api_key(txn: &WriteTransaction, id: &str) -> Result<ApiKeyRecord, StoreError> {
    let mut table = txn.open_table(tables::API_KEYS).map_err(storage)?;
    let mut target = None;
    let mut platform_keys = 0;
    for row in table.iter().map_err(storage)? {
        let (key, value) = row.map_err(storage)?;
        let record: ApiKeyRecord = serde_json::from_slice(value.value()).map_err(corrupt)?;
        if record.class == KeyClass::Platform {
            platform_keys += 1;
        }
        if key.value() == id {
            target = Some(record);
        }
    }
    let target = target.ok_or_else(|| StoreError::not_found("api key", id))?;
    if target.class == KeyClass::Platform && platform_keys <= 1 {
        return Err(StoreError::Conflict(
            "this is the last platform key: mint another one before revoking it".into(),
        ));
    }
    table.remove(id).map_err(storage)?;
    Ok(target)
}

pub(super) fn touch_api_key(
    txn: &WriteTransaction,
    id: &str,
    at: String,
) -> Result<(), StoreError> {
    let record = {
        let table = txn.open_table(tables::API_KEYS).map_err(storage)?;
        let value = table.get(id).map_err(storage)?;
        match value {
            Some(v) => serde_json::from_slice::<ApiKeyRecord>(v.value()).map_err(corrupt)?,
            // Revoked in the meantime: nothing to record.
            None => return Ok(()),
        }
    };
    put_api_key(
        txn,
        &ApiKeyRecord {
            last_used_at: Some(at),
            ..record
        },
    )
}
