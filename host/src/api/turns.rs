//! The one front door for turns: `start` starts a turn for a caller in any
//! protocol (`POST /sessions`, `POST /sessions/{id}/input`, an AG-UI run, an
//! MCP `tools/call`), through the writer's one command per target (the
//! writer starts the turn it commits, `store::start`, and decides what the
//! caller may do, `store::By`), and `follow` streams a started turn's
//! events from its `TURN_STARTED` through a protocol's framer. Each
//! endpoint is a thin adapter: it reads its protocol's request, names the
//! target and renders `Started` or the stream. (Which layers an endpoint
//! gets, the queue bound among them, its row in `table.rs` says.)

use std::convert::Infallible;

use axum::response::sse::Event;
use futures::Stream;
use serde_json::Value;
use uuid::Uuid;

use super::caller::Caller;
use super::{ApiError, AppState, events};
use crate::journal::StoredEvent;
use crate::store::{Idempotency, InputOutcome, OnBusy, SessionRecord, TurnAnswer};

/// Where a turn starts.
pub(crate) enum Target {
    /// A new session of `app` (an id or slug) at `route`: checked here
    /// for a caller other than a platform key (`Caller::app`).
    New { app: String, route: String },
    /// The next input of session `id`, which the caller was checked to
    /// reach (`Caller::session`); `on_busy` while a turn runs.
    Session { id: Uuid, on_busy: OnBusy },
    /// The next input of an AG-UI thread's session (created on the
    /// thread's first run) of app `app`, which the caller was checked to
    /// use (`Caller::app`).
    Thread {
        app: Uuid,
        route: String,
        thread: String,
    },
}

/// What `start` did.
pub(crate) struct Started {
    pub session: Uuid,
    /// The turn started; for a queued input, the session's turn then.
    pub turn: u32,
    /// The seq of the turn's `TURN_STARTED`, where `follow` starts; none
    /// for an input queued, or for an idempotent replay (its turn started
    /// with the first request).
    pub started_seq: Option<u64>,
    /// The answer as the writer committed it (the first one on a replay).
    pub answer: Answer,
}

/// The committed answer of a `start`, per target.
pub(crate) enum Answer {
    /// `Target::New`: the session as created.
    Created(Box<SessionRecord>),
    /// `Target::Session`: the turn, or where the input was queued.
    Input(TurnAnswer),
    /// `Target::Thread`: the turn started (never replayed).
    Thread,
}

/// Starts a turn of `target` with `input` for `caller`, once per
/// idempotency `key` (every time without one).
pub(crate) async fn start(
    state: &AppState,
    caller: &Caller,
    target: Target,
    input: Value,
    key: Option<Idempotency>,
) -> Result<Started, ApiError> {
    state.refuse_if_shutting_down()?;
    let by = caller.by();
    match target {
        Target::New { app, route } => {
            if !caller.is_platform() {
                caller.app(state, &app).await?;
            }
            let done = (state.writer)
                .create_session(app, route, input, by, key)
                .await?;
            let record = done.answer;
            Ok(Started {
                session: record.id,
                turn: record.turn,
                started_seq: done.work.map(|(_, ticket)| ticket.started_seq),
                answer: Answer::Created(Box::new(record)),
            })
        }
        Target::Session { id, on_busy } => {
            let done = (state.writer).input(id, input, by, on_busy, key).await?;
            let started_seq = match &done.work {
                Some(InputOutcome::Started(ticket)) => Some(ticket.started_seq),
                Some(InputOutcome::Queued(queued)) => {
                    if let Some(turn) = queued.interrupts {
                        interrupt(state, caller, id, turn).await;
                    }
                    None
                }
                None => None,
            };
            let answer = done.answer;
            Ok(Started {
                session: answer.session_id,
                turn: answer.turn,
                started_seq,
                answer: Answer::Input(answer),
            })
        }
        Target::Thread { app, route, thread } => {
            // With a key every end user of the app holds, the thread id is
            // the only thing between one user's thread and another's.
            caller.require_unguessable("a `threadId`", &thread)?;
            let turn = (state.writer)
                .open_thread(app.to_string(), route, thread, input, by)
                .await?;
            Ok(Started {
                session: turn.session.id,
                turn: turn.ticket.turn,
                started_seq: Some(turn.ticket.started_seq),
                answer: Answer::Thread,
            })
        }
    }
}

/// Cancels the running `turn` an input queued with `on_busy: interrupt`
/// interrupts: the input is queued first, and the cancelled turn's end
/// starts it (not on a replay: the first request cancelled).
async fn interrupt(state: &AppState, caller: &Caller, session: Uuid, turn: u32) {
    let by = format!(
        "{} interrupting it with a new input",
        super::controls::canceller(caller)
    );
    if let Err(err) = state.runtime.cancel(session, turn, by).await {
        // The input is queued: it runs once the turn ends however it does.
        tracing::warn!(%session, turn, error = %err, "could not cancel the interrupted turn");
    }
}

/// Streams session `session`'s events from `from` (a turn's
/// `TURN_STARTED`), each through `framer`, which says when the stream ends.
pub(crate) async fn follow<F>(
    state: AppState,
    caller: &Caller,
    session: Uuid,
    from: u64,
    framer: F,
) -> Result<impl Stream<Item = Result<Event, Infallible>> + use<F>, ApiError>
where
    F: FnMut(&StoredEvent) -> (Vec<Event>, bool) + Send + 'static,
{
    // The writer started the turn (`store::start`); subscribed before
    // reading, nothing it publishes from here on is missed.
    let subscription = state.store.hub().subscribe(session);
    let first = events::read_chunk(&state, session, from).await?;
    Ok(events::frames(
        state,
        session,
        from,
        first,
        subscription,
        caller.key_id.clone(),
        framer,
    ))
}
