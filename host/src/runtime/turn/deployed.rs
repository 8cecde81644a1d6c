//! A deployment as its turns run it (`Deployed`): its compiled form and
//! each capability's per-deployment state (approval gates, declared
//! secrets, limits, outbound access, MCP servers), made once when a turn
//! first needs it and kept (`Deployments`), as Spin's factors configure an
//! app once; `Deployed::prepare` makes a turn's own states from them at
//! its start, reading what may change between turns (secret values, the
//! session's journal size) then.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use uuid::Uuid;

use super::ctx::{TurnCtx, TurnStates};
use super::gate::Failure;
use super::gates::Gates;
use super::llm::LlmModels;
use super::mcp::McpServers;
use super::outbound::{Access, OutboundPolicy};
use super::secrets::{self, DeclaredSecrets, Secrets};
use crate::runtime::compile::{AgentPre, Compiler};
use crate::runtime::limits::TurnLimits;
use crate::runtime::{InstanceData, RuntimeError};
use crate::secrets::Vault;
use crate::store::{Db, TurnTicket};

/// A deployment ready to run turns.
pub(super) struct Deployed {
    pub pre: AgentPre<InstanceData>,
    pub gates: Arc<Gates>,
    pub secrets: DeclaredSecrets,
    /// The manifest's limits, with the operator's approval timeout as default.
    pub limits: TurnLimits,
    pub outbound: Access,
    pub mcp: McpServers,
    pub llm: LlmModels,
}

/// The operator's settings that a deployment's or a turn's states are made
/// under (`serve` flags, fixed for the process).
pub(crate) struct Operator {
    pub outbound: OutboundPolicy,
    /// The default for `TurnLimits::approval_timeout`.
    pub approval_timeout: Option<Duration>,
    /// The cap on a session's journal (`TurnLimits::in_journal`).
    pub max_journal_bytes: Option<u64>,
    /// `TurnLimits::min_timer_delay`.
    pub min_timer_delay: Duration,
}

/// The deployments loaded on this host, under the operator's settings.
pub(super) struct Deployments {
    loaded: Arc<Mutex<Loaded<Arc<Deployed>>>>,
    pub operator: Operator,
}

impl Deployments {
    pub(super) fn new(operator: Operator) -> Deployments {
        Deployments {
            loaded: Arc::default(),
            operator,
        }
    }

    /// The deployment, loaded (and kept) on first use.
    pub(super) async fn get(
        &self,
        compile: &Compiler<TurnCtx>,
        store: &Db,
        deployment: Uuid,
    ) -> Result<Arc<Deployed>, RuntimeError> {
        if let Some(deployed) = self.lock().get(deployment) {
            return Ok(deployed);
        }
        let record = store
            .read(move |s| s.deployment(deployment))
            .await?
            .ok_or(RuntimeError::UnknownDeployment(deployment))?;
        let operator = &self.operator;
        let gates = Arc::new(Gates::from_record(&record));
        let secrets = DeclaredSecrets::configure(&record);
        let mut limits = TurnLimits::from_record(&record.limits);
        limits.approval_timeout = limits.approval_timeout.or(operator.approval_timeout);
        limits.min_timer_delay = operator.min_timer_delay;
        let outbound = Access::configure(&operator.outbound, &record.outbound);
        let mcp = McpServers::configure(&record.manifest);
        let llm = LlmModels::configure(&record.manifest);
        let compiled = compile
            .load(record, self.forget_when_whole(deployment))
            .await?;
        let deployed = Arc::new(Deployed {
            pre: compiled.pre,
            gates,
            secrets,
            limits,
            outbound,
            mcp,
            llm,
        });
        (self.lock()).keep(deployment, deployed.clone(), compiled.links_libraries);
        Ok(deployed)
    }

    /// What to run once `deployment` is compiled whole: its linked load is
    /// forgotten, and the next turn loads the whole one.
    pub(super) fn forget_when_whole(&self, deployment: Uuid) -> impl FnOnce() + Send + 'static {
        let loaded = self.loaded.clone();
        move || (loaded.lock().unwrap_or_else(PoisonError::into_inner)).compiled_whole(deployment)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Loaded<Arc<Deployed>>> {
        self.loaded.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Deployed {
    /// A turn's capability states, made at its start: its limits within
    /// its session's journal cap, its secrets' values as they are now (a
    /// missing one fails the turn), its redactor, its outbound access and
    /// its MCP servers' credentials.
    pub(super) fn prepare(
        &self,
        vault: &Vault,
        ticket: &TurnTicket,
        operator: &Operator,
    ) -> (TurnStates, Result<Secrets, Failure>) {
        let values = self.secrets.prepare(vault);
        let (mcp, mut mcp_secrets) = self.mcp.prepare(vault);
        let (llm, llm_keys) = self.llm.prepare(vault, &ticket.app_slug);
        mcp_secrets.extend(llm_keys);
        let states = TurnStates {
            gates: self.gates.clone(),
            limits: (self.limits.clone())
                .in_journal(operator.max_journal_bytes, ticket.journal_bytes),
            redactor: secrets::redactor(&values, mcp_secrets),
            outbound: self.outbound.clone(),
            mcp,
            llm,
        };
        (states, values)
    }
}

/// The deployments loaded for turns, and those compiled whole since this
/// process started: one lock, so that a load that read the linked
/// artifact just before the whole one was recorded is not kept after it
/// (the next turn loads the whole one).
struct Loaded<T> {
    loaded: HashMap<Uuid, T>,
    whole: HashSet<Uuid>,
}

impl<T> Default for Loaded<T> {
    fn default() -> Self {
        Loaded {
            loaded: HashMap::new(),
            whole: HashSet::new(),
        }
    }
}

impl<T: Clone> Loaded<T> {
    fn get(&self, deployment: Uuid) -> Option<T> {
        self.loaded.get(&deployment).cloned()
    }

    /// Keeps a load, unless it links libraries that a whole compile has
    /// replaced meanwhile.
    fn keep(&mut self, deployment: Uuid, loaded: T, links_libraries: bool) {
        if !(links_libraries && self.whole.contains(&deployment)) {
            self.loaded.insert(deployment, loaded);
        }
    }

    /// The deployment's whole artifact is recorded: forget the linked load.
    fn compiled_whole(&mut self, deployment: Uuid) {
        self.whole.insert(deployment);
        self.loaded.remove(&deployment);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_linked_load_that_raced_the_whole_compile_is_not_kept() {
        let mut loaded = Loaded::default();
        let id = Uuid::now_v7();
        loaded.keep(id, "linked", true);
        assert_eq!(loaded.get(id), Some("linked"));
        loaded.compiled_whole(id);
        assert_eq!(loaded.get(id), None);
        // A load that read the record before the whole artifact was
        // recorded ends after it: the next turn loads again.
        loaded.keep(id, "linked, late", true);
        assert_eq!(loaded.get(id), None);
        loaded.keep(id, "whole", false);
        assert_eq!(loaded.get(id), Some("whole"));
        // Other deployments are kept as loaded.
        let other = Uuid::now_v7();
        loaded.keep(other, "linked", true);
        assert_eq!(loaded.get(other), Some("linked"));
    }
}
