//! One turn: a fresh instance (made ahead when a spare is ready,
//! `spare.rs`), the guest's `handle`, and the turn's final commit.
//!
//! However the guest ends (returns, errs, panics, traps, overruns its
//! deadline or memory, breaks an order rule), the turn ends with exactly one
//! terminal event (TURN_ENDED or TURN_ERROR) committed together with the
//! release of the session's running state.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::{Store, Trap};

use super::Turns;
use super::ctx::{TurnCtx, TurnStates};
use super::deployed::Deployed;
use super::gate::{BudgetStop, Failure, Gate, Settled, Suspension, TurnState, cancelled};
use super::outbound::Access;
use super::secrets::Secrets;
use super::spare::Recipe;
use crate::journal::payloads;
use crate::journal::{NewEvent, TurnErrorKind};
use crate::redact::Redactor;
use crate::runtime::InstanceData;
use crate::runtime::bindings::{Agent, Decision, Reason, ToolCall, Turn};
use crate::runtime::compile::{apply_limits, trap_message};
use crate::runtime::limits::TurnLimits;
use crate::store::{
    Committed, PendingApproval, ToolCallRecord, TurnOutcome, TurnReason, TurnTicket,
};

/// How the guest's part of a turn ended.
enum GuestEnd {
    Returned,
    Failed(Failure),
    /// Stopped from outside (the turn's gate was cancelled, by whom): this
    /// ending wins over whatever the turn did before, a suspension included.
    Cancelled(String),
}

/// A turn as its preparation left it: its context, whatever happened, and
/// the guest to run or the failure that ends the turn before the guest runs.
struct Prepared {
    ctx: TurnCtx,
    guest: Result<Guest, Failure>,
}

/// What the turn's instance is made of.
struct Guest {
    deployed: Arc<Deployed>,
    /// The values of the secrets the deployment declares.
    secrets: Secrets,
}

impl Turns {
    pub(super) async fn run_turn(
        &self,
        ticket: TurnTicket,
        gate: Arc<Gate>,
        committed: Option<Committed>,
    ) {
        let started = Instant::now();
        let Prepared { ctx, guest } = self.prepare_turn(&ticket, gate, committed).await;
        let (end, mut ctx) = match guest {
            Ok(guest) => match self.run_guest(guest, ctx, &ticket, started).await {
                Some(ran) => ran,
                None => return,
            },
            Err(failure) => (GuestEnd::Failed(failure), ctx),
        };
        // Kept by the final commit only if the turn ends well.
        let timers = std::mem::take(&mut ctx.timers);
        let outbox = ctx.outbox();
        let (events, outcome, label) = closing_events(ctx, end, &ticket).await;
        let result = (self.writer)
            .finish_turn_with(
                ticket.session_id,
                ticket.turn,
                events,
                outcome,
                timers,
                outbox.bytes(),
            )
            .await;
        if let Err(err) = &result {
            tracing::error!(session = %ticket.session_id, turn = ticket.turn, error = %err, "cannot finish turn");
        }
        (crate::metrics::get().turn).observe(started.elapsed().as_secs_f64());
        tracing::info!(
            session = %ticket.session_id,
            turn = ticket.turn,
            deployment = %ticket.deployment_id,
            app = %ticket.app_slug,
            outcome = label,
            duration_ms = started.elapsed().as_secs_f64() * 1000.0,
            "turn"
        );
    }

    /// The turn's context under its deployment's terms, and its guest: a
    /// deployment that cannot be loaded or a declared secret that does not
    /// exist ends the turn before the guest runs.
    async fn prepare_turn(
        &self,
        ticket: &TurnTicket,
        gate: Arc<Gate>,
        committed: Option<Committed>,
    ) -> Prepared {
        let (writer, store) = (self.writer.clone(), self.store.clone());
        let ctx = |states| TurnCtx::new(writer, store, ticket, gate, states, committed);
        let deployed = self
            .deployments
            .get(&self.compile, &self.store, ticket.deployment_id);
        let deployed = match deployed.await {
            Ok(deployed) => deployed,
            Err(err) => {
                tracing::error!(deployment = %ticket.deployment_id, error = %err, "cannot load deployment");
                let states = TurnStates {
                    gates: Default::default(),
                    limits: TurnLimits::default(),
                    redactor: Redactor::default(),
                    outbound: Access::none(),
                    mcp: Default::default(),
                    llm: Default::default(),
                };
                return Prepared {
                    ctx: ctx(states),
                    guest: Err(Failure {
                        kind: TurnErrorKind::DeploymentUnavailable,
                        message: "the host could not load this session's deployment".into(),
                    }),
                };
            }
        };
        let (states, secrets) = deployed.prepare(&self.vault, ticket, &self.deployments.operator);
        Prepared {
            ctx: ctx(states),
            guest: secrets.map(|secrets| Guest { deployed, secrets }),
        }
    }

    /// Calls the guest's `handle` in a fresh instance with the turn's
    /// context; returns how it ended, and the context back once the
    /// instance is gone (with it whatever the guest left open: response
    /// bodies, requests in flight, whose records are among the turn's last).
    async fn run_guest(
        &self,
        guest: Guest,
        ctx: TurnCtx,
        ticket: &TurnTicket,
        started: Instant,
    ) -> Option<(GuestEnd, TurnCtx)> {
        let Guest { deployed, secrets } = guest;
        let limits = &deployed.limits;
        // Made only when an instance or a spare is: a turn that takes its
        // spare and makes none builds no environment.
        let env = || guest_env(&deployed, &secrets);
        // The spare made for this turn, if it is ready; this turn makes the next one.
        let (mut store, agent) = match self.spares.take(ticket.deployment_id, &secrets) {
            Some(spare) => (spare.store, Some(spare.agent)),
            None => {
                let state = InstanceData::new(&env(), limits.memory_bytes);
                (Store::new(self.compile.engine(), state), None)
            }
        };
        // Owned copies only when a spare is to be made.
        self.spares
            .refill(self.compile.engine(), ticket.deployment_id, || Recipe {
                pre: deployed.pre.clone(),
                env: (env().iter())
                    .map(|(name, value)| (name.to_string(), value.to_string()))
                    .collect(),
                secrets: secrets.clone(),
                memory_bytes: limits.memory_bytes,
                fuel: limits.fuel,
                deadline: limits.deadline,
            });
        let gate = ctx.gate.clone();
        store.data_mut().turn = Some(ctx);
        let end = self
            .call_handle(&mut store, &deployed, agent, ticket, started, &gate)
            .await;
        let mut state = store.into_data();
        let ctx = state.turn.take()?;
        log_output(ticket, &state, &ctx.redactor);
        drop(state);
        Some((end, ctx))
    }

    async fn call_handle(
        &self,
        store: &mut Store<InstanceData>,
        deployed: &Deployed,
        spare: Option<Agent>,
        ticket: &TurnTicket,
        started: Instant,
        gate: &Gate,
    ) -> GuestEnd {
        let (pre, limits) = (&deployed.pre, &deployed.limits);
        let deadline = limits.deadline;
        if let Err(err) = apply_limits(store, limits.fuel, deadline, started) {
            tracing::error!(error = %err, "cannot set the turn's fuel");
        }
        let turn = Turn {
            session_id: ticket.session_id.to_string(),
            turn: ticket.turn,
            route: ticket.route.clone(),
            reason: match &ticket.reason {
                TurnReason::Input => Reason::Input,
                TurnReason::ApprovalDecision {
                    approved,
                    approver,
                    pending,
                    details,
                } => Reason::ApprovalDecision(Decision {
                    // A given result: the tool must not run. An SDK that
                    // reads the decision's event reports the result; one
                    // from before (that only knows this record) a denial.
                    approved: *approved && details.result.is_none(),
                    approver: approver.clone(),
                    pending_tool_call: wire_call(&pending.call),
                    step: pending.step.iter().map(wire_call).collect(),
                }),
            },
            input: ticket.input.to_string(),
        };
        let call = async {
            let agent = match spare {
                Some(agent) => agent,
                None => {
                    let instantiating = Instant::now();
                    let agent = pre.instantiate_async(&mut *store).await?;
                    (crate::metrics::get().instantiate)
                        .observe(instantiating.elapsed().as_secs_f64());
                    agent
                }
            };
            agent
                .agenthost_agent_guest()
                .call_handle(&mut *store, &turn)
                .await
        };
        // A cancel drops the guest's call where it stands, as the deadline does.
        let result = tokio::select! {
            result = tokio::time::timeout(deadline, call) => result,
            by = gate.cancelled() => return GuestEnd::Cancelled(by),
        };
        let secs = deadline.as_secs();
        match result {
            Err(_) => GuestEnd::Failed(Failure {
                kind: TurnErrorKind::Deadline,
                message: format!("the turn did not finish within its {secs} s deadline"),
            }),
            Ok(Ok(Ok(()))) => GuestEnd::Returned,
            Ok(Ok(Err(message))) => GuestEnd::Failed(Failure {
                kind: TurnErrorKind::AgentError,
                message,
            }),
            Ok(Err(err)) => {
                let state = store.data();
                let failure = if let Some(panic) = &state.panic {
                    Failure {
                        kind: TurnErrorKind::Panic,
                        message: panic.clone(),
                    }
                } else if err.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
                    Failure {
                        kind: TurnErrorKind::Deadline,
                        message: format!("the turn did not finish within its {secs} s deadline"),
                    }
                } else if err.downcast_ref::<Trap>() == Some(&Trap::OutOfFuel) {
                    Failure {
                        kind: TurnErrorKind::CpuLimit,
                        message: format!(
                            "the agent used its CPU budget ({} fuel, limits.cpu_fuel)",
                            limits.fuel
                        ),
                    }
                } else if state.limiter.denied {
                    Failure {
                        kind: TurnErrorKind::MemoryLimit,
                        message: format!(
                            "the agent needed more than {} MiB of memory",
                            limits.memory_bytes >> 20
                        ),
                    }
                } else {
                    Failure {
                        kind: TurnErrorKind::Trap,
                        message: trap_message(&err),
                    }
                };
                tracing::warn!(session = %ticket.session_id, turn = ticket.turn, error = ?err, "guest trapped");
                GuestEnd::Failed(failure)
            }
        }
    }
}

/// The platform's environment for the agent, nothing of the host's own:
/// the approval policy and the deployment's secrets.
fn guest_env<'a>(deployed: &'a Deployed, secrets: &'a Secrets) -> Vec<(&'a str, &'a str)> {
    let policy = deployed.gates.policy_json.as_str();
    let mut env = vec![("SERVICE_APPROVAL_POLICY", policy)];
    env.extend((secrets.iter()).map(|(name, value)| (name.as_str(), &**value)));
    env
}

fn wire_call(call: &ToolCallRecord) -> ToolCall {
    ToolCall {
        tool_call_id: call.tool_call_id.clone(),
        name: call.name.clone(),
        arguments: call.arguments.to_string(),
    }
}

/// The events that close the turn, and the session's next status.
async fn closing_events(
    mut ctx: TurnCtx,
    end: GuestEnd,
    ticket: &TurnTicket,
) -> (Vec<NewEvent>, TurnOutcome, &'static str) {
    let turn = ticket.turn;
    let Settled {
        state,
        session_ended,
    } = ctx.settle();
    // A cancel ends the turn whatever it did; a rule the host saw broken is
    // the root cause of whatever the guest did next.
    let mut failure = match (state, end) {
        (TurnState::Cancelled(by), _) | (_, GuestEnd::Cancelled(by)) => Some(Failure {
            kind: TurnErrorKind::Cancelled,
            message: cancelled(&by),
        }),
        (TurnState::Suspended(suspension), end) => {
            return suspended(ctx, suspension, end, ticket).await;
        }
        (TurnState::BudgetPaused(stop), _) => {
            return budget_paused(ctx, *stop, ticket).await;
        }
        (TurnState::Failed(host_saw), _) => Some(host_saw),
        (_, GuestEnd::Failed(failure)) => Some(failure),
        (_, GuestEnd::Returned) => None,
    };
    if failure.is_none() && ctx.calls.has_pending() {
        let ids = ctx.calls.unanswered();
        failure = Some(Failure {
            kind: TurnErrorKind::UnansweredToolCall,
            message: format!(
                "the turn ended without a result for tool call(s) {}",
                ids.iter()
                    .map(|id| format!("`{id}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    // A storage failure surfaces in the final commit (the writer turns it into TURN_ERROR).
    let _ = ctx.flush().await;
    let mut events = ctx.close_outbound();
    events.extend(ctx.close_open_messages(failure.is_some()));
    let (outcome, label) = match failure {
        None => {
            events.push(NewEvent::of(&payloads::TurnEnded { turn }));
            (TurnOutcome::Ended, "ended")
        }
        Some(Failure { kind, message }) => {
            let mut message = ctx.redactor.redact(&message).into_owned();
            crate::util::truncate_utf8(&mut message, 4096);
            events.push(NewEvent::of(&payloads::TurnError {
                turn,
                kind,
                message,
            }));
            (TurnOutcome::Errored, kind.as_str())
        }
    };
    if session_ended {
        events.push(NewEvent::of(&payloads::SessionEnded::default()));
        return (events, TurnOutcome::SessionEnded, label);
    }
    (events, outcome, label)
}

/// A suspended turn ends with TOOL_APPROVAL_REQUIRED, committed with the
/// session's move to `awaiting_approval`. Whatever the guest did after the
/// suspension had no effect (every import was refused), so it cannot change that.
async fn suspended(
    mut ctx: TurnCtx,
    suspension: Suspension,
    end: GuestEnd,
    ticket: &TurnTicket,
) -> (Vec<NewEvent>, TurnOutcome, &'static str) {
    if let GuestEnd::Failed(failure) = end {
        tracing::info!(session = %ticket.session_id, turn = ticket.turn, kind = failure.kind.as_str(), "the agent failed after suspending; the suspension stands");
    }
    let _ = ctx.flush().await;
    let mut events = ctx.close_outbound();
    events.extend(ctx.close_open_messages(false));
    let call = &suspension.call;
    // The deadline is journaled, so it holds across restarts (`expiry.rs`).
    let expires_at = (ctx.limits.approval_timeout)
        .and_then(|wait| std::time::SystemTime::now().checked_add(wait))
        .map(|at| humantime::format_rfc3339_millis(at).to_string());
    events.push(NewEvent::of(&payloads::ToolApprovalRequired {
        tool_call_id: call.tool_call_id.clone(),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
        reason: suspension.reason.clone(),
        gated_by: suspension.gated_by.iter().map(|g| g.to_string()).collect(),
        expires_at: expires_at.clone(),
    }));
    let pending = PendingApproval {
        call: suspension.call,
        reason: suspension.reason,
        gated_by: suspension.gated_by.iter().map(|g| g.to_string()).collect(),
        step: suspension.step,
        input: ticket.input.clone(),
        event_seq: 0,
        expires_at,
    };
    (
        events,
        TurnOutcome::Suspended(Box::new(pending)),
        "suspended",
    )
}

/// A turn paused at its LLM budget ends with BUDGET_REACHED, committed
/// with the session's move to `paused_budget`; raising the budget runs a
/// new turn with the same input (`store::domain::budgets`).
async fn budget_paused(
    mut ctx: TurnCtx,
    stop: BudgetStop,
    ticket: &TurnTicket,
) -> (Vec<NewEvent>, TurnOutcome, &'static str) {
    let _ = ctx.flush().await;
    let mut events = ctx.close_outbound();
    events.extend(ctx.close_open_messages(false));
    events.push(NewEvent::of(&stop.reached));
    let pause = crate::store::BudgetPause {
        turn: ticket.turn,
        needed: stop.needed,
        input: ticket.input.clone(),
        manifest: stop.manifest,
    };
    (
        events,
        TurnOutcome::BudgetPaused(Box::new(pause)),
        "paused_budget",
    )
}

fn log_output(ticket: &TurnTicket, state: &InstanceData, redactor: &Redactor) {
    for (stream, output) in [("stdout", &state.stdout), ("stderr", &state.stderr)] {
        let (text, dropped) = output.contents();
        let text = redactor.redact(&text);
        if !text.is_empty() {
            tracing::info!(
                target: "agenthost::guest",
                session = %ticket.session_id,
                turn = ticket.turn,
                stream,
                dropped_bytes = dropped,
                "{}",
                crate::util::escape_controls(text.trim_end())
            );
        }
    }
}
