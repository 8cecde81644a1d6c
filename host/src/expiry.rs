//! Approval deadlines: a pending approval past its `expires_at` (journaled
//! in its TOOL_APPROVAL_REQUIRED, so it holds across restarts) is decided as
//! denied by approver `timeout`, through the same exactly-once decision as a
//! human's, and the writer starts the resumed turn. With several hosts each
//! host does so; one decision wins, the others are 409.
//!
//! The deadlines are kept in memory and followed through the approvals
//! feed: one snapshot at start, then only the feed's new entries when it
//! advances (a request adds its deadline, a decision or withdrawal removes
//! it). So a second's check costs nothing however many approvals wait; a
//! fresh snapshot every `RESYNC` makes up for anything missed.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::Value;
use uuid::Uuid;

use crate::store::{
    ApprovalFeedEntry, By, Db, Decision, FeedKind, StoreError, WriterHandle, now_rfc3339,
};

/// How often deadlines are compared with the clock.
const EVERY: Duration = Duration::from_secs(1);
/// How often the deadlines are read whole again, whatever the feed said.
const RESYNC: Duration = Duration::from_secs(60);
/// Feed entries read per page.
const PAGE: usize = 500;
/// The approver (and key id) of a decision the deadline made.
pub(crate) const TIMEOUT_APPROVER: &str = "timeout";

/// Starts the sweep; the resumed turns are the writer's host's.
pub(crate) fn start(store: Db, writer: WriterHandle) {
    tokio::spawn(async move {
        let mut feed = store.hub().feed_watch();
        let mut deadlines = Deadlines::default();
        let mut synced: Option<Instant> = None;
        loop {
            let stale = synced.is_none_or(|at| at.elapsed() >= RESYNC);
            let followed = if stale {
                deadlines
                    .resync(&store)
                    .await
                    .map(|()| synced = Some(Instant::now()))
            } else if feed.has_changed().unwrap_or(false) {
                feed.borrow_and_update();
                deadlines.follow(&store).await
            } else {
                Ok(())
            };
            if let Err(err) = followed {
                tracing::warn!(error = %err, "cannot read approval deadlines");
                synced = None;
            }
            // From what is known, even if this read failed.
            deadlines.decide_due(&writer).await;
            tokio::time::sleep(EVERY).await;
        }
    });
}

/// The deadlines of the pending approvals that have one, by session (a
/// session waits on at most one call), and how far into the feed they go.
#[derive(Default)]
struct Deadlines {
    by_session: HashMap<Uuid, String>,
    read_through: u64,
}

impl Deadlines {
    /// Reads every pending approval again, and the feed position it stands at.
    async fn resync(&mut self, store: &Db) -> Result<(), StoreError> {
        let (head, items) = store.read(|s| s.approval_snapshot(None)).await?;
        self.by_session = (items.iter())
            .filter_map(|item| {
                let pending = item.session.pending_approval.as_ref()?;
                Some((item.session.id, pending.expires_at.clone()?))
            })
            .collect();
        self.read_through = head;
        Ok(())
    }

    /// Applies the feed's entries since the last read.
    async fn follow(&mut self, store: &Db) -> Result<(), StoreError> {
        loop {
            let after = self.read_through;
            let page = store
                .read(move |s| s.approval_feed(after, None, PAGE))
                .await?;
            if page.purged_through > after {
                // Entries we never saw were purged by age: read it all again.
                return self.resync(store).await;
            }
            for item in &page.items {
                let entry: ApprovalFeedEntry = match serde_json::from_str(&item.json) {
                    Ok(entry) => entry,
                    Err(err) => {
                        // The next snapshot holds what this entry said.
                        tracing::error!(seq = item.seq, error = %err, "unreadable approvals feed entry");
                        continue;
                    }
                };
                match entry.kind {
                    FeedKind::Requested => match requested_deadline(entry.event.as_ref()) {
                        Some(at) => self.by_session.insert(entry.session_id, at),
                        None => self.by_session.remove(&entry.session_id),
                    },
                    FeedKind::Decided | FeedKind::Withdrawn => {
                        self.by_session.remove(&entry.session_id)
                    }
                };
            }
            self.read_through = after.max(page.read_through);
            if page.read_through >= page.head {
                return Ok(());
            }
        }
    }

    /// Denies every pending approval whose deadline has passed.
    async fn decide_due(&mut self, writer: &WriterHandle) {
        let now = now_rfc3339();
        let due: Vec<Uuid> = (self.by_session.iter())
            .filter(|(_, at)| at.as_str() <= now.as_str())
            .map(|(session, _)| *session)
            .collect();
        for session in due {
            let decision = Decision {
                approved: false,
                approver: TIMEOUT_APPROVER.into(),
                by: By::Host {
                    name: TIMEOUT_APPROVER,
                },
                details: Default::default(),
                checked_seq: None,
            };
            match writer.decide(session, decision, None).await {
                Ok(_) => {
                    tracing::info!(%session, "an approval expired: denied by timeout");
                    self.by_session.remove(&session);
                }
                // Decided meanwhile (by a human or another host).
                Err(StoreError::Conflict(_) | StoreError::NotFound { .. }) => {
                    self.by_session.remove(&session);
                }
                // The app is at its running-turns cap: the next check tries again.
                Err(StoreError::Quota { .. }) => {}
                Err(err) => {
                    tracing::warn!(%session, error = %err, "cannot deny an expired approval");
                }
            }
        }
    }
}

/// The `expires_at` of a TOOL_APPROVAL_REQUIRED event, if it has one.
fn requested_deadline(event: Option<&Value>) -> Option<String> {
    let at = event?.get("payload")?.get("expires_at")?.as_str()?;
    Some(at.to_string())
}
