//! The redb table definitions: the on-disk layout (a compatibility contract).
//!
//! Uuids are stored as `u128` (big-endian value of the 16 bytes), so keys of
//! UUIDv7 ids sort by creation time.

use redb::{Database, ReadableTable, TableDefinition, TableHandle};

use super::storage;
use crate::store::StoreError;
use crate::store::engine::Owner;
use crate::store::error::corrupt;
use crate::store::records::{SessionRecord, SessionStatus};

/// (session, seq) → event record (see `journal::encode_record`).
pub(super) const EVENTS: TableDefinition<(u128, u64), &[u8]> = TableDefinition::new("events_v1");
/// event id → (session, seq): resolves a Last-Event-ID whose id does not
/// carry its seq (`journal::event_id`): every event of older files, and
/// one past 2^40 events. Newer events have no entry.
pub(super) const EVENT_IDS: TableDefinition<u128, (u128, u64)> =
    TableDefinition::new("event_ids_v1");
/// session id → SessionRecord (JSON).
pub(super) const SESSIONS: TableDefinition<u128, &[u8]> = TableDefinition::new("sessions_v1");
/// app id → AppRecord (JSON).
pub(super) const APPS: TableDefinition<u128, &[u8]> = TableDefinition::new("apps_v1");
/// app slug → app id.
pub(super) const APP_SLUGS: TableDefinition<&str, u128> = TableDefinition::new("app_slugs_v1");
/// deployment id → DeploymentRecord (JSON).
pub(super) const DEPLOYMENTS: TableDefinition<u128, &[u8]> = TableDefinition::new("deployments_v1");
/// (app id, version) → deployment id.
pub(super) const APP_DEPLOYMENTS: TableDefinition<(u128, u64), u128> =
    TableDefinition::new("app_deployments_v1");
/// session id → seq of its TOOL_APPROVAL_REQUIRED, for sessions awaiting a decision.
pub(super) const PENDING_APPROVALS: TableDefinition<u128, u64> =
    TableDefinition::new("pending_approvals_v1");
/// secret name → SecretRecord (JSON, sealed).
pub(super) const SECRETS: TableDefinition<&str, &[u8]> = TableDefinition::new("secrets_v1");
/// key id → ApiKeyRecord (JSON).
pub(super) const API_KEYS: TableDefinition<&str, &[u8]> = TableDefinition::new("api_keys_v1");

/// (app id, route, AG-UI thread id) → session id (`store::domain::threads`).
pub(super) const THREADS: TableDefinition<(u128, &str, &str), u128> =
    TableDefinition::new("threads_v1");

/// (API key id, Idempotency-Key) → IdempotencyRecord (JSON) (`store::domain::idempotency`).
pub(super) const IDEMPOTENCY: TableDefinition<(&str, &str), &[u8]> =
    TableDefinition::new("idempotency_v1");
/// (expires at, Unix ms; API key id, Idempotency-Key) → (): the purge's order.
pub(super) const IDEMPOTENCY_EXPIRY: TableDefinition<(u64, &str, &str), ()> =
    TableDefinition::new("idempotency_expiry_v1");
/// (app id, session id) → 1 if it runs a turn, else 0, for every session
/// not ended: an app's load (`store::domain::quotas`) is one range of it.
/// Derived from SESSIONS (filled from it when a file predates the table).
pub(super) const OPEN_SESSIONS: TableDefinition<(u128, u128), u8> =
    TableDefinition::new("open_sessions_v1");
/// (app id, owner's key (`Owner::key`), session id) → 1 if it runs a turn,
/// else 0, for every session not ended that has an owner: an end user's or
/// a bare-key address's share of the app (`store::domain::quotas`) is one
/// range of it. Derived from SESSIONS (filled from it when a file predates
/// the table).
pub(super) const OPEN_BY_OWNER: TableDefinition<(u128, &str, u128), u8> =
    TableDefinition::new("open_sessions_by_owner_v1");

/// approvals-feed seq → (appended at, Unix ms; session id; app id;
/// `ApprovalFeedEntry` JSON) (`store::domain::feed`).
pub(super) const APPROVAL_FEED: TableDefinition<u64, (u64, u128, u128, &str)> =
    TableDefinition::new("approval_feed_v1");
/// (session id, feed seq) → (): a session's feed entries, for its deletion.
pub(super) const APPROVAL_FEED_SESSIONS: TableDefinition<(u128, u64), ()> =
    TableDefinition::new("approval_feed_sessions_v1");
/// The feed's marks: `head` (the newest seq given) and `purged_through`.
pub(super) const APPROVAL_FEED_MARKS: TableDefinition<&str, u64> =
    TableDefinition::new("approval_feed_marks_v1");

/// webhook id → WebhookRecord (JSON) (`store::domain::webhooks`).
pub(super) const WEBHOOKS: TableDefinition<u128, &[u8]> =
    TableDefinition::new("webhooks_endpoints_v1");
/// delivery id → DeliveryRecord (JSON).
pub(super) const WEBHOOK_DELIVERIES: TableDefinition<u128, &[u8]> =
    TableDefinition::new("webhooks_deliveries_v1");
/// (webhook id, delivery id) → (): an endpoint's deliveries.
pub(super) const WEBHOOK_BY_ENDPOINT: TableDefinition<(u128, u128), ()> =
    TableDefinition::new("webhooks_by_endpoint_v1");
/// (webhook id, delivery id) → (): the pending ones only.
pub(super) const WEBHOOK_PENDING: TableDefinition<(u128, u128), ()> =
    TableDefinition::new("webhooks_pending_v1");
/// (due at, Unix ms; session id; schedule id) → (): the schedules' due
/// index (`store::domain::schedules`; the schedules are on their sessions' records).
pub(super) const SCHEDULES_DUE: TableDefinition<(u64, u128, u128), ()> =
    TableDefinition::new("schedules_due_v1");
/// end user (`Principal::key_id`) → the Unix ms at or before which their
/// tokens were issued are refused (`store::domain::end_users`).
pub(super) const ENDUSERS_NOT_BEFORE: TableDefinition<&str, u64> =
    TableDefinition::new("endusers_not_before_v1");
/// end user (`Principal::key_id`) → the Unix ms of their turns of the
/// last minute, 8 bytes little-endian each (`[end_users]
/// turns_per_minute_per_user`).
pub(super) const ENDUSERS_TURNS: TableDefinition<&str, &[u8]> =
    TableDefinition::new("endusers_turns_v1");

/// Makes sure every table exists.
pub(super) fn create_all(db: &Database) -> Result<(), StoreError> {
    let txn = db.begin_write().map_err(storage)?;
    let fill_open =
        !(txn.list_tables().map_err(storage)?).any(|table| table.name() == OPEN_SESSIONS.name());
    let fill_owners =
        !(txn.list_tables().map_err(storage)?).any(|table| table.name() == OPEN_BY_OWNER.name());
    {
        txn.open_table(EVENTS).map_err(storage)?;
        txn.open_table(EVENT_IDS).map_err(storage)?;
        txn.open_table(SESSIONS).map_err(storage)?;
        txn.open_table(APPS).map_err(storage)?;
        txn.open_table(APP_SLUGS).map_err(storage)?;
        txn.open_table(DEPLOYMENTS).map_err(storage)?;
        txn.open_table(APP_DEPLOYMENTS).map_err(storage)?;
        txn.open_table(API_KEYS).map_err(storage)?;
        txn.open_table(PENDING_APPROVALS).map_err(storage)?;
        txn.open_table(SECRETS).map_err(storage)?;
        txn.open_table(THREADS).map_err(storage)?;
        txn.open_table(IDEMPOTENCY).map_err(storage)?;
        txn.open_table(IDEMPOTENCY_EXPIRY).map_err(storage)?;
        txn.open_table(APPROVAL_FEED).map_err(storage)?;
        txn.open_table(APPROVAL_FEED_SESSIONS).map_err(storage)?;
        txn.open_table(APPROVAL_FEED_MARKS).map_err(storage)?;
        txn.open_table(WEBHOOKS).map_err(storage)?;
        txn.open_table(WEBHOOK_DELIVERIES).map_err(storage)?;
        txn.open_table(WEBHOOK_BY_ENDPOINT).map_err(storage)?;
        txn.open_table(WEBHOOK_PENDING).map_err(storage)?;
        txn.open_table(SCHEDULES_DUE).map_err(storage)?;
        txn.open_table(ENDUSERS_NOT_BEFORE).map_err(storage)?;
        txn.open_table(ENDUSERS_TURNS).map_err(storage)?;
        let mut open = txn.open_table(OPEN_SESSIONS).map_err(storage)?;
        if fill_open {
            let sessions = txn.open_table(SESSIONS).map_err(storage)?;
            for row in sessions.iter().map_err(storage)? {
                let (key, value) = row.map_err(storage)?;
                let record: SessionRecord =
                    serde_json::from_slice(value.value()).map_err(corrupt)?;
                if let Some(running) = open_entry(record.status) {
                    (open.insert((record.app_id.as_u128(), key.value()), running))
                        .map_err(storage)?;
                }
            }
        }
        let mut owners = txn.open_table(OPEN_BY_OWNER).map_err(storage)?;
        if fill_owners {
            let sessions = txn.open_table(SESSIONS).map_err(storage)?;
            for row in sessions.iter().map_err(storage)? {
                let (key, value) = row.map_err(storage)?;
                let record: SessionRecord =
                    serde_json::from_slice(value.value()).map_err(corrupt)?;
                if let (Some(running), Some(owner)) =
                    (open_entry(record.status), Owner::of(&record))
                {
                    let owner = owner.key();
                    let entry = (record.app_id.as_u128(), owner.as_str(), key.value());
                    owners.insert(entry, running).map_err(storage)?;
                }
            }
        }
    }
    txn.commit().map_err(storage)
}

/// A session's value in OPEN_SESSIONS: `None` when it is not kept there (ended).
pub(super) fn open_entry(status: SessionStatus) -> Option<u8> {
    match status {
        SessionStatus::Ended => None,
        SessionStatus::Running => Some(1),
        _ => Some(0),
    }
}

#[cfg(test)]
mod tests {
    use redb::{Database, ReadableDatabase, ReadableTableMetadata, backends::InMemoryBackend};
    use uuid::Uuid;

    use super::*;

    /// A file from before OPEN_SESSIONS gets the table filled from its sessions.
    #[test]
    fn open_sessions_is_filled_from_the_sessions_of_an_older_file() {
        let db = Database::builder()
            .create_with_backend(InMemoryBackend::new())
            .unwrap();
        create_all(&db).unwrap();
        let (app, other) = (Uuid::now_v7(), Uuid::now_v7());
        let statuses = [
            (app, SessionStatus::Running),
            (app, SessionStatus::Idle),
            (app, SessionStatus::Ended),
            (other, SessionStatus::AwaitingApproval),
        ];
        let txn = db.begin_write().unwrap();
        {
            let mut sessions = txn.open_table(SESSIONS).unwrap();
            for (app_id, status) in statuses {
                let id = Uuid::now_v7();
                let record = serde_json::json!({
                    "id": id, "app_id": app_id, "app_slug": "a", "route": "/r",
                    "deployment_id": Uuid::nil(), "deployment_version": 1,
                    "status": status, "turn": 1,
                    "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
                });
                let bytes = serde_json::to_vec(&record).unwrap();
                sessions.insert(id.as_u128(), bytes.as_slice()).unwrap();
            }
        }
        // As an older file has it: no index.
        txn.delete_table(OPEN_SESSIONS).unwrap();
        txn.commit().unwrap();

        create_all(&db).unwrap();
        let read = db.begin_read().unwrap();
        let open = read.open_table(OPEN_SESSIONS).unwrap();
        let of = |app: Uuid| -> Vec<u8> {
            let key = app.as_u128();
            (open.range((key, 0)..=(key, u128::MAX)).unwrap())
                .map(|row| row.unwrap().1.value())
                .collect()
        };
        let mut of_app = of(app);
        of_app.sort_unstable();
        assert_eq!(of_app, [0, 1], "idle and running, not ended");
        assert_eq!(of(other), [0]);
        // Once there, it is not filled again.
        drop((open, read));
        create_all(&db).unwrap();
        let read = db.begin_read().unwrap();
        assert_eq!(read.open_table(OPEN_SESSIONS).unwrap().len().unwrap(), 3);
    }

    /// A file from before OPEN_BY_OWNER gets it filled from its sessions:
    /// the open ones an end user or a bare-key address owns.
    #[test]
    fn open_sessions_by_owner_is_filled_from_the_sessions_of_an_older_file() {
        let db = Database::builder()
            .create_with_backend(InMemoryBackend::new())
            .unwrap();
        create_all(&db).unwrap();
        let app = Uuid::now_v7();
        let owners = [
            (SessionStatus::Running, Some("ada"), None),
            (SessionStatus::Idle, Some("ada"), None),
            (SessionStatus::Ended, Some("ada"), None),
            (SessionStatus::Idle, None, Some("192.0.2.1")),
            (SessionStatus::Idle, None, None),
        ];
        let txn = db.begin_write().unwrap();
        {
            let mut sessions = txn.open_table(SESSIONS).unwrap();
            for (status, end_user, source) in owners {
                let id = Uuid::now_v7();
                let record = serde_json::json!({
                    "id": id, "app_id": app, "app_slug": "a", "route": "/r",
                    "deployment_id": Uuid::nil(), "deployment_version": 1,
                    "status": status, "turn": 1, "end_user": end_user, "source": source,
                    "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
                });
                let bytes = serde_json::to_vec(&record).unwrap();
                sessions.insert(id.as_u128(), bytes.as_slice()).unwrap();
            }
        }
        txn.delete_table(OPEN_BY_OWNER).unwrap();
        txn.commit().unwrap();

        create_all(&db).unwrap();
        let read = db.begin_read().unwrap();
        let index = read.open_table(OPEN_BY_OWNER).unwrap();
        let of = |owner: Owner| -> Vec<u8> {
            let (key, owner) = (app.as_u128(), owner.key());
            let range = (key, owner.as_str(), 0)..=(key, owner.as_str(), u128::MAX);
            let mut held: Vec<u8> = (index.range(range).unwrap())
                .map(|row| row.unwrap().1.value())
                .collect();
            held.sort_unstable();
            held
        };
        assert_eq!(of(Owner::User("ada".into())), [0, 1], "not the ended one");
        assert_eq!(of(Owner::Source("192.0.2.1".into())), [0]);
        assert_eq!(index.len().unwrap(), 3, "an unowned session has no entry");
    }
}
