//! The schedules' scanner: every `EVERY` it reads the schedules due now
//! from the engine's due index and fires each through the writer
//! (`store::domain::schedules`), whose command fires a schedule once
//! whichever host (or retry) asks: with several hosts each scans, one
//! firing wins, the others find it gone. A schedule due while the server
//! was down is due at its start: it fires once, late. A session's
//! schedules start at most `MAX_SCHEDULE_TURNS_PER_SESSION_PER_MINUTE`
//! turns a minute from this host; past it they wait, due.

use std::collections::{HashMap, VecDeque};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, SystemTime};

use uuid::Uuid;

use crate::store::{Db, DueSchedule, Fired, InputOutcome, StoreError, WriterHandle, unix_ms};

/// Turns one session's schedules (an agent's timers included) may start
/// or queue in any minute, per host (docs/limits.md): past it a due one
/// waits for the next read. An agent that sets its next timer from every
/// turn cannot run turns back to back.
pub(crate) const MAX_SCHEDULE_TURNS_PER_SESSION_PER_MINUTE: usize = 60;
const RATE_WINDOW_MS: u64 = 60_000;

/// The times of each session's recent schedule firings (sessions with one
/// in the last minute only).
#[derive(Default)]
struct Rate(Mutex<HashMap<Uuid, VecDeque<u64>>>);

impl Rate {
    /// Counts one firing of `session` at `now`, or refuses it (its share of the minute is spent).
    fn take(&self, session: Uuid, now: u64) -> bool {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let times = map.entry(session).or_default();
        while times.front().is_some_and(|t| t + RATE_WINDOW_MS <= now) {
            times.pop_front();
        }
        if times.len() >= MAX_SCHEDULE_TURNS_PER_SESSION_PER_MINUTE {
            return false;
        }
        times.push_back(now);
        true
    }

    /// Gives back the firing counted at `now` (it started nothing).
    fn give_back(&self, session: Uuid, now: u64) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(times) = map.get_mut(&session)
            && let Some(at) = times.iter().rposition(|t| *t == now)
        {
            times.remove(at);
        }
    }

    /// Forgets the sessions with no firing in the last minute.
    fn prune(&self, now: u64) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, times| times.back().is_some_and(|t| t + RATE_WINDOW_MS > now));
    }
}

static RATE: LazyLock<Rate> = LazyLock::new(Rate::default);

/// How often the due index is read.
const EVERY: Duration = Duration::from_millis(250);
/// Schedules fired per read (the rest wait for the next).
const PAGE: usize = 256;

/// Starts the scanner; the turns it starts are the writer's host's.
pub(crate) fn start(store: Db, writer: WriterHandle) {
    tokio::spawn(async move {
        loop {
            if !scan(&store, &writer).await {
                tokio::time::sleep(EVERY).await;
            }
        }
    });
}

/// One read of the due index and the firing of what it found, all at once
/// (the writer commits them together, in batches, instead of one commit
/// and fsync each). Whether to read again at once: a full page that moved
/// on (fired or dropped some) says more are due.
async fn scan(store: &Db, writer: &WriterHandle) -> bool {
    let now = unix_ms(SystemTime::now());
    RATE.prune(now);
    match store.read(move |s| s.due_schedules(now, PAGE)).await {
        Ok(due) => {
            let full = due.len() == PAGE;
            let fired = due.into_iter().map(|due| fire(writer, due));
            let moved = futures::future::join_all(fired).await;
            full && moved.into_iter().any(|moved| moved)
        }
        Err(err) => {
            tracing::warn!(error = %err, "cannot read due schedules");
            false
        }
    }
}

/// Fires one due schedule; a refusal is logged, and a cap waits for the
/// next read. Whether it left the due index (fired or dropped).
async fn fire(writer: &WriterHandle, due: DueSchedule) -> bool {
    let (owner, schedule) = (due.owner.id(), due.schedule);
    let now = unix_ms(SystemTime::now());
    if !RATE.take(owner, now) {
        crate::metrics::get().schedules_deferred.inc();
        tracing::debug!(owner = %owner, %schedule, "a due schedule waits: its session's schedules started {MAX_SCHEDULE_TURNS_PER_SESSION_PER_MINUTE} turns in the last minute");
        return false;
    }
    let fired = writer.fire_schedule(due).await;
    // Only a session's input counts (an app's schedule makes a new session).
    if !matches!(fired, Ok(Fired::Input(_))) {
        RATE.give_back(owner, now);
    }
    if let Ok(Fired::Input(_) | Fired::Session(..)) = &fired {
        let metrics = crate::metrics::get();
        metrics.schedules_fired.inc();
        let late_ms = unix_ms(SystemTime::now()).saturating_sub(due.due_ms);
        metrics.schedule_lateness.observe(late_ms as f64 / 1000.0);
    }
    let moved = fired.is_ok();
    match fired {
        Ok(Fired::Input(InputOutcome::Started(ticket))) => {
            tracing::info!(session = %owner, %schedule, turn = ticket.turn, "a schedule fired");
        }
        Ok(Fired::Input(InputOutcome::Queued(queued))) => {
            let position = queued.position;
            tracing::info!(session = %owner, %schedule, position, "a schedule fired: queued, the session is busy");
        }
        Ok(Fired::Session(created, ticket)) => {
            let app = &ticket.app_slug;
            tracing::info!(%app, %schedule, session = %created, "an app's schedule fired: a new session");
        }
        Ok(Fired::Missed(why)) => {
            crate::metrics::get().schedules_missed.inc();
            tracing::warn!(app = %owner, %schedule, error = %why, "an app's schedule fired, but the app could not take it: missed");
        }
        Ok(Fired::Dropped) => {}
        // A cap (running turns, the session's queue): the next read tries
        // again; counted, and logged at debug (it repeats every read).
        Err(StoreError::Quota { cap, .. } | StoreError::Throttled { cap, .. }) => {
            crate::metrics::get().schedules_deferred.inc();
            let cap = cap.as_str();
            tracing::debug!(owner = %owner, %schedule, cap, "a due schedule waits: a cap is reached");
        }
        Err(err) => {
            tracing::warn!(owner = %owner, %schedule, error = %err, "cannot fire a schedule")
        }
    }
    moved
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::test_calls::HostCalls;
    use crate::store::{ScheduleRecord, TestBackend, new_deployment, start_for_tests, success};

    #[test]
    fn a_sessions_schedules_start_at_most_their_rate_a_minute() {
        let rate = Rate::default();
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let t = 1_000_000;
        for i in 0..MAX_SCHEDULE_TURNS_PER_SESSION_PER_MINUTE as u64 {
            assert!(rate.take(a, t + i));
        }
        assert!(!rate.take(a, t + 100), "the minute's share is spent");
        assert!(rate.take(b, t + 100), "another session has its own");
        rate.give_back(a, t + 5);
        assert!(rate.take(a, t + 101), "a firing given back frees its place");
        assert!(!rate.take(a, t + 102));
        // A minute after the first, a place frees again.
        assert!(rate.take(a, t + RATE_WINDOW_MS));
        rate.prune(t + 10 * RATE_WINDOW_MS);
        assert!(
            rate.0.lock().unwrap().is_empty(),
            "idle sessions are forgotten"
        );
    }

    /// More schedules due than a page holds: the first read fires a full
    /// page and says to read again at once; the second fires the rest and
    /// says to wait; then nothing is due.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_page_that_moved_on_is_read_again_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let backend = TestBackend::Redb(dir.path().join("db.redb"));
        let (store, writer) = start_for_tests(&backend).await;
        let d = writer
            .create_deployment(new_deployment(None))
            .await
            .unwrap();
        writer.finish_build(d.id, success()).await.unwrap();
        let now = unix_ms(SystemTime::now());
        for n in 0..PAGE + 10 {
            let (session, ticket) = (writer.new_session("app".into(), "/chat".into(), json!(n)))
                .await
                .unwrap();
            (writer.finish_turn(
                session.id,
                ticket.turn,
                vec![],
                crate::store::TurnOutcome::Ended,
            ))
            .await
            .unwrap();
            let record = ScheduleRecord {
                id: uuid::Uuid::now_v7(),
                due_ms: now,
                input: json!(n),
                ..Default::default()
            };
            (writer.create_schedule(session.id, record, crate::store::By::host()))
                .await
                .unwrap();
        }
        let due = |store: Db| async move {
            store
                .read(|s| s.due_schedules(u64::MAX, 2 * PAGE))
                .await
                .unwrap()
                .len()
        };
        assert_eq!(due(store.clone()).await, PAGE + 10);
        assert!(
            scan(&store, &writer).await,
            "a full page: read again at once"
        );
        assert_eq!(due(store.clone()).await, 10);
        assert!(!scan(&store, &writer).await, "the rest: wait");
        assert_eq!(due(store.clone()).await, 0);
        assert!(!scan(&store, &writer).await);
    }
}
