//! The API-key rules: store a key, revoke one (never the last platform
//! key), and the rate-limited last-used write.

use crate::store::Missing;
use crate::store::StoreError;
use crate::store::batch::{Batch, Op};
use crate::store::records::{ApiKeyRecord, KeyClass};

/// Stores a key (minted, or the bootstrap key replacing the previous one).
pub(in crate::store) struct PutApiKey(pub ApiKeyRecord);

impl Op for PutApiKey {
    type Output = ();

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<(), StoreError> {
        batch.tx.put_api_key(&self.0)
    }
}

/// Revokes a key; 409 for the last platform key.
pub(in crate::store) struct DeleteApiKey(pub String);

impl Op for DeleteApiKey {
    type Output = ApiKeyRecord;

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<ApiKeyRecord, StoreError> {
        let id = self.0.as_str();
        let keys = batch.tx.api_keys()?;
        let platform_keys = keys
            .iter()
            .filter(|k| k.class == KeyClass::Platform)
            .count();
        let target = keys
            .into_iter()
            .find(|k| k.id == id)
            .ok_or_else(|| StoreError::not_found(Missing::ApiKey, id))?;
        if target.class == KeyClass::Platform && platform_keys <= 1 {
            return Err(StoreError::Conflict(
                "this is the last platform key: mint another one before revoking it".into(),
            ));
        }
        batch.tx.remove_api_key(id)?;
        Ok(target)
    }
}

/// Records a key's last use; a key revoked meanwhile is left alone.
pub(in crate::store) struct TouchApiKey(pub String, pub String);

impl Op for TouchApiKey {
    type Output = ();

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<(), StoreError> {
        let Some(record) = batch.tx.api_key(&self.0)? else {
            return Ok(());
        };
        batch.tx.put_api_key(&ApiKeyRecord {
            last_used_at: Some(self.1.clone()),
            ..record
        })
    }
}
