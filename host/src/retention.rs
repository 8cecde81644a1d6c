//! The retention purges. `--retain-ended-sessions`: every minute (or every
//! retention period, if shorter), sessions
//! that ended longer ago than the setting are deleted, journal and all.
//! Off by default. With several hosts each purges; a session deleted by
//! another host meanwhile is simply gone. Always: the first answers of
//! idempotent requests, once expired (`store::IDEMPOTENCY_TTL`), and the
//! approvals feed's entries past `FEED_RETENTION`, finished webhook
//! deliveries past `DELIVERY_RETENTION`. `--session-idle-secs`: sessions an
//! end user or the bare invocation key opened that have been idle (no turn,
//! nothing queued or scheduled) for longer are ended (`start_idle`), so
//! they stop counting against the app's caps; their journal is kept.

use std::time::{Duration, SystemTime};

use crate::store::{Db, SessionFilter, SessionStatus, StoreError, WriterHandle, unix_ms};

/// How often the purge runs at most (more often for a retention shorter than this).
const EVERY: Duration = Duration::from_secs(60);
/// Sessions read per page while looking for expired ones.
const PAGE: usize = 500;

/// Starts the purge of sessions ended longer than `retain` ago.
pub(crate) fn start(store: Db, writer: WriterHandle, retain: Duration) {
    tokio::spawn(async move {
        loop {
            match purge(&store, &writer, retain).await {
                Ok(0) => {}
                Ok(deleted) => tracing::info!(deleted, "purged ended sessions past retention"),
                Err(err) => tracing::warn!(error = %err, "cannot purge ended sessions"),
            }
            tokio::time::sleep(retain.clamp(Duration::from_secs(1), EVERY)).await;
        }
    });
}

/// Deletes every session that ended before now − `retain`; returns how many.
pub(crate) async fn purge(
    store: &Db,
    writer: &WriterHandle,
    retain: Duration,
) -> Result<usize, StoreError> {
    let cutoff = SystemTime::now()
        .checked_sub(retain)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let cutoff = humantime::format_rfc3339_millis(cutoff).to_string();
    let mut before = None;
    let mut deleted = 0;
    loop {
        let filter = SessionFilter {
            app_id: None,
            status: Some(SessionStatus::Ended),
            before,
            limit: PAGE,
            end_user: None,
        };
        let page = store.read(move |s| s.sessions(&filter)).await?;
        for record in &page {
            if record.updated_at >= cutoff {
                continue;
            }
            match writer.delete_session(record.id, Some(cutoff.clone())).await {
                Ok(()) => deleted += 1,
                // Deleted by another host, or no longer eligible.
                Err(StoreError::NotFound { .. } | StoreError::Conflict(_)) => {}
                Err(err) => return Err(err),
            }
        }
        match page.last() {
            Some(last) if page.len() == PAGE => before = Some(last.id),
            _ => return Ok(deleted),
        }
    }
}

/// How often the idle sweep runs at most (more often for a shorter idle time).
const IDLE_EVERY: Duration = Duration::from_secs(600);

/// Starts the sweep that ends sessions idle for longer than `idle`.
pub(crate) fn start_idle(store: Db, writer: WriterHandle, idle: Duration) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(idle.clamp(Duration::from_secs(1), IDLE_EVERY)).await;
            match end_idle(&store, &writer, idle).await {
                Ok(0) => {}
                Ok(ended) => tracing::info!(ended, "ended idle sessions (--session-idle-secs)"),
                Err(err) => tracing::warn!(error = %err, "cannot end idle sessions"),
            }
        }
    });
}

/// Ends every session an end user or the bare invocation key opened that
/// is idle or errored and untouched since now − `idle`, with nothing queued
/// or scheduled; returns how many. The writer checks again
/// (`end_idle_session`): one used meanwhile is left alone.
pub(crate) async fn end_idle(
    store: &Db,
    writer: &WriterHandle,
    idle: Duration,
) -> Result<usize, StoreError> {
    let cutoff = SystemTime::now()
        .checked_sub(idle)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let cutoff = humantime::format_rfc3339_millis(cutoff).to_string();
    let reason = format!(
        "idle: no turn for {} s (--session-idle-secs)",
        idle.as_secs()
    );
    let mut before = None;
    let mut ended = 0;
    loop {
        let filter = SessionFilter {
            app_id: None,
            status: None,
            before,
            limit: PAGE,
            end_user: None,
        };
        let page = store.read(move |s| s.sessions(&filter)).await?;
        for record in &page {
            let idle = matches!(record.status, SessionStatus::Idle | SessionStatus::Errored)
                && (record.end_user.is_some() || record.source.is_some())
                && record.updated_at < cutoff
                && record.queued.is_empty()
                && record.schedules.is_empty();
            if !idle {
                continue;
            }
            let (id, before) = (record.id, cutoff.clone());
            match writer.end_idle_session(id, before, reason.clone()).await {
                Ok(_) => ended += 1,
                // Used, ended or deleted meanwhile (by another host too).
                Err(StoreError::NotFound { .. } | StoreError::Conflict(_)) => {}
                Err(err) => return Err(err),
            }
        }
        match page.last() {
            Some(last) if page.len() == PAGE => before = Some(last.id),
            _ => return Ok(ended),
        }
    }
}

/// How often expired idempotency keys are purged (a key is new again at
/// its expiry whether or not it was purged yet).
const IDEMPOTENCY_EVERY: Duration = Duration::from_secs(600);
/// Keys or feed entries forgotten per writer command (a purge repeats
/// while there are more).
const PURGE_PAGE: usize = 1000;

/// How long the approvals feed keeps an entry: a feed reader away for
/// longer resumes from a fresh snapshot (docs/approvals.md).
pub(crate) const FEED_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long a finished webhook delivery (delivered or failed) is kept
/// for `GET /webhooks/{id}/deliveries` (docs/webhooks.md).
pub(crate) const DELIVERY_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Starts the purges that always run: expired idempotency keys, and
/// approvals-feed entries past `FEED_RETENTION`.
pub(crate) fn start_purges(writer: WriterHandle) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(IDEMPOTENCY_EVERY).await;
            let now = SystemTime::now();
            let now_ms = unix_ms(now);
            purge_pages("expired idempotency keys", || {
                writer.purge_idempotency(now_ms, PURGE_PAGE)
            })
            .await;
            let before_ms = unix_ms(
                now.checked_sub(FEED_RETENTION)
                    .unwrap_or(SystemTime::UNIX_EPOCH),
            );
            purge_pages("old approvals-feed entries", || {
                writer.purge_feed(before_ms, PURGE_PAGE)
            })
            .await;
            let before_ms = unix_ms(
                now.checked_sub(DELIVERY_RETENTION)
                    .unwrap_or(SystemTime::UNIX_EPOCH),
            );
            purge_pages("old webhook deliveries", || {
                writer.purge_deliveries(before_ms, PURGE_PAGE)
            })
            .await;
        }
    });
}

/// Runs a purge to its end, one writer command of at most `PURGE_PAGE`
/// after another until one forgets fewer, and logs what it did.
async fn purge_pages<F, Fut>(what: &str, mut page: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<usize, StoreError>>,
{
    let mut purged = 0;
    loop {
        match page().await {
            Ok(forgotten) => {
                purged += forgotten;
                if forgotten < PURGE_PAGE {
                    break;
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot purge {what}");
                return;
            }
        }
    }
    if purged > 0 {
        tracing::info!(purged, "purged {what}");
    }
}
