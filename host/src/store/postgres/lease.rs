//! Leases on running turns. A host owns the turns it starts (the session
//! row's `owner`); while it runs them it renews their `lease_expires` every
//! third of the lease. A host that dies stops renewing; once the lease has
//! expired, any host's sweep (`Recover`) settles the turn with the same
//! rules as a restart. A host that lost its lease can no longer append: the
//! writer refuses a turn's events unless the session's owner is its host.
//!
//! Builds have leases too (`builds.rs`): the host that builds a deployment
//! renews its claim the same way, and another host adopts a build whose
//! claim expired.

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use super::{Held, describe};
use crate::store::StoreError;

/// How long a lease lasts without renewal (`--lease-secs`).
#[derive(Debug, Clone, Copy)]
pub struct LeaseOptions {
    pub ttl: Duration,
}

impl Default for LeaseOptions {
    fn default() -> Self {
        LeaseOptions {
            ttl: Duration::from_secs(5),
        }
    }
}

impl LeaseOptions {
    pub(super) fn ttl_secs(&self) -> f64 {
        self.ttl.as_secs_f64()
    }

    /// How often leases are renewed, and expired ones looked for.
    pub fn tick(&self) -> Duration {
        (self.ttl / 3).max(Duration::from_millis(100))
    }
}

/// Starts the thread that renews this host's leases: on the turns it runs
/// (`live`) and on the builds it works on (`building`).
pub(super) fn spawn_keeper(
    target: super::Target,
    host: Uuid,
    lease: LeaseOptions,
    live: Arc<Held>,
    building: Arc<Held>,
) -> Result<(), StoreError> {
    std::thread::Builder::new()
        .name("lease-keeper".into())
        .spawn(move || {
            let mut client = None;
            loop {
                std::thread::sleep(lease.tick());
                let (sessions, builds) = (live.snapshot(), building.snapshot());
                if sessions.is_empty() && builds.is_empty() {
                    continue;
                }
                if client.as_ref().is_none_or(postgres::Client::is_closed) {
                    client = target.connect().ok();
                }
                let Some(c) = client.as_mut() else {
                    tracing::warn!("cannot reach PostgreSQL to renew this host's leases");
                    continue;
                };
                // One row per statement: a statement renewing them all held
                // some rows' locks while it waited for a row the writer held,
                // and the writer (locking its rows in its own order) waited
                // for those: a deadlock, which stalled both until PostgreSQL's
                // deadlock_timeout (1 s) broke it.
                let renewed = c
                    .prepare(
                        "UPDATE sessions SET lease_expires = now() + make_interval(secs => $3)
                         WHERE id = $2 AND owner = $1 AND status = 'running'",
                    )
                    .and_then(|renew| {
                        sessions.iter().try_for_each(|session| {
                            c.execute(&renew, &[&host, session, &lease.ttl_secs()])
                                .map(|_| ())
                        })
                    })
                    .and_then(|_| {
                        c.execute(
                            "UPDATE build_claims
                             SET lease_expires = now() + make_interval(secs => $3)
                             WHERE owner = $1 AND deployment_id = ANY($2)",
                            &[&host, &builds, &lease.ttl_secs()],
                        )
                    });
                if let Err(err) = renewed {
                    tracing::warn!(error = %describe(&err), "cannot renew this host's leases");
                    client = None;
                }
            }
        })
        .map_err(|e| StoreError::Storage(format!("cannot start the lease keeper: {e}")))?;
    Ok(())
}
