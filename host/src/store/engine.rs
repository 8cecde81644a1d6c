//! The storage boundary: what the domain needs from an engine (redb or
//! PostgreSQL), and nothing of how either keeps it.
//!
//! `Engine` answers the read-only queries (each a short transaction of its
//! own) and opens the writer's side. `WriteEngine::transact` runs one batch
//! of domain commands in one durable write transaction; `WriteTx` is what
//! those commands see inside it. The rules themselves (the session state
//! machine, versions, the exactly-once decision, recovery) live in
//! `store::domain` and are written once against these traits.

use std::collections::{HashMap, HashSet};

use uuid::Uuid;

use super::StoreError;
use super::records::{
    ApiKeyRecord, AppRecord, DeploymentRecord, IdempotencyRecord, SecretRecord, SessionRecord,
    SessionStatus,
};
use super::webhook_records::{DeliveryRecord, WebhookRecord};
use crate::journal::StoredEvent;

/// A session as a write transaction sees it: its record and the seq its
/// next event gets.
#[derive(Debug, Clone)]
pub struct SessionRow {
    pub record: SessionRecord,
    pub next_seq: u64,
}

/// One event on its way into the journal.
#[derive(Debug, Clone, Copy)]
pub struct EventRow<'a> {
    pub session: Uuid,
    pub seq: u64,
    pub id: Uuid,
    /// The wire name of its type (`MESSAGE_DELTA`, ...).
    pub event_type: &'static str,
    /// Its stored form (`journal::encode_record`).
    pub record: &'a [u8],
}

/// Filters and cursor of `GET /sessions`.
#[derive(Debug, Clone, Default)]
pub struct SessionFilter {
    pub app_id: Option<Uuid>,
    pub status: Option<SessionStatus>,
    /// Return sessions strictly older than this one.
    pub before: Option<Uuid>,
    pub limit: usize,
    /// Only the sessions of this end user.
    pub end_user: Option<String>,
}

/// Whose share of an app's frontend caps a session counts against
/// (`domain::quotas::check_share`): the end user who owns it, or the
/// source address of the bare invocation key that created it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    User(String),
    Source(String),
}

impl Owner {
    /// The owner `record` counts against, if any.
    pub fn of(record: &SessionRecord) -> Option<Owner> {
        match (&record.end_user, &record.source) {
            (Some(user), _) => Some(Owner::User(user.clone())),
            (None, Some(source)) => Some(Owner::Source(source.clone())),
            (None, None) => None,
        }
    }

    /// Its key in an index (redb's `open_sessions_by_owner_v1`): a user id
    /// and an address never meet.
    pub fn key(&self) -> String {
        match self {
            Owner::User(user) => format!("u:{user}"),
            Owner::Source(source) => format!("a:{source}"),
        }
    }
}

/// An app's sessions that count against its caps (`store::domain::quotas`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppLoad {
    /// Sessions not ended.
    pub open: u64,
    /// Of those, sessions running a turn.
    pub running: u64,
}

/// A pending approval as `GET /approvals` lists it.
#[derive(Debug, Clone)]
pub struct ApprovalItem {
    pub session: SessionRecord,
    pub event: StoredEvent,
}

/// An entry of the approvals feed as stored: its seq and its JSON
/// (`records::ApprovalFeedEntry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedItem {
    pub seq: u64,
    pub json: String,
}

/// One read of the approvals feed: entries and the feed's marks, as of one
/// committed state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeedPage {
    /// The newest seq ever given to an entry (0: none yet).
    pub head: u64,
    /// Every entry up to this seq was purged by age (`purge_feed`).
    pub purged_through: u64,
    pub items: Vec<FeedItem>,
    /// Every entry up to this seq was looked at (a reader resumes after it).
    pub read_through: u64,
}

/// An entry on its way into the approvals feed.
#[derive(Debug, Clone)]
pub struct FeedRow {
    pub session: Uuid,
    pub app: Uuid,
    /// `records::ApprovalFeedEntry` as JSON.
    pub json: String,
}

/// A schedule's row in the due index (`store::domain::schedules`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DueSchedule {
    /// When it is due, Unix ms.
    pub due_ms: u64,
    pub owner: ScheduleOwner,
    pub schedule: Uuid,
}

/// Whose schedule a due row is. The stored index keys both kinds by one id
/// (a session's or an app's); an engine tells them apart as it reads the row
/// (a session of that id exists, or else it is an app's or a leftover).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScheduleOwner {
    /// A session's schedule (`POST /sessions/{id}/schedules`, an agent's timer).
    Session(Uuid),
    /// An app's schedule (`POST /apps/{id}/schedules`): it creates a session.
    App(Uuid),
}

impl ScheduleOwner {
    /// The id the due index keys the row by.
    pub fn id(self) -> Uuid {
        match self {
            ScheduleOwner::Session(id) | ScheduleOwner::App(id) => id,
        }
    }
}

/// A storage engine: the read-only queries, and the writer's side.
///
/// Reads block (they run on tokio's blocking pool through `Db::read`)
/// and never see a batch before it is committed.
pub trait Engine: Send + Sync + 'static {
    fn session(&self, id: Uuid) -> Result<Option<SessionRecord>, StoreError>;
    /// Sessions newest first, filtered; `limit` is applied after filtering.
    fn sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRecord>, StoreError>;
    /// Up to `limit` events of a session with seq >= `from`, in seq order.
    fn events(
        &self,
        session: Uuid,
        from: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError>;
    /// The seq of the event of `session` whose id is `id`, if it has one
    /// (resolves a Last-Event-ID).
    fn event_seq(&self, session: Uuid, id: Uuid) -> Result<Option<u64>, StoreError>;
    /// An app by id or slug.
    fn app(&self, id_or_slug: &str) -> Result<Option<AppRecord>, StoreError>;
    fn apps(&self) -> Result<Vec<AppRecord>, StoreError>;
    fn deployment(&self, id: Uuid) -> Result<Option<DeploymentRecord>, StoreError>;
    /// An app's deployments, newest version first.
    fn deployments(&self, app_id: Uuid) -> Result<Vec<DeploymentRecord>, StoreError>;
    /// Deployments still marked `building` (interrupted by a restart).
    fn building_deployments(&self) -> Result<Vec<DeploymentRecord>, StoreError>;
    fn api_keys(&self) -> Result<Vec<ApiKeyRecord>, StoreError>;
    /// One API key by id (a key this host has not heard of yet).
    fn api_key(&self, id: &str) -> Result<Option<ApiKeyRecord>, StoreError> {
        Ok(self.api_keys()?.into_iter().find(|key| key.id == id))
    }
    /// Sessions awaiting a decision, oldest request first (by the id of
    /// their TOOL_APPROVAL_REQUIRED, a time-ordered UUID v7), optionally of
    /// one app, strictly after the request `after`.
    fn pending_approvals(
        &self,
        app_id: Option<Uuid>,
        after: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<ApprovalItem>, StoreError>;
    /// Every pending approval (optionally of one app), oldest request
    /// first, and the feed's head, as of one committed state: the feed's
    /// entries after that head are exactly what changed since.
    fn approval_snapshot(
        &self,
        app_id: Option<Uuid>,
    ) -> Result<(u64, Vec<ApprovalItem>), StoreError> {
        self.approval_snapshot_page(app_id, usize::MAX)
    }
    /// As `approval_snapshot`, but the `limit` oldest pending approvals only.
    fn approval_snapshot_page(
        &self,
        app_id: Option<Uuid>,
        limit: usize,
    ) -> Result<(u64, Vec<ApprovalItem>), StoreError>;
    /// Up to `limit` entries of the approvals feed with seq > `after`
    /// (optionally of one app), in seq order, with the feed's marks.
    fn approval_feed(
        &self,
        after: u64,
        app_id: Option<Uuid>,
        limit: usize,
    ) -> Result<FeedPage, StoreError>;
    /// Every secret, sealed, by name.
    fn secrets(&self) -> Result<Vec<SecretRecord>, StoreError>;
    /// The session an AG-UI thread of an app's route names, if it has one.
    fn thread_session(
        &self,
        app: Uuid,
        route: &str,
        thread: &str,
    ) -> Result<Option<Uuid>, StoreError>;

    /// Every webhook endpoint, oldest first.
    fn webhooks(&self) -> Result<Vec<WebhookRecord>, StoreError>;
    /// Pending deliveries due at `now_ms` whose lease (if any) expired,
    /// approval events (`approval.*`) first, then soonest first, at most `limit`.
    fn due_deliveries(&self, now_ms: u64, limit: usize) -> Result<Vec<DeliveryRecord>, StoreError>;
    /// An endpoint's deliveries, newest first, strictly older than `before`.
    fn deliveries(
        &self,
        webhook: Uuid,
        before: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<DeliveryRecord>, StoreError>;
    /// Up to `limit` schedules due at `now_ms` (Unix ms), soonest first.
    fn due_schedules(&self, now_ms: u64, limit: usize) -> Result<Vec<DueSchedule>, StoreError>;

    // End users (`store::domain::end_users`, `end_users::revocation`).
    /// The Unix ms at or before which the tokens of end user `user_key`
    /// (`Principal::key_id`) were issued are refused, if they were revoked.
    fn end_user_not_before(&self, user_key: &str) -> Result<Option<u64>, StoreError>;

    /// Whether several hosts may share this engine.
    fn shared(&self) -> bool {
        false
    }

    /// Keeps a built deployment's component where every host can reach it,
    /// so a host that did not build it compiles it on first use. The
    /// embedded engine has one host, whose data dir holds the component
    /// already: it keeps nothing here.
    fn put_component(&self, _deployment: Uuid, _bytes: &[u8]) -> Result<(), StoreError> {
        Ok(())
    }

    /// A component kept by `put_component`, if the engine keeps them.
    fn component(&self, _deployment: Uuid) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(None)
    }

    /// Claims the build of `deployment` for this host until the returned
    /// value is dropped: a shared engine renews the claim meanwhile, and
    /// another host adopts the build once it expired (`orphaned_builds`).
    fn hold_build(&self, _deployment: Uuid) -> Result<Option<Box<dyn Send>>, StoreError> {
        Ok(None)
    }

    /// Keeps an uploaded bundle where every host can reach it, until its
    /// build is over (`forget_build`). The embedded engine keeps nothing:
    /// the bundle waits in the data dir.
    fn put_bundle(&self, _deployment: Uuid, _bytes: &[u8]) -> Result<(), StoreError> {
        Ok(())
    }

    /// A bundle kept by `put_bundle`, if the engine keeps them.
    fn bundle(&self, _deployment: Uuid) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(None)
    }

    /// Drops a finished build's bundle and claim.
    fn forget_build(&self, _deployment: Uuid) -> Result<(), StoreError> {
        Ok(())
    }

    /// Claims for this host the builds still `building` whose host stopped
    /// renewing its claim (or never made one, long enough ago); returns them.
    fn orphaned_builds(&self) -> Result<Vec<Uuid>, StoreError> {
        Ok(Vec::new())
    }

    /// Marks a turn as running on this host until the returned value is
    /// dropped: a shared engine renews this host's lease on it meanwhile.
    fn hold_turn(&self, _session: Uuid) -> Option<Box<dyn Send>> {
        None
    }

    /// Tells every host sharing the engine to cancel `turn` of `session`
    /// if it runs it (`by` names who asked). The embedded engine has one
    /// host, which cancels its turns itself: nothing to announce.
    fn announce_cancel(&self, _session: Uuid, _turn: u32, _by: &str) -> Result<(), StoreError> {
        Ok(())
    }

    /// The writer thread's side of the engine (called once, by `Writer`).
    fn write_engine(&self) -> Result<Box<dyn WriteEngine>, StoreError>;
}

/// The writer thread's handle on the engine.
pub trait WriteEngine: Send {
    /// Runs `apply` in one write transaction and commits it durably.
    ///
    /// An engine may call `apply` more than once (a transaction that lost a
    /// race with another host is rolled back and retried), so `apply` must
    /// start from scratch each time. On `Err` nothing of the batch is kept.
    fn transact(
        &mut self,
        apply: &mut dyn FnMut(&mut dyn WriteTx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// Whether `transact` calls `apply` once and then commits exactly what
    /// it applied or fails (and the store stops writes): then the writer
    /// starts a batch's turns before its commit (`store/start.rs`).
    fn applies_once(&self) -> bool {
        false
    }
}

/// What a domain command sees inside a write transaction: committed state
/// plus what the transaction wrote so far.
pub trait WriteTx {
    /// A session and its next seq (PostgreSQL locks its row for the
    /// transaction, so two hosts never decide on one session at once).
    fn load_session(&mut self, id: Uuid) -> Result<Option<SessionRow>, StoreError>;
    /// Locks the sessions a batch is about to decide on, all at once and in
    /// one order (an engine with row locks; the embedded one has a single
    /// writer and nothing to do). `load_session` then finds them locked.
    fn lock_sessions(&mut self, _ids: &mut Vec<Uuid>) -> Result<(), StoreError> {
        Ok(())
    }
    /// Saves the records of `dirty` sessions, last thing before the commit.
    /// `touched` is every session the transaction loaded or created, as it
    /// leaves them (an engine may cache them).
    fn save_sessions(
        &mut self,
        touched: HashMap<Uuid, SessionRow>,
        dirty: &HashSet<Uuid>,
    ) -> Result<(), StoreError>;
    /// A new id for the event at `seq`: a UUIDv7, or one that carries its
    /// seq (`journal::event_id`) where the engine resolves ids that way.
    fn event_id(&self, _seq: u64) -> Uuid {
        Uuid::now_v7()
    }
    /// Journals one event: `record` is its stored form (`journal::encode_record`).
    fn insert_event(&mut self, event: EventRow<'_>) -> Result<(), StoreError>;
    /// The session's events from its last `TURN_STARTED` on (all of them
    /// when it has none), oldest first, this transaction's included.
    fn last_turn_events(&mut self, session: Uuid) -> Result<Vec<StoredEvent>, StoreError>;
    /// Sessions with a running turn that no live host owns: on redb every
    /// running session of an earlier process (`boot`); on PostgreSQL the
    /// running sessions whose lease has expired.
    fn orphaned_turns(&mut self, boot: Uuid) -> Result<Vec<SessionRecord>, StoreError>;
    /// The app's open (not ended) and running sessions as committed, less
    /// those this transaction deleted (the sessions it loaded or created
    /// are the caller's to count: their records are saved at the end). An
    /// engine shared by several hosts first locks the app until the commit,
    /// so two hosts never both take its last place; read only when a cap is
    /// set, in time proportional to the app's open sessions.
    fn app_load(&mut self, app: Uuid) -> Result<AppLoad, StoreError>;
    /// The ids of the app's open sessions that end user `user` owns, as
    /// committed (locked and counted as `app_load`); read only when the app
    /// caps its users, in time proportional to the app's open sessions.
    fn user_open_sessions(&mut self, app: Uuid, user: &str) -> Result<Vec<Uuid>, StoreError>;
    /// The app's open sessions `owner` holds, as committed, each with
    /// whether it runs a turn (locked as `app_load`); read only when a
    /// public caller starts a session or turn under the app's frontend
    /// caps, in time proportional to the owner's open sessions (redb:
    /// `open_sessions_by_owner_v1`) or the app's (PostgreSQL).
    fn owner_sessions(&mut self, app: Uuid, owner: &Owner)
    -> Result<Vec<(Uuid, bool)>, StoreError>;
    /// Removes a session: its record, its journal, its event ids, its
    /// pending approval and its entries in the approvals feed.
    fn delete_session(&mut self, id: Uuid) -> Result<(), StoreError>;
    /// Appends entries to the approvals feed, giving each the next seq of
    /// the feed's one counter (taken last in the transaction, so seqs
    /// become visible in commit order, with no gap a reader could pass);
    /// returns the newest.
    fn append_feed(&mut self, rows: &[FeedRow]) -> Result<u64, StoreError>;
    /// Removes up to `limit` feed entries appended before `before_ms`
    /// (Unix ms), oldest first, and raises the purge mark past them;
    /// returns how many.
    fn purge_feed(&mut self, before_ms: u64, limit: usize) -> Result<usize, StoreError>;
    /// Indexes (`Some(seq of its TOOL_APPROVAL_REQUIRED)`) or un-indexes a
    /// session's pending approval.
    fn set_pending_approval(&mut self, session: Uuid, seq: Option<u64>) -> Result<(), StoreError>;
    /// The session an AG-UI thread of an app's route names, if it has one.
    fn thread_session(
        &mut self,
        app: Uuid,
        route: &str,
        thread: &str,
    ) -> Result<Option<Uuid>, StoreError>;
    /// Records that an AG-UI thread of an app's route names `session`.
    fn put_thread(
        &mut self,
        app: Uuid,
        route: &str,
        thread: &str,
        session: Uuid,
    ) -> Result<(), StoreError>;

    fn app(&mut self, id_or_slug: &str) -> Result<Option<AppRecord>, StoreError>;
    /// `app`, to change and save it: on PostgreSQL its row stays locked
    /// until the commit, so two hosts never write back stale copies (its
    /// schedules, its current deployment). One writer per engine otherwise.
    fn app_for_update(&mut self, id_or_slug: &str) -> Result<Option<AppRecord>, StoreError> {
        self.app(id_or_slug)
    }
    /// Saves an app (`new`: also claims its slug).
    fn put_app(&mut self, app: &AppRecord, new: bool) -> Result<(), StoreError>;
    fn deployment(&mut self, id: Uuid) -> Result<Option<DeploymentRecord>, StoreError>;
    /// Saves a deployment (`new`: also indexes its app and version).
    fn put_deployment(&mut self, record: &DeploymentRecord, new: bool) -> Result<(), StoreError>;
    fn version_exists(&mut self, app: Uuid, version: u64) -> Result<bool, StoreError>;
    fn latest_version(&mut self, app: Uuid) -> Result<Option<u64>, StoreError>;

    fn api_keys(&mut self) -> Result<Vec<ApiKeyRecord>, StoreError>;
    fn api_key(&mut self, id: &str) -> Result<Option<ApiKeyRecord>, StoreError>;
    fn put_api_key(&mut self, record: &ApiKeyRecord) -> Result<(), StoreError>;
    fn remove_api_key(&mut self, id: &str) -> Result<(), StoreError>;

    fn secret(&mut self, name: &str) -> Result<Option<SecretRecord>, StoreError>;
    fn put_secret(&mut self, record: &SecretRecord) -> Result<(), StoreError>;
    /// Whether there was one to remove.
    fn remove_secret(&mut self, name: &str) -> Result<bool, StoreError>;

    /// The first answer remembered for an API key's `Idempotency-Key`,
    /// expired or not. An engine shared by several hosts makes another
    /// transaction asking for the same key wait until this one ends, so two
    /// hosts never both do the work of one key.
    fn idempotency(
        &mut self,
        key_id: &str,
        key: &str,
    ) -> Result<Option<IdempotencyRecord>, StoreError>;
    /// Remembers (or replaces an expired) first answer for a key.
    fn put_idempotency(
        &mut self,
        key_id: &str,
        key: &str,
        record: &IdempotencyRecord,
    ) -> Result<(), StoreError>;
    /// Forgets up to `limit` answers expired at `now_ms` (Unix milliseconds);
    /// returns how many.
    fn purge_idempotency(&mut self, now_ms: u64, limit: usize) -> Result<usize, StoreError>;

    /// Every webhook endpoint (`store::domain::webhooks`).
    fn webhooks(&mut self) -> Result<Vec<WebhookRecord>, StoreError>;
    fn webhook(&mut self, id: Uuid) -> Result<Option<WebhookRecord>, StoreError>;
    fn put_webhook(&mut self, record: &WebhookRecord) -> Result<(), StoreError>;
    /// Removes an endpoint and its deliveries; whether there was one.
    fn remove_webhook(&mut self, id: Uuid) -> Result<bool, StoreError>;
    /// A delivery (an engine shared by several hosts locks its row until the commit).
    fn delivery(&mut self, id: Uuid) -> Result<Option<DeliveryRecord>, StoreError>;
    /// Saves a delivery (new or changed).
    fn put_delivery(&mut self, record: &DeliveryRecord) -> Result<(), StoreError>;
    /// How many deliveries of an endpoint are pending, as committed.
    fn pending_deliveries(&mut self, webhook: Uuid) -> Result<u64, StoreError>;
    /// Removes up to `limit` finished (delivered or failed) deliveries
    /// made before `before_ms` (Unix ms), oldest first; returns how many.
    fn purge_deliveries(&mut self, before_ms: u64, limit: usize) -> Result<usize, StoreError>;
    /// Indexes a schedule of `session` as due at `due_ms` (Unix ms).
    fn put_schedule_due(
        &mut self,
        due_ms: u64,
        session: Uuid,
        schedule: Uuid,
    ) -> Result<(), StoreError>;
    /// Un-indexes it (nothing to do when it is not indexed).
    fn remove_schedule_due(
        &mut self,
        due_ms: u64,
        session: Uuid,
        schedule: Uuid,
    ) -> Result<(), StoreError>;

    // End users (`store::domain::end_users`).
    /// `Engine::end_user_not_before`, in the transaction.
    fn end_user_not_before(&mut self, user_key: &str) -> Result<Option<u64>, StoreError>;
    /// Stores an end user's not-before; an engine shared by several hosts
    /// announces it to every host at the commit.
    fn put_end_user_not_before(
        &mut self,
        user_key: &str,
        not_before_ms: u64,
    ) -> Result<(), StoreError>;
    /// The Unix ms of an end user's recent turns, as committed. An engine
    /// shared by several hosts locks the user's row until the commit, so
    /// two hosts never both take their last turn of the minute.
    fn end_user_turns(&mut self, user_key: &str) -> Result<Vec<u64>, StoreError>;
    /// Replaces an end user's recent turns.
    fn put_end_user_turns(&mut self, user_key: &str, turns_ms: &[u64]) -> Result<(), StoreError>;
}
