//! A host among many (`--store postgres://`): it applies what other hosts
//! commit (wakes its streams, refreshes its keys and secrets) and settles
//! the turns whose host died (an expired lease), with the same recovery
//! rules as a restart, and adopts the builds it left. See docs/scale-out.md.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use uuid::Uuid;

use crate::build::Builder;
use crate::keys::Keys;
use crate::runtime::Runtime;
use crate::secrets::Vault;
use crate::store::postgres::{Change, LeaseOptions, PgEngine};
use crate::store::{Db, StoreError, WriterHandle};

/// What a host's cluster duties reach.
#[derive(Clone)]
pub(crate) struct Host {
    pub store: Db,
    pub writer: WriterHandle,
    pub runtime: Arc<Runtime>,
    pub builder: Builder,
    pub keys: Keys,
    pub vault: Arc<Vault>,
    /// Revoked end users (`end_users::revocation`).
    pub revocations: crate::end_users::revocation::Revocations,
}

/// Events read per query when a stream's session catches up.
const CHUNK: usize = 512;

/// Starts the lease keeper, the listener and the sweep of expired leases.
pub(crate) fn start(engine: &PgEngine, lease: LeaseOptions, host: Host) -> Result<(), StoreError> {
    engine.keep_leases()?;
    let (tx, rx) = mpsc::unbounded_channel();
    engine.listen(Box::new(move |change| {
        // The receiver lives as long as the server.
        let _ = tx.send(change);
    }))?;
    tokio::spawn(apply_changes(host.clone(), rx));
    tokio::spawn(sweep(host, lease.tick()));
    Ok(())
}

async fn apply_changes(host: Host, mut changes: mpsc::UnboundedReceiver<Change>) {
    while let Some(change) = changes.recv().await {
        let result = match change {
            Change::Events {
                session,
                first,
                last,
            } => catch_up(&host, session, first, last).await,
            Change::Key(id) => refresh_key(&host, id).await,
            Change::Secret(_) => refresh_secrets(&host).await,
            Change::App(_) => Ok(()),
            Change::Deleted(session) => {
                host.store.hub().close(session);
                Ok(())
            }
            Change::Feed(head) => {
                host.store.hub().feed_advanced(head);
                Ok(())
            }
            Change::Cancel { session, turn, by } => {
                host.runtime.cancel_here(session, turn, &by);
                Ok(())
            }
            Change::EndUserRevoked {
                user_key,
                not_before_ms,
            } => {
                // Refused here too from now on, and their streams end.
                host.revocations.apply(&user_key, not_before_ms);
                host.keys.end_streams(&user_key);
                Ok(())
            }
            Change::Reconnected => resync(&host).await,
        };
        if let Err(err) = result {
            tracing::warn!(error = %err, "cannot apply another host's change; it is applied at the next one");
        }
    }
}

/// Publishes a watched session's events `first..=last` that this host has
/// not published yet, read from the journal in order.
async fn catch_up(host: &Host, session: Uuid, first: u64, last: u64) -> Result<(), StoreError> {
    let hub = host.store.hub();
    while let Some(from) = hub.missing(session, first, last) {
        let chunk = (host.store)
            .read(move |s| s.events(session, from, CHUNK))
            .await?;
        let done = chunk.len() < CHUNK;
        let events: Vec<_> = chunk.into_iter().map(|e| (session, e)).collect();
        hub.publish(&events);
        if done {
            break;
        }
    }
    Ok(())
}

async fn refresh_key(host: &Host, id: String) -> Result<(), StoreError> {
    let records = host.store.read(|s| s.api_keys()).await?;
    match records.iter().find(|k| k.id == id) {
        Some(record) => host.keys.insert(record),
        // Revoked on another host: refused here too, its streams end.
        None => host.keys.remove(&id),
    }
    Ok(())
}

async fn refresh_secrets(host: &Host) -> Result<(), StoreError> {
    let records = host.store.read(|s| s.secrets()).await?;
    if let Err(err) = host.vault.load(&records) {
        tracing::error!(error = %err, "cannot open a secret another host stored (is the master key the same on every host?)");
    }
    Ok(())
}

/// After the listener reconnected: anything may have changed meanwhile.
async fn resync(host: &Host) -> Result<(), StoreError> {
    host.store.hub().feed_recheck();
    host.revocations.forget_all();
    for session in host.store.hub().watched() {
        catch_up(host, session, 0, u64::MAX).await?;
    }
    let records = host.store.read(|s| s.api_keys()).await?;
    for record in &records {
        host.keys.insert(record);
    }
    for id in host.keys.ids() {
        if !records.iter().any(|k| k.id == id) {
            host.keys.remove(&id);
        }
    }
    refresh_secrets(host).await
}

/// Settles, every `tick`, the turns whose host stopped renewing its lease,
/// and adopts the builds whose host stopped renewing its claim.
async fn sweep(host: Host, tick: Duration) {
    loop {
        tokio::time::sleep(tick).await;
        // The writer starts the turns it hands back (`store::start`).
        match host.writer.recover().await {
            Ok(recovery) => {
                if !recovery.closed.is_empty() || !recovery.restarted.is_empty() {
                    tracing::warn!(
                        closed = recovery.closed.len(),
                        restarted = recovery.restarted.len(),
                        "took over turns whose host stopped"
                    );
                }
            }
            Err(err) => tracing::warn!(error = %err, "cannot look for expired leases"),
        }
        if let Err(err) = host.builder.adopt_orphans().await {
            tracing::warn!(error = %err, "cannot look for orphaned builds");
        }
    }
}
