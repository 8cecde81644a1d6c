//! A turn waiting for a slot without its input: a turn that cannot start
//! at once drops its input (up to 1 MiB) and, for a resumed turn, the
//! gated call it resumes, and reads both back from the store when its slot
//! comes (the TURN_STARTED at `started_seq` and the session's resume
//! record). The memory of N waiting turns does not grow with their inputs;
//! a turn that gets its slot at once keeps its ticket as it came and reads
//! nothing more (the hot path).

use serde_json::Value;

use crate::journal::payloads::TurnStarted;
use crate::store::{Committed, Db, StoreError, TurnReason, TurnTicket};

/// A waiting turn's ticket, its input and resumed call left out.
pub(super) struct Parked {
    ticket: TurnTicket,
    /// A resumed turn: its reason is read back from the session's record.
    resumed: bool,
}

impl Parked {
    /// Drops what the store holds anyway.
    pub(super) fn park(mut ticket: TurnTicket) -> Parked {
        ticket.input = Value::Null;
        let resumed = matches!(ticket.reason, TurnReason::ApprovalDecision { .. });
        ticket.reason = TurnReason::Input;
        Parked { ticket, resumed }
    }

    /// The ticket as it was, its input read from the journal once the
    /// batch that started the turn is committed.
    pub(super) async fn unpark(
        self,
        store: &Db,
        committed: Option<&Committed>,
    ) -> Result<TurnTicket, StoreError> {
        if let Some(committed) = committed {
            committed.wait().await?;
        }
        let Parked {
            mut ticket,
            resumed,
        } = self;
        let (session, seq, turn) = (ticket.session_id, ticket.started_seq, ticket.turn);
        let (input, resume) = store
            .read(move |s| {
                let started = s.events(session, seq, 1)?;
                let started = match started.first() {
                    Some(event) if event.seq == seq => event
                        .payload::<TurnStarted>()
                        .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                    _ => None,
                };
                let input = match started {
                    Some(started) if started.turn == turn => started.input,
                    _ => return Err(missing(session, turn)),
                };
                let resume = match resumed {
                    true => s.session(session)?.and_then(|record| record.resume),
                    false => None,
                };
                Ok((input, resume))
            })
            .await?;
        ticket.input = input;
        if resumed {
            let resume = resume.ok_or_else(|| missing(session, turn))?;
            ticket.reason = TurnReason::ApprovalDecision {
                approved: resume.approved,
                approver: resume.approver,
                pending: Box::new(resume.pending),
                details: Box::new(resume.details),
            };
        }
        Ok(ticket)
    }

    #[cfg(test)]
    pub(super) fn ticket(&self) -> &TurnTicket {
        &self.ticket
    }
}

fn missing(session: uuid::Uuid, turn: u32) -> StoreError {
    StoreError::Corrupt(format!(
        "the start of turn {turn} of session {session} is not in its journal"
    ))
}

#[cfg(test)]
#[path = "parked_tests.rs"]
mod tests;
