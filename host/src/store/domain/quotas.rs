//! Per-app caps on open sessions and running turns, checked by the commands
//! that would exceed them (`CreateSession`, `PostInput`, `Decide`) inside
//! the writer's transaction, so they hold exactly: the count is what the
//! engine has committed plus this batch's own changes, and on a shared
//! engine the app stays locked until the commit.

use uuid::Uuid;

use super::by::By;
use crate::store::Cap;
use crate::store::StoreError;
use crate::store::batch::Batch;
use crate::store::engine::{AppLoad, Owner};
use crate::store::records::SessionStatus;

/// What a command is about to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Starting {
    /// A new session with its first turn.
    Session,
    /// A turn of an existing open session.
    Turn,
}

/// Refuses (`StoreError::Quota`) when starting one more would go past a cap
/// of the app: the operator's caps for everyone, and, `by` a public
/// caller (an invocation key or an end user: what ships in frontends,
/// `By::public`), the caps of theirs, which count the app's sessions and
/// turns all the same.
pub(super) fn check(
    batch: &mut Batch<'_>,
    app: Uuid,
    slug: &str,
    starting: Starting,
    by: &By,
) -> Result<(), StoreError> {
    let public = by.public();
    let quotas = batch.state.quotas;
    let pick = |all: Option<u64>, theirs: Option<u64>, flags: [&'static str; 2]| {
        let theirs = theirs.filter(|_| public).map(|cap| (cap, flags[1]));
        let all = all.map(|cap| (cap, flags[0]));
        match (all, theirs) {
            (Some(a), Some(t)) => Some(if t.0 < a.0 { t } else { a }),
            (a, t) => a.or(t),
        }
    };
    let open_cap = pick(
        quotas.open_sessions,
        quotas.public_open_sessions,
        [
            "--max-open-sessions-per-app",
            "--invocation-max-open-sessions-per-app",
        ],
    )
    .filter(|_| starting == Starting::Session);
    let running_cap = pick(
        quotas.running_turns,
        quotas.public_running_turns,
        [
            "--max-running-turns-per-app",
            "--invocation-max-running-turns-per-app",
        ],
    );
    if open_cap.is_none() && running_cap.is_none() {
        return Ok(());
    }
    let load = load(batch, app)?;
    if let Some((cap, flag)) = open_cap
        && load.open >= cap
    {
        return Err(StoreError::Quota {
            cap: Cap::OpenSessions,
            message: format!(
                "app `{slug}` has {} open sessions, its cap ({flag} {cap}): end one first (POST /sessions/{{id}}/end)",
                load.open
            ),
        });
    }
    if let Some((cap, flag)) = running_cap
        && load.running >= cap
    {
        return Err(StoreError::Quota {
            cap: Cap::RunningTurns,
            message: format!(
                "app `{slug}` has {} running turns, its cap ({flag} {cap}): retry once one ends",
                load.running
            ),
        });
    }
    Ok(())
}

/// Refuses (`StoreError::Quota`) a new session of end user `user` when they
/// already have `cap` open sessions of the app (`[end_users]
/// max_open_sessions_per_user`).
pub(super) fn check_user(
    batch: &mut Batch<'_>,
    app: Uuid,
    user: &str,
    cap: u64,
) -> Result<(), StoreError> {
    let mut owned: std::collections::HashSet<Uuid> = batch
        .tx
        .user_open_sessions(app, user)?
        .into_iter()
        .collect();
    // This batch's own changes: sessions it created or ended.
    for (id, row) in &batch.changes.sessions {
        if row.record.app_id != app || row.record.end_user.as_deref() != Some(user) {
            continue;
        }
        if weight(Some(row.record.status)).0 == 1 {
            owned.insert(*id);
        } else {
            owned.remove(id);
        }
    }
    if owned.len() as u64 >= cap {
        return Err(StoreError::Quota {
            cap: Cap::OpenSessionsPerUser,
            message: format!(
                "end user `{user}` has {} open sessions of this app, its cap ([end_users] max_open_sessions_per_user = {cap}): end one first (POST /sessions/{{id}}/end)",
                owned.len()
            ),
        });
    }
    Ok(())
}

/// The least share of a frontend cap a principal gets, whatever the
/// percent (unless the cap itself is lower).
pub(crate) const MIN_SHARE: u64 = 8;

/// One principal's share of frontend cap `cap` at `percent`: `percent` of
/// it rounded up, at least `MIN_SHARE`, at most the cap.
pub(crate) fn share(cap: u64, percent: u64) -> u64 {
    let part = cap.saturating_mul(percent).div_ceil(100);
    part.max(MIN_SHARE).min(cap)
}

/// Refuses (`StoreError::Quota`) when starting one more would take
/// `owner` (the end user, or the bare invocation key's source address, of
/// the session) past its share of the app's frontend caps
/// (`--invocation-share-per-principal`), so that one visitor or end user
/// cannot fill them for everyone. Only `by` a public caller; the open
/// sessions' share is left to `[end_users] max_open_sessions_per_user`
/// where the manifest sets it (`user_cap_set`).
pub(super) fn check_share(
    batch: &mut Batch<'_>,
    app: Uuid,
    slug: &str,
    starting: Starting,
    by: &By,
    owner: Option<Owner>,
    user_cap_set: bool,
) -> Result<(), StoreError> {
    let quotas = batch.state.quotas;
    let (Some(owner), Some(percent)) = (owner, quotas.share_percent) else {
        return Ok(());
    };
    if !by.public() {
        return Ok(());
    }
    let open_cap = (quotas.public_open_sessions)
        .filter(|_| starting == Starting::Session)
        .filter(|_| !(user_cap_set && matches!(owner, Owner::User(_))));
    let running_cap = quotas.public_running_turns;
    if open_cap.is_none() && running_cap.is_none() {
        return Ok(());
    }
    let mut held: std::collections::HashMap<Uuid, bool> =
        batch.tx.owner_sessions(app, &owner)?.into_iter().collect();
    // This batch's own changes: sessions it created, started or ended.
    for (id, row) in &batch.changes.sessions {
        if row.record.app_id != app || Owner::of(&row.record).as_ref() != Some(&owner) {
            continue;
        }
        match weight(Some(row.record.status)) {
            (1, running) => held.insert(*id, running == 1),
            _ => held.remove(id),
        };
    }
    let (open, running) = (
        held.len() as u64,
        held.values().filter(|running| **running).count() as u64,
    );
    let who = match &owner {
        Owner::User(user) => format!("end user `{user}` has"),
        Owner::Source(source) => format!("the invocation key has, from address {source},"),
    };
    let of = |cap: u64, flag: &str| {
        format!(
            "{} of {flag} {cap}, --invocation-share-per-principal {percent} %",
            share(cap, percent)
        )
    };
    if let Some(cap) = open_cap
        && open >= share(cap, percent)
    {
        return Err(StoreError::Quota {
            cap: Cap::OpenSessionsShare,
            message: format!(
                "{who} {open} open sessions of app `{slug}`, their share of its cap ({}): end one first (POST /sessions/{{id}}/end)",
                of(cap, "--invocation-max-open-sessions-per-app")
            ),
        });
    }
    if let Some(cap) = running_cap
        && running >= share(cap, percent)
    {
        return Err(StoreError::Quota {
            cap: Cap::RunningTurnsShare,
            message: format!(
                "{who} {running} running turns of app `{slug}`, their share of its cap ({}): retry once one ends",
                of(cap, "--invocation-max-running-turns-per-app")
            ),
        });
    }
    Ok(())
}

/// The app's load as this batch leaves it so far: the engine's committed
/// count, corrected by every session of the app the batch loaded or created.
fn load(batch: &mut Batch<'_>, app: Uuid) -> Result<AppLoad, StoreError> {
    let committed = batch.tx.app_load(app)?;
    let (mut open, mut running) = (committed.open as i64, committed.running as i64);
    let changes = &batch.changes;
    for (id, row) in &changes.sessions {
        if row.record.app_id != app {
            continue;
        }
        let (now_open, now_running) = weight(Some(row.record.status));
        let (was_open, was_running) = weight(changes.loaded.get(id).copied());
        open += now_open - was_open;
        running += now_running - was_running;
    }
    Ok(AppLoad {
        open: open.max(0) as u64,
        running: running.max(0) as u64,
    })
}

/// What one session counts: (open, running).
fn weight(status: Option<SessionStatus>) -> (i64, i64) {
    match status {
        None | Some(SessionStatus::Ended) => (0, 0),
        Some(SessionStatus::Running) => (1, 1),
        Some(_) => (1, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::share;

    #[test]
    fn a_share_is_its_percent_rounded_up_at_least_min_share_at_most_the_cap() {
        assert_eq!(share(10_000, 1), 100);
        assert_eq!(share(64, 1), 8);
        assert_eq!(share(20, 1), 8);
        assert_eq!(share(3, 1), 3);
        assert_eq!(share(1_000, 50), 500);
        assert_eq!(share(10_001, 1), 101);
    }
}
