//! End users' own rows: revoking a user's tokens (their not-before, which
//! every host checks, `end_users::revocation`), and their share of turns
//! (`[end_users] turns_per_minute_per_user`): at most that many turns
//! started in any 60 s. A user's recent turns are one row, read (locked,
//! on PostgreSQL) and written inside the writer's transaction, so the cap
//! holds exactly across hosts; a command refused after its turn was
//! counted gives the place back.

use std::time::SystemTime;

use uuid::Uuid;

use super::idempotency::{Remembered, unix_ms};
use super::sessions::{InputOutcome, PostInput};
use crate::store::Cap;
use crate::store::StoreError;
use crate::store::batch::{Batch, Op};
use crate::store::records::DeploymentRecord;

/// The prefix of an end user's `Principal::key_id`.
pub(crate) const END_USER_KEY_PREFIX: &str = "user:";

/// The `Principal::key_id` of end user `user` of `app`: fixed length, no
/// `.` (it goes into stream tokens), the same on every host; the user's
/// rows here are keyed by it.
pub(crate) fn end_user_key(app: Uuid, user: &str) -> String {
    use sha2::Digest as _;
    let hash = hex::encode(&sha2::Sha256::digest(user.as_bytes())[..16]);
    format!("{END_USER_KEY_PREFIX}{}:{hash}", app.simple())
}

/// The keyword of a tool's parameters schema by which the agent's code
/// (each SDK's end-user approval) says the session's end user may decide
/// its calls, as the manifest's `[tools.<name>] approver = "end_user"`
/// does: `"x-agenthost-approver": "end_user"` at the schema's top level.
/// (JSON Schema ignores keywords it does not know; `tool-spec` stays as it is.)
pub(crate) const APPROVER_KEYWORD: &str = "x-agenthost-approver";

/// The tools of `description` whose code leaves their calls to the
/// session's end user.
pub(crate) fn approved_by_end_user(
    description: &crate::store::records::AgentDescription,
) -> Vec<String> {
    (description.tools.iter())
        .filter(|tool| {
            tool.parameters
                .get(APPROVER_KEYWORD)
                .and_then(|v| v.as_str())
                == Some("end_user")
        })
        .map(|tool| tool.name.clone())
        .collect()
}

/// The window `turns_per_minute_per_user` counts over.
pub(crate) const TURN_WINDOW_MS: u64 = 60_000;

/// Refuses every token of end user `user_key` issued until now; answers
/// the not-before stored (Unix ms; never earlier than one stored before).
pub(in crate::store) struct RevokeEndUser {
    pub user_key: String,
}

impl Op for RevokeEndUser {
    type Output = u64;

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<u64, StoreError> {
        let now = unix_ms(SystemTime::now());
        let before = batch.tx.end_user_not_before(&self.user_key)?;
        let not_before = before.map_or(now, |before| before.max(now));
        batch
            .tx
            .put_end_user_not_before(&self.user_key, not_before)?;
        Ok(not_before)
    }
}

/// The user's recent turns before `take_turn` counted one: what a refused
/// command puts back.
pub(super) struct Taken {
    user_key: String,
    before: Vec<u64>,
}

impl Taken {
    /// Gives the turn back (its command was refused after all).
    pub(super) fn give_back(self, batch: &mut Batch<'_>) -> Result<(), StoreError> {
        batch.tx.put_end_user_turns(&self.user_key, &self.before)
    }
}

/// Counts one turn of end user `user` of `app` against the cap of
/// `deployment` (none: nothing counted), or refuses it (429 with the
/// seconds until a place frees).
pub(super) fn take_turn(
    batch: &mut Batch<'_>,
    app: Uuid,
    user: &str,
    deployment: &DeploymentRecord,
) -> Result<Option<Taken>, StoreError> {
    let cap = (deployment.end_users.as_ref()).and_then(|p| p.turns_per_minute_per_user);
    let Some(cap) = cap else {
        return Ok(None);
    };
    let user_key = end_user_key(app, user);
    let now = unix_ms(SystemTime::now());
    let mut turns = batch.tx.end_user_turns(&user_key)?;
    turns.retain(|at| at.saturating_add(TURN_WINDOW_MS) > now);
    let before = turns.clone();
    if turns.len() as u64 >= cap {
        let oldest = turns.iter().min().copied().unwrap_or(now);
        let wait_ms = (oldest + TURN_WINDOW_MS).saturating_sub(now);
        let retry_after_secs = wait_ms.div_ceil(1000).max(1);
        return Err(StoreError::Throttled {
            cap: Cap::TurnsPerMinutePerUser,
            message: format!(
                "end user `{user}` started {} turns in the last minute, the app's cap ([end_users] turns_per_minute_per_user = {cap}): retry after {retry_after_secs} s",
                turns.len()
            ),
            retry_after_secs,
        });
    }
    turns.push(now);
    batch.tx.put_end_user_turns(&user_key, &turns)?;
    Ok(Some(Taken { user_key, before }))
}

/// Runs `start`, a command that starts one turn for end user `user` of
/// `app`, counted first; a refusal of `start` gives the turn back.
pub(super) fn counted<T>(
    batch: &mut Batch<'_>,
    app: Uuid,
    user: &str,
    deployment: &DeploymentRecord,
    start: impl FnOnce(&mut Batch<'_>) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let taken = take_turn(batch, app, user, deployment)?;
    match start(batch) {
        Err(err) if !err.fails_batch() => {
            if let Some(taken) = taken {
                taken.give_back(batch)?;
            }
            Err(err)
        }
        other => other,
    }
}

/// A follow-up input sent by the session's own end user: counted against
/// their share of turns. (An input from a platform key, or a schedule's,
/// is not theirs to count.)
pub(in crate::store) struct UserInput {
    pub input: PostInput,
    pub user: String,
}

impl Op for UserInput {
    type Output = InputOutcome;

    fn tickets(outcome: &InputOutcome) -> Vec<super::TurnTicket> {
        PostInput::tickets(outcome)
    }

    fn session(&self) -> Option<Uuid> {
        Some(self.input.session)
    }

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<InputOutcome, StoreError> {
        user_input(batch, &mut self.input, &self.user)
    }
}

/// `input`, counted when `user` owns its session.
fn user_input(
    batch: &mut Batch<'_>,
    input: &mut PostInput,
    user: &str,
) -> Result<InputOutcome, StoreError> {
    let record = batch.session(input.session)?.record.clone();
    if record.end_user.as_deref() != Some(user) {
        return input.apply(batch);
    }
    let deployment = (batch.tx.deployment(record.deployment_id)?).ok_or_else(|| {
        crate::store::error::corrupt(format!(
            "deployment {} of session {} is missing",
            record.deployment_id, record.id
        ))
    })?;
    counted(batch, record.app_id, user, &deployment, |batch| {
        input.apply(batch)
    })
}

/// `UserInput` that also answers the seq of the turn's `TURN_STARTED` (an
/// MCP `tools/call` of an end user on their session), as `PostInputAt`.
pub(in crate::store) struct UserInputAt {
    pub input: PostInput,
    pub user: String,
}

impl Op for UserInputAt {
    type Output = (super::TurnTicket, u64);

    fn tickets(output: &Self::Output) -> Vec<super::TurnTicket> {
        vec![output.0.clone()]
    }

    fn session(&self) -> Option<Uuid> {
        Some(self.input.session)
    }

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<Self::Output, StoreError> {
        let started_seq = batch.session(self.input.session)?.next_seq;
        match user_input(batch, &mut self.input, &self.user)? {
            InputOutcome::Started(ticket) => Ok((ticket, started_seq)),
            // Only an input with `on_busy` is queued.
            InputOutcome::Queued(_) => Err(StoreError::Corrupt("an input was queued".into())),
        }
    }
}

impl Remembered for UserInput {
    const COMMAND: &'static str = PostInput::COMMAND;
    type Answer = <PostInput as Remembered>::Answer;

    fn answer(batch: &mut Batch<'_>, outcome: &InputOutcome) -> Result<Self::Answer, StoreError> {
        PostInput::answer(batch, outcome)
    }
}
