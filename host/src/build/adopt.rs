//! Builds on a shared store (docs/scale-out.md): the host that receives an
//! upload claims its build and stores the bundle in the store before it
//! answers; every host's sweep adopts the builds whose claim expired (their
//! host stopped), reading the bundle back and building it here.

use std::path::PathBuf;

use uuid::Uuid;

use super::Builder;
use crate::store::{BuildOutcome, StoreError};

impl Builder {
    /// Claims the build of the bundle at `bundle` for this host and stores
    /// the bundle for any host to adopt; returns the claim.
    pub(super) async fn share(
        &self,
        deployment: Uuid,
        bundle: PathBuf,
    ) -> Result<Option<Box<dyn Send>>, StoreError> {
        self.store
            .read(move |store| {
                let claim = store.hold_build(deployment)?;
                let bytes = std::fs::read(&bundle)
                    .map_err(|e| StoreError::Storage(format!("cannot read the bundle: {e}")))?;
                store.put_bundle(deployment, &bytes)?;
                Ok(claim)
            })
            .await
    }

    /// Adopts every orphaned build: claims it, and queues it when its
    /// bundle was stored, or fails it when its host stopped before that.
    pub(crate) async fn adopt_orphans(&self) -> Result<(), StoreError> {
        let builder = self.clone();
        let adopted = self
            .store
            .read(move |store| {
                let mut adopted = 0;
                for deployment in store.orphaned_builds()? {
                    let claim = store.hold_build(deployment)?;
                    let Some(record) = store.deployment(deployment)? else {
                        continue;
                    };
                    adopted += 1;
                    match store.bundle(deployment)? {
                        Some(bytes) => {
                            let path = builder.bundle_path(deployment);
                            if let Some(parent) = path.parent() {
                                std::fs::create_dir_all(parent).map_err(io)?;
                            }
                            std::fs::write(&path, bytes).map_err(io)?;
                            builder.queue(&record, claim);
                        }
                        None => {
                            let message = "the host that received this upload stopped before \
                                           storing it; deploy again"
                                .to_string();
                            builder
                                .writer
                                .blocking_finish_build(deployment, BuildOutcome::Failed(message))?;
                            store.forget_build(deployment)?;
                        }
                    }
                }
                Ok(adopted)
            })
            .await?;
        if adopted > 0 {
            tracing::warn!(count = adopted, "adopted builds whose host stopped");
        }
        Ok(())
    }
}

fn io(err: std::io::Error) -> StoreError {
    StoreError::Storage(format!("cannot keep an adopted bundle: {err}"))
}
