//! The secret rules: put (create, or rotate keeping `created_at`) and delete.

use crate::store::Missing;
use crate::store::StoreError;
use crate::store::batch::{Batch, Op};
use crate::store::records::SecretRecord;

/// Stores a sealed secret; answers it as stored and whether it is new.
pub(in crate::store) struct PutSecret(pub SecretRecord);

impl Op for PutSecret {
    type Output = (SecretRecord, bool);

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<(SecretRecord, bool), StoreError> {
        let mut record = self.0.clone();
        let previous = batch.tx.secret(&record.name)?;
        if let Some(previous) = &previous {
            record.created_at = previous.created_at.clone();
        }
        batch.tx.put_secret(&record)?;
        Ok((record, previous.is_none()))
    }
}

/// Deletes a secret; 404 when there is none.
pub(in crate::store) struct DeleteSecret(pub String);

impl Op for DeleteSecret {
    type Output = ();

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<(), StoreError> {
        match batch.tx.remove_secret(&self.0)? {
            true => Ok(()),
            false => Err(StoreError::not_found(Missing::Secret, &self.0)),
        }
    }
}
