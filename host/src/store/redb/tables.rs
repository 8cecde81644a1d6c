//! The redb table definitions: the on-disk layout (a compatibility contract).
//!
//! Uuids are stored as `u128` (big-endian value of the 16 bytes), so keys of
//! UUIDv7 ids sort by creation time.

use redb::{Database, ReadableTable, TableDefinition, TableHandle};

use super::storage;
use crate::store::StoreError;
use crate::store::error::corrupt;
use crate::store::records::{SessionRecord, SessionStatus};

/// (session, seq) → event record (see `journal::encode_record`).
pub const EVENTS: TableDefinition<(u128, u64), &[u8]> = TableDefinition::new("events_v1");
/// event id → (session, seq): resolves a Last-Event-ID.
pub const EVENT_IDS: TableDefinition<u128, (u128, u64)> = TableDefinition::new("event_ids_v1");
/// session id → SessionRecord (JSON).
pub const SESSIONS: TableDefinition<u128, &[u8]> = TableDefinition::new("sessions_v1");
/// app id → AppRecord (JSON).
pub const APPS: TableDefinition<u128, &[u8]> = TableDefinition::new("apps_v1");
/// app slug → app id.
pub const APP_SLUGS: TableDefinition<&str, u128> = TableDefinition::new("app_slugs_v1");
/// deployment id → DeploymentRecord (JSON).
pub const DEPLOYMENTS: TableDefinition<u128, &[u8]> = TableDefinition::new("deployments_v1");
/// (app id, version) → deployment id.
pub const APP_DEPLOYMENTS: TableDefinition<(u128, u64), u128> =
    TableDefinition::new("app_deployments_v1");
/// session id → seq of its TOOL_APPROVAL_REQUIRED, for sessions awaiting a decision.
pub const PENDING_APPROVALS: TableDefinition<u128, u64> =
    TableDefinition::new("pending_approvals_v1");
/// secret name → SecretRecord (JSON, sealed).
pub const SECRETS: TableDefinition<&str, &[u8]> = TableDefinition::new("secrets_v1");
/// key id → ApiKeyRecord (JSON).
pub const API_KEYS: TableDefinition<&str, &[u8]> = TableDefinition::new("api_keys_v1");

/// (app id, route, AG-UI thread id) → session id (`store::domain::threads`).
pub const THREADS: TableDefinition<(u128, &str, &str), u128> = TableDefinition::new("threads_v1");

/// (app id, session id) → 1 if it runs a turn, else 0, for every session
/// not ended: an app's load (`store::domain::quotas`) is one range of it.
/// Derived from SESSIONS (filled from it when a file predates the table).
pub const OPEN_SESSIONS: TableDefinition<(u128, u128), u8> =
    TableDefinition::new("open_sessions_v1");

/// Makes sure every table exists.
pub(super) fn create_all(db: &Database) -> Result<(), StoreError> {
    let txn = db.begin_write().map_err(storage)?;
    let fill_open =
        !(txn.list_tables().map_err(storage)?).any(|table| table.name() == OPEN_SESSIONS.name());
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
