//! A PostgreSQL write transaction as the domain sees it (`WriteTx`).
//!
//! Sessions are locked as they are loaded (`FOR UPDATE`). Events are
//! buffered and go in as one multi-row insert (before any journal read and
//! at the end); the sessions the batch changed go in as one upsert, which
//! also sets their owner and lease. Changes other hosts must learn of are
//! announced with one NOTIFY statement before the commit (delivered only if
//! it commits).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use postgres::Transaction;
use postgres::types::Json;
use uuid::Uuid;

use super::{Attempt, CHANNEL, Change, Held, LeaseOptions, lost_race, pg};
use crate::journal::{StoredEvent, decode_record};
use crate::store::StoreError;
use crate::store::engine::{AppLoad, EventRow, FeedRow, Owner, SessionRow, WriteTx};
use crate::store::error::corrupt;
use crate::store::records::{
    ApiKeyRecord, AppRecord, DeploymentRecord, IdempotencyRecord, SecretRecord, SessionRecord,
    SessionStatus,
};
use crate::store::webhook_records::{DeliveryRecord, DeliveryState, WebhookRecord};

pub(super) struct PgTx<'c> {
    txn: Transaction<'c>,
    lease: LeaseOptions,
    live: Arc<Held>,
    /// Events not yet sent: session, seq, id, type, record.
    events: Vec<(Uuid, i64, Uuid, &'static str, Vec<u8>)>,
    /// What to NOTIFY at commit.
    notes: Vec<String>,
    /// First and newest seq written per session, for the NOTIFY.
    written: HashMap<Uuid, (u64, u64)>,
    /// The error that lost a race, if one did (the writer retries).
    race: Option<postgres::Error>,
    /// Sessions locked by `lock_sessions`, until `load_session` takes them.
    locked: HashMap<Uuid, SessionRow>,
}

impl<'c> PgTx<'c> {
    pub(super) fn new(txn: Transaction<'c>, lease: LeaseOptions, live: Arc<Held>) -> Self {
        PgTx {
            txn,
            lease,
            live,
            events: Vec::new(),
            notes: Vec::new(),
            written: HashMap::new(),
            race: None,
            locked: HashMap::new(),
        }
    }

    /// The error that made the transaction lose a race, if one did.
    pub(super) fn take_race(&mut self) -> Option<postgres::Error> {
        self.race.take()
    }

    /// Maps an error, keeping it when it lost a race (the writer retries).
    fn lost(&mut self, err: postgres::Error) -> StoreError {
        let mapped = pg(&err);
        if lost_race(&err) {
            self.race = Some(err);
        }
        mapped
    }

    fn query(
        &mut self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<postgres::Row>, StoreError> {
        match self.txn.query(sql, params) {
            Ok(rows) => Ok(rows),
            Err(err) => Err(self.lost(err)),
        }
    }

    fn execute(
        &mut self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        match self.txn.execute(sql, params) {
            Ok(n) => Ok(n),
            Err(err) => Err(self.lost(err)),
        }
    }

    /// Sends the buffered events.
    fn flush(&mut self) -> Result<(), StoreError> {
        if self.events.is_empty() {
            return Ok(());
        }
        let events = std::mem::take(&mut self.events);
        let mut sessions = Vec::with_capacity(events.len());
        let mut seqs = Vec::with_capacity(events.len());
        let mut ids = Vec::with_capacity(events.len());
        let mut types = Vec::with_capacity(events.len());
        let mut records = Vec::with_capacity(events.len());
        for (session, seq, id, kind, record) in events {
            sessions.push(session);
            seqs.push(seq);
            ids.push(id);
            types.push(kind);
            records.push(record);
        }
        self.execute(
            "INSERT INTO events (session_id, seq, id, type, record)
             SELECT * FROM unnest($1::uuid[], $2::int8[], $3::uuid[], $4::text[], $5::bytea[])",
            &[&sessions, &seqs, &ids, &types, &records],
        )?;
        Ok(())
    }

    /// Announces what changed, then commits.
    pub(super) fn commit(mut self) -> Result<(), Attempt> {
        if let Err(err) = self.flush() {
            return Err(self.race.take().map_or(Attempt::Failed(err), Attempt::Lost));
        }
        let mut notes = std::mem::take(&mut self.notes);
        notes.extend(
            (self.written.iter())
                .map(|(session, (first, last))| Change::events_note(*session, *first, *last)),
        );
        if !notes.is_empty() {
            self.txn.execute(
                "SELECT pg_notify($1, note) FROM unnest($2::text[]) AS note",
                &[&CHANNEL, &notes],
            )?;
        }
        Ok(self.txn.commit()?)
    }

    fn record<T: serde::de::DeserializeOwned>(
        row: &postgres::Row,
        column: usize,
    ) -> Result<T, StoreError> {
        row.try_get::<_, Json<T>>(column)
            .map(|json| json.0)
            .map_err(corrupt)
    }

    fn one<T: serde::de::DeserializeOwned>(
        &mut self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Option<T>, StoreError> {
        match self.query(sql, params)?.first() {
            Some(row) => Self::record(row, 0).map(Some),
            None => Ok(None),
        }
    }

    fn all<T: serde::de::DeserializeOwned>(
        &mut self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<T>, StoreError> {
        let rows = self.query(sql, params)?;
        rows.iter().map(|row| Self::record(row, 0)).collect()
    }
}

impl WriteTx for PgTx<'_> {
    fn lock_sessions(&mut self, ids: &mut Vec<Uuid>) -> Result<(), StoreError> {
        ids.sort_unstable();
        ids.dedup();
        if ids.len() < 2 {
            return Ok(());
        }
        // In id order: two hosts' batches lock shared sessions in one order.
        let rows = self.query(
            "SELECT s.record, (SELECT COALESCE(max(seq) + 1, 0) FROM events WHERE session_id = s.id)
             FROM sessions s WHERE s.id = ANY($1) ORDER BY s.id FOR UPDATE OF s",
            &[&*ids],
        )?;
        for row in &rows {
            let record: SessionRecord = Self::record(row, 0)?;
            let next_seq: i64 = row.try_get(1).map_err(corrupt)?;
            let row = SessionRow {
                next_seq: next_seq as u64,
                record,
            };
            self.locked.insert(row.record.id, row);
        }
        Ok(())
    }

    fn load_session(&mut self, id: Uuid) -> Result<Option<SessionRow>, StoreError> {
        if let Some(row) = self.locked.remove(&id) {
            return Ok(Some(row));
        }
        let rows = self.query(
            "SELECT record, (SELECT COALESCE(max(seq) + 1, 0) FROM events WHERE session_id = $1)
             FROM sessions WHERE id = $1 FOR UPDATE",
            &[&id],
        )?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let record: SessionRecord = Self::record(row, 0)?;
        let next_seq: i64 = row.try_get(1).map_err(corrupt)?;
        Ok(Some(SessionRow {
            record,
            next_seq: next_seq as u64,
        }))
    }

    fn save_sessions(
        &mut self,
        touched: HashMap<Uuid, SessionRow>,
        dirty: &HashSet<Uuid>,
    ) -> Result<(), StoreError> {
        self.flush()?;
        if dirty.is_empty() {
            return Ok(());
        }
        let mut ids = Vec::with_capacity(dirty.len());
        let mut apps = Vec::with_capacity(dirty.len());
        let mut statuses = Vec::with_capacity(dirty.len());
        let mut owners: Vec<Option<Uuid>> = Vec::with_capacity(dirty.len());
        let mut records = Vec::with_capacity(dirty.len());
        for id in dirty {
            let Some(row) = touched.get(id) else { continue };
            let record = &row.record;
            ids.push(*id);
            apps.push(record.app_id);
            statuses.push(record.status.as_str());
            owners.push(match record.status {
                SessionStatus::Running => record.boot_id,
                _ => None,
            });
            records.push(serde_json::to_value(record).map_err(corrupt)?);
        }
        let lease = self.lease.ttl_secs();
        self.execute(
            "INSERT INTO sessions (id, app_id, status, owner, lease_expires, record)
             SELECT id, app, status, owner,
                    CASE WHEN owner IS NULL THEN NULL ELSE now() + make_interval(secs => $6) END,
                    record
             FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::uuid[], $5::jsonb[])
                  AS s(id, app, status, owner, record)
             ON CONFLICT (id) DO UPDATE SET status = excluded.status, owner = excluded.owner,
                 lease_expires = excluded.lease_expires, record = excluded.record",
            &[&ids, &apps, &statuses, &owners, &records, &lease],
        )?;
        Ok(())
    }

    fn insert_event(&mut self, event: EventRow<'_>) -> Result<(), StoreError> {
        let range = (self.written)
            .entry(event.session)
            .or_insert((event.seq, event.seq));
        range.1 = range.1.max(event.seq);
        self.events.push((
            event.session,
            event.seq as i64,
            event.id,
            event.event_type,
            event.record.to_vec(),
        ));
        Ok(())
    }

    fn last_turn_events(&mut self, session: Uuid) -> Result<Vec<StoredEvent>, StoreError> {
        self.flush()?;
        let rows = self.query(
            "SELECT seq, record FROM events WHERE session_id = $1 AND seq >= COALESCE(
                 (SELECT max(seq) FROM events WHERE session_id = $1 AND type = 'TURN_STARTED'), 0)
             ORDER BY seq",
            &[&session],
        )?;
        rows.iter()
            .map(|row| {
                let seq: i64 = row.try_get(0).map_err(corrupt)?;
                let bytes: &[u8] = row.try_get(1).map_err(corrupt)?;
                decode_record(seq as u64, bytes)
                    .ok_or_else(|| corrupt(format!("event {session}/{seq} is unreadable")))
            })
            .collect()
    }

    fn orphaned_turns(&mut self, _boot: Uuid) -> Result<Vec<SessionRecord>, StoreError> {
        // Expired leases only: a live host keeps renewing its own. This
        // host never settles a turn it is still running.
        let live = self.live.snapshot();
        self.all(
            "SELECT record FROM sessions
             WHERE status = 'running' AND (lease_expires IS NULL OR lease_expires < now())
               AND NOT (id = ANY($1))
             ORDER BY id LIMIT 64 FOR UPDATE SKIP LOCKED",
            &[&live],
        )
    }

    fn delete_session(&mut self, id: Uuid) -> Result<(), StoreError> {
        // What this transaction queued for it goes too.
        self.events.retain(|(session, ..)| *session != id);
        self.written.remove(&id);
        self.locked.remove(&id);
        for sql in [
            "DELETE FROM events WHERE session_id = $1",
            "DELETE FROM approval_feed WHERE session_id = $1",
            "DELETE FROM pending_approvals WHERE session_id = $1",
            "DELETE FROM threads WHERE session_id = $1",
            "DELETE FROM sessions WHERE id = $1",
        ] {
            self.execute(sql, &[&id])?;
        }
        self.notes.push(Change::deleted_note(id));
        Ok(())
    }

    fn app_load(&mut self, app: Uuid) -> Result<AppLoad, StoreError> {
        // The app's row is the lock: a host checking a cap waits for
        // another's commit, then counts what it committed (each statement
        // of a READ COMMITTED transaction sees the commits before it).
        self.execute("SELECT 1 FROM apps WHERE id = $1 FOR UPDATE", &[&app])?;
        let rows = self.query(
            "SELECT count(*), count(*) FILTER (WHERE status = 'running')
             FROM sessions WHERE app_id = $1 AND status <> 'ended'",
            &[&app],
        )?;
        let count = |column| -> Result<u64, StoreError> {
            let n: i64 = match rows.first() {
                Some(row) => row.try_get(column).map_err(corrupt)?,
                None => 0,
            };
            Ok(n.max(0) as u64)
        };
        Ok(AppLoad {
            open: count(0)?,
            running: count(1)?,
        })
    }

    fn user_open_sessions(&mut self, app: Uuid, user: &str) -> Result<Vec<Uuid>, StoreError> {
        // The same lock as `app_load`: two hosts never both take a user's
        // last place.
        self.execute("SELECT 1 FROM apps WHERE id = $1 FOR UPDATE", &[&app])?;
        let rows = self.query(
            "SELECT id FROM sessions
             WHERE app_id = $1 AND status <> 'ended' AND record->>'end_user' = $2",
            &[&app, &user],
        )?;
        rows.iter()
            .map(|row| row.try_get(0).map_err(corrupt))
            .collect()
    }

    fn owner_sessions(
        &mut self,
        app: Uuid,
        owner: &Owner,
    ) -> Result<Vec<(Uuid, bool)>, StoreError> {
        // The same lock as `app_load`: two hosts never both take an
        // owner's last place.
        self.execute("SELECT 1 FROM apps WHERE id = $1 FOR UPDATE", &[&app])?;
        let (sql, name) = match owner {
            Owner::User(user) => (
                "SELECT id, status = 'running' FROM sessions
                 WHERE app_id = $1 AND status <> 'ended' AND record->>'end_user' = $2",
                user,
            ),
            Owner::Source(source) => (
                "SELECT id, status = 'running' FROM sessions
                 WHERE app_id = $1 AND status <> 'ended' AND record->>'end_user' IS NULL
                 AND record->>'source' = $2",
                source,
            ),
        };
        let rows = self.query(sql, &[&app, name])?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get(0).map_err(corrupt)?,
                    row.try_get(1).map_err(corrupt)?,
                ))
            })
            .collect()
    }

    fn append_feed(&mut self, rows: &[FeedRow]) -> Result<u64, StoreError> {
        // The marks' row stays locked until the commit: another host's
        // append waits, so seqs become visible in order, without gaps.
        let n = rows.len() as i64;
        let head: i64 = match self
            .query(
                "UPDATE approval_feed_marks SET head = head + $1 RETURNING head",
                &[&n],
            )?
            .first()
        {
            Some(row) => row.try_get(0).map_err(corrupt)?,
            None => return Err(corrupt("the approvals feed has no marks row")),
        };
        let seqs: Vec<i64> = (head - n + 1..=head).collect();
        let sessions: Vec<Uuid> = rows.iter().map(|row| row.session).collect();
        let apps: Vec<Uuid> = rows.iter().map(|row| row.app).collect();
        let entries: Vec<&str> = rows.iter().map(|row| row.json.as_str()).collect();
        let now = crate::store::unix_ms(std::time::SystemTime::now()) as i64;
        self.execute(
            "INSERT INTO approval_feed (seq, session_id, app_id, at_ms, entry)
             SELECT seq, session, app, $4, entry
             FROM unnest($1::int8[], $2::uuid[], $3::uuid[], $5::text[]) AS f(seq, session, app, entry)",
            &[&seqs, &sessions, &apps, &now, &entries],
        )?;
        self.notes.push(Change::feed_note(head as u64));
        Ok(head as u64)
    }

    fn purge_feed(&mut self, before_ms: u64, limit: usize) -> Result<usize, StoreError> {
        let rows = self.query(
            "WITH gone AS (
                 DELETE FROM approval_feed WHERE seq IN (
                     SELECT seq FROM approval_feed WHERE at_ms < $1 ORDER BY seq LIMIT $2)
                 RETURNING seq)
             SELECT count(*), COALESCE(max(seq), 0) FROM gone",
            &[
                &(before_ms.min(i64::MAX as u64) as i64),
                &(limit.min(i64::MAX as usize) as i64),
            ],
        )?;
        let (count, last): (i64, i64) = match rows.first() {
            Some(row) => (
                row.try_get(0).map_err(corrupt)?,
                row.try_get(1).map_err(corrupt)?,
            ),
            None => (0, 0),
        };
        if count > 0 {
            self.execute(
                "UPDATE approval_feed_marks SET purged_through = GREATEST(purged_through, $1)",
                &[&last],
            )?;
        }
        Ok(count.max(0) as usize)
    }

    fn set_pending_approval(&mut self, session: Uuid, seq: Option<u64>) -> Result<(), StoreError> {
        match seq {
            Some(seq) => self.execute(
                "INSERT INTO pending_approvals (session_id, seq) VALUES ($1, $2)
                 ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq",
                &[&session, &(seq as i64)],
            )?,
            None => self.execute(
                "DELETE FROM pending_approvals WHERE session_id = $1",
                &[&session],
            )?,
        };
        Ok(())
    }

    fn thread_session(
        &mut self,
        app: Uuid,
        route: &str,
        thread: &str,
    ) -> Result<Option<Uuid>, StoreError> {
        let rows = self.query(
            "SELECT session_id FROM threads WHERE app_id = $1 AND route = $2 AND thread_id = $3",
            &[&app, &route, &thread],
        )?;
        rows.first()
            .map(|row| row.try_get(0).map_err(corrupt))
            .transpose()
    }

    fn put_thread(
        &mut self,
        app: Uuid,
        route: &str,
        thread: &str,
        session: Uuid,
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO threads (app_id, route, thread_id, session_id) VALUES ($1, $2, $3, $4)",
            &[&app, &route, &thread, &session],
        )?;
        Ok(())
    }

    fn app(&mut self, id_or_slug: &str) -> Result<Option<AppRecord>, StoreError> {
        match Uuid::parse_str(id_or_slug) {
            Ok(id) => self.one("SELECT record FROM apps WHERE id = $1", &[&id]),
            Err(_) => self.one("SELECT record FROM apps WHERE slug = $1", &[&id_or_slug]),
        }
    }

    fn app_for_update(&mut self, id_or_slug: &str) -> Result<Option<AppRecord>, StoreError> {
        // Locked: the record (its schedules, its current deployment) is
        // read, changed and written back by one host at a time.
        match Uuid::parse_str(id_or_slug) {
            Ok(id) => self.one("SELECT record FROM apps WHERE id = $1 FOR UPDATE", &[&id]),
            Err(_) => self.one(
                "SELECT record FROM apps WHERE slug = $1 FOR UPDATE",
                &[&id_or_slug],
            ),
        }
    }

    fn put_app(&mut self, app: &AppRecord, _new: bool) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO apps (id, slug, record) VALUES ($1, $2, $3)
             ON CONFLICT (id) DO UPDATE SET record = excluded.record",
            &[&app.id, &app.slug, &Json(app)],
        )?;
        self.notes.push(format!("a:{}", app.id));
        Ok(())
    }

    fn deployment(&mut self, id: Uuid) -> Result<Option<DeploymentRecord>, StoreError> {
        self.one("SELECT record FROM deployments WHERE id = $1", &[&id])
    }

    fn put_deployment(&mut self, record: &DeploymentRecord, _new: bool) -> Result<(), StoreError> {
        let status = serde_json::to_value(record.status).map_err(corrupt)?;
        let status = status.as_str().unwrap_or_default().to_string();
        self.execute(
            "INSERT INTO deployments (id, app_id, version, status, record) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (id) DO UPDATE SET status = excluded.status, record = excluded.record",
            &[&record.id, &record.app_id, &(record.version as i64), &status, &Json(record)],
        )?;
        Ok(())
    }

    fn version_exists(&mut self, app: Uuid, version: u64) -> Result<bool, StoreError> {
        let rows = self.query(
            "SELECT 1 FROM deployments WHERE app_id = $1 AND version = $2",
            &[&app, &(version as i64)],
        )?;
        Ok(!rows.is_empty())
    }

    fn latest_version(&mut self, app: Uuid) -> Result<Option<u64>, StoreError> {
        // Lock the app's row: two hosts deploying it at once get distinct versions.
        self.execute("SELECT 1 FROM apps WHERE id = $1 FOR UPDATE", &[&app])?;
        let rows = self.query(
            "SELECT max(version) FROM deployments WHERE app_id = $1",
            &[&app],
        )?;
        let version: Option<i64> = match rows.first() {
            Some(row) => row.try_get(0).map_err(corrupt)?,
            None => None,
        };
        Ok(version.map(|v| v as u64))
    }

    fn api_keys(&mut self) -> Result<Vec<ApiKeyRecord>, StoreError> {
        self.all("SELECT record FROM api_keys ORDER BY id FOR UPDATE", &[])
    }

    fn api_key(&mut self, id: &str) -> Result<Option<ApiKeyRecord>, StoreError> {
        self.one("SELECT record FROM api_keys WHERE id = $1", &[&id])
    }

    fn put_api_key(&mut self, record: &ApiKeyRecord) -> Result<(), StoreError> {
        let known = self.api_key(&record.id)?;
        self.execute(
            "INSERT INTO api_keys (id, record) VALUES ($1, $2)
             ON CONFLICT (id) DO UPDATE SET record = excluded.record",
            &[&record.id, &Json(record)],
        )?;
        // A last-used time is nobody else's business; a new or replaced key is.
        if known.is_none_or(|k| k.sha256 != record.sha256 || k.class != record.class) {
            self.notes.push(format!("k:{}", record.id));
        }
        Ok(())
    }

    fn remove_api_key(&mut self, id: &str) -> Result<(), StoreError> {
        self.execute("DELETE FROM api_keys WHERE id = $1", &[&id])?;
        self.notes.push(format!("k:{id}"));
        Ok(())
    }

    fn secret(&mut self, name: &str) -> Result<Option<SecretRecord>, StoreError> {
        self.one("SELECT record FROM secrets WHERE name = $1", &[&name])
    }

    fn put_secret(&mut self, record: &SecretRecord) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO secrets (name, record) VALUES ($1, $2)
             ON CONFLICT (name) DO UPDATE SET record = excluded.record",
            &[&record.name, &Json(record)],
        )?;
        self.notes.push(format!("s:{}", record.name));
        Ok(())
    }

    fn remove_secret(&mut self, name: &str) -> Result<bool, StoreError> {
        let removed = self.execute("DELETE FROM secrets WHERE name = $1", &[&name])?;
        self.notes.push(format!("s:{name}"));
        Ok(removed > 0)
    }

    fn idempotency(
        &mut self,
        key_id: &str,
        key: &str,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        // A row lock cannot hold a key that has no row yet: a transaction
        // lock on the key's hash makes another host's transaction for the
        // same key wait until this one ends, then find its answer.
        self.execute(
            "SELECT pg_advisory_xact_lock(hashtext('agenthost idempotency'), hashtext($1 || ' ' || $2))",
            &[&key_id, &key],
        )?;
        self.one(
            "SELECT record FROM idempotency WHERE key_id = $1 AND key = $2",
            &[&key_id, &key],
        )
    }

    fn put_idempotency(
        &mut self,
        key_id: &str,
        key: &str,
        record: &IdempotencyRecord,
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO idempotency (key_id, key, expires_at_ms, record) VALUES ($1, $2, $3, $4)
             ON CONFLICT (key_id, key) DO UPDATE
             SET expires_at_ms = excluded.expires_at_ms, record = excluded.record",
            &[&key_id, &key, &(record.expires_at_ms as i64), &Json(record)],
        )?;
        Ok(())
    }

    fn purge_idempotency(&mut self, now_ms: u64, limit: usize) -> Result<usize, StoreError> {
        let purged = self.execute(
            "DELETE FROM idempotency WHERE (key_id, key) IN (
                 SELECT key_id, key FROM idempotency WHERE expires_at_ms <= $1
                 ORDER BY expires_at_ms LIMIT $2 FOR UPDATE SKIP LOCKED)",
            &[&(now_ms as i64), &(limit as i64)],
        )?;
        Ok(purged as usize)
    }

    fn webhooks(&mut self) -> Result<Vec<WebhookRecord>, StoreError> {
        self.all("SELECT record FROM webhooks ORDER BY id", &[])
    }

    fn webhook(&mut self, id: Uuid) -> Result<Option<WebhookRecord>, StoreError> {
        // Not locked: claims read it for every delivery, and rows locked
        // in two orders could deadlock two hosts' claims.
        self.one("SELECT record FROM webhooks WHERE id = $1", &[&id])
    }

    fn put_webhook(&mut self, record: &WebhookRecord) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO webhooks (id, record) VALUES ($1, $2)
             ON CONFLICT (id) DO UPDATE SET record = excluded.record",
            &[&record.id, &Json(record)],
        )?;
        Ok(())
    }

    fn put_schedule_due(
        &mut self,
        due_ms: u64,
        session: Uuid,
        schedule: Uuid,
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO schedules_due (due_ms, session_id, schedule_id) VALUES ($1, $2, $3)
             ON CONFLICT DO NOTHING",
            &[&(due_ms as i64), &session, &schedule],
        )?;
        Ok(())
    }

    fn remove_webhook(&mut self, id: Uuid) -> Result<bool, StoreError> {
        self.execute(
            "DELETE FROM webhooks_deliveries WHERE webhook_id = $1",
            &[&id],
        )?;
        Ok(self.execute("DELETE FROM webhooks WHERE id = $1", &[&id])? > 0)
    }

    fn delivery(&mut self, id: Uuid) -> Result<Option<DeliveryRecord>, StoreError> {
        self.one(
            "SELECT record FROM webhooks_deliveries WHERE id = $1 FOR UPDATE",
            &[&id],
        )
    }

    fn put_delivery(&mut self, record: &DeliveryRecord) -> Result<(), StoreError> {
        let pending = record.state == DeliveryState::Pending;
        self.execute(
            "INSERT INTO webhooks_deliveries
                 (id, webhook_id, pending, next_at_ms, lease_until_ms, record)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (id) DO UPDATE SET pending = excluded.pending,
                 next_at_ms = excluded.next_at_ms, lease_until_ms = excluded.lease_until_ms,
                 record = excluded.record",
            &[
                &record.id,
                &record.webhook_id,
                &pending,
                &(record.next_at_ms as i64),
                &(record.lease_until_ms as i64),
                &Json(record),
            ],
        )?;
        Ok(())
    }

    fn purge_deliveries(&mut self, before_ms: u64, limit: usize) -> Result<usize, StoreError> {
        let bound = Uuid::from_u128(u128::from(before_ms) << 80);
        let purged = self.execute(
            "DELETE FROM webhooks_deliveries WHERE id IN (
                 SELECT id FROM webhooks_deliveries WHERE NOT pending AND id < $1
                 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)",
            &[&bound, &(limit as i64)],
        )?;
        Ok(purged as usize)
    }

    fn pending_deliveries(&mut self, webhook: Uuid) -> Result<u64, StoreError> {
        let rows = self.query(
            "SELECT count(*) FROM webhooks_deliveries WHERE webhook_id = $1 AND pending",
            &[&webhook],
        )?;
        let n: i64 = rows
            .first()
            .map_or(Ok(0), |row| row.try_get(0))
            .map_err(corrupt)?;
        Ok(n as u64)
    }

    fn remove_schedule_due(
        &mut self,
        due_ms: u64,
        session: Uuid,
        schedule: Uuid,
    ) -> Result<(), StoreError> {
        self.execute(
            "DELETE FROM schedules_due WHERE due_ms = $1 AND session_id = $2 AND schedule_id = $3",
            &[&(due_ms as i64), &session, &schedule],
        )?;
        Ok(())
    }

    fn end_user_not_before(&mut self, user_key: &str) -> Result<Option<u64>, StoreError> {
        let rows = self.query(
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

    fn put_end_user_not_before(
        &mut self,
        user_key: &str,
        not_before_ms: u64,
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO endusers_not_before (user_key, not_before_ms) VALUES ($1, $2)
             ON CONFLICT (user_key) DO UPDATE SET not_before_ms = excluded.not_before_ms",
            &[&user_key, &(not_before_ms as i64)],
        )?;
        self.notes
            .push(Change::revoked_user_note(user_key, not_before_ms));
        Ok(())
    }

    fn end_user_turns(&mut self, user_key: &str) -> Result<Vec<u64>, StoreError> {
        // The user's row is the lock: made first if it is missing, so a
        // host counting waits for another's commit, then reads it.
        self.execute(
            "INSERT INTO endusers_turns (user_key, turns_ms) VALUES ($1, '{}')
             ON CONFLICT (user_key) DO NOTHING",
            &[&user_key],
        )?;
        let rows = self.query(
            "SELECT turns_ms FROM endusers_turns WHERE user_key = $1 FOR UPDATE",
            &[&user_key],
        )?;
        let turns: Vec<i64> = match rows.first() {
            Some(row) => row.try_get(0).map_err(corrupt)?,
            None => Vec::new(),
        };
        Ok(turns.into_iter().map(|ms| ms as u64).collect())
    }

    fn put_end_user_turns(&mut self, user_key: &str, turns_ms: &[u64]) -> Result<(), StoreError> {
        let turns: Vec<i64> = turns_ms.iter().map(|ms| *ms as i64).collect();
        self.execute(
            "INSERT INTO endusers_turns (user_key, turns_ms) VALUES ($1, $2)
             ON CONFLICT (user_key) DO UPDATE SET turns_ms = excluded.turns_ms",
            &[&user_key, &turns],
        )?;
        Ok(())
    }
}
