//! A turn's gate: whether the turn may still have effects. It is open until
//! the turn suspends on a gated call, fails (a broken rule or limit, a lost
//! write), ends its session, or is cancelled from outside; from then on every
//! effect (each journaled host import, each outbound request) is refused.
//!
//! One gate per turn, made when the turn is scheduled (`control.rs` keeps it
//! for cancels) and consulted by the turn's context (`ctx.rs`) and its
//! outbound requests (`outbound/`). The runner settles it when the guest's
//! call is over: what it says then decides how the turn ends, and a cancel
//! arriving later changes nothing (the runner's final commit is the ending).

use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::watch;

use crate::journal::TurnErrorKind;
use crate::runtime::bindings::HostError;
use crate::store::ToolCallRecord;

/// Why a turn must end with TURN_ERROR although the guest returned normally.
#[derive(Debug, Clone)]
pub(super) struct Failure {
    pub kind: TurnErrorKind,
    pub message: String,
}

/// A gated call that suspended the turn.
#[derive(Debug, Clone)]
pub(super) struct Suspension {
    pub call: ToolCallRecord,
    pub reason: Option<String>,
    pub gated_by: Vec<&'static str>,
    /// Every call of the step, in order.
    pub step: Vec<ToolCallRecord>,
}

/// A declared-model call the LLM budget could not cover: the turn pauses
/// (docs/llm.md "Budgets").
#[derive(Debug, Clone)]
pub(super) struct BudgetStop {
    pub reached: crate::journal::payloads::BudgetReached,
    pub needed: crate::store::Spend,
    /// The deployment's `[llm] budget_per_session`.
    pub manifest: Option<crate::store::Budget>,
}

/// Where a turn stands. Only `Open` allows effects; the first other state
/// holds, except that a failure to record may follow `Ended` and a cancel
/// overrides anything until the gate is settled.
#[derive(Debug, Clone)]
pub(super) enum TurnState {
    Open,
    Suspended(Suspension),
    /// Paused at the LLM budget (BUDGET_REACHED).
    BudgetPaused(Box<BudgetStop>),
    Failed(Failure),
    /// The guest ended its session (`end-session`).
    Ended,
    /// Stopped from outside, by whom.
    Cancelled(String),
}

/// The gate as the runner settled it.
pub(super) struct Settled {
    pub state: TurnState,
    /// The guest ended its session, whatever happened after.
    pub session_ended: bool,
}

/// One turn's gate.
pub(super) struct Gate {
    turn: u32,
    inner: Mutex<Inner>,
    /// Who cancelled the turn, once someone has (for the runner's wait).
    cancelled_by: watch::Sender<Option<String>>,
}

struct Inner {
    state: TurnState,
    session_ended: bool,
    /// The guest's call is over: the state no longer changes.
    settled: bool,
}

impl Gate {
    pub(super) fn new(turn: u32) -> Gate {
        Gate {
            turn,
            inner: Mutex::new(Inner {
                state: TurnState::Open,
                session_ended: false,
                settled: false,
            }),
            cancelled_by: watch::Sender::new(None),
        }
    }

    /// The turn this gate belongs to.
    pub(super) fn turn(&self) -> u32 {
        self.turn
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the turn may still have effects (an outbound request may leave).
    pub(super) fn is_open(&self) -> bool {
        matches!(self.lock().state, TurnState::Open)
    }

    /// Refuses an effect unless the turn is open, saying why.
    pub(super) fn check(&self) -> Result<(), HostError> {
        match &self.lock().state {
            TurnState::Open => Ok(()),
            state => Err(refusal(state)),
        }
    }

    /// Refuses a read of the journal once the turn is suspended or
    /// cancelled; a failed or ended turn may still read.
    pub(super) fn check_read(&self) -> Result<(), HostError> {
        match &self.lock().state {
            state @ (TurnState::Suspended(_)
            | TurnState::BudgetPaused(_)
            | TurnState::Cancelled(_)) => Err(refusal(state)),
            _ => Ok(()),
        }
    }

    /// Suspends an open turn on a gated call.
    pub(super) fn suspend(&self, suspension: Suspension) {
        let mut inner = self.lock();
        if matches!(inner.state, TurnState::Open) && !inner.settled {
            inner.state = TurnState::Suspended(suspension);
        }
    }

    /// Pauses an open turn at its LLM budget.
    pub(super) fn pause_budget(&self, stop: BudgetStop) {
        let mut inner = self.lock();
        if matches!(inner.state, TurnState::Open) && !inner.settled {
            inner.state = TurnState::BudgetPaused(Box::new(stop));
        }
    }

    /// Fails the turn; the first failure is the one recorded.
    pub(super) fn fail(&self, failure: Failure) {
        let mut inner = self.lock();
        if matches!(inner.state, TurnState::Open | TurnState::Ended) && !inner.settled {
            inner.state = TurnState::Failed(failure);
        }
    }

    /// The guest ended its session: the turn has no more effects.
    pub(super) fn end_session(&self) {
        let mut inner = self.lock();
        if matches!(inner.state, TurnState::Open) && !inner.settled {
            inner.state = TurnState::Ended;
            inner.session_ended = true;
        }
    }

    /// Cancels the turn unless the runner has settled it. The first cancel
    /// names the canceller; later ones change nothing.
    pub(super) fn cancel(&self, by: &str) {
        {
            let mut inner = self.lock();
            if inner.settled || matches!(inner.state, TurnState::Cancelled(_)) {
                return;
            }
            inner.state = TurnState::Cancelled(by.to_string());
        }
        self.cancelled_by.send_if_modified(|current| {
            if current.is_some() {
                return false;
            }
            *current = Some(by.to_string());
            true
        });
    }

    /// Resolves once the turn is cancelled, with who cancelled it.
    pub(super) async fn cancelled(&self) -> String {
        let mut rx = self.cancelled_by.subscribe();
        loop {
            let current = rx.borrow_and_update().clone();
            if let Some(by) = current {
                return by;
            }
            if rx.changed().await.is_err() {
                // The sender lives in `self`: unreachable while borrowed.
                std::future::pending::<()>().await;
            }
        }
    }

    /// The guest's call is over: fixes the state (later cancels change
    /// nothing) and returns it. Effects stay as refused or allowed as they were.
    pub(super) fn settle(&self) -> Settled {
        let mut inner = self.lock();
        inner.settled = true;
        Settled {
            state: inner.state.clone(),
            session_ended: inner.session_ended,
        }
    }
}

/// Why an effect is refused in `state`.
fn refusal(state: &TurnState) -> HostError {
    HostError::Closed(match state {
        TurnState::Open => "the turn is open".into(),
        TurnState::Suspended(suspension) => format!(
            "the turn is suspended until a human decides on tool call `{}`: return from handle",
            suspension.call.tool_call_id
        ),
        TurnState::BudgetPaused(stop) => format!(
            "the session's LLM budget cannot cover this call (limit {}, spent {}, reserved {}, needed {} {}): the turn is paused until the budget is raised: return from handle",
            stop.reached.limit,
            stop.reached.spent,
            stop.reached.reserved,
            stop.reached.needed,
            stop.reached.unit
        ),
        TurnState::Failed(failure) => format!("the turn has failed: {}", failure.message),
        TurnState::Ended => "the session has ended: nothing more can be written".into(),
        TurnState::Cancelled(by) => cancelled(by),
    })
}

/// The TURN_ERROR message of a cancelled turn.
pub(super) fn cancelled(by: &str) -> String {
    format!("the turn was cancelled by {by}")
}
