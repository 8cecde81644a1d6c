//! The session state machine: create, input (the 409 rules), a turn's
//! appends and its final commit (a suspension included), and the
//! exactly-once approval decision that starts the resumed turn.

use std::sync::Arc;

use serde_json::Value;
use uuid::Uuid;

use super::closing::closing_events;
use super::feed;
use super::idempotency::{DecisionAnswer, QueuedAnswer, Remembered, TurnAnswer};
use super::queue::{self, OnBusy, Queued};
use super::quotas::{self, Starting};
use super::timers::TurnTimers;
use super::turn_start::turn_start_events_for;
use super::{By, Decision, TurnOutcome, TurnReason, TurnTicket};
use crate::journal::payloads::{self, StartReason};
use crate::journal::{NewEvent, TurnErrorKind};
use crate::store::Missing;
use crate::store::batch::{Batch, Op};
use crate::store::engine::{Owner, SessionRow};
use crate::store::error::corrupt;
use crate::store::outbox::Outbox;
use crate::store::records::{ResumeRecord, SessionRecord, SessionStatus, WithdrawReason};
use crate::store::{StoreError, now_rfc3339};

/// Creates a session pinned to the app's current deployment, with turn 1 started.
pub(in crate::store) struct CreateSession {
    pub app: String,
    pub route: String,
    pub input: Value,
    /// Who creates it: an end user then owns it (`By::owner`).
    pub by: By,
    /// Why its first turn starts: `Input`, or the app schedule that fired.
    pub reason: StartReason,
}

impl Op for CreateSession {
    type Output = (SessionRecord, TurnTicket);

    fn tickets((_, ticket): &Self::Output) -> Vec<TurnTicket> {
        vec![ticket.clone()]
    }

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<Self::Output, StoreError> {
        let app = (batch.tx.app(&self.app)?)
            .ok_or_else(|| StoreError::not_found(Missing::App, &self.app))?;
        let deployment_id = app.current_deployment.ok_or_else(|| {
            StoreError::Conflict(format!(
                "app `{}` has no active deployment yet: deploy it first",
                app.slug
            ))
        })?;
        let deployment = (batch.tx.deployment(deployment_id)?)
            .ok_or_else(|| corrupt(format!("current deployment {deployment_id} is missing")))?;
        // The policy of the deployment the session pins decides (401).
        self.by.may_act(&deployment)?;
        let routes = deployment
            .description
            .as_ref()
            .map(|d| d.routes.as_slice())
            .unwrap_or_default();
        if !routes.contains(&self.route) {
            return Err(StoreError::NotFound {
                what: Missing::Route,
                key: self.route.clone(),
                hint: format!(": app `{}` serves {}", app.slug, routes.join(", ")),
            });
        }
        quotas::check(batch, app.id, &app.slug, Starting::Session, &self.by)?;
        let owner = self.by.owner(&deployment);
        let user_cap = (deployment.end_users.as_ref()).and_then(|p| p.max_open_sessions_per_user);
        let share_owner = match (&owner, self.by.source()) {
            (Some(user), _) => Some(Owner::User(user.id.clone())),
            (None, Some(source)) => Some(Owner::Source(source)),
            (None, None) => None,
        };
        let (slug, by, set) = (&app.slug, &self.by, user_cap.is_some());
        quotas::check_share(batch, app.id, slug, Starting::Session, by, share_owner, set)?;
        if let (Some(user), Some(cap)) = (&owner, user_cap) {
            quotas::check_user(batch, app.id, &user.id, cap)?;
        }
        // Last of the refusals: a turn counted is a turn started.
        if let Some(user) = &owner {
            super::end_users::take_turn(batch, app.id, &user.id, &deployment)?;
        }
        let now = now_rfc3339();
        // A capability for a bare invocation key: all its random bits fresh.
        let id = crate::util::random_v7();
        let record = SessionRecord {
            id,
            app_id: app.id,
            app_slug: app.slug.clone(),
            route: self.route.clone(),
            deployment_id,
            deployment_version: deployment.version,
            status: SessionStatus::Running,
            turn: 1,
            created_at: now.clone(),
            updated_at: now,
            boot_id: Some(batch.state.boot),
            pending_approval: None,
            resume: None,
            end_user: owner.as_ref().map(|user| user.id.clone()),
            queued: Vec::new(),
            schedules: Vec::new(),
            journal_bytes: 0,
            source: self.by.source(),
            budget: deployment.llm_budget,
            llm: Default::default(),
            budget_pause: None,
        };
        let mut events = vec![NewEvent::of(&payloads::SessionCreated {
            app_id: app.id,
            app: app.slug.clone(),
            route: self.route.clone(),
            deployment_id,
            deployment_version: deployment.version,
            input: self.input.clone(),
            end_user: owner,
        })];
        events.extend(turn_start_events_for(1, &self.input, self.reason.clone()));
        batch.insert_session(SessionRow {
            record: record.clone(),
            next_seq: 0,
        });
        batch.write_events(id, &events)?;
        let ticket = TurnTicket {
            session_id: id,
            turn: 1,
            deployment_id,
            app_slug: app.slug,
            route: self.route.clone(),
            input: self.input.clone(),
            reason: TurnReason::Input,
            // After SESSION_CREATED (seq 0) of the new journal.
            started_seq: 1,
            journal_bytes: crate::store::payload_bytes(&events),
        };
        Ok((record, ticket))
    }
}

/// A follow-up input: starts the session's next turn, or, when the session
/// is busy, refuses (409) or queues it as `on_busy` says (`queue.rs`); 429
/// at the app's running-turns cap or a full queue. The ticket of a turn
/// started holds the seq of its `TURN_STARTED` (where a stream follows it).
pub(in crate::store) struct PostInput {
    pub session: Uuid,
    pub input: Value,
    pub on_busy: OnBusy,
    /// The schedule whose firing this input is (`domain::schedules`).
    pub schedule: Option<Uuid>,
    /// Who sends it: a bare invocation key is refused where the session's
    /// deployment requires end-user tokens, and the session's own end
    /// user's input counts against their share of turns
    /// (`[end_users] turns_per_minute_per_user`; an input from a platform
    /// key, or a schedule's, is not theirs to count).
    pub by: By,
}

/// What an input did.
#[derive(Debug, Clone)]
pub enum InputOutcome {
    /// Its turn started now.
    Started(TurnTicket),
    /// The session was busy: it waits for a turn of its own.
    Queued(Queued),
}

impl Op for PostInput {
    type Output = InputOutcome;

    fn tickets(outcome: &InputOutcome) -> Vec<TurnTicket> {
        match outcome {
            InputOutcome::Started(ticket) => vec![ticket.clone()],
            InputOutcome::Queued(_) => Vec::new(),
        }
    }

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<InputOutcome, StoreError> {
        if self.by.is_operator() {
            return self.start(batch);
        }
        let record = batch.session(self.session)?.record.clone();
        // The app's policy is its current deployment's, read in this commit.
        if let Some(current) = super::deployments::current_deployment(batch, record.app_id)? {
            self.by.may_act(&current)?;
        }
        let deployment = (batch.tx.deployment(record.deployment_id)?).ok_or_else(|| {
            corrupt(format!(
                "deployment {} of session {} is missing",
                record.deployment_id, record.id
            ))
        })?;
        match self.by.user().map(str::to_string) {
            Some(user) if record.end_user.as_deref() == Some(user.as_str()) => {
                super::end_users::counted(batch, record.app_id, &user, &deployment, |batch| {
                    self.start(batch)
                })
            }
            _ => self.start(batch),
        }
    }
}

impl PostInput {
    /// The input's start (or queueing) once its caller may send it.
    fn start(&mut self, batch: &mut Batch<'_>) -> Result<InputOutcome, StoreError> {
        let id = self.session;
        if batch.session(id)?.record.status != SessionStatus::Ended {
            super::journal_cap::check(batch, id)?;
        }
        let session = batch.session(id)?;
        match session.record.status {
            SessionStatus::Idle | SessionStatus::Errored => {}
            SessionStatus::Running
            | SessionStatus::AwaitingApproval
            | SessionStatus::PausedBudget
                if self.on_busy != OnBusy::Reject =>
            {
                return queue::enqueue(batch, id, &self.input, self.on_busy, self.schedule)
                    .map(InputOutcome::Queued);
            }
            SessionStatus::Running => {
                return Err(StoreError::Conflict(
                    "a turn is in progress: send the input after its TURN_ENDED or TURN_ERROR \
                     (or with `on_busy`: `enqueue` or `interrupt`)"
                        .into(),
                ));
            }
            SessionStatus::AwaitingApproval => {
                return Err(StoreError::Conflict(
                    "the session is awaiting an approval decision: decide it first".into(),
                ));
            }
            SessionStatus::PausedBudget => {
                return Err(StoreError::Conflict(
                    "the session is paused at its LLM budget: raise it (PATCH /sessions/{id}) first"
                        .into(),
                ));
            }
            SessionStatus::Ended => {
                return Err(StoreError::Conflict(
                    "the session has ended and accepts no more input".into(),
                ));
            }
        }
        let (turn, app) = (session.record.turn + 1, session.record.app_id);
        let slug = session.record.app_slug.clone();
        let owner = Owner::of(&session.record);
        quotas::check(batch, app, &slug, Starting::Turn, &self.by)?;
        quotas::check_share(batch, app, &slug, Starting::Turn, &self.by, owner, false)?;
        let reason = match self.schedule {
            Some(schedule_id) => StartReason::Schedule { schedule_id },
            None => StartReason::Input,
        };
        let started_seq = batch.session(id)?.next_seq;
        batch.write_events(id, &turn_start_events_for(turn, &self.input, reason))?;
        let boot = batch.state.boot;
        let session = batch.session(id)?;
        session.record.turn = turn;
        session.record.status = SessionStatus::Running;
        session.record.boot_id = Some(boot);
        session.record.updated_at = now_rfc3339();
        let ticket = TurnTicket {
            session_id: id,
            turn,
            deployment_id: session.record.deployment_id,
            app_slug: session.record.app_slug.clone(),
            route: session.record.route.clone(),
            input: self.input.clone(),
            reason: TurnReason::Input,
            started_seq,
            journal_bytes: session.record.journal_bytes,
        };
        batch.touch(id);
        Ok(InputOutcome::Started(ticket))
    }
}

/// Checks that `turn` is the session's running turn, and that this host
/// still owns it (the fencing check: an owner is a host's boot id, and a
/// host never runs two runners of one turn at once).
pub(super) fn running_turn(batch: &mut Batch<'_>, id: Uuid, turn: u32) -> Result<(), StoreError> {
    let (host, fenced) = (batch.state.boot, batch.state.fenced);
    let session = batch.session(id)?;
    if session.record.status != SessionStatus::Running || session.record.turn != turn {
        return Err(StoreError::Conflict(format!(
            "turn {turn} of session {id} is not running"
        )));
    }
    if fenced && session.record.boot_id != Some(host) {
        return Err(StoreError::Conflict(format!(
            "this host no longer holds the lease on turn {turn} of session {id}"
        )));
    }
    Ok(())
}

/// What a running turn's outbox holds, taken when the writer reaches it.
pub(in crate::store) struct Append {
    outbox: Arc<Outbox>,
    /// Taken from the outbox on the first apply (kept for a retried transaction).
    events: Option<Vec<NewEvent>>,
}

impl Append {
    pub(in crate::store) fn new(outbox: Arc<Outbox>) -> Self {
        Append {
            outbox,
            events: None,
        }
    }
}

impl Op for Append {
    type Output = ();

    fn session(&self) -> Option<Uuid> {
        Some(self.outbox.session())
    }

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<(), StoreError> {
        let outbox = &self.outbox;
        let events = self.events.get_or_insert_with(|| outbox.take());
        let (id, turn) = (outbox.session(), outbox.turn());
        running_turn(batch, id, turn)?;
        if batch.is_broken(id) {
            // A rejection, not a storage failure: the rest of the batch goes on.
            return Err(StoreError::Conflict(
                "an earlier write of this turn failed; the turn cannot go on".into(),
            ));
        }
        super::budgets::settle(batch, id, events)?;
        batch.append_events(id, events)
    }

    fn abandon(&mut self) {
        if self.events.is_none() {
            // Dropped with the batch: the turn's next event starts afresh.
            drop(self.outbox.take());
        }
    }
}

/// A turn's last events and the session's next status, in one commit.
pub(in crate::store) struct FinishTurn {
    pub session: Uuid,
    pub turn: u32,
    pub events: Vec<NewEvent>,
    pub outcome: TurnOutcome,
    /// The timers the agent set, kept only by a turn that ends well (`timers.rs`).
    pub timers: TurnTimers,
    /// Payload bytes the turn appended before (`Append`).
    pub appended: u64,
}

impl Op for FinishTurn {
    /// The queued input's turn it started, if one waited.
    type Output = Option<TurnTicket>;

    fn tickets(next: &Option<TurnTicket>) -> Vec<TurnTicket> {
        next.iter().cloned().collect()
    }

    fn session(&self) -> Option<Uuid> {
        Some(self.session)
    }

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<Option<TurnTicket>, StoreError> {
        finish_turn_with(
            batch,
            self.session,
            self.turn,
            &self.events,
            self.outcome.clone(),
            &self.timers,
            self.appended,
        )
    }
}

/// Ends the running `turn` with `events` and the session's next status;
/// an idle or errored session starts its first queued input (`queue.rs`),
/// whose ticket it returns.
pub(super) fn finish_turn(
    batch: &mut Batch<'_>,
    id: Uuid,
    turn: u32,
    events: &[NewEvent],
    outcome: TurnOutcome,
) -> Result<Option<TurnTicket>, StoreError> {
    finish_turn_with(batch, id, turn, events, outcome, &TurnTimers::default(), 0)
}

/// `finish_turn` with the timers the turn set: applied, and journaled
/// just before the turn's last event (its TURN_ENDED or
/// TOOL_APPROVAL_REQUIRED), when the turn keeps them; `appended` payload
/// bytes the turn wrote before count in the session's journal from now.
fn finish_turn_with(
    batch: &mut Batch<'_>,
    id: Uuid,
    turn: u32,
    events: &[NewEvent],
    mut outcome: TurnOutcome,
    timers: &TurnTimers,
    appended: u64,
) -> Result<Option<TurnTicket>, StoreError> {
    running_turn(batch, id, turn)?;
    batch.session(id)?.record.journal_bytes += appended;
    super::budgets::settle(batch, id, events)?;
    super::budgets::settle_turn(batch, id, turn)?;
    if batch.is_broken(id) {
        // Some of this turn's events were never committed: say so instead.
        let closing = closing_events(
            batch,
            id,
            turn,
            TurnErrorKind::Storage,
            "the host could not record part of this turn",
        )?;
        batch.write_events(id, &closing)?;
        outcome = TurnOutcome::Errored;
    } else {
        let (body, last) = events.split_at(events.len().saturating_sub(1));
        batch.write_events(id, body)?;
        let timers = super::timers::apply(batch, id, timers, &outcome)?;
        batch.write_events(id, &timers)?;
        batch.write_events(id, last)?;
    }
    let next_seq = batch.session(id)?.next_seq;
    let starts_next = matches!(outcome, TurnOutcome::Ended | TurnOutcome::Errored);
    if let TurnOutcome::Suspended(pending) = &mut outcome {
        // TOOL_APPROVAL_REQUIRED is the turn's last event.
        pending.event_seq = next_seq - 1;
        batch.tx.set_pending_approval(id, Some(pending.event_seq))?;
        feed::requested(batch, id, &pending.call.tool_call_id, pending.event_seq)?;
    }
    let session = batch.session(id)?;
    session.record.status = match &outcome {
        TurnOutcome::Ended => SessionStatus::Idle,
        TurnOutcome::Errored => SessionStatus::Errored,
        TurnOutcome::SessionEnded => SessionStatus::Ended,
        TurnOutcome::Suspended(_) => SessionStatus::AwaitingApproval,
        TurnOutcome::BudgetPaused(_) => SessionStatus::PausedBudget,
    };
    session.record.budget_pause = match &outcome {
        TurnOutcome::BudgetPaused(pause) => Some((**pause).clone()),
        _ => None,
    };
    session.record.pending_approval = match outcome {
        TurnOutcome::Suspended(pending) => Some(*pending),
        _ => None,
    };
    session.record.resume = None;
    session.record.boot_id = None;
    session.record.updated_at = now_rfc3339();
    if session.record.status == SessionStatus::Ended {
        // Nothing runs after SESSION_ENDED: its queued inputs are dropped,
        // and so are its schedules (and their rows of the due index).
        session.record.queued.clear();
        super::schedules::drop_all(batch, id)?;
    }
    batch.touch(id);
    batch.changes.unbroken.insert(id);
    if starts_next {
        queue::start_next(batch, id)
    } else {
        Ok(None)
    }
}

/// A human's decision on the session's pending approval, and the resumed
/// turn's start; 409 when nothing is pending, 429 at the app's
/// running-turns cap (the decision is not recorded: retry it). Of two racing decisions
/// exactly one wins: both are commands of the one writer (and, on
/// PostgreSQL, the session's row is locked for the transaction).
/// An end user decides only a call of their own session (404 otherwise,
/// as for a session that does not exist), and only of a tool whose
/// manifest says `approver = "end_user"` (403 otherwise).
fn may_end_user_decide(
    batch: &mut Batch<'_>,
    session: &SessionRecord,
    pending: &crate::store::records::PendingApproval,
    user: &str,
) -> Result<(), StoreError> {
    if session.end_user.as_deref() != Some(user) {
        return Err(StoreError::not_found(Missing::Session, session.id));
    }
    let deployment = (batch.tx.deployment(session.deployment_id)?).ok_or_else(|| {
        corrupt(format!(
            "deployment {} of session {} is missing",
            session.deployment_id, session.id
        ))
    })?;
    if !deployment.end_user_approvals.contains(&pending.call.name) {
        return Err(StoreError::Forbidden(format!(
            "calls of `{}` are decided by operators: neither the manifest nor the agent's code leaves them to the end user (`approver = \"end_user\"`)",
            pending.call.name
        )));
    }
    Ok(())
}

pub(in crate::store) struct Decide {
    pub session: Uuid,
    pub decision: Decision,
}

impl Op for Decide {
    type Output = TurnTicket;

    fn tickets(ticket: &TurnTicket) -> Vec<TurnTicket> {
        vec![ticket.clone()]
    }

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<TurnTicket, StoreError> {
        let (id, decision) = (self.session, &self.decision);
        let session = batch.session(id)?;
        let pending = match (&session.record.status, &session.record.pending_approval) {
            (SessionStatus::AwaitingApproval, Some(pending)) => pending.clone(),
            _ => {
                return Err(StoreError::Conflict(
                    "no approval is pending: it was already decided, or the turn ended".into(),
                ));
            }
        };
        if let Some(user) = decision.by.user() {
            let record = session.record.clone();
            may_end_user_decide(batch, &record, &pending, user)?;
        }
        let session = batch.session(id)?;
        let (turn, app) = (session.record.turn + 1, session.record.app_id);
        let slug = session.record.app_slug.clone();
        let owner = Owner::of(&session.record);
        quotas::check(batch, app, &slug, Starting::Turn, &decision.by)?;
        quotas::check_share(
            batch,
            app,
            &slug,
            Starting::Turn,
            &decision.by,
            owner,
            false,
        )?;
        if decision.details.arguments.is_some() && decision.checked_seq != Some(pending.event_seq) {
            return Err(StoreError::Conflict(
                "the pending call changed since its edited arguments were checked: decide again"
                    .into(),
            ));
        }
        let details = decision.details.clone();
        let call = &pending.call;
        let (tool_call_id, name) = (call.tool_call_id.clone(), call.name.clone());
        let (approver, key_id) = (decision.approver.clone(), decision.by.key_id().to_string());
        let decided = if decision.approved {
            NewEvent::of(&payloads::ToolApprovalGranted {
                tool_call_id,
                name,
                approver,
                key_id,
                original_arguments: details.arguments.as_ref().map(|_| call.arguments.clone()),
                arguments: details.arguments.clone(),
                result: details.result.clone(),
                message: details.message.clone(),
                address_hash: details.address_hash.clone(),
            })
        } else {
            NewEvent::of(&payloads::ToolApprovalDenied {
                tool_call_id,
                name,
                approver,
                key_id,
                message: details.message.clone(),
                address_hash: details.address_hash.clone(),
            })
        };
        let events = [
            decided,
            NewEvent::of(&payloads::TurnStarted {
                turn,
                reason: StartReason::ApprovalDecision {
                    approved: decision.approved,
                    tool_call_id: call.tool_call_id.clone(),
                    approver: decision.approver.clone(),
                },
                input: pending.input.clone(),
            }),
        ];
        // The call runs with the edited arguments, wherever the resumed
        // turn reads it (the pending call and its place in the step).
        let mut pending = pending;
        if let Some(arguments) = &details.arguments {
            pending.call.arguments = arguments.clone();
            let id = pending.call.tool_call_id.clone();
            for call in pending.step.iter_mut().filter(|c| c.tool_call_id == id) {
                call.arguments = arguments.clone();
            }
        }
        let decided_seq = batch.session(id)?.next_seq;
        batch.write_events(id, &events)?;
        batch.tx.set_pending_approval(id, None)?;
        feed::decided(batch, id, &pending.call.tool_call_id, decided_seq)?;
        batch.touch(id);
        let boot = batch.state.boot;
        let session = batch.session(id)?;
        session.record.turn = turn;
        session.record.status = SessionStatus::Running;
        session.record.boot_id = Some(boot);
        session.record.pending_approval = None;
        session.record.resume = Some(ResumeRecord {
            approved: decision.approved,
            approver: decision.approver.clone(),
            pending: pending.clone(),
            details: details.clone(),
        });
        session.record.updated_at = now_rfc3339();
        Ok(TurnTicket {
            session_id: id,
            turn,
            deployment_id: session.record.deployment_id,
            app_slug: session.record.app_slug.clone(),
            route: session.record.route.clone(),
            input: pending.input.clone(),
            reason: TurnReason::ApprovalDecision {
                approved: decision.approved,
                approver: decision.approver.clone(),
                pending: Box::new(pending),
                details: Box::new(details),
            },
            // After the decision's event.
            started_seq: decided_seq + 1,
            journal_bytes: session.record.journal_bytes,
        })
    }
}

/// Ends a session on request (`POST /sessions/{id}/end`): SESSION_ENDED
/// with the reason. A pending approval is dropped with it (a decision is
/// 409 afterwards). 409 while a turn runs (the caller cancels it first)
/// and when the session has already ended. With `idle_before` (the idle
/// sweep, `--session-idle-secs`), only a session still idle or errored,
/// untouched since then, with nothing queued or scheduled: 409 otherwise.
pub(in crate::store) struct EndSession {
    pub session: Uuid,
    pub reason: Option<String>,
    pub key_id: String,
    pub idle_before: Option<String>,
}

impl Op for EndSession {
    type Output = SessionRecord;

    fn session(&self) -> Option<Uuid> {
        Some(self.session)
    }

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<SessionRecord, StoreError> {
        let id = self.session;
        let session = batch.session(id)?;
        if let Some(before) = &self.idle_before {
            let record = &session.record;
            let idle = matches!(record.status, SessionStatus::Idle | SessionStatus::Errored)
                && record.updated_at < *before
                && record.queued.is_empty()
                && record.schedules.is_empty();
            if !idle {
                return Err(StoreError::Conflict(
                    "the session was used meanwhile: it is not idle".into(),
                ));
            }
        }
        let withdrawn = (session.record.pending_approval.as_ref())
            .map(|pending| pending.call.tool_call_id.clone());
        let ended_seq = session.next_seq;
        match session.record.status {
            SessionStatus::Idle | SessionStatus::Errored | SessionStatus::PausedBudget => {}
            SessionStatus::AwaitingApproval => batch.tx.set_pending_approval(id, None)?,
            SessionStatus::Running => {
                return Err(StoreError::Conflict(
                    "a turn started meanwhile: cancel it, then end the session".into(),
                ));
            }
            SessionStatus::Ended => {
                return Err(StoreError::Conflict("the session has already ended".into()));
            }
        }
        batch.write_events(
            id,
            &[NewEvent::of(&payloads::SessionEnded {
                reason: self.reason.clone(),
                key_id: Some(self.key_id.clone()),
            })],
        )?;
        if let Some(call) = withdrawn {
            let reason = WithdrawReason::SessionEnded;
            feed::withdrawn(batch, id, &call, reason, Some(ended_seq))?;
        }
        let session = batch.session(id)?;
        session.record.status = SessionStatus::Ended;
        session.record.queued.clear();
        session.record.pending_approval = None;
        session.record.budget_pause = None;
        session.record.resume = None;
        session.record.updated_at = now_rfc3339();
        super::schedules::drop_all(batch, id)?;
        let record = batch.session(id)?.record.clone();
        batch.touch(id);
        Ok(record)
    }
}

impl Remembered for CreateSession {
    const COMMAND: &'static str = "create_session";
    type Answer = SessionRecord;

    fn answer(
        _: &mut Batch<'_>,
        (record, _): &(SessionRecord, TurnTicket),
    ) -> Result<SessionRecord, StoreError> {
        Ok(record.clone())
    }
}

impl Remembered for PostInput {
    const COMMAND: &'static str = "post_input";
    type Answer = TurnAnswer;

    fn answer(_: &mut Batch<'_>, outcome: &InputOutcome) -> Result<TurnAnswer, StoreError> {
        Ok(match outcome {
            InputOutcome::Started(ticket) => TurnAnswer {
                session_id: ticket.session_id,
                turn: ticket.turn,
                queued: None,
            },
            InputOutcome::Queued(queued) => TurnAnswer {
                session_id: queued.session_id,
                turn: queued.turn,
                queued: Some(QueuedAnswer {
                    input_id: queued.input_id.clone(),
                    position: queued.position,
                    status: queued.status,
                }),
            },
        })
    }
}

impl Remembered for Decide {
    const COMMAND: &'static str = "decide";
    type Answer = DecisionAnswer;

    fn answer(_: &mut Batch<'_>, ticket: &TurnTicket) -> Result<DecisionAnswer, StoreError> {
        match &ticket.reason {
            TurnReason::ApprovalDecision {
                approved,
                approver,
                pending,
                ..
            } => Ok(DecisionAnswer {
                session_id: ticket.session_id,
                turn: ticket.turn,
                tool_call_id: pending.call.tool_call_id.clone(),
                approved: *approved,
                approver: approver.clone(),
            }),
            TurnReason::Input => Err(corrupt("a decision resumed no gated call")),
        }
    }
}
