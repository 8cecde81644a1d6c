//! End users' own rows: revoking a user's tokens (their not-before, which
//! every host checks, `end_users::revocation`), and their share of turns
//! (`[end_users] turns_per_minute_per_user`): at most that many turns
//! started in any 60 s. A user's recent turns are one row, read (locked,
//! on PostgreSQL) and written inside the writer's transaction, so the cap
//! holds exactly across hosts; a command refused after its turn was
//! counted gives the place back.

use std::time::SystemTime;

use uuid::Uuid;

use super::clock::unix_ms;
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
