//! The writer's session commands: create, input (the 409 rules), a turn's
//! appends and its final commit, and closing turns a previous process left.

use redb::ReadableTable;
use serde_json::{Value, json};
use uuid::Uuid;

use super::batch::Batch;
use super::commands::{Decision, TurnOutcome, TurnReason, TurnTicket};
use super::error::{corrupt, storage};
use super::records::{DeploymentRecord, ResumeRecord, SessionRecord, SessionStatus};
use super::txn::{find_app, get_json};
use super::writer::{CachedSession, Writer};
use super::{StoreError, now_rfc3339, recovery, tables};
use crate::journal::{EventType, NewEvent};

impl Writer {
    pub(super) fn create_session(
        &mut self,
        batch: &mut Batch<'_>,
        app: &str,
        route: String,
        input: Value,
        boot: Uuid,
    ) -> Result<(SessionRecord, TurnTicket), StoreError> {
        let app = find_app(batch.txn, app)?.ok_or_else(|| StoreError::not_found("app", app))?;
        let deployment_id = app.current_deployment.ok_or_else(|| {
            StoreError::Conflict(format!(
                "app `{}` has no active deployment yet: deploy it first",
                app.slug
            ))
        })?;
        let deployment =
            get_json::<DeploymentRecord>(batch.txn, tables::DEPLOYMENTS, deployment_id)?
                .ok_or_else(|| corrupt(format!("current deployment {deployment_id} is missing")))?;
        let routes = deployment
            .description
            .as_ref()
            .map(|d| d.routes.as_slice())
            .unwrap_or_default();
        if !routes.contains(&route) {
            return Err(StoreError::NotFound {
                what: "route",
                key: format!(
                    "{route}` (app `{}` serves: {})",
                    app.slug,
                    routes.join(", ")
                ),
            });
        }
        let now = now_rfc3339();
        let id = Uuid::now_v7();
        let record = SessionRecord {
            id,
            app_id: app.id,
            app_slug: app.slug.clone(),
            route: route.clone(),
            deployment_id,
            deployment_version: deployment.version,
            status: SessionStatus::Running,
            turn: 1,
            created_at: now.clone(),
            updated_at: now,
            boot_id: Some(boot),
            pending_approval: None,
            resume: None,
        };
        let mut events = vec![NewEvent::new(
            EventType::SessionCreated,
            json!({
                "app_id": app.id,
                "app": app.slug,
                "route": route,
                "deployment_id": deployment_id,
                "deployment_version": deployment.version,
                "input": input,
            }),
        )];
        events.extend(turn_start_events(1, &input));
        let mut next_seq = 0;
        batch.write_events(id, &mut next_seq, events)?;
        batch.changes.sessions.insert(
            id,
            CachedSession {
                record: record.clone(),
                next_seq,
            },
        );
        batch.changes.dirty.insert(id);
        let ticket = TurnTicket {
            session_id: id,
            turn: 1,
            deployment_id,
            app_slug: app.slug,
            route,
            input,
            reason: TurnReason::Input,
        };
        Ok((record, ticket))
    }

    pub(super) fn post_input(
        &mut self,
        batch: &mut Batch<'_>,
        id: Uuid,
        input: Value,
        boot: Uuid,
    ) -> Result<TurnTicket, StoreError> {
        let session = self.session(batch, id)?;
        match session.record.status {
            SessionStatus::Idle | SessionStatus::Errored => {}
            SessionStatus::Running => {
                return Err(StoreError::Conflict(
                    "a turn is in progress: send the input after its TURN_ENDED or TURN_ERROR"
                        .into(),
                ));
            }
            SessionStatus::AwaitingApproval => {
                return Err(StoreError::Conflict(
                    "the session is awaiting an approval decision: decide it first".into(),
                ));
            }
            SessionStatus::Ended => {
                return Err(StoreError::Conflict(
                    "the session has ended and accepts no more input".into(),
                ));
            }
        }
        let turn = session.record.turn + 1;
        let mut next_seq = session.next_seq;
        batch.write_events(id, &mut next_seq, turn_start_events(turn, &input))?;
        let session = self.session(batch, id)?;
        session.next_seq = next_seq;
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
            input,
            reason: TurnReason::Input,
        };
        batch.changes.dirty.insert(id);
        Ok(ticket)
    }

    /// Checks that `turn` is the session's running turn.
    pub(super) fn running_turn(
        &self,
        batch: &mut Batch<'_>,
        id: Uuid,
        turn: u32,
    ) -> Result<u64, StoreError> {
        let session = self.session(batch, id)?;
        if session.record.status != SessionStatus::Running || session.record.turn != turn {
            return Err(StoreError::Conflict(format!(
                "turn {turn} of session {id} is not running"
            )));
        }
        Ok(session.next_seq)
    }

    pub(super) fn append(
        &mut self,
        batch: &mut Batch<'_>,
        id: Uuid,
        turn: u32,
        events: Vec<NewEvent>,
    ) -> Result<(), StoreError> {
        let mut next_seq = self.running_turn(batch, id, turn)?;
        if self.broken.contains(&id) {
            // A rejection, not a storage failure: the rest of the batch goes on.
            return Err(StoreError::Conflict(
                "an earlier write of this turn failed; the turn cannot go on".into(),
            ));
        }
        batch.write_events(id, &mut next_seq, events)?;
        self.session(batch, id)?.next_seq = next_seq;
        Ok(())
    }

    pub(super) fn finish_turn(
        &mut self,
        batch: &mut Batch<'_>,
        id: Uuid,
        turn: u32,
        mut events: Vec<NewEvent>,
        mut outcome: TurnOutcome,
    ) -> Result<(), StoreError> {
        let mut next_seq = self.running_turn(batch, id, turn)?;
        if self.broken.contains(&id) {
            // Some of this turn's events were never committed: say so instead.
            events = recovery::closing_events(
                &batch.event_tables()?.events,
                id,
                turn,
                "storage",
                "the host could not record part of this turn",
                self.redact.as_ref(),
            )?;
            outcome = TurnOutcome::Errored;
        }
        batch.write_events(id, &mut next_seq, events)?;
        if let TurnOutcome::Suspended(pending) = &mut outcome {
            // TOOL_APPROVAL_REQUIRED is the turn's last event.
            pending.event_seq = next_seq - 1;
            let mut index = batch
                .txn
                .open_table(tables::PENDING_APPROVALS)
                .map_err(storage)?;
            index
                .insert(id.as_u128(), pending.event_seq)
                .map_err(storage)?;
        }
        let session = self.session(batch, id)?;
        session.next_seq = next_seq;
        session.record.status = match &outcome {
            TurnOutcome::Ended => SessionStatus::Idle,
            TurnOutcome::Errored => SessionStatus::Errored,
            TurnOutcome::SessionEnded => SessionStatus::Ended,
            TurnOutcome::Suspended(_) => SessionStatus::AwaitingApproval,
        };
        session.record.pending_approval = match outcome {
            TurnOutcome::Suspended(pending) => Some(*pending),
            _ => None,
        };
        session.record.resume = None;
        session.record.boot_id = None;
        session.record.updated_at = now_rfc3339();
        batch.changes.dirty.insert(id);
        self.broken.remove(&id);
        Ok(())
    }

    pub(super) fn decide(
        &mut self,
        batch: &mut Batch<'_>,
        id: Uuid,
        decision: Decision,
        boot: Uuid,
    ) -> Result<TurnTicket, StoreError> {
        let session = self.session(batch, id)?;
        let pending = match (&session.record.status, &session.record.pending_approval) {
            (SessionStatus::AwaitingApproval, Some(pending)) => pending.clone(),
            _ => {
                return Err(StoreError::Conflict(
                    "no approval is pending: it was already decided, or the turn ended".into(),
                ));
            }
        };
        let turn = session.record.turn + 1;
        let mut next_seq = session.next_seq;
        let call = &pending.call;
        let kind = if decision.approved {
            EventType::ToolApprovalGranted
        } else {
            EventType::ToolApprovalDenied
        };
        let events = vec![
            NewEvent::new(
                kind,
                json!({
                    "tool_call_id": call.tool_call_id,
                    "name": call.name,
                    "approver": decision.approver,
                    "key_id": decision.key_id,
                }),
            ),
            NewEvent::new(
                EventType::TurnStarted,
                json!({
                    "turn": turn,
                    "reason": {
                        "kind": "approval_decision",
                        "approved": decision.approved,
                        "tool_call_id": call.tool_call_id,
                        "approver": decision.approver,
                    },
                    "input": pending.input,
                }),
            ),
        ];
        batch.write_events(id, &mut next_seq, events)?;
        let mut index = batch
            .txn
            .open_table(tables::PENDING_APPROVALS)
            .map_err(storage)?;
        index.remove(id.as_u128()).map_err(storage)?;
        drop(index);
        batch.changes.dirty.insert(id);
        let session = self.session(batch, id)?;
        session.next_seq = next_seq;
        session.record.turn = turn;
        session.record.status = SessionStatus::Running;
        session.record.boot_id = Some(boot);
        session.record.pending_approval = None;
        session.record.resume = Some(ResumeRecord {
            approved: decision.approved,
            approver: decision.approver.clone(),
            pending: pending.clone(),
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
                approver: decision.approver,
                pending: Box::new(pending),
            },
        })
    }

    /// Settles the turns an earlier process left running: a turn that left
    /// no trace in the journal (it never started, or died before its first
    /// effect) is scheduled again; any other is closed with TURN_ERROR. A
    /// resumed turn that did start is never run again behind the user's back.
    pub(super) fn recover(
        &mut self,
        batch: &mut Batch<'_>,
        boot: Uuid,
    ) -> Result<Recovery, StoreError> {
        let mut stale = Vec::new();
        {
            let table = batch.txn.open_table(tables::SESSIONS).map_err(storage)?;
            for row in table.iter().map_err(storage)? {
                let (_, v) = row.map_err(storage)?;
                let record: SessionRecord = serde_json::from_slice(v.value()).map_err(corrupt)?;
                if record.status == SessionStatus::Running && record.boot_id != Some(boot) {
                    stale.push(record);
                }
            }
        }
        let mut recovery = Recovery::default();
        for record in stale {
            let (id, turn) = (record.id, record.turn);
            if let Some(input) = recovery::untouched_turn_input(&batch.event_tables()?.events, id)?
            {
                let session = self.session(batch, id)?;
                session.record.boot_id = Some(boot);
                batch.changes.dirty.insert(id);
                let reason = match record.resume {
                    Some(resume) => TurnReason::ApprovalDecision {
                        approved: resume.approved,
                        approver: resume.approver,
                        pending: Box::new(resume.pending),
                    },
                    None => TurnReason::Input,
                };
                recovery.restarted.push(TurnTicket {
                    session_id: id,
                    turn,
                    deployment_id: record.deployment_id,
                    app_slug: record.app_slug,
                    route: record.route,
                    input,
                    reason,
                });
                continue;
            }
            let message = match &record.resume {
                Some(resume) if resume.approved => format!(
                    "the host stopped while this resumed turn was running: the approved tool call `{}` ({}) may or may not have run, and is not run again; send a new input to continue",
                    resume.pending.call.tool_call_id, resume.pending.call.name
                ),
                _ => "the host stopped while this turn was running; send a new input to continue"
                    .to_string(),
            };
            let events = recovery::closing_events(
                &batch.event_tables()?.events,
                id,
                turn,
                "host_restarted",
                &message,
                self.redact.as_ref(),
            )?;
            self.finish_turn(batch, id, turn, events, TurnOutcome::Errored)?;
            recovery.closed.push(id);
        }
        Ok(recovery)
    }
}

/// What `recover` did.
#[derive(Debug, Default)]
pub struct Recovery {
    /// Accepted turns that never left a trace: to be scheduled again.
    pub restarted: Vec<TurnTicket>,
    /// Turns closed with TURN_ERROR `host_restarted`.
    pub closed: Vec<Uuid>,
}

/// TURN_STARTED, then the input as a user message when it is text.
pub(super) fn turn_start_events(turn: u32, input: &Value) -> Vec<NewEvent> {
    let mut events = vec![NewEvent::new(
        EventType::TurnStarted,
        json!({"turn": turn, "reason": {"kind": "input"}, "input": input}),
    )];
    if let Some(text) = input_text(input) {
        let message_id = format!("msg_{}", Uuid::now_v7().simple());
        events.push(NewEvent::new(
            EventType::MessageStart,
            json!({"message_id": message_id, "role": "user"}),
        ));
        events.push(NewEvent::new(
            EventType::MessageDelta,
            json!({"message_id": message_id, "delta": {"type": "text", "text": text}}),
        ));
        events.push(NewEvent::new(
            EventType::MessageEnd,
            json!({"message_id": message_id, "role": "user", "text": text}),
        ));
    }
    events
}

/// The text of a text input: a JSON string, or an object's string field `text`.
pub fn input_text(input: &Value) -> Option<&str> {
    match input {
        Value::String(text) => Some(text),
        Value::Object(map) => map.get("text").and_then(Value::as_str),
        _ => None,
    }
}
