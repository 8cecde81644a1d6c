//! Approval deadlines: every second, a pending approval past its
//! `expires_at` (journaled in its TOOL_APPROVAL_REQUIRED, so it holds across
//! restarts) is decided as denied by approver `timeout`, through the same
//! exactly-once decision as a human's, and the resumed turn is scheduled.
//! With several hosts each sweeps; one decision wins, the others are 409.

use std::sync::Arc;
use std::time::Duration;

use crate::runtime::Runtime;
use crate::store::{Db, Decision, StoreError, WriterHandle, now_rfc3339};

/// How often pending approvals are checked.
const EVERY: Duration = Duration::from_secs(1);
/// Pending approvals read per page.
const PAGE: usize = 500;
/// The approver (and key id) of a decision the deadline made.
pub(crate) const TIMEOUT_APPROVER: &str = "timeout";

/// Starts the sweep; `boot` is this host's id (the resumed turns' owner).
pub(crate) fn start(store: Db, writer: WriterHandle, runtime: Arc<Runtime>, boot: uuid::Uuid) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(EVERY).await;
            if let Err(err) = sweep(&store, &writer, &runtime, boot).await {
                tracing::warn!(error = %err, "cannot check approval deadlines");
            }
        }
    });
}

/// Denies every pending approval whose deadline has passed.
async fn sweep(
    store: &Db,
    writer: &WriterHandle,
    runtime: &Arc<Runtime>,
    boot: uuid::Uuid,
) -> Result<(), StoreError> {
    let now = now_rfc3339();
    let mut after = None;
    loop {
        let page = store
            .read(move |s| s.pending_approvals(None, after, PAGE))
            .await?;
        for item in &page {
            let session = &item.session;
            let expired = (session.pending_approval.as_ref())
                .and_then(|p| p.expires_at.as_deref())
                .is_some_and(|at| at <= now.as_str());
            if !expired {
                continue;
            }
            let decision = Decision {
                approved: false,
                approver: TIMEOUT_APPROVER.into(),
                key_id: TIMEOUT_APPROVER.into(),
            };
            match writer.decide(session.id, decision, boot).await {
                Ok(ticket) => {
                    tracing::info!(session = %session.id, "an approval expired: denied by timeout");
                    runtime.schedule(ticket);
                }
                // Decided meanwhile (by a human or another host).
                Err(StoreError::Conflict(_) | StoreError::NotFound { .. }) => {}
                // The app is at its running-turns cap: the next sweep tries again.
                Err(StoreError::Quota { .. }) => {}
                Err(err) => return Err(err),
            }
        }
        match page.last() {
            Some(last) if page.len() == PAGE => after = Some(last.event.id),
            _ => return Ok(()),
        }
    }
}
