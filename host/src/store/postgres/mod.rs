//! The PostgreSQL engine (`--store postgres://...`): what many hosts share.
//!
//! Every host holds a pool of connections for reads and one connection for
//! its writer. A write transaction locks the rows of the sessions it
//! decides on (`SELECT ... FOR UPDATE`), so two hosts never decide on one
//! session at once; a transaction that loses a race (deadlock,
//! serialization failure) is rolled back and retried whole. A running turn
//! is owned by the host that started it (the session row's `owner`, with a
//! lease that host renews while it runs the turn, `lease.rs`); a host whose
//! lease expired can no longer append, and another host settles the turn
//! with the recovery rules; builds are claimed and adopted the same way
//! (`builds.rs`). Commits announce themselves with NOTIFY, and
//! each host's listener (`listen.rs`) wakes the streams it serves.

mod builds;
mod connect;
mod lease;
mod listen;
mod reads;
mod schema;
mod tls;
mod tx;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use postgres::Client;
use r2d2_postgres::PostgresConnectionManager;
use uuid::Uuid;

use super::StoreError;
use super::engine::{WriteEngine, WriteTx};
pub(crate) use connect::StoreTimeouts;
use connect::{Target, Tls};
pub(crate) use lease::LeaseOptions;
pub(crate) use listen::Change;
use tx::PgTx;

type Pool = r2d2::Pool<PostgresConnectionManager<Tls>>;

/// The read pool, closed on a thread of its own when the last engine handle
/// goes: closing a sync client blocks, which an async worker may not.
struct Reads(Option<Pool>);

impl Drop for Reads {
    fn drop(&mut self) {
        if let Some(pool) = self.0.take() {
            let _ = std::thread::Builder::new()
                .name("pg-pool-close".into())
                .spawn(move || drop(pool));
        }
    }
}

/// The NOTIFY channel every host listens on.
const CHANNEL: &str = "agenthost";

/// Maps a PostgreSQL error: the server is gone or refused for now (the
/// next call tries again), or the transaction lost a race (retried).
pub(super) fn pg(err: &postgres::Error) -> StoreError {
    // Data PostgreSQL cannot store (class 22, "data exception": text with a
    // NUL in a `text` or `jsonb` column): the command's own fault, not the
    // database's. The writer applies the rest of its batch without it.
    if let Some(db) = err.as_db_error()
        && db.code().code().starts_with("22")
    {
        return StoreError::Unstorable(format!("the database cannot store this: {}", db.message()));
    }
    StoreError::Unavailable(describe(err))
}

fn describe(err: &postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => {
            // The client's own text names only the kind ("error performing
            // TLS handshake"): the why is in its causes.
            let mut text = err.to_string();
            let mut cause = std::error::Error::source(err);
            while let Some(inner) = cause {
                text.push_str(": ");
                text.push_str(&inner.to_string());
                cause = inner.source();
            }
            text
        }
    }
}

fn pool_error(err: r2d2::Error) -> StoreError {
    StoreError::Unavailable(format!("no PostgreSQL connection: {err}"))
}

/// Whether a failed transaction may succeed when run again at once.
fn lost_race(err: &postgres::Error) -> bool {
    use postgres::error::SqlState;
    err.code().is_some_and(|c| {
        *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
    })
}

/// What this host is working on, by id (the sessions it runs a turn of,
/// the deployments it builds): their leases are renewed, and this host
/// never takes them over as orphans. Counted: one session's next turn may
/// start here (a queued input, an input sent right after TURN_ENDED) before
/// the previous turn's runner has let go of its hold, and that runner's
/// release must not drop the new turn's lease.
#[derive(Default)]
pub(crate) struct Held(Mutex<HashMap<Uuid, usize>>);

impl Held {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, usize>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn snapshot(&self) -> Vec<Uuid> {
        self.lock().keys().copied().collect()
    }

    /// Holds `id` until the returned value (and every other hold of it) is dropped.
    fn hold(self: &Arc<Self>, id: Uuid) -> Hold {
        *self.lock().entry(id).or_default() += 1;
        Hold {
            held: self.clone(),
            id,
        }
    }
}

/// Held while this host works on something; forgets it on drop.
pub(crate) struct Hold {
    held: Arc<Held>,
    id: Uuid,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut held = self.held.lock();
        if let Some(count) = held.get_mut(&self.id) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.id);
            }
        }
    }
}

#[cfg(test)]
mod held_tests {
    use super::*;

    #[test]
    fn a_session_stays_held_until_its_last_hold_is_dropped() {
        let held = Arc::new(Held::default());
        let session = Uuid::now_v7();
        let finishing = held.hold(session);
        // The next turn starts before the finishing one's runner let go.
        let next = held.hold(session);
        drop(finishing);
        assert_eq!(held.snapshot(), [session]);
        drop(next);
        assert!(held.snapshot().is_empty());
    }
}

/// The PostgreSQL engine of one host (cheap to clone).
#[derive(Clone)]
pub(crate) struct PgEngine {
    target: Target,
    pool: Arc<Reads>,
    host: Uuid,
    lease: LeaseOptions,
    live: Arc<Held>,
    building: Arc<Held>,
}

impl PgEngine {
    /// `open_with` the default timeouts (the store's tests).
    #[cfg(test)]
    pub(crate) fn open(url: &str, host: Uuid, lease: LeaseOptions) -> Result<PgEngine, StoreError> {
        PgEngine::open_with(url, host, lease, StoreTimeouts::default())
    }

    /// Connects, runs the schema migrations (refusing a schema newer than
    /// this binary knows), and opens the read pool. `host` is this
    /// process's id: the owner of the turns it runs; `timeouts` are set on
    /// every connection.
    pub(crate) fn open_with(
        url: &str,
        host: Uuid,
        lease: LeaseOptions,
        timeouts: StoreTimeouts,
    ) -> Result<PgEngine, StoreError> {
        let target = Target::parse(url, timeouts)?;
        let mut client = target.connect().map_err(|e| target.startup_error(&e))?;
        // A migration may take longer than a statement may.
        client
            .batch_execute("SET statement_timeout = 0")
            .map_err(|e| pg(&e))?;
        schema::migrate(&mut client)?;
        let manager = target.manager();
        let pool = r2d2::Pool::builder()
            .max_size(16)
            .min_idle(Some(2))
            .connection_timeout(Duration::from_secs(5))
            .build(manager)
            .map_err(pool_error)?;
        Ok(PgEngine {
            target,
            pool: Arc::new(Reads(Some(pool))),
            host,
            lease,
            live: Arc::default(),
            building: Arc::default(),
        })
    }

    fn conn(&self) -> Result<r2d2::PooledConnection<PostgresConnectionManager<Tls>>, StoreError> {
        let pool = (self.pool.0.as_ref())
            .ok_or_else(|| StoreError::Unavailable("the read pool is closed".into()))?;
        pool.get().map_err(pool_error)
    }

    /// Marks a turn as running here until the hold is dropped.
    pub(crate) fn hold(&self, session: Uuid) -> Hold {
        self.live.hold(session)
    }

    /// Starts the lease keeper (renewals) of this host.
    pub(crate) fn keep_leases(&self) -> Result<(), StoreError> {
        lease::spawn_keeper(
            self.target.clone(),
            self.host,
            self.lease,
            self.live.clone(),
            self.building.clone(),
        )
    }

    /// Starts this host's listener: `changed` is called for every change
    /// another transaction (of any host) committed.
    pub(crate) fn listen(&self, changed: Box<dyn Fn(Change) + Send>) -> Result<(), StoreError> {
        listen::spawn(self.target.clone(), changed)
    }
}

/// The writer's side: one connection (re-made after a failure) and the lease settings.
struct PgWriter {
    target: Target,
    client: Option<Client>,
    lease: LeaseOptions,
    live: Arc<Held>,
}

/// How often a transaction that lost a race is run again before the batch fails.
const RETRIES: usize = 5;

impl PgWriter {
    fn client(&mut self) -> Result<&mut Client, StoreError> {
        if self.client.as_ref().is_none_or(|c| c.is_closed()) {
            self.client = Some(self.target.connect().map_err(|e| pg(&e))?);
        }
        self.client
            .as_mut()
            .ok_or_else(|| StoreError::Unavailable("no connection".into()))
    }

    fn attempt(
        &mut self,
        apply: &mut dyn FnMut(&mut dyn WriteTx) -> Result<(), StoreError>,
    ) -> Result<(), Attempt> {
        let (lease, live) = (self.lease, self.live.clone());
        let client = self.client().map_err(Attempt::Failed)?;
        let txn = client.transaction().map_err(Attempt::from)?;
        let mut tx = PgTx::new(txn, lease, live);
        apply(&mut tx).map_err(|err| tx.take_race().map_or(Attempt::Failed(err), Attempt::Lost))?;
        let started = std::time::Instant::now();
        tx.commit()?;
        crate::metrics::get()
            .commit
            .observe(started.elapsed().as_secs_f64());
        Ok(())
    }
}

pub(super) enum Attempt {
    Lost(postgres::Error),
    Failed(StoreError),
}

impl From<postgres::Error> for Attempt {
    fn from(err: postgres::Error) -> Self {
        if lost_race(&err) {
            Attempt::Lost(err)
        } else {
            Attempt::Failed(pg(&err))
        }
    }
}

impl WriteEngine for PgWriter {
    fn transact(
        &mut self,
        apply: &mut dyn FnMut(&mut dyn WriteTx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut tries = 0;
        loop {
            match self.attempt(apply) {
                Ok(()) => return Ok(()),
                Err(Attempt::Lost(err)) if tries < RETRIES => {
                    tries += 1;
                    tracing::debug!(error = %describe(&err), tries, "transaction lost a race; running it again");
                }
                Err(Attempt::Lost(err)) => return Err(pg(&err)),
                Err(Attempt::Failed(err)) => {
                    if self.client.as_ref().is_some_and(|c| c.is_closed()) {
                        self.client = None;
                    }
                    return Err(err);
                }
            }
        }
    }
}
