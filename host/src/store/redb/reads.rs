//! The redb engine's read-only queries: each one a short read transaction.

use redb::{ReadTransaction, ReadableDatabase, ReadableTable};
use uuid::Uuid;

use super::{RedbEngine, feed, storage, tables, webhooks};
use crate::journal::{StoredEvent, decode_record, record_id, seq_of};
use crate::store::StoreError;
use crate::store::engine::{
    ApprovalItem, DueSchedule, Engine, FeedPage, ScheduleOwner, SessionFilter, WriteEngine,
};
use crate::store::error::corrupt;
use crate::store::records::{
    ApiKeyRecord, AppRecord, DeploymentRecord, DeploymentStatus, SecretRecord, SessionRecord,
};
use crate::store::webhook_records::{DeliveryRecord, WebhookRecord};

fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(corrupt)
}

impl Engine for RedbEngine {
    fn session(&self, id: Uuid) -> Result<Option<SessionRecord>, StoreError> {
        let txn = self.db.begin_read().map_err(storage)?;
        let table = txn.open_table(tables::SESSIONS).map_err(storage)?;
        match table.get(id.as_u128()).map_err(storage)? {
            Some(v) => Ok(Some(decode(v.value())?)),
            None => Ok(None),
        }
    }

    /// Sessions newest first, filtered; `limit` is applied after filtering.
    fn sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRecord>, StoreError> {
        let txn = self.db.begin_read().map_err(storage)?;
        let table = txn.open_table(tables::SESSIONS).map_err(storage)?;
        let upper = filter.before.map(|id| id.as_u128()).unwrap_or(u128::MAX);
        let mut out = Vec::new();
        for row in table.range(..upper).map_err(storage)?.rev() {
            let (_, v) = row.map_err(storage)?;
            let record: SessionRecord = decode(v.value())?;
            if filter.app_id.is_some_and(|app| app != record.app_id)
                || filter.status.is_some_and(|s| s != record.status)
                || (filter.end_user.is_some() && filter.end_user != record.end_user)
            {
                continue;
            }
            out.push(record);
            if out.len() >= filter.limit {
                break;
            }
        }
        Ok(out)
    }

    /// Up to `limit` events of a session with seq >= `from`, in seq order.
    fn events(
        &self,
        session: Uuid,
        from: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let txn = self.db.begin_read().map_err(storage)?;
        let table = txn.open_table(tables::EVENTS).map_err(storage)?;
        let key = session.as_u128();
        let mut out = Vec::with_capacity(limit.min(1024));
        for row in table
            .range((key, from)..=(key, u64::MAX))
            .map_err(storage)?
        {
            let (k, v) = row.map_err(storage)?;
            let seq = k.value().1;
            let event = decode_record(seq, v.value())
                .ok_or_else(|| corrupt(format!("event {session}/{seq} has an unknown format")))?;
            out.push(event);
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    /// An id that carries its seq is checked against the event there;
    /// any other (older events) is looked up in `EVENT_IDS`.
    fn event_seq(&self, session: Uuid, id: Uuid) -> Result<Option<u64>, StoreError> {
        let txn = self.db.begin_read().map_err(storage)?;
        let key = session.as_u128();
        if let Some(seq) = seq_of(id) {
            let events = txn.open_table(tables::EVENTS).map_err(storage)?;
            let found = events.get((key, seq)).map_err(storage)?;
            if found.is_some_and(|record| record_id(record.value()) == Some(id)) {
                return Ok(Some(seq));
            }
        }
        let table = txn.open_table(tables::EVENT_IDS).map_err(storage)?;
        Ok((table.get(id.as_u128()).map_err(storage)?)
            .map(|v| v.value())
            .and_then(|(owner, seq)| (owner == key).then_some(seq)))
    }

    /// An app by id or slug.
    fn app(&self, id_or_slug: &str) -> Result<Option<AppRecord>, StoreError> {
        let txn = self.db.begin_read().map_err(storage)?;
        let apps = txn.open_table(tables::APPS).map_err(storage)?;
        let id = match Uuid::parse_str(id_or_slug) {
            Ok(id) => Some(id.as_u128()),
            Err(_) => {
                let slugs = txn.open_table(tables::APP_SLUGS).map_err(storage)?;
                slugs.get(id_or_slug).map_err(storage)?.map(|v| v.value())
            }
        };
        let Some(id) = id else { return Ok(None) };
        match apps.get(id).map_err(storage)? {
            Some(v) => Ok(Some(decode(v.value())?)),
            None => Ok(None),
        }
    }

    fn apps(&self) -> Result<Vec<AppRecord>, StoreError> {
        let txn = self.db.begin_read().map_err(storage)?;
        let apps = txn.open_table(tables::APPS).map_err(storage)?;
        let mut out = Vec::new();
        for row in apps.iter().map_err(storage)? {
            let (_, v) = row.map_err(storage)?;
            out.push(decode(v.value())?);
        }
        Ok(out)
    }

    fn deployment(&self, id: Uuid) -> Result<Option<DeploymentRecord>, StoreError> {
        let txn = self.db.begin_read().map_err(storage)?;
        let table = txn.open_table(tables::DEPLOYMENTS).map_err(storage)?;
        match table.get(id.as_u128()).map_err(storage)? {
            Some(v) => Ok(Some(decode(v.value())?)),
            None => Ok(None),
        }
    }

    /// An app's deployments, newest version first.
    fn deployments(&self, app_id: Uuid) -> Result<Vec<DeploymentRecord>, StoreError> {
        let txn = self.db.begin_read().map_err(storage)?;
        let index = txn.open_table(tables::APP_DEPLOYMENTS).map_err(storage)?;
        let table = txn.open_table(tables::DEPLOYMENTS).map_err(storage)?;
        let app = app_id.as_u128();
        let mut out = Vec::new();
        for row in index
            .range((app, 0)..=(app, u64::MAX))
            .map_err(storage)?
            .rev()
        {
            let (_, id) = row.map_err(storage)?;
            let record = table.get(id.value()).map_err(storage)?.ok_or_else(|| {
                corrupt(format!("deployment {} is indexed but missing", id.value()))
            })?;
            out.push(decode(record.value())?);
        }
        Ok(out)
    }

    /// Deployments still marked `building` (interrupted by a restart).
    fn building_deployments(&self) -> Result<Vec<DeploymentRecord>, StoreError> {
        let txn = self.db.begin_read().map_err(storage)?;
        let table = txn.open_table(tables::DEPLOYMENTS).map_err(storage)?;
        let mut out = Vec::new();
        for row in table.iter().map_err(storage)? {
            let (_, v) = row.map_err(storage)?;
            let record: DeploymentRecord = decode(v.value())?;
            if record.status == DeploymentStatus::Building {
                out.push(record);
            }
        }
        Ok(out)
    }

    fn api_keys(&self) -> Result<Vec<ApiKeyRecord>, StoreError> {
        let txn = self.db.begin_read().map_err(storage)?;
        let table = txn.open_table(tables::API_KEYS).map_err(storage)?;
        let mut out = Vec::new();
        for row in table.iter().map_err(storage)? {
            let (_, v) = row.map_err(storage)?;
            out.push(decode(v.value())?);
        }
        Ok(out)
    }

    /// Sessions awaiting a decision, oldest request first, optionally of one app.
    fn pending_approvals(
        &self,
        app_id: Option<Uuid>,
        after: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<ApprovalItem>, StoreError> {
        let txn = self.db.begin_read().map_err(storage)?;
        pending(&txn, app_id, after, limit)
    }

    fn approval_snapshot_page(
        &self,
        app_id: Option<Uuid>,
        limit: usize,
    ) -> Result<(u64, Vec<ApprovalItem>), StoreError> {
        let txn = self.db.begin_read().map_err(storage)?;
        Ok((feed::head(&txn)?, pending(&txn, app_id, None, limit)?))
    }

    fn approval_feed(
        &self,
        after: u64,
        app_id: Option<Uuid>,
        limit: usize,
    ) -> Result<FeedPage, StoreError> {
        let txn = self.db.begin_read().map_err(storage)?;
        feed::read(&txn, after, app_id, limit)
    }

    fn end_user_not_before(&self, user_key: &str) -> Result<Option<u64>, StoreError> {
        super::end_users::not_before(self, user_key)
    }

    fn due_schedules(&self, now_ms: u64, limit: usize) -> Result<Vec<DueSchedule>, StoreError> {
        let txn = self.db.begin_read().map_err(storage)?;
        let table = txn.open_table(tables::SCHEDULES_DUE).map_err(storage)?;
        let sessions = txn.open_table(tables::SESSIONS).map_err(storage)?;
        let mut out = Vec::new();
        for row in (table.range(..(now_ms.saturating_add(1), 0, 0))).map_err(storage)? {
            if out.len() == limit {
                break;
            }
            let (key, _) = row.map_err(storage)?;
            let (due_ms, owner, schedule) = key.value();
            let session = sessions.get(owner).map_err(storage)?.is_some();
            let owner = Uuid::from_u128(owner);
            out.push(DueSchedule {
                due_ms,
                owner: match session {
                    true => ScheduleOwner::Session(owner),
                    false => ScheduleOwner::App(owner),
                },
                schedule: Uuid::from_u128(schedule),
            });
        }
        Ok(out)
    }

    /// Every secret, sealed, by name.
    fn secrets(&self) -> Result<Vec<SecretRecord>, StoreError> {
        let txn = self.db.begin_read().map_err(storage)?;
        let table = txn.open_table(tables::SECRETS).map_err(storage)?;
        let mut out = Vec::new();
        for row in table.iter().map_err(storage)? {
            let (_, v) = row.map_err(storage)?;
            out.push(decode(v.value())?);
        }
        Ok(out)
    }

    fn thread_session(
        &self,
        app: Uuid,
        route: &str,
        thread: &str,
    ) -> Result<Option<Uuid>, StoreError> {
        let txn = self.db.begin_read().map_err(storage)?;
        let table = txn.open_table(tables::THREADS).map_err(storage)?;
        let session = table.get((app.as_u128(), route, thread)).map_err(storage)?;
        Ok(session.map(|v| Uuid::from_u128(v.value())))
    }

    fn webhooks(&self) -> Result<Vec<WebhookRecord>, StoreError> {
        webhooks::webhooks(&self.db.begin_read().map_err(storage)?)
    }

    fn due_deliveries(&self, now_ms: u64, limit: usize) -> Result<Vec<DeliveryRecord>, StoreError> {
        webhooks::due(&self.db.begin_read().map_err(storage)?, now_ms, limit)
    }

    fn deliveries(
        &self,
        webhook: Uuid,
        before: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<DeliveryRecord>, StoreError> {
        let txn = self.db.begin_read().map_err(storage)?;
        webhooks::deliveries(&txn, webhook, before, limit)
    }

    fn write_engine(&self) -> Result<Box<dyn WriteEngine>, StoreError> {
        Ok(self.write_side())
    }
}

/// Pending approvals as of `txn` (see `Engine::pending_approvals`).
fn pending(
    txn: &ReadTransaction,
    app_id: Option<Uuid>,
    after: Option<Uuid>,
    limit: usize,
) -> Result<Vec<ApprovalItem>, StoreError> {
    let index = txn.open_table(tables::PENDING_APPROVALS).map_err(storage)?;
    let sessions = txn.open_table(tables::SESSIONS).map_err(storage)?;
    let events = txn.open_table(tables::EVENTS).map_err(storage)?;
    let read = |session: u128, seq: u64| -> Result<ApprovalItem, StoreError> {
        let record: SessionRecord = match sessions.get(session).map_err(storage)? {
            Some(v) => decode(v.value())?,
            None => {
                return Err(corrupt(format!(
                    "pending approval of missing session {session}"
                )));
            }
        };
        let event = events
            .get((session, seq))
            .map_err(storage)?
            .and_then(|v| decode_record(seq, v.value()))
            .ok_or_else(|| corrupt(format!("approval event {session}/{seq} is missing")))?;
        Ok(ApprovalItem {
            session: record,
            event,
        })
    };
    // The index is by session: every pending approval is looked at and
    // sorted by request, keeping only its id (an item may be large: its
    // arguments, the turn's input); the page's items are read again.
    let mut order = Vec::new();
    for row in index.iter().map_err(storage)? {
        let (session, seq) = row.map_err(storage)?;
        let (session, seq) = (session.value(), seq.value());
        let item = read(session, seq)?;
        if app_id.is_some_and(|app| app != item.session.app_id) {
            continue;
        }
        if after.is_some_and(|after| item.event.id <= after) {
            continue;
        }
        order.push((item.event.id, session, seq));
    }
    order.sort_unstable();
    order.truncate(limit);
    order
        .into_iter()
        .map(|(_, session, seq)| read(session, seq))
        .collect()
}
