//! The PostgreSQL engine's read-only queries, each on a pooled connection.

use postgres::types::{Json, ToSql};
use postgres::{GenericClient, IsolationLevel};
use uuid::Uuid;

use super::listen::Change;
use super::{CHANNEL, PgEngine, PgWriter, pg};
use crate::journal::{StoredEvent, decode_record};
use crate::store::StoreError;
use crate::store::engine::{
    ApprovalItem, DueSchedule, Engine, FeedItem, FeedPage, ScheduleOwner, SessionFilter,
    WriteEngine,
};
use crate::store::error::corrupt;
use crate::store::records::{
    ApiKeyRecord, AppRecord, DeploymentRecord, SecretRecord, SessionRecord,
};
use crate::store::webhook_records::{DeliveryRecord, WebhookRecord};

type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

impl PgEngine {
    fn rows(&self, sql: &str, params: Params<'_>) -> Result<Vec<postgres::Row>, StoreError> {
        self.conn()?.query(sql, params).map_err(|e| pg(&e))
    }

    fn records<T: serde::de::DeserializeOwned>(
        &self,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Vec<T>, StoreError> {
        self.rows(sql, params)?
            .iter()
            .map(|row| row.try_get::<_, Json<T>>(0).map(|j| j.0).map_err(corrupt))
            .collect()
    }

    fn record<T: serde::de::DeserializeOwned>(
        &self,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Option<T>, StoreError> {
        Ok(self.records(sql, params)?.into_iter().next())
    }
}

impl PgEngine {
    /// Keeps `bytes` as the blob `kind`/`id` (a component, a bundle).
    fn put_blob(&self, kind: &str, id: Uuid, bytes: &[u8]) -> Result<(), StoreError> {
        self.conn()?
            .execute(
                "INSERT INTO blobs (kind, id, bytes) VALUES ($1, $2, $3)
                 ON CONFLICT (kind, id) DO UPDATE SET bytes = excluded.bytes",
                &[&kind, &id, &bytes],
            )
            .map_err(|e| pg(&e))?;
        Ok(())
    }

    fn blob(&self, kind: &str, id: Uuid) -> Result<Option<Vec<u8>>, StoreError> {
        let rows = self.rows(
            "SELECT bytes FROM blobs WHERE kind = $1 AND id = $2",
            &[&kind, &id],
        )?;
        rows.first()
            .map(|row| row.try_get(0).map_err(corrupt))
            .transpose()
    }
}

/// A row limit as PostgreSQL takes it (`usize::MAX` means no limit).
fn clamp(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

fn event(session: Uuid, row: &postgres::Row) -> Result<StoredEvent, StoreError> {
    let seq: i64 = row.try_get(0).map_err(corrupt)?;
    let bytes: &[u8] = row.try_get(1).map_err(corrupt)?;
    decode_record(seq as u64, bytes)
        .ok_or_else(|| corrupt(format!("event {session}/{seq} has an unknown format")))
}

impl Engine for PgEngine {
    fn session(&self, id: Uuid) -> Result<Option<SessionRecord>, StoreError> {
        self.record("SELECT record FROM sessions WHERE id = $1", &[&id])
    }

    fn sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRecord>, StoreError> {
        let status = filter.status.map(|s| s.as_str());
        self.records(
            "SELECT record FROM sessions
             WHERE ($1::uuid IS NULL OR app_id = $1) AND ($2::text IS NULL OR status = $2)
               AND ($3::uuid IS NULL OR id < $3)
               AND ($5::text IS NULL OR record->>'end_user' = $5)
             ORDER BY id DESC LIMIT $4",
            &[
                &filter.app_id,
                &status,
                &filter.before,
                &clamp(filter.limit),
                &filter.end_user,
            ],
        )
    }

    fn events(
        &self,
        session: Uuid,
        from: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let rows = self.rows(
            "SELECT seq, record FROM events WHERE session_id = $1 AND seq >= $2
             ORDER BY seq LIMIT $3",
            &[&session, &(from.min(i64::MAX as u64) as i64), &clamp(limit)],
        )?;
        rows.iter().map(|row| event(session, row)).collect()
    }

    fn event_seq(&self, session: Uuid, id: Uuid) -> Result<Option<u64>, StoreError> {
        let rows = self.rows(
            "SELECT seq FROM events WHERE id = $1 AND session_id = $2",
            &[&id, &session],
        )?;
        match rows.first() {
            Some(row) => {
                let seq: i64 = row.try_get(0).map_err(corrupt)?;
                Ok(Some(seq as u64))
            }
            None => Ok(None),
        }
    }

    fn app(&self, id_or_slug: &str) -> Result<Option<AppRecord>, StoreError> {
        match Uuid::parse_str(id_or_slug) {
            Ok(id) => self.record("SELECT record FROM apps WHERE id = $1", &[&id]),
            Err(_) => self.record("SELECT record FROM apps WHERE slug = $1", &[&id_or_slug]),
        }
    }

    fn apps(&self) -> Result<Vec<AppRecord>, StoreError> {
        self.records("SELECT record FROM apps ORDER BY id", &[])
    }

    fn deployment(&self, id: Uuid) -> Result<Option<DeploymentRecord>, StoreError> {
        self.record("SELECT record FROM deployments WHERE id = $1", &[&id])
    }

    fn deployments(&self, app_id: Uuid) -> Result<Vec<DeploymentRecord>, StoreError> {
        self.records(
            "SELECT record FROM deployments WHERE app_id = $1 ORDER BY version DESC",
            &[&app_id],
        )
    }

    fn building_deployments(&self) -> Result<Vec<DeploymentRecord>, StoreError> {
        self.records(
            "SELECT record FROM deployments WHERE status = 'building' ORDER BY id",
            &[],
        )
    }

    fn api_keys(&self) -> Result<Vec<ApiKeyRecord>, StoreError> {
        self.records("SELECT record FROM api_keys ORDER BY id", &[])
    }

    fn api_key(&self, id: &str) -> Result<Option<ApiKeyRecord>, StoreError> {
        self.record("SELECT record FROM api_keys WHERE id = $1", &[&id])
    }

    fn pending_approvals(
        &self,
        app_id: Option<Uuid>,
        after: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<ApprovalItem>, StoreError> {
        pending(&mut *self.conn()?, app_id, after, limit)
    }

    fn approval_snapshot_page(
        &self,
        app_id: Option<Uuid>,
        limit: usize,
    ) -> Result<(u64, Vec<ApprovalItem>), StoreError> {
        // One snapshot for both reads: the head and the list agree.
        let mut conn = self.conn()?;
        let mut txn = (conn.build_transaction())
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(|e| pg(&e))?;
        let head: i64 = match (txn.query("SELECT head FROM approval_feed_marks", &[]))
            .map_err(|e| pg(&e))?
            .first()
        {
            Some(row) => row.try_get(0).map_err(corrupt)?,
            None => 0,
        };
        let items = pending(&mut txn, app_id, None, limit)?;
        txn.commit().map_err(|e| pg(&e))?;
        Ok((head.max(0) as u64, items))
    }

    fn approval_feed(
        &self,
        after: u64,
        app_id: Option<Uuid>,
        limit: usize,
    ) -> Result<FeedPage, StoreError> {
        // One statement, one snapshot: the marks and the entries agree.
        let after = after.min(i64::MAX as u64) as i64;
        let rows = self.rows(
            "SELECT m.head, m.purged_through, f.seq, f.entry FROM approval_feed_marks m
             LEFT JOIN LATERAL (
                 SELECT seq, entry FROM approval_feed
                 WHERE seq > $1 AND ($2::uuid IS NULL OR app_id = $2)
                 ORDER BY seq LIMIT $3) f ON true
             ORDER BY f.seq",
            &[&after, &app_id, &clamp(limit)],
        )?;
        let mut page = FeedPage::default();
        for row in &rows {
            let head: i64 = row.try_get(0).map_err(corrupt)?;
            let purged: i64 = row.try_get(1).map_err(corrupt)?;
            (page.head, page.purged_through) = (head.max(0) as u64, purged.max(0) as u64);
            let seq: Option<i64> = row.try_get(2).map_err(corrupt)?;
            let json: Option<String> = row.try_get(3).map_err(corrupt)?;
            if let (Some(seq), Some(json)) = (seq, json) {
                let seq = seq.max(0) as u64;
                page.items.push(FeedItem { seq, json });
            }
        }
        page.read_through = match page.items.last() {
            Some(last) if page.items.len() >= limit => last.seq,
            _ => page.head.max(after as u64),
        };
        Ok(page)
    }

    fn end_user_not_before(&self, user_key: &str) -> Result<Option<u64>, StoreError> {
        let rows = self.rows(
            "SELECT not_before_ms FROM endusers_not_before WHERE user_key = $1",
            &[&user_key],
        )?;
        rows.first()
            .map(|row| {
                row.try_get::<_, i64>(0)
                    .map(|ms| ms as u64)
                    .map_err(corrupt)
            })
            .transpose()
    }

    fn due_schedules(&self, now_ms: u64, limit: usize) -> Result<Vec<DueSchedule>, StoreError> {
        let rows = self.rows(
            "SELECT d.due_ms, d.session_id, d.schedule_id,
                    EXISTS (SELECT 1 FROM sessions s WHERE s.id = d.session_id)
             FROM schedules_due d WHERE d.due_ms <= $1
             ORDER BY d.due_ms LIMIT $2",
            &[&(now_ms.min(i64::MAX as u64) as i64), &(limit as i64)],
        )?;
        rows.iter()
            .map(|row| {
                let due_ms: i64 = row.try_get(0).map_err(corrupt)?;
                let owner: Uuid = row.try_get(1).map_err(corrupt)?;
                let session: bool = row.try_get(3).map_err(corrupt)?;
                Ok(DueSchedule {
                    due_ms: due_ms as u64,
                    owner: match session {
                        true => ScheduleOwner::Session(owner),
                        false => ScheduleOwner::App(owner),
                    },
                    schedule: row.try_get(2).map_err(corrupt)?,
                })
            })
            .collect()
    }

    fn secrets(&self) -> Result<Vec<SecretRecord>, StoreError> {
        self.records("SELECT record FROM secrets ORDER BY name", &[])
    }

    fn shared(&self) -> bool {
        true
    }

    fn put_component(&self, deployment: Uuid, bytes: &[u8]) -> Result<(), StoreError> {
        self.put_blob("component", deployment, bytes)
    }

    fn component(&self, deployment: Uuid) -> Result<Option<Vec<u8>>, StoreError> {
        self.blob("component", deployment)
    }

    fn hold_build(&self, deployment: Uuid) -> Result<Option<Box<dyn Send>>, StoreError> {
        Ok(Some(Box::new(self.claim_build(deployment)?)))
    }

    fn put_bundle(&self, deployment: Uuid, bytes: &[u8]) -> Result<(), StoreError> {
        self.put_blob("bundle", deployment, bytes)
    }

    fn bundle(&self, deployment: Uuid) -> Result<Option<Vec<u8>>, StoreError> {
        self.blob("bundle", deployment)
    }

    fn forget_build(&self, deployment: Uuid) -> Result<(), StoreError> {
        self.drop_build(deployment)
    }

    fn orphaned_builds(&self) -> Result<Vec<Uuid>, StoreError> {
        self.claim_orphaned_builds()
    }

    fn announce_cancel(&self, session: Uuid, turn: u32, by: &str) -> Result<(), StoreError> {
        let note = Change::cancel_note(session, turn, by);
        self.conn()?
            .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &note])
            .map_err(|e| pg(&e))?;
        Ok(())
    }

    fn hold_turn(&self, session: Uuid) -> Option<Box<dyn Send>> {
        Some(Box::new(self.hold(session)))
    }

    fn thread_session(
        &self,
        app: Uuid,
        route: &str,
        thread: &str,
    ) -> Result<Option<Uuid>, StoreError> {
        let rows = self.rows(
            "SELECT session_id FROM threads WHERE app_id = $1 AND route = $2 AND thread_id = $3",
            &[&app, &route, &thread],
        )?;
        rows.first()
            .map(|row| row.try_get(0).map_err(corrupt))
            .transpose()
    }

    fn webhooks(&self) -> Result<Vec<WebhookRecord>, StoreError> {
        self.records("SELECT record FROM webhooks ORDER BY id", &[])
    }

    fn due_deliveries(&self, now_ms: u64, limit: usize) -> Result<Vec<DeliveryRecord>, StoreError> {
        self.records(
            "SELECT record FROM webhooks_deliveries
             WHERE pending AND next_at_ms <= $1 AND lease_until_ms < $1
             ORDER BY (record->>'event_type') NOT LIKE 'approval.%', next_at_ms LIMIT $2",
            &[&(now_ms as i64), &(limit as i64)],
        )
    }

    fn deliveries(
        &self,
        webhook: Uuid,
        before: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<DeliveryRecord>, StoreError> {
        self.records(
            "SELECT record FROM webhooks_deliveries
             WHERE webhook_id = $1 AND ($2::uuid IS NULL OR id < $2)
             ORDER BY id DESC LIMIT $3",
            &[&webhook, &before, &(limit as i64)],
        )
    }

    fn write_engine(&self) -> Result<Box<dyn WriteEngine>, StoreError> {
        Ok(Box::new(PgWriter {
            target: self.target.clone(),
            client: None,
            lease: self.lease,
            live: self.live.clone(),
        }))
    }
}

/// Pending approvals as `client` sees them (see `Engine::pending_approvals`).
fn pending(
    client: &mut impl GenericClient,
    app_id: Option<Uuid>,
    after: Option<Uuid>,
    limit: usize,
) -> Result<Vec<ApprovalItem>, StoreError> {
    let rows = client
        .query(
            "SELECT s.record, e.seq, e.record FROM pending_approvals p
             JOIN sessions s ON s.id = p.session_id
             JOIN events e ON e.session_id = p.session_id AND e.seq = p.seq
             WHERE ($1::uuid IS NULL OR s.app_id = $1) AND ($2::uuid IS NULL OR e.id > $2)
             ORDER BY e.id LIMIT $3",
            &[&app_id, &after, &clamp(limit)],
        )
        .map_err(|e| pg(&e))?;
    rows.iter()
        .map(|row| {
            let session: SessionRecord =
                row.try_get::<_, Json<SessionRecord>>(0).map_err(corrupt)?.0;
            let seq: i64 = row.try_get(1).map_err(corrupt)?;
            let bytes: &[u8] = row.try_get(2).map_err(corrupt)?;
            let event = decode_record(seq as u64, bytes).ok_or_else(|| {
                corrupt(format!("approval event {}/{seq} is unreadable", session.id))
            })?;
            Ok(ApprovalItem { session, event })
        })
        .collect()
}
