//! Shorthands the store's and the runtime's unit tests use for the
//! writer's turn-starting commands, as the host itself (`By::host()`),
//! without an idempotency key: the session and ticket, or the ticket.

use serde_json::Value;
use uuid::Uuid;

use super::{By, Decision, InputOutcome, SessionRecord, StoreError, WriterHandle};
use crate::store::start::TurnTicket;

/// `WriterHandle`'s turn-starting commands, by the host, once.
#[allow(async_fn_in_trait)]
pub(crate) trait HostCalls {
    /// `create_session`: the session and its turn 1.
    async fn new_session(
        &self,
        app: String,
        route: String,
        input: Value,
    ) -> Result<(SessionRecord, TurnTicket), StoreError>;
    /// `input` refused while busy: the turn started.
    async fn next_input(&self, session: Uuid, input: Value) -> Result<TurnTicket, StoreError>;
    /// `decide`: the resumed turn.
    async fn decide_now(&self, session: Uuid, decision: Decision)
    -> Result<TurnTicket, StoreError>;
}

fn done<T>(work: Option<T>) -> Result<T, StoreError> {
    work.ok_or_else(|| StoreError::Corrupt("a command without a key was replayed".into()))
}

impl HostCalls for WriterHandle {
    async fn new_session(
        &self,
        app: String,
        route: String,
        input: Value,
    ) -> Result<(SessionRecord, TurnTicket), StoreError> {
        done(
            (self
                .create_session(app, route, input, By::host(), None)
                .await?)
                .work,
        )
    }

    async fn next_input(&self, session: Uuid, input: Value) -> Result<TurnTicket, StoreError> {
        let on_busy = super::OnBusy::Reject;
        match done(
            (self
                .input(session, input, By::host(), on_busy, None)
                .await?)
                .work,
        )? {
            InputOutcome::Started(ticket) => Ok(ticket),
            InputOutcome::Queued(_) => Err(StoreError::Corrupt("an input was queued".into())),
        }
    }

    async fn decide_now(
        &self,
        session: Uuid,
        decision: Decision,
    ) -> Result<TurnTicket, StoreError> {
        done((self.decide(session, decision, None).await?).work)
    }
}
