//! A redb write transaction as the domain sees it (`WriteTx`). The
//! journal's two tables are opened once per transaction and kept open
//! (redb refuses to open a table twice in one transaction, and opening it
//! per command cost ~6% of the writer's time); the others per call.

use std::collections::{HashMap, HashSet};

use redb::{ReadableTable, Table, TableDefinition, WriteTransaction};
use uuid::Uuid;

use super::{storage, tables, webhooks};
use crate::journal::{EventType, StoredEvent, decode_record, event_id, seq_of};
use crate::store::StoreError;
use crate::store::engine::{AppLoad, EventRow, FeedRow, Owner, SessionRow, WriteTx};
use crate::store::error::corrupt;
use crate::store::records::{
    ApiKeyRecord, AppRecord, DeploymentRecord, IdempotencyRecord, SecretRecord, SessionRecord,
    SessionStatus,
};
use crate::store::webhook_records::{DeliveryRecord, WebhookRecord};

pub(super) struct RedbTx<'t> {
    txn: &'t WriteTransaction,
    events: Table<'t, (u128, u64), &'static [u8]>,
    ids: Table<'t, u128, (u128, u64)>,
    /// The writer's committed view of the sessions it touched before.
    cache: &'t HashMap<Uuid, SessionRow>,
    touched: HashMap<Uuid, SessionRow>,
    /// Sessions deleted: the writer's cache forgets them.
    deleted: Vec<Uuid>,
}

impl<'t> RedbTx<'t> {
    pub(super) fn new(
        txn: &'t WriteTransaction,
        cache: &'t HashMap<Uuid, SessionRow>,
    ) -> Result<Self, StoreError> {
        Ok(RedbTx {
            txn,
            events: txn.open_table(tables::EVENTS).map_err(storage)?,
            ids: txn.open_table(tables::EVENT_IDS).map_err(storage)?,
            cache,
            touched: HashMap::new(),
            deleted: Vec::new(),
        })
    }

    /// The sessions as the transaction leaves them, and those it deleted,
    /// for the writer's cache.
    pub(super) fn into_touched(self) -> (HashMap<Uuid, SessionRow>, Vec<Uuid>) {
        (self.touched, self.deleted)
    }

    fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        table: TableDefinition<u128, &[u8]>,
        id: Uuid,
    ) -> Result<Option<T>, StoreError> {
        let table = self.txn.open_table(table).map_err(storage)?;
        let value = table.get(id.as_u128()).map_err(storage)?;
        match value {
            Some(v) => serde_json::from_slice(v.value()).map(Some).map_err(corrupt),
            None => Ok(None),
        }
    }

    fn put_json(
        &self,
        table: TableDefinition<u128, &[u8]>,
        id: Uuid,
        value: &impl serde::Serialize,
    ) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(value).map_err(corrupt)?;
        let mut table = self.txn.open_table(table).map_err(storage)?;
        table
            .insert(id.as_u128(), bytes.as_slice())
            .map_err(storage)?;
        Ok(())
    }

    fn get_named<T: serde::de::DeserializeOwned>(
        &self,
        table: TableDefinition<&str, &[u8]>,
        key: &str,
    ) -> Result<Option<T>, StoreError> {
        let table = self.txn.open_table(table).map_err(storage)?;
        let value = table.get(key).map_err(storage)?;
        match value {
            Some(v) => serde_json::from_slice(v.value()).map(Some).map_err(corrupt),
            None => Ok(None),
        }
    }

    fn put_named(
        &self,
        table: TableDefinition<&str, &[u8]>,
        key: &str,
        value: &impl serde::Serialize,
    ) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(value).map_err(corrupt)?;
        let mut table = self.txn.open_table(table).map_err(storage)?;
        table.insert(key, bytes.as_slice()).map_err(storage)?;
        Ok(())
    }

    fn remove_named(
        &self,
        table: TableDefinition<&str, &[u8]>,
        key: &str,
    ) -> Result<bool, StoreError> {
        let mut table = self.txn.open_table(table).map_err(storage)?;
        let removed = table.remove(key).map_err(storage)?.is_some();
        Ok(removed)
    }
}

impl WriteTx for RedbTx<'_> {
    fn load_session(&mut self, id: Uuid) -> Result<Option<SessionRow>, StoreError> {
        if self.deleted.contains(&id) {
            return Ok(None);
        }
        if let Some(row) = self.cache.get(&id) {
            return Ok(Some(row.clone()));
        }
        let Some(record) = self.get_json::<SessionRecord>(tables::SESSIONS, id)? else {
            return Ok(None);
        };
        let key = id.as_u128();
        let next_seq = match self
            .events
            .range((key, 0)..=(key, u64::MAX))
            .map_err(storage)?
            .next_back()
        {
            Some(row) => row.map_err(storage)?.0.value().1 + 1,
            None => 0,
        };
        Ok(Some(SessionRow { record, next_seq }))
    }

    fn save_sessions(
        &mut self,
        touched: HashMap<Uuid, SessionRow>,
        dirty: &HashSet<Uuid>,
    ) -> Result<(), StoreError> {
        let mut open = self
            .txn
            .open_table(tables::OPEN_SESSIONS)
            .map_err(storage)?;
        let mut owners = (self.txn)
            .open_table(tables::OPEN_BY_OWNER)
            .map_err(storage)?;
        for id in dirty {
            if let Some(session) = touched.get(id) {
                self.put_json(tables::SESSIONS, *id, &session.record)?;
                let record = &session.record;
                let entry = tables::open_entry(record.status);
                // Most saves keep the status: nothing to change in the index.
                let before = self
                    .cache
                    .get(id)
                    .map(|s| tables::open_entry(s.record.status));
                if before == Some(entry) {
                    continue;
                }
                let key = (record.app_id.as_u128(), id.as_u128());
                match entry {
                    Some(running) => open.insert(key, running).map_err(storage)?,
                    None => open.remove(key).map_err(storage)?,
                };
                // A session's owner never changes: only its entry does.
                if let Some(owner) = Owner::of(record) {
                    let owner = owner.key();
                    let key = (record.app_id.as_u128(), owner.as_str(), id.as_u128());
                    match entry {
                        Some(running) => owners.insert(key, running).map_err(storage)?,
                        None => owners.remove(key).map_err(storage)?,
                    };
                }
            }
        }
        drop((open, owners));
        self.touched = touched;
        Ok(())
    }

    /// Ids carry their seq: no entry in `EVENT_IDS` (see `journal::event_id`).
    fn event_id(&self, seq: u64) -> Uuid {
        event_id(seq)
    }

    fn insert_event(&mut self, event: EventRow<'_>) -> Result<(), StoreError> {
        let session = event.session.as_u128();
        self.events
            .insert((session, event.seq), event.record)
            .map_err(storage)?;
        // Only an id that does not carry its seq (a UUIDv7: older events,
        // or a seq past `MAX_SEQ`) needs the index.
        if seq_of(event.id) != Some(event.seq) {
            self.ids
                .insert(event.id.as_u128(), (session, event.seq))
                .map_err(storage)?;
        }
        Ok(())
    }

    fn last_turn_events(&mut self, session: Uuid) -> Result<Vec<StoredEvent>, StoreError> {
        let key = session.as_u128();
        let mut out = Vec::new();
        for row in self
            .events
            .range((key, 0)..=(key, u64::MAX))
            .map_err(storage)?
            .rev()
        {
            let (k, v) = row.map_err(storage)?;
            let seq = k.value().1;
            let event = decode_record(seq, v.value())
                .ok_or_else(|| corrupt(format!("event {session}/{seq} is unreadable")))?;
            let start = event.is(EventType::TurnStarted);
            out.push(event);
            if start {
                break;
            }
        }
        out.reverse();
        Ok(out)
    }

    fn orphaned_turns(&mut self, boot: Uuid) -> Result<Vec<SessionRecord>, StoreError> {
        let table = self.txn.open_table(tables::SESSIONS).map_err(storage)?;
        let mut stale = Vec::new();
        for row in table.iter().map_err(storage)? {
            let (_, v) = row.map_err(storage)?;
            let record: SessionRecord = serde_json::from_slice(v.value()).map_err(corrupt)?;
            if record.status == SessionStatus::Running && record.boot_id != Some(boot) {
                stale.push(record);
            }
        }
        Ok(stale)
    }

    fn delete_session(&mut self, id: Uuid) -> Result<(), StoreError> {
        let key = id.as_u128();
        let mut ids = Vec::new();
        for row in self
            .events
            .range((key, 0)..=(key, u64::MAX))
            .map_err(storage)?
        {
            let (k, v) = row.map_err(storage)?;
            let seq = k.value().1;
            let event = decode_record(seq, v.value())
                .ok_or_else(|| corrupt(format!("event {id}/{seq} is unreadable")))?;
            if seq_of(event.id) != Some(seq) {
                ids.push(event.id.as_u128());
            }
        }
        for event_id in ids {
            self.ids.remove(event_id).map_err(storage)?;
        }
        self.events
            .retain_in((key, 0)..=(key, u64::MAX), |_, _| false)
            .map_err(storage)?;
        // The AG-UI threads that name it: all under its app and route.
        if let Some(record) = self.get_json::<SessionRecord>(tables::SESSIONS, id)? {
            let (app, route) = (record.app_id.as_u128(), record.route.as_str());
            let mut open = self
                .txn
                .open_table(tables::OPEN_SESSIONS)
                .map_err(storage)?;
            open.remove((app, key)).map_err(storage)?;
            drop(open);
            if let Some(owner) = Owner::of(&record) {
                let mut owners = (self.txn)
                    .open_table(tables::OPEN_BY_OWNER)
                    .map_err(storage)?;
                owners
                    .remove((app, owner.key().as_str(), key))
                    .map_err(storage)?;
            }
            // The smallest route after `route`: every key of `route` sorts before it.
            let next = format!("{route}\0");
            let mut threads = self.txn.open_table(tables::THREADS).map_err(storage)?;
            (threads.retain_in((app, route, "")..(app, next.as_str(), ""), |_, session| {
                session != key
            }))
            .map_err(storage)?;
        }
        let mut sessions = self.txn.open_table(tables::SESSIONS).map_err(storage)?;
        sessions.remove(key).map_err(storage)?;
        drop(sessions);
        self.set_pending_approval(id, None)?;
        super::feed::delete_session(self.txn, id)?;
        self.touched.remove(&id);
        self.deleted.push(id);
        Ok(())
    }

    fn append_feed(&mut self, rows: &[FeedRow]) -> Result<u64, StoreError> {
        super::feed::append(self.txn, rows)
    }

    fn purge_feed(&mut self, before_ms: u64, limit: usize) -> Result<usize, StoreError> {
        super::feed::purge(self.txn, before_ms, limit)
    }

    fn app_load(&mut self, app: Uuid) -> Result<AppLoad, StoreError> {
        let open = self
            .txn
            .open_table(tables::OPEN_SESSIONS)
            .map_err(storage)?;
        let key = app.as_u128();
        let mut load = AppLoad::default();
        for row in open.range((key, 0)..=(key, u128::MAX)).map_err(storage)? {
            let (_, running) = row.map_err(storage)?;
            load.open += 1;
            load.running += u64::from(running.value());
        }
        Ok(load)
    }

    fn user_open_sessions(&mut self, app: Uuid, user: &str) -> Result<Vec<Uuid>, StoreError> {
        let open = (self.txn)
            .open_table(tables::OPEN_SESSIONS)
            .map_err(storage)?;
        let key = app.as_u128();
        let mut ids = Vec::new();
        for row in open.range((key, 0)..=(key, u128::MAX)).map_err(storage)? {
            let (id, _) = row.map_err(storage)?;
            ids.push(Uuid::from_u128(id.value().1));
        }
        drop(open);
        let mut owned = Vec::new();
        for id in ids {
            let record: Option<SessionRecord> = self.get_json(tables::SESSIONS, id)?;
            if record.is_some_and(|r| r.end_user.as_deref() == Some(user)) {
                owned.push(id);
            }
        }
        Ok(owned)
    }

    fn owner_sessions(
        &mut self,
        app: Uuid,
        owner: &Owner,
    ) -> Result<Vec<(Uuid, bool)>, StoreError> {
        let owners = (self.txn)
            .open_table(tables::OPEN_BY_OWNER)
            .map_err(storage)?;
        let (app, owner) = (app.as_u128(), owner.key());
        let range = (app, owner.as_str(), 0)..=(app, owner.as_str(), u128::MAX);
        let mut held = Vec::new();
        for row in owners.range(range).map_err(storage)? {
            let (key, running) = row.map_err(storage)?;
            held.push((Uuid::from_u128(key.value().2), running.value() == 1));
        }
        Ok(held)
    }

    fn set_pending_approval(&mut self, session: Uuid, seq: Option<u64>) -> Result<(), StoreError> {
        let mut index = (self.txn)
            .open_table(tables::PENDING_APPROVALS)
            .map_err(storage)?;
        match seq {
            Some(seq) => index.insert(session.as_u128(), seq).map_err(storage)?,
            None => index.remove(session.as_u128()).map_err(storage)?,
        };
        Ok(())
    }

    fn thread_session(
        &mut self,
        app: Uuid,
        route: &str,
        thread: &str,
    ) -> Result<Option<Uuid>, StoreError> {
        let table = self.txn.open_table(tables::THREADS).map_err(storage)?;
        let session = table.get((app.as_u128(), route, thread)).map_err(storage)?;
        Ok(session.map(|v| Uuid::from_u128(v.value())))
    }

    fn put_thread(
        &mut self,
        app: Uuid,
        route: &str,
        thread: &str,
        session: Uuid,
    ) -> Result<(), StoreError> {
        let mut table = self.txn.open_table(tables::THREADS).map_err(storage)?;
        table
            .insert((app.as_u128(), route, thread), session.as_u128())
            .map_err(storage)?;
        Ok(())
    }

    fn app(&mut self, id_or_slug: &str) -> Result<Option<AppRecord>, StoreError> {
        let id = match Uuid::parse_str(id_or_slug) {
            Ok(id) => id,
            Err(_) => {
                let slugs = self.txn.open_table(tables::APP_SLUGS).map_err(storage)?;
                let id = slugs.get(id_or_slug).map_err(storage)?.map(|v| v.value());
                match id {
                    Some(id) => Uuid::from_u128(id),
                    None => return Ok(None),
                }
            }
        };
        self.get_json(tables::APPS, id)
    }

    fn put_app(&mut self, app: &AppRecord, new: bool) -> Result<(), StoreError> {
        self.put_json(tables::APPS, app.id, app)?;
        if new {
            let mut slugs = self.txn.open_table(tables::APP_SLUGS).map_err(storage)?;
            slugs
                .insert(app.slug.as_str(), app.id.as_u128())
                .map_err(storage)?;
        }
        Ok(())
    }

    fn deployment(&mut self, id: Uuid) -> Result<Option<DeploymentRecord>, StoreError> {
        self.get_json(tables::DEPLOYMENTS, id)
    }

    fn put_deployment(&mut self, record: &DeploymentRecord, new: bool) -> Result<(), StoreError> {
        if new {
            let mut index = (self.txn)
                .open_table(tables::APP_DEPLOYMENTS)
                .map_err(storage)?;
            index
                .insert(
                    (record.app_id.as_u128(), record.version),
                    record.id.as_u128(),
                )
                .map_err(storage)?;
        }
        self.put_json(tables::DEPLOYMENTS, record.id, record)
    }

    fn version_exists(&mut self, app: Uuid, version: u64) -> Result<bool, StoreError> {
        let index = (self.txn)
            .open_table(tables::APP_DEPLOYMENTS)
            .map_err(storage)?;
        let found = index.get((app.as_u128(), version)).map_err(storage)?;
        Ok(found.is_some())
    }

    fn latest_version(&mut self, app: Uuid) -> Result<Option<u64>, StoreError> {
        let index = (self.txn)
            .open_table(tables::APP_DEPLOYMENTS)
            .map_err(storage)?;
        let key = app.as_u128();
        let last = index
            .range((key, 0)..=(key, u64::MAX))
            .map_err(storage)?
            .next_back();
        match last {
            Some(row) => Ok(Some(row.map_err(storage)?.0.value().1)),
            None => Ok(None),
        }
    }

    fn api_keys(&mut self) -> Result<Vec<ApiKeyRecord>, StoreError> {
        let table = self.txn.open_table(tables::API_KEYS).map_err(storage)?;
        let mut out = Vec::new();
        for row in table.iter().map_err(storage)? {
            let (_, v) = row.map_err(storage)?;
            out.push(serde_json::from_slice(v.value()).map_err(corrupt)?);
        }
        Ok(out)
    }

    fn api_key(&mut self, id: &str) -> Result<Option<ApiKeyRecord>, StoreError> {
        self.get_named(tables::API_KEYS, id)
    }

    fn put_api_key(&mut self, record: &ApiKeyRecord) -> Result<(), StoreError> {
        self.put_named(tables::API_KEYS, &record.id, record)
    }

    fn remove_api_key(&mut self, id: &str) -> Result<(), StoreError> {
        self.remove_named(tables::API_KEYS, id).map(|_| ())
    }

    fn secret(&mut self, name: &str) -> Result<Option<SecretRecord>, StoreError> {
        self.get_named(tables::SECRETS, name)
    }

    fn put_secret(&mut self, record: &SecretRecord) -> Result<(), StoreError> {
        self.put_named(tables::SECRETS, &record.name, record)
    }

    fn remove_secret(&mut self, name: &str) -> Result<bool, StoreError> {
        self.remove_named(tables::SECRETS, name)
    }

    fn idempotency(
        &mut self,
        key_id: &str,
        key: &str,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        let table = self.txn.open_table(tables::IDEMPOTENCY).map_err(storage)?;
        let value = table.get((key_id, key)).map_err(storage)?;
        match value {
            Some(v) => serde_json::from_slice(v.value()).map(Some).map_err(corrupt),
            None => Ok(None),
        }
    }

    fn put_idempotency(
        &mut self,
        key_id: &str,
        key: &str,
        record: &IdempotencyRecord,
    ) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(record).map_err(corrupt)?;
        let mut table = self.txn.open_table(tables::IDEMPOTENCY).map_err(storage)?;
        let mut expiry = (self.txn.open_table(tables::IDEMPOTENCY_EXPIRY)).map_err(storage)?;
        let replaced = table
            .insert((key_id, key), bytes.as_slice())
            .map_err(storage)?
            .map(|old| serde_json::from_slice::<IdempotencyRecord>(old.value()));
        if let Some(old) = replaced {
            let old = old.map_err(corrupt)?;
            expiry
                .remove((old.expires_at_ms, key_id, key))
                .map_err(storage)?;
        }
        expiry
            .insert((record.expires_at_ms, key_id, key), ())
            .map_err(storage)?;
        Ok(())
    }

    fn purge_idempotency(&mut self, now_ms: u64, limit: usize) -> Result<usize, StoreError> {
        let mut table = self.txn.open_table(tables::IDEMPOTENCY).map_err(storage)?;
        let mut expiry = (self.txn.open_table(tables::IDEMPOTENCY_EXPIRY)).map_err(storage)?;
        let mut expired = Vec::new();
        let end = (now_ms.saturating_add(1), "", "");
        for entry in expiry.range(..end).map_err(storage)? {
            if expired.len() == limit {
                break;
            }
            let (entry, _) = entry.map_err(storage)?;
            let (at, key_id, key) = entry.value();
            expired.push((at, key_id.to_owned(), key.to_owned()));
        }
        for (at, key_id, key) in &expired {
            expiry
                .remove((*at, key_id.as_str(), key.as_str()))
                .map_err(storage)?;
            table
                .remove((key_id.as_str(), key.as_str()))
                .map_err(storage)?;
        }
        Ok(expired.len())
    }

    fn webhooks(&mut self) -> Result<Vec<WebhookRecord>, StoreError> {
        webhooks::tx_webhooks(self.txn)
    }

    fn webhook(&mut self, id: Uuid) -> Result<Option<WebhookRecord>, StoreError> {
        webhooks::tx_webhook(self.txn, id)
    }

    fn put_webhook(&mut self, record: &WebhookRecord) -> Result<(), StoreError> {
        webhooks::put_webhook(self.txn, record)
    }

    fn remove_webhook(&mut self, id: Uuid) -> Result<bool, StoreError> {
        webhooks::remove_webhook(self.txn, id)
    }

    fn delivery(&mut self, id: Uuid) -> Result<Option<DeliveryRecord>, StoreError> {
        webhooks::delivery(self.txn, id)
    }

    fn put_delivery(&mut self, record: &DeliveryRecord) -> Result<(), StoreError> {
        webhooks::put_delivery(self.txn, record)
    }

    fn pending_deliveries(&mut self, webhook: Uuid) -> Result<u64, StoreError> {
        webhooks::pending_count(self.txn, webhook)
    }

    fn purge_deliveries(&mut self, before_ms: u64, limit: usize) -> Result<usize, StoreError> {
        webhooks::purge(self.txn, before_ms, limit)
    }

    fn put_schedule_due(
        &mut self,
        due_ms: u64,
        session: Uuid,
        schedule: Uuid,
    ) -> Result<(), StoreError> {
        let mut table = self
            .txn
            .open_table(tables::SCHEDULES_DUE)
            .map_err(storage)?;
        (table.insert((due_ms, session.as_u128(), schedule.as_u128()), ())).map_err(storage)?;
        Ok(())
    }

    fn remove_schedule_due(
        &mut self,
        due_ms: u64,
        session: Uuid,
        schedule: Uuid,
    ) -> Result<(), StoreError> {
        let mut table = self
            .txn
            .open_table(tables::SCHEDULES_DUE)
            .map_err(storage)?;
        (table.remove((due_ms, session.as_u128(), schedule.as_u128()))).map_err(storage)?;
        Ok(())
    }

    fn end_user_not_before(&mut self, user_key: &str) -> Result<Option<u64>, StoreError> {
        super::end_users::tx_not_before(self.txn, user_key)
    }

    fn put_end_user_not_before(
        &mut self,
        user_key: &str,
        not_before_ms: u64,
    ) -> Result<(), StoreError> {
        super::end_users::put_not_before(self.txn, user_key, not_before_ms)
    }

    fn end_user_turns(&mut self, user_key: &str) -> Result<Vec<u64>, StoreError> {
        super::end_users::turns(self.txn, user_key)
    }

    fn put_end_user_turns(&mut self, user_key: &str, turns_ms: &[u64]) -> Result<(), StoreError> {
        super::end_users::put_turns(self.txn, user_key, turns_ms)
    }
}
