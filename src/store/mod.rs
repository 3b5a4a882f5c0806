//! The store: every instance, run, step, attempt and event `wf` knows about,
//! behind one engine-level interface (the methods of [`Store`]): read an
//! instance's rows, create one, claim it (`take_over`, which raises its fencing
//! epoch and reads its history), apply a batch of [`Write`]s atomically under
//! the fence (`commit`), renew and release the lease, deliver events, find due
//! work. Neither the engine nor the commands see SQL.
//!
//! Two backends stand behind it: SQLite (`sqlite`, a file, the default) and
//! PostgreSQL (`pg`, shared by workers on many machines). Each operation
//! means the same on both; the methods are `async` so that a network round
//! trip never blocks the engine's loop. One contract (`contract.rs`, tests)
//! runs the same cases on both, and proves that every way a batch of writes
//! reaches either database leaves the same rows.
//!
//! The two backends' files mirror each other by name and job:
//! - `mod.rs`: the backend's store type, its connection and settings;
//! - `schema.rs`: the migrations;
//! - `history.rs`: an instance's rows read (the history a takeover reads
//!   included), new instances, events and cancel requests (and on SQLite
//!   the statement of each write, which `write.rs` calls);
//! - `list.rs`: `wf list`'s statements, made of the filters given;
//! - `lease.rs`: who holds an instance: take over, the fence, renew and
//!   release, the due instances and their claim;
//! - `write.rs`: a batch of [`Write`]s applied under the fence (`commit`,
//!   `begin_commit`, `commit_unsynced`; on PostgreSQL each write's
//!   statement too);
//! - `spans.rs`: spans read back, marked exported, each run's trace;
//! - `schedules.rs`, `prune.rs`, `copy.rs`: `wf schedule`, `wf prune`,
//!   `wf restart --as`;
//! - `registry.rs`: `wf workflow add` and the registry's reads;
//! - `metrics.rs`: `/metrics`' kept counts and workers' heartbeats;
//! - `queue.rs`: queue admission (`queue:`), reading a key's rows and
//!   applying what `store/queue.rs` decides;
//! - `types.rs`: the vocabulary (`crate::vocab`) as columns;
//! - `query_plans.rs` (tests): the plans of the statements that must stay
//!   flat however large the history.
//!
//! Each backend's own: on SQLite `offthread.rs` (the commit thread that
//! `begin_commit` lends the connection to), `walbuf.rs` (the VFS that writes
//! a commit's WAL frames at once) and `closing.rs` (the last connection's
//! checkpoint); on PostgreSQL `batch.rs` (a batch as few statements, a
//! step's as one), `conn.rs` (reconnecting), `target.rs` and `url.rs` (where
//! the database is), `text.rs` (NUL in text columns). Above both,
//! `location.rs` says where the history is ([`Location`]),
//! `list_sql.rs` builds `wf list`'s statements for both dialects,
//! `pending.rs` is a commit under way ([`PendingCommit`]), `portable.rs`
//! the history's rows as any backend holds them (`wf db`), `run_store.rs`
//! what one run asks of its store ([`RunStore`]), `write.rs` the
//! [`Write`]s, `rows.rs` the rows, `schedules.rs` the schedule interface,
//! `metrics.rs` what a scrape reads.

#[cfg(test)]
mod contract;
mod fan;
mod list_filter;
mod list_sql;
mod location;
mod pending;
mod pg;
mod pool;
pub mod queue;
pub mod rows;
mod shared;
mod sqlite;
mod write;

use serde_json::Value;
use std::path::PathBuf;

pub use actions::{ActionRow, FoundSession, SessionRow, TokenRow};
pub use check::{Finding, Lease};
pub use list_filter::*;
pub use location::{FileId, Location, call_deadline};
pub use pending::PendingCommit;
pub use pg::PgTarget;
pub use pool::Pool;
pub use queue::{QueueLimits, QueuePlace};
pub use registry::{Recent, Refused};
pub use rows::*;
pub(crate) use run_store::RunStore;
pub use shared::Shared;
pub use write::{ChildWrites, UpgradeTo, Write};

/// How hard a commit tries to reach the disk (`WF_DURABILITY`): `Full`
/// (the default) survives a power loss, `Normal` a crash of wf only. Each
/// backend sets it its own way (SQLite's `synchronous`, PostgreSQL's
/// `synchronous_commit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durability {
    Full,
    Normal,
}

impl Durability {
    fn from_env() -> Durability {
        match std::env::var("WF_DURABILITY").ok().as_deref() {
            Some("normal") => Durability::Normal,
            _ => Durability::Full,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database {path}: {reason}")]
    Open { path: String, reason: String },
    #[error(
        "database {path} has schema version {found}, newer than this wf understands ({known}); upgrade wf"
    )]
    TooNew {
        path: String,
        found: i64,
        known: i64,
    },
    #[error("no instance matches `{0}`")]
    NotFound(String),
    #[error("instance id `{prefix}` is ambiguous: it matches {}", .matches.join(", "))]
    Ambiguous {
        prefix: String,
        matches: Vec<String>,
    },
    /// A statement failed; the text is one line, the backend's reason.
    #[error("database error: {0}")]
    Sql(String),
    /// SQLite refused a write: the file, or the mount it is on, is
    /// read-only. `commands::execute` names the file.
    #[error("database error: {0}")]
    ReadOnly(String),
    #[error("corrupt record in database: {0}")]
    Corrupt(String),
    /// SQLite could not take its lock within `busy_timeout`: another
    /// process holds the database (a long write, a backup). Nothing was
    /// written; the same request later may succeed (`wf serve`: 503).
    #[error("database error: {0}")]
    Busy(String),
    /// The connection was lost and could not be made again within
    /// `WF_DB_RETRY` (exit 6): what was recorded stays.
    #[error("database {path} unreachable for {}: {reason}", crate::workflow::duration::format(.after.as_millis() as u64))]
    Unreachable {
        path: String,
        after: std::time::Duration,
        reason: String,
    },
    /// A commit sent again after its reply was lost was in already
    /// (PostgreSQL): the store takes it for success; it never leaves it.
    #[error("the commit was applied already")]
    Committed,
    /// A runner's write was refused: another process took the instance over.
    #[error("lost instance {id} to {}", .holder.as_deref().unwrap_or("another process"))]
    Fenced {
        id: InstanceId,
        holder: Option<String>,
    },
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// The history, in one of the backends.
pub enum Store {
    Sqlite(sqlite::SqliteStore),
    Postgres(Box<pg::PgStore>),
    /// One of the connections the children run in one process share, taken
    /// for each call ([`shared`]).
    Lent(std::sync::Arc<Shared>),
}

impl Store {
    /// The backend as OpenTelemetry's `db.system.name` names it.
    pub fn system(&self) -> &'static str {
        match self {
            Store::Sqlite(_) => "sqlite",
            Store::Postgres(_) => "postgresql",
            Store::Lent(shared) => match shared.location() {
                Location::Sqlite(_) => "sqlite",
                Location::Postgres(_) => "postgresql",
            },
        }
    }
}

/// Calls the same method on whichever backend, awaiting PostgreSQL's; a
/// lent store on the connection it takes for the call.
macro_rules! each {
    ($self:ident . $method:ident ( $($arg:expr),* )) => {
        match $self {
            Store::Sqlite(s) => s.$method($($arg),*),
            Store::Postgres(p) => p.$method($($arg),*).await,
            Store::Lent(shared) => {
                let mut lease = shared.take().await?;
                match &mut *lease {
                    Store::Sqlite(s) => s.$method($($arg),*),
                    Store::Postgres(p) => p.$method($($arg),*).await,
                    Store::Lent(_) => Err($crate::store::StoreError::Sql(
                        "a shared connection is itself shared".into(),
                    ).into()),
                }
            }
        }
    };
}

// After `each!`, which they use.
pub mod actions;
mod cache;
pub use cache::{CacheEntry, CachedFrom};
mod check;
pub mod metrics;
pub mod portable;
pub mod queue_line;
mod registry;
mod run_store;
mod schedules;
pub mod transfer;

impl Store {
    /// Opens (creating if needed) the database and brings its schema up to date.
    pub async fn open(location: &Location) -> Result<Store> {
        Ok(match location {
            Location::Sqlite(path) => Store::Sqlite(sqlite::SqliteStore::open(path)?),
            Location::Postgres(target) => {
                Store::Postgres(Box::new(pg::PgStore::open(target).await?))
            }
        })
    }

    /// Opens the history at `location` only if one is there (`None`: no
    /// SQLite file, or no wf schema on the PostgreSQL server), creating
    /// nothing: for the commands that only read.
    pub async fn open_existing(location: &Location) -> Result<Option<Store>> {
        Ok(match location {
            Location::Sqlite(path) if !path.exists() => None,
            Location::Sqlite(_) => Some(Store::open(location).await?),
            Location::Postgres(target) => pg::PgStore::open_existing(target)
                .await?
                .map(|p| Store::Postgres(Box::new(p))),
        })
    }

    pub fn location(&self) -> Location {
        match self {
            Store::Sqlite(s) => Location::Sqlite(s.path().to_path_buf()),
            Store::Postgres(p) => Location::Postgres(Box::new(p.target().clone())),
            Store::Lent(shared) => shared.location().clone(),
        }
    }

    /// How messages name the database.
    pub fn describe(&self) -> String {
        self.location().describe()
    }

    /// Whether this is a store lent to a child run in its parent's process
    /// ([`Store::Lent`]), whose parent goes on from its commits.
    pub fn is_lent(&self) -> bool {
        matches!(self, Store::Lent(_))
    }

    /// Whether a connection whose request just failed is made again for
    /// the next one rather than used once more: a server's may have been
    /// lost (PostgreSQL); a file's stays good (SQLite, and a lent one,
    /// whose pool checks its connections).
    pub fn reconnects_after_an_error(&self) -> bool {
        matches!(self, Store::Postgres(_))
    }

    /// Whether the connection can serve another run (a PostgreSQL one that
    /// was lost cannot).
    pub fn is_usable(&self) -> bool {
        match self {
            Store::Sqlite(_) | Store::Lent(_) => true,
            Store::Postgres(p) => p.is_usable(),
        }
    }

    /// The folder where running attempts copy their output as it comes,
    /// masked, for `wf logs --follow` on the same machine; made (mode 0700)
    /// when an attempt needs it, removed when empty.
    pub fn live_dir(&self) -> PathBuf {
        match self {
            Store::Sqlite(s) => s.live_dir(),
            Store::Postgres(p) => p.live_dir(),
            Store::Lent(shared) => match shared.location() {
                Location::Sqlite(path) => sqlite::SqliteStore::live_dir_of(path),
                Location::Postgres(target) => pg::PgStore::live_dir_of(target),
            },
        }
    }

    pub async fn instance(&self, id: &InstanceId) -> Result<InstanceRow> {
        each!(self.instance(id))
    }

    /// What a read command shows of one instance (with every attempt when
    /// `attempts`), in one snapshot ([`InstanceView`]).
    pub async fn view(&self, id: &InstanceId, attempts: bool) -> Result<InstanceView> {
        let mut view = each!(self.view(id, attempts))?;
        sort_children(&mut view.children);
        Ok(view)
    }

    /// The children of instance `id`, in the order they were made.
    pub async fn children(&self, id: &InstanceId) -> Result<Vec<InstanceRow>> {
        let mut children = each!(self.children(id))?;
        sort_children(&mut children);
        Ok(children)
    }

    /// Runs the reads of `f` in one snapshot of the database, so that what
    /// a read command prints was all true at one moment (a step's row with
    /// the state its commit patched, a run with its spans). On SQLite, one
    /// read transaction; on PostgreSQL, one REPEATABLE READ transaction on
    /// the store's connection, read again whole if the connection was
    /// replaced meanwhile. For a store used by one task at a time (the read
    /// commands): another task's statements would run in the transaction.
    pub async fn snapshot<T, E: From<StoreError>>(
        &self,
        mut f: impl AsyncFnMut(&Store) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        match self {
            Store::Sqlite(s) => {
                let began = s.begin_snapshot()?;
                let out = f(self).await;
                if began {
                    s.end_snapshot();
                }
                out
            }
            Store::Postgres(p) => {
                let mut tries = 0;
                loop {
                    let generation = p.begin_snapshot().await?;
                    let out = f(self).await;
                    tries += 1;
                    if p.end_snapshot(generation).await || out.is_err() {
                        return out;
                    }
                    if tries >= 5 {
                        // Never a torn read: say so instead.
                        return Err(StoreError::Sql(format!(
                            "the connection to {} was replaced {tries} times while reading; try again",
                            self.describe()
                        ))
                        .into());
                    }
                }
            }
            Store::Lent(shared) => {
                let lease = shared.take().await?;
                Box::pin(lease.snapshot(f)).await
            }
        }
    }

    /// Instances, newest first, as `filter` says.
    pub async fn list_instances(&self, filter: &ListFilter) -> Result<Vec<InstanceRow>> {
        if filter.matches_nothing() {
            return Ok(Vec::new());
        }
        each!(self.list_instances(filter))
    }

    /// How many instances `filter` matches, whatever its `limit` (`wf list`
    /// says how many it did not show).
    pub async fn count_instances(&self, filter: &ListFilter) -> Result<u64> {
        if filter.matches_nothing() {
            return Ok(0);
        }
        each!(self.count_instances(filter))
    }

    /// How many instances of each status `filter` matches (its status and
    /// limit aside), each counted up to `cap` (a count of `cap`: at least
    /// that many).
    pub async fn count_by_status(
        &self,
        filter: &ListFilter,
        cap: u64,
    ) -> Result<Vec<(crate::vocab::InstanceStatus, u64)>> {
        if filter.matches_nothing() {
            return Ok(Vec::new());
        }
        each!(self.count_by_status(filter, cap))
    }

    /// How many children each of `parents` has (those with none left out).
    pub async fn children_counts(&self, parents: &[InstanceId]) -> Result<Vec<(InstanceId, u64)>> {
        each!(self.children_counts(parents))
    }

    pub async fn runs(&self, id: &InstanceId) -> Result<Vec<RunRow>> {
        each!(self.runs(id))
    }

    /// The `set_state` patch each step row committed (for `wf restart`;
    /// other reads leave `StepRow::state_patch` null).
    pub async fn state_patches(&self, id: &InstanceId) -> Result<Vec<(String, Value)>> {
        each!(self.state_patches(id))
    }

    pub async fn steps(&self, id: &InstanceId) -> Result<Vec<StepRow>> {
        each!(self.steps(id))
    }

    pub async fn attempts(&self, id: &InstanceId) -> Result<Vec<AttemptRow>> {
        each!(self.attempts(id))
    }

    /// The logs of one attempt of `key` (the last when `attempt` is None).
    pub async fn attempt_logs(
        &self,
        id: &InstanceId,
        key: &str,
        attempt: Option<i64>,
    ) -> Result<Option<AttemptLogs>> {
        each!(self.attempt_logs(id, key, attempt))
    }

    pub async fn definition_step_ids(&self, hash: &str) -> Result<Option<Vec<String>>> {
        each!(self.definition_step_ids(hash))
    }

    /// A pinned definition (with the hashes of the workflows it calls), if stored.
    pub async fn definition(&self, hash: &str) -> Result<Option<DefinitionRow>> {
        each!(self.definition(hash))
    }

    /// Every span of an instance, whole ([`SpanRow::restore`]).
    pub async fn spans(&self, id: &InstanceId) -> Result<Vec<SpanRow>> {
        let mut rows = each!(self.spans(id))?;
        self.restore_spans(id, &mut rows).await?;
        Ok(rows)
    }

    /// Gives stored spans back the attributes they were stored without.
    async fn restore_spans(&self, id: &InstanceId, rows: &mut [SpanRow]) -> Result<()> {
        if rows.iter().any(SpanRow::is_slim) {
            let workflow = self.instance(id).await?.workflow;
            let system = self.system();
            rows.iter_mut().for_each(|r| r.restore(&workflow, system));
        }
        Ok(())
    }

    /// Feeds every span of an instance to `f`, whole, in order, without
    /// holding them all.
    pub async fn each_span<E: From<StoreError>>(
        &self,
        id: &InstanceId,
        mut f: impl FnMut(SpanRow) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        // (No instance: no spans either.)
        let workflow = match self.instance(id).await {
            Ok(i) => i.workflow,
            Err(StoreError::NotFound(_)) => String::new(),
            Err(e) => return Err(e.into()),
        };
        let system = self.system();
        let f = |mut row: SpanRow| {
            row.restore(&workflow, system);
            f(row)
        };
        each!(self.each_span(id, f))
    }

    /// The (trace id, span id) of attempt `attempt` of unit `key`: a
    /// child's first run is a child of the attempt that made it.
    pub async fn attempt_span(
        &self,
        id: &InstanceId,
        key: &str,
        attempt: i64,
    ) -> Result<Option<(String, String)>> {
        each!(self.attempt_span(id, key, attempt))
    }

    pub async fn run_trace(&self, id: &InstanceId, run: i64) -> Result<Option<RunTrace>> {
        each!(self.run_trace(id, run))
    }

    /// Up to `limit` spans not sent live yet, after `after`.
    pub async fn unexported_spans(
        &self,
        id: &InstanceId,
        after: Option<&SpanRow>,
        limit: usize,
    ) -> Result<Vec<SpanRow>> {
        let mut rows = each!(self.unexported_spans(id, after, limit))?;
        self.restore_spans(id, &mut rows).await?;
        Ok(rows)
    }

    /// The result of a completed instance (`outputs:`), if it has one.
    pub async fn outputs(&self, id: &InstanceId) -> Result<Option<Value>> {
        each!(self.outputs(id))
    }

    /// What a run looks for while it runs: the cancel request (0: none; 1:
    /// cancel; 2: terminate, no compensations), and the
    /// events delivered and not taken (one round trip on PostgreSQL).
    pub async fn poll(&self, id: &InstanceId) -> Result<(CancelRequest, Vec<EventRow>)> {
        match self {
            Store::Sqlite(s) => Ok((s.cancel_requested(id)?, s.events_after(id, 0)?)),
            Store::Postgres(p) => p.poll(id).await,
            Store::Lent(shared) => Box::pin(shared.take().await?.poll(id)).await,
        }
    }

    /// Events delivered and not taken, after event `after`.
    pub async fn events_after(&self, id: &InstanceId, after: i64) -> Result<Vec<EventRow>> {
        each!(self.events_after(id, after))
    }

    /// Instances a worker should look at now, oldest first: sleeping ones
    /// whose timer is due, waiting ones whose event arrived or timed out, and
    /// running ones (whose holder may be gone).
    pub async fn due_instances(&self) -> Result<Vec<DueInstance>> {
        each!(self.due_instances())
    }

    /// Claims for `owner` (leasing them for `ttl_ms`, raising their epoch)
    /// up to `limit` instances that are due and whose lease is free or
    /// expired, oldest first, leaving out `skip`; on PostgreSQL, rows other
    /// workers are claiming are skipped, never waited for. Running
    /// instances whose holder died on this host before its lease expired
    /// are found with [`Store::due_instances`].
    pub async fn claim_due(
        &mut self,
        owner: &str,
        ttl_ms: i64,
        limit: usize,
        skip: &[InstanceId],
    ) -> Result<Vec<InstanceId>> {
        each!(self.claim_due(owner, ttl_ms, limit, skip))
    }

    /// Deletes ended instances (of `statuses`) last changed before `before`,
    /// with everything that belongs to them, `batch` instances a
    /// transaction; with `dry_run`, only counts them.
    pub async fn prune(
        &mut self,
        before: Timestamp,
        statuses: &[InstanceStatus],
        batch: usize,
        dry_run: bool,
        archive: Option<&mut dyn portable::Archive>,
        by: &crate::vocab::Actor,
    ) -> Result<Pruned> {
        let before = before.text();
        let statuses: Vec<String> = statuses.iter().map(|s| s.as_str().into()).collect();
        each!(self.prune(&before, &statuses, batch, dry_run, archive, by))
    }

    /// Gives the space of deleted rows back to the file system (SQLite);
    /// false where the backend does it by itself (PostgreSQL's autovacuum).
    pub async fn vacuum(&mut self) -> Result<bool> {
        match self {
            Store::Sqlite(s) => s.vacuum().map(|()| true),
            Store::Postgres(_) => Ok(false),
            Store::Lent(shared) => Box::pin(shared.take().await?.vacuum()).await,
        }
    }

    /// Waits until something may have become due (PostgreSQL: a
    /// notification from `wf signal`, a new instance, a released lease) or
    /// `timeout` passed, whichever is first.
    pub async fn wait_for_work(&self, timeout: std::time::Duration) {
        match self {
            Store::Sqlite(_) | Store::Lent(_) => tokio::time::sleep(timeout).await,
            Store::Postgres(p) => p.wait_for_work(timeout).await,
        }
    }

    /// Pins a new instance, and records its `start` action by its
    /// `started_by` with `detail`; false (nothing written) when the id is
    /// taken.
    /// One with a queue meets it in the same transaction (`queue::arrive`
    /// on SQLite): older queued ones its `debounce` replaces end skipped; it
    /// is admitted at once when it has room and a holder, else `on_full`
    /// applies. `holder_alive` judges the holders of the key's slots.
    pub async fn create_instance(
        &mut self,
        row: &InstanceRow,
        defs: &[DefinitionRow],
        detail: &str,
        holder_alive: &dyn Fn(&str) -> bool,
    ) -> Result<bool> {
        each!(self.create_instance(row, defs, detail, holder_alive))
    }

    /// Admits the instance `fence` holds if its queue has room for it now
    /// (a no-op for one admitted already or without a queue); otherwise it
    /// is `queued`, and the answer says where and why.
    pub async fn admit(
        &mut self,
        fence: &Fence,
        holder_alive: &dyn Fn(&str) -> bool,
    ) -> Result<queue::Admission> {
        each!(self.admit(fence, holder_alive))
    }

    /// Takes step lock `key` (at most `limit` holders, across instances and
    /// hosts) for unit `unit` of the instance `fence` holds: false while
    /// `limit` attempts whose instances' leases live hold it. A holder
    /// whose lease is dead is not counted, and loses the lock and its
    /// lease epoch when its place is taken. Refused (`Fenced`) once the
    /// caller's own lease expired. Given back by `Write::ReleaseLock`.
    pub async fn take_lock(
        &mut self,
        fence: &Fence,
        key: &str,
        limit: u32,
        unit: &str,
        holder_alive: &dyn Fn(&str) -> bool,
    ) -> Result<bool> {
        each!(self.take_lock(fence, key, limit, unit, holder_alive))
    }

    /// Every key with admitted or queued instances, or admissions in its
    /// rate's window, by key (`wf queue list`).
    pub async fn queues(&self) -> Result<Vec<queue::QueueSummary>> {
        each!(self.queues())
    }

    /// Where instance `id` stands in its queue now, writing nothing
    /// (`wf inspect`); `None` without a queue.
    pub async fn queue_standing(
        &self,
        id: &InstanceId,
        holder_alive: &dyn Fn(&str) -> bool,
    ) -> Result<Option<queue::Admission>> {
        each!(self.queue_standing(id, holder_alive))
    }

    /// Admits, leased to `owner` for `ttl_ms`, up to `max` queued instances
    /// no live process holds whose keys have room now, in each key's order.
    pub async fn admit_queued(
        &mut self,
        owner: &str,
        ttl_ms: i64,
        max: usize,
        holder_alive: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<InstanceId>> {
        each!(self.admit_queued(owner, ttl_ms, max, holder_alive))
    }

    /// Copies instance `from` (its instance row, runs, steps, and attempts
    /// with their logs; not its events nor its spans) to a new instance `to`,
    /// created `now` and leased to no one, recording `start` (its `start`
    /// action, whose actor it records as its starter); false (nothing
    /// written) when `to` is taken. `from` is only read.
    pub async fn copy_instance(
        &mut self,
        from: &InstanceId,
        to: &InstanceId,
        now: Timestamp,
        start: &ActionRow,
    ) -> Result<bool> {
        let now = now.text();
        each!(self.copy_instance(from, to, &now, start))
    }

    /// Asks whatever process drives the instance to cancel it, recording
    /// `action` (a request's; none when a parent ends its children).
    pub async fn request_cancel(
        &mut self,
        id: &InstanceId,
        ask: CancelRequest,
        action: Option<&ActionRow>,
    ) -> Result<()> {
        each!(self.request_cancel(id, ask, action))
    }

    /// Delivers an event (`wake`: the instance waits for it, make it due),
    /// recording `action`.
    pub async fn deliver_event(
        &mut self,
        id: &InstanceId,
        name: &str,
        payload: &Value,
        traceparent: Option<&str>,
        wake: bool,
        action: &ActionRow,
    ) -> Result<()> {
        each!(self.deliver_event(id, name, payload, traceparent, wake, action))
    }

    /// Claims the instance for `owner` (raising its epoch) unless a live
    /// holder has it (`Err(holder)`), and reads its history, atomically.
    pub async fn take_over(
        &mut self,
        id: &InstanceId,
        owner: &str,
        ttl_ms: i64,
        holder_alive: impl Fn(&str) -> bool,
    ) -> Result<std::result::Result<(Fence, History), String>> {
        each!(self.take_over(id, owner, ttl_ms, holder_alive))
    }

    /// Extends the lease; `Fenced` once another process took the instance.
    pub async fn renew(&self, fence: &Fence, ttl_ms: i64) -> Result<()> {
        each!(self.renew(fence, ttl_ms))
    }

    /// Gives the instance up (if the fence still holds it).
    pub async fn release(&mut self, fence: &Fence) -> Result<()> {
        each!(self.release(fence))
    }

    /// Marks spans sent live, under the fence.
    pub async fn mark_exported(&mut self, fence: &Fence, spans: &[SpanRow]) -> Result<()> {
        each!(self.mark_exported(fence, spans))
    }

    /// Resolves a unique instance id prefix to the full id.
    pub async fn resolve_id(&self, prefix: &str) -> Result<InstanceId> {
        if prefix.is_empty() {
            return Err(StoreError::NotFound(prefix.into()));
        }
        let matches = each!(self.ids_with_prefix(prefix))?;
        if matches.iter().any(|m| m == prefix) {
            return Ok(prefix.into());
        }
        match matches.len() {
            0 => Err(StoreError::NotFound(prefix.into())),
            1 => Ok(matches.into_iter().next().unwrap_or_default().into()),
            _ => Err(StoreError::Ambiguous {
                prefix: prefix.into(),
                matches,
            }),
        }
    }

    /// The most recently created instance that is not a child (the
    /// children of `workflow:` steps are nested in their parent's), if any.
    pub async fn latest_instance_id(&self) -> Result<Option<InstanceId>> {
        each!(self.latest_instance_id()).map(|id| id.map(InstanceId::from))
    }

    /// Applies `writes` in one transaction, refused (nothing applied) unless
    /// `fence` still holds the instance.
    pub async fn commit(&mut self, fence: &Fence, writes: &[Write]) -> Result<()> {
        match self {
            Store::Lent(shared) if shared.groups_commits() => {
                shared::grouped(shared.commit(fence, writes.to_vec(), true)).await
            }
            _ => each!(self.commit(fence, writes)),
        }
    }

    /// [`Store::commit`], begun and left under way while the caller goes on
    /// (SQLite: made on a thread of wf's own; PostgreSQL: sent, the reply
    /// awaited later); nothing may depend on it before
    /// [`PendingCommit::done`] returned `Ok`. `Err`: refused already,
    /// nothing applied.
    pub async fn begin_commit(
        &mut self,
        fence: &Fence,
        writes: Vec<Write>,
    ) -> Result<PendingCommit<'_>> {
        match self {
            Store::Sqlite(s) => s.begin_commit(fence, writes),
            Store::Postgres(p) => Ok(p.begin_commit(fence, writes).await),
            Store::Lent(shared) => shared::begin_commit(shared, fence, writes).await,
        }
    }

    /// [`Store::commit`] left for the next synced commit to flush: applied
    /// and visible to every connection when this returns, not waited for
    /// on the disk. For a commit after which the run (or a child it made)
    /// makes a synced commit before anything outside the database may
    /// depend on it: no process or request starts, no command returns,
    /// between them (docs/execution.md, Durability). Both backends' logs
    /// are one sequence, so that later sync flushes this commit too.
    pub async fn commit_before_sync(&mut self, fence: &Fence, writes: &[Write]) -> Result<()> {
        match self {
            Store::Sqlite(s) => s.commit_unsynced(fence, writes),
            // Awaited: a child's first commit, on another connection, goes
            // on from it.
            Store::Postgres(p) => p.commit_unsynced_awaited(fence, writes).await,
            Store::Lent(shared) if shared.groups_commits() => {
                shared::grouped(shared.commit(fence, writes.to_vec(), false)).await
            }
            Store::Lent(_) => self.commit_unsynced(fence, writes).await,
        }
    }

    /// [`Store::commit`] without waiting for the disk: for what need not
    /// outlive the machine (a process group does not outlive a power loss).
    pub async fn commit_unsynced(&mut self, fence: &Fence, writes: &[Write]) -> Result<()> {
        match self {
            Store::Sqlite(s) => s.commit_unsynced(fence, writes),
            Store::Postgres(p) => p.commit_unsynced(fence, writes).await,
            // The caller's next request may go on another connection.
            Store::Lent(shared) => match &mut *shared.take().await? {
                Store::Postgres(p) => p.commit_unsynced_awaited(fence, writes).await,
                other => Box::pin(other.commit_unsynced(fence, writes)).await,
            },
        }
    }
}
