//! Builds across hosts: the uploaded bundle is kept in `blobs` until its
//! build is over, and the host that builds a deployment holds a claim on it
//! (`build_claims`, renewed by the lease keeper). When a host stops mid-build,
//! its claim expires and another host's sweep adopts the build: it claims
//! it, reads the bundle back and builds it. Builds are deterministic, so if
//! the first host comes back and finishes too, its result is refused (the
//! deployment is no longer `building`) and nothing changes.

use uuid::Uuid;

use super::{Hold, PgEngine, pg};
use crate::store::StoreError;
use crate::store::error::corrupt;

impl PgEngine {
    /// Claims (or re-claims) `deployment`'s build for this host.
    pub(super) fn claim_build(&self, deployment: Uuid) -> Result<Hold, StoreError> {
        self.conn()?
            .execute(
                "INSERT INTO build_claims (deployment_id, owner, lease_expires)
                 VALUES ($1, $2, now() + make_interval(secs => $3))
                 ON CONFLICT (deployment_id) DO UPDATE
                 SET owner = excluded.owner, lease_expires = excluded.lease_expires",
                &[&deployment, &self.host, &self.lease.ttl_secs()],
            )
            .map_err(|e| pg(&e))?;
        Ok(self.building.hold(deployment))
    }

    pub(super) fn drop_build(&self, deployment: Uuid) -> Result<(), StoreError> {
        let mut conn = self.conn()?;
        let mut txn = conn.transaction().map_err(|e| pg(&e))?;
        txn.execute(
            "DELETE FROM blobs WHERE kind = 'bundle' AND id = $1",
            &[&deployment],
        )
        .map_err(|e| pg(&e))?;
        txn.execute(
            "DELETE FROM build_claims WHERE deployment_id = $1",
            &[&deployment],
        )
        .map_err(|e| pg(&e))?;
        txn.commit().map_err(|e| pg(&e))
    }

    /// Claims the orphaned builds: `building` deployments whose claim
    /// expired, or that never got one within a lease of their creation (the
    /// host stopped between creating the deployment and claiming it).
    /// `SKIP LOCKED` and the conditional upsert let hosts sweep together:
    /// each orphan goes to one of them.
    pub(super) fn claim_orphaned_builds(&self) -> Result<Vec<Uuid>, StoreError> {
        let rows = self
            .conn()?
            .query(
                "WITH orphans AS (
                     SELECT d.id FROM deployments d
                     LEFT JOIN build_claims c ON c.deployment_id = d.id
                     WHERE d.status = 'building'
                       AND (c.lease_expires < now()
                            OR (c.deployment_id IS NULL
                                AND (d.record->>'created_at')::timestamptz
                                    < now() - make_interval(secs => $2)))
                     FOR UPDATE OF d SKIP LOCKED
                 )
                 INSERT INTO build_claims (deployment_id, owner, lease_expires)
                 SELECT id, $1, now() + make_interval(secs => $2) FROM orphans
                 ON CONFLICT (deployment_id) DO UPDATE
                 SET owner = excluded.owner, lease_expires = excluded.lease_expires
                 WHERE build_claims.lease_expires < now()
                 RETURNING deployment_id",
                &[&self.host, &self.lease.ttl_secs()],
            )
            .map_err(|e| pg(&e))?;
        rows.iter().map(|r| r.try_get(0).map_err(corrupt)).collect()
    }
}
