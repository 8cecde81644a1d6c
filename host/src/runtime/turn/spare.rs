//! Spare instances: a deployment that runs turns keeps one fresh instance
//! made ahead, so its next turn does not wait for instantiation (about
//! 1.2 ms for a Python agent, whose interpreter is many linked modules).
//!
//! A spare is still a fresh instance for exactly one turn: it is made from
//! the deployment's `InstancePre` with no turn attached, nothing of the
//! guest runs in it but instantiation itself, and the one turn that takes
//! it drops it at its end. It is made with the secrets of its time; a turn
//! that finds them changed drops it and instantiates anew. At most
//! `MAX_SPARES` are ready or being made at once (the instance pool reserves
//! them); the oldest ready one makes room for another deployment's.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use uuid::Uuid;
use wasmtime::{Engine, Store};

use super::secrets::Secrets;
use crate::runtime::InstanceData;
use crate::runtime::compile::{Agent, AgentPre, apply_limits};

/// Spares ready or being made, over every deployment.
pub(crate) const MAX_SPARES: usize = 16;

/// A fresh instance, not yet a turn's.
pub(super) struct Spare {
    pub(super) store: Store<InstanceData>,
    pub(super) agent: Agent,
    secrets: Secrets,
    made: Instant,
}

/// What a spare of one deployment is made from.
pub(super) struct Recipe {
    pub(super) pre: AgentPre<InstanceData>,
    /// The guest's whole environment: the approval policy and the secrets.
    pub(super) env: Vec<(String, String)>,
    pub(super) secrets: Secrets,
    pub(super) memory_bytes: usize,
    pub(super) fuel: u64,
    pub(super) deadline: Duration,
}

#[derive(Default)]
struct Shelf {
    ready: HashMap<Uuid, Spare>,
    making: HashSet<Uuid>,
}

/// The spares of every deployment on this host.
#[derive(Default)]
pub(super) struct Spares {
    shelf: Mutex<Shelf>,
}

impl Spares {
    /// The deployment's spare, if one is ready and was made with `secrets`.
    pub(super) fn take(&self, deployment: Uuid, secrets: &Secrets) -> Option<Spare> {
        let spare = self.lock().ready.remove(&deployment)?;
        // A secret changed since it was made: its environment is stale
        // (dropped here, outside the lock).
        (spare.secrets == *secrets).then_some(spare)
    }

    /// Makes the deployment's next spare in the background from `recipe`
    /// (called only then), unless one is ready or being made, or
    /// `MAX_SPARES` are being made.
    pub(super) fn refill(
        self: &Arc<Self>,
        engine: &Engine,
        deployment: Uuid,
        recipe: impl FnOnce() -> Recipe,
    ) {
        let evicted = {
            let mut shelf = self.lock();
            if shelf.ready.contains_key(&deployment) || shelf.making.contains(&deployment) {
                return;
            }
            let evicted = if shelf.ready.len() + shelf.making.len() >= MAX_SPARES {
                let oldest = shelf
                    .ready
                    .iter()
                    .min_by_key(|(_, s)| s.made)
                    .map(|(id, _)| *id);
                match oldest.and_then(|id| shelf.ready.remove(&id)) {
                    Some(spare) => Some(spare),
                    None => return,
                }
            } else {
                None
            };
            shelf.making.insert(deployment);
            evicted
        };
        drop(evicted);
        let recipe = recipe();
        let making = Making {
            spares: self.clone(),
            deployment,
        };
        let engine = engine.clone();
        tokio::spawn(async move {
            let made = make(&engine, &recipe).await;
            let mut shelf = making.spares.lock();
            shelf.making.remove(&deployment);
            match made {
                Ok((store, agent)) => {
                    let spare = Spare {
                        store,
                        agent,
                        secrets: recipe.secrets,
                        made: Instant::now(),
                    };
                    shelf.ready.insert(deployment, spare);
                }
                // The turn that takes no spare instantiates itself, and reports.
                Err(err) => tracing::debug!(%deployment, error = %err, "no spare instance"),
            }
            // The lock first: `making` takes it again when dropped.
            drop(shelf);
            drop(making);
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shelf> {
        self.shelf.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A spare being made; however its task ends (a panic included), the
/// deployment may have a spare made again.
struct Making {
    spares: Arc<Spares>,
    deployment: Uuid,
}

impl Drop for Making {
    fn drop(&mut self) {
        self.spares.lock().making.remove(&self.deployment);
    }
}

/// A fresh instance under the deployment's limits (the turn sets them
/// again, from its own start, when it takes it).
async fn make(engine: &Engine, recipe: &Recipe) -> wasmtime::Result<(Store<InstanceData>, Agent)> {
    let state = InstanceData::new(&recipe.env, recipe.memory_bytes);
    let mut store = Store::new(engine, state);
    let started = Instant::now();
    apply_limits(&mut store, recipe.fuel, recipe.deadline, started)?;
    let agent = recipe.pre.instantiate_async(&mut store).await?;
    (crate::metrics::get().instantiate).observe(started.elapsed().as_secs_f64());
    Ok((store, agent))
}
