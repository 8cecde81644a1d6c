//! The PostgreSQL schema and its versioned migrations, run at start under
//! an advisory lock (hosts starting together migrate once). A host refuses
//! a database whose schema is newer than it knows.
//!
//! Records are the same JSON as on redb (`records.rs`), events the same
//! stored bytes (`journal::encode_record`): one format, two engines.

use postgres::Client;

use super::pg;
use crate::store::StoreError;

/// Migration N brings the schema from version N to N + 1. Append only.
const MIGRATIONS: &[&str] = &[
    // 1: everything the redb file holds, plus leases and stored bundles.
    "CREATE TABLE apps (
        id uuid PRIMARY KEY,
        slug text NOT NULL UNIQUE,
        record jsonb NOT NULL
    );
    CREATE TABLE deployments (
        id uuid PRIMARY KEY,
        app_id uuid NOT NULL,
        version bigint NOT NULL,
        status text NOT NULL,
        record jsonb NOT NULL,
        UNIQUE (app_id, version)
    );
    CREATE TABLE sessions (
        id uuid PRIMARY KEY,
        app_id uuid NOT NULL,
        status text NOT NULL,
        owner uuid,
        lease_expires timestamptz,
        record jsonb NOT NULL
    );
    CREATE INDEX sessions_running ON sessions (lease_expires) WHERE status = 'running';
    CREATE INDEX sessions_app ON sessions (app_id, id);
    CREATE TABLE events (
        session_id uuid NOT NULL,
        seq bigint NOT NULL,
        id uuid NOT NULL UNIQUE,
        type text NOT NULL,
        record bytea NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE pending_approvals (
        session_id uuid PRIMARY KEY,
        seq bigint NOT NULL
    );
    CREATE TABLE api_keys (id text PRIMARY KEY, record jsonb NOT NULL);
    CREATE TABLE secrets (name text PRIMARY KEY, record jsonb NOT NULL);
    CREATE TABLE blobs (
        kind text NOT NULL,
        id uuid NOT NULL,
        bytes bytea NOT NULL,
        PRIMARY KEY (kind, id)
    );",
    // 2: who builds a deployment, so another host adopts the build of a
    // host that stopped (`builds.rs`).
    "CREATE TABLE build_claims (
        deployment_id uuid PRIMARY KEY,
        owner uuid NOT NULL,
        lease_expires timestamptz NOT NULL
    );",
    // 3: the session each AG-UI thread names (`store::domain::threads`).
    "CREATE TABLE threads (
        app_id uuid NOT NULL,
        route text NOT NULL,
        thread_id text NOT NULL,
        session_id uuid NOT NULL,
        PRIMARY KEY (app_id, route, thread_id)
    );
    CREATE INDEX threads_session ON threads (session_id);",
    // 4: the first answers of idempotent requests (`store::domain::idempotency`).
    "CREATE TABLE idempotency (
        key_id text NOT NULL,
        key text NOT NULL,
        expires_at_ms bigint NOT NULL,
        record jsonb NOT NULL,
        PRIMARY KEY (key_id, key)
    );
    CREATE INDEX idempotency_expiry ON idempotency (expires_at_ms);",
    // 5: an app's open sessions, counted against its caps
    // (`store::domain::quotas`).
    "CREATE INDEX sessions_open ON sessions (app_id, status) WHERE status <> 'ended';",
    // 6: the approvals feed (`store::domain::feed`): entries by seq, and one
    // row of marks whose lock orders the appends.
    "CREATE TABLE approval_feed (
        seq bigint PRIMARY KEY,
        session_id uuid NOT NULL,
        app_id uuid NOT NULL,
        at_ms bigint NOT NULL,
        entry text NOT NULL
    );
    CREATE INDEX approval_feed_session ON approval_feed (session_id);
    CREATE INDEX approval_feed_app ON approval_feed (app_id, seq);
    CREATE TABLE approval_feed_marks (
        only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
        head bigint NOT NULL,
        purged_through bigint NOT NULL
    );
    INSERT INTO approval_feed_marks (head, purged_through) VALUES (0, 0);",
    // 7: webhook endpoints and their deliveries (`store::domain::webhooks`);
    // a delivery's lease lets one host at a time attempt it.
    "CREATE TABLE webhooks (id uuid PRIMARY KEY, record jsonb NOT NULL);
    CREATE TABLE webhooks_deliveries (
        id uuid PRIMARY KEY,
        webhook_id uuid NOT NULL,
        pending boolean NOT NULL,
        next_at_ms bigint NOT NULL,
        lease_until_ms bigint NOT NULL,
        record jsonb NOT NULL
    );
    CREATE INDEX webhooks_deliveries_due ON webhooks_deliveries (next_at_ms) WHERE pending;
    CREATE INDEX webhooks_deliveries_endpoint ON webhooks_deliveries (webhook_id, id);
    CREATE INDEX webhooks_deliveries_pending ON webhooks_deliveries (webhook_id) WHERE pending;",
    // 8: the schedules' due index (`store::domain::schedules`; the
    // schedules are on their sessions' records). The key leads with the
    // due time: the scanner reads one range of it.
    "CREATE TABLE schedules_due (
        due_ms bigint NOT NULL,
        session_id uuid NOT NULL,
        schedule_id uuid NOT NULL,
        PRIMARY KEY (due_ms, session_id, schedule_id)
    );",
    // 9: end users (`store::domain::end_users`): the time before which a
    // user's tokens are refused (revoked), and their turns of the last minute
    // (`[end_users] turns_per_minute_per_user`), keyed by `Principal::key_id`.
    "CREATE TABLE endusers_not_before (
        user_key text PRIMARY KEY,
        not_before_ms bigint NOT NULL
    );
    CREATE TABLE endusers_turns (
        user_key text PRIMARY KEY,
        turns_ms bigint[] NOT NULL
    );",
];

/// The schema version this binary writes.
pub(super) const VERSION: i32 = MIGRATIONS.len() as i32;

/// Brings the database to `VERSION`, or refuses a newer one.
pub(super) fn migrate(client: &mut Client) -> Result<(), StoreError> {
    let mut txn = client.transaction().map_err(|e| pg(&e))?;
    // Any constant: hosts starting together take turns here.
    txn.execute("SELECT pg_advisory_xact_lock(7305546369283716417)", &[])
        .map_err(|e| pg(&e))?;
    txn.batch_execute("CREATE TABLE IF NOT EXISTS agenthost_schema (version integer NOT NULL)")
        .map_err(|e| pg(&e))?;
    let current: i32 = match txn
        .query_opt("SELECT version FROM agenthost_schema", &[])
        .map_err(|e| pg(&e))?
    {
        Some(row) => row.get(0),
        None => {
            txn.execute("INSERT INTO agenthost_schema (version) VALUES (0)", &[])
                .map_err(|e| pg(&e))?;
            0
        }
    };
    if current > VERSION {
        return Err(StoreError::Rejected(format!(
            "the database's schema is version {current}, newer than this agenthost knows ({VERSION}): upgrade agenthost"
        )));
    }
    for (from, migration) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        txn.batch_execute(migration).map_err(|e| pg(&e))?;
        tracing::info!(version = from + 1, "migrated the PostgreSQL schema");
    }
    txn.execute("UPDATE agenthost_schema SET version = $1", &[&VERSION])
        .map_err(|e| pg(&e))?;
    txn.commit().map_err(|e| pg(&e))
}
