//! The SQLite backend: the history in one file beside the user's work.
//! Short IMMEDIATE transactions, so a step's output, its state patch and its
//! outcome land together or not at all (`history` holds the statements of
//! the rows, `lease` those of ownership and claims, `spans` those of traces).
//!
//! PRAGMAs, set on every connection:
//! - `journal_mode=WAL`: readers (`wf inspect`, `wf list`) never block the
//!   writer, and a commit is one append to the WAL.
//! - `synchronous=FULL` (default) fsyncs the WAL on every commit, so a
//!   completed step survives a power loss; `WF_DURABILITY=normal` selects
//!   `synchronous=NORMAL` (survives a process crash, not a power loss).
//!   A commit that starts steps is made on a thread of wf's own
//!   (`offthread`), while the steps' processes load. A commit that need not
//!   survive a power loss (a process group's record) is made with NORMAL.
//! - A persistent WAL (`SQLITE_FCNTL_PERSIST_WAL`): the last connection to
//!   close still checkpoints the WAL into the database file, but leaves the
//!   `-wal` file (and `-shm`) in place instead of deleting it, so the next
//!   run writes over blocks the file already has. Deleting it cost about 2
//!   ms at every exit, and a WAL that grows makes each commit's `fsync`
//!   write the file's size too: 300 `/bin/true` steps on a database used
//!   before, 898 against 839 µs a step (11 alternated runs).
//! - The WAL's frames of a FULL commit reach the file in one write instead
//!   of two per frame (`walbuf`, a VFS that is the default one for every
//!   other file).
//! - The checkpoint SQLite makes when the last connection closes syncs
//!   the WAL, never the database file, whose copy of the pages the WAL
//!   keeps (`closing`).
//! - `wal_autocheckpoint=250` (pages; SQLite's default is 1000): the WAL
//!   starts over once its frames reach 250 and a checkpoint copied them.
//!   Every process's first connection rebuilds the WAL's index from all
//!   the frames the WAL holds, and its closing checkpoint copies them all
//!   again, so a WAL left long costs every `wf` command: a 1-step `wf run`
//!   6.5 against 7.3–7.7 ms on a database of 100,000 instances, `wf worker
//!   --once` 4.5 against 5.8–6.6 ms. A new database's WAL also stops
//!   growing sooner, and a commit that grows the file costs more than one
//!   that writes over it: 300 `/bin/true` steps on a new database 851 →
//!   829 µs a step (31 alternated runs); 1000 steps 799 → 807 (15 runs),
//!   the more frequent checkpoints' cost.
//! - `busy_timeout=10000`: a second process waits for the write lock instead
//!   of failing at once (leases, not locks, keep two runners apart).
//!   `WF_BUSY_TIMEOUT_MS` overrides the 10 s (the tests use it so that a
//!   locked database fails fast).
//! - `foreign_keys=ON`: rows always belong to an instance.

mod actions;
mod cache;
mod closing;
mod copy;
mod history;
mod lease;
mod list;
mod metrics;
mod offthread;
mod portable;
pub(in crate::store) use portable::single_file;
mod prune;
#[cfg(test)]
mod query_plans;
mod queue;
mod registry;
mod schedules;
mod schema;
mod spans;
mod types;
mod walbuf;
mod write;

use super::rows::*;
use super::{ActionRow, Durability, Result, StoreError};
use lease::check_fence;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Not `From<rusqlite::Error>`-as-source: the one-line message would repeat
/// the SQLite error (`…: database is locked: Error code 5: …`).
impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        match &e {
            rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ReadOnly => {
                StoreError::ReadOnly(sqlite_reason(&e))
            }
            rusqlite::Error::SqliteFailure(f, _)
                if matches!(
                    f.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) =>
            {
                StoreError::Busy(sqlite_reason(&e))
            }
            _ => StoreError::Sql(sqlite_reason(&e)),
        }
    }
}

fn sqlite_reason(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(f, Some(msg)) => format!("{msg} ({:?})", f.code),
        other => other.to_string(),
    }
}

/// [`Durability`] as SQLite's `synchronous` setting.
impl Durability {
    /// The statement that sets it on a connection.
    fn pragma(self) -> &'static str {
        match self {
            Durability::Full => "PRAGMA synchronous=FULL",
            Durability::Normal => "PRAGMA synchronous=NORMAL",
        }
    }

    /// Commits `tx`, on a connection set to this durability: a FULL
    /// commit's WAL frames are written in one call (`walbuf`).
    fn commit(self, tx: rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
        match self {
            Durability::Full => walbuf::synced_commit(|| tx.commit()),
            Durability::Normal => tx.commit(),
        }
    }
}

/// Ids that start with ?1: those from ?1 up to ?2, the first text after them
/// ([`prefix_end`]; an empty blob, above any text, when there is none), so
/// that the primary key's index finds them.
const IDS_WITH_PREFIX_SQL: &str = "SELECT id FROM instances WHERE id >= ?1 AND id < ?2 \
     AND substr(id, 1, length(?1)) = ?1 ORDER BY id = ?1 DESC, id LIMIT 6";

use crate::store::list_filter::{ListFilter, prefix_end};

/// A runner's write transaction on `conn`: IMMEDIATE (takes the write lock
/// up front, so it never fails half-way with SQLITE_BUSY on upgrade), then
/// the check that `fence` still holds the instance (refused with
/// [`StoreError::Fenced`] if not).
fn fenced<'c>(conn: &'c mut Connection, fence: &Fence) -> Result<rusqlite::Transaction<'c>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    check_fence(&tx, fence)?;
    Ok(tx)
}

pub struct SqliteStore {
    /// Here, or lent to the commit thread (`offthread`).
    conn: offthread::Conn,
    path: PathBuf,
    durability: Durability,
}

impl SqliteStore {
    /// Opens (creating if needed, mode 0600) the database at `path` and brings
    /// its schema up to date.
    pub fn open(path: &Path) -> Result<SqliteStore> {
        let err = |reason: String| StoreError::Open {
            path: path.display().to_string(),
            reason,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                // EEXIST/ENOTDIR here: a file stands where a folder should be.
                let reason = match e.kind() {
                    std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::NotADirectory => {
                        "a file (not a folder) is in the way".to_string()
                    }
                    _ => crate::workflow::io_reason(&e),
                };
                err(format!("cannot create folder {}: {reason}", dir.display()))
            })?;
        }
        if path.is_dir() {
            return Err(err("is a directory, not a database file".into()));
        }
        if !path.exists() {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                // Another process may have created it a moment ago: fine.
                .or_else(|e| {
                    if e.kind() == std::io::ErrorKind::AlreadyExists {
                        std::fs::File::open(path)
                    } else {
                        Err(e)
                    }
                })
                .map_err(|e| err(format!("cannot create: {}", crate::workflow::io_reason(&e))))?;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = match walbuf::vfs() {
            Some(vfs) => Connection::open_with_flags_and_vfs(path, flags, vfs),
            None => Connection::open_with_flags(path, flags),
        }
        .map_err(|e| err(sqlite_reason(&e)))?;
        let mut store = SqliteStore {
            conn: offthread::Conn::new(conn),
            path: path.to_path_buf(),
            durability: Durability::from_env(),
        };
        store.configure(store.durability).map_err(|e| {
            err(match e {
                StoreError::Sql(s) | StoreError::ReadOnly(s) | StoreError::Busy(s) => s,
                other => other.to_string(),
            })
        })?;
        store.migrate()?;
        Ok(store)
    }

    fn configure(&mut self, durability: Durability) -> Result<()> {
        let busy_ms = std::env::var("WF_BUSY_TIMEOUT_MS")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(10_000)
            .min(i32::MAX as u64); // rusqlite panics above i32::MAX ms
        self.conn
            .busy_timeout(std::time::Duration::from_millis(busy_ms))?;
        // The engine cycles through a few dozen statements per step.
        self.conn.set_prepared_statement_cache_capacity(64);
        // Switching a new database to WAL needs it to itself for a moment: a
        // second process opening it at the same instant (a `wf inspect` beside
        // the `wf run` that creates it) makes the switch report the old mode,
        // or fail busy, without waiting. Try again until the busy timeout.
        let until = std::time::Instant::now() + std::time::Duration::from_millis(busy_ms);
        loop {
            let mode = self
                .conn
                .query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0));
            match mode {
                Ok(m) if m.eq_ignore_ascii_case("wal") => break,
                Ok(_) | Err(rusqlite::Error::SqliteFailure(_, _))
                    if std::time::Instant::now() < until =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                Ok(m) => {
                    return Err(StoreError::Corrupt(format!(
                        "could not enable WAL (journal_mode={m})"
                    )));
                }
                Err(e) => return Err(e.into()),
            }
        }
        self.conn.execute_batch(&format!(
            "{}; PRAGMA foreign_keys=ON; PRAGMA wal_autocheckpoint=250;",
            durability.pragma()
        ))?;
        // The WAL file is kept when the last connection closes (after the
        // checkpoint that closing makes, so the database file alone holds
        // everything): see the module's doc. Only a matter of speed: where
        // refused, the WAL is deleted at exit as by default.
        closing::persist_wal(&self.conn);
        Ok(())
    }

    fn migrate(&mut self) -> Result<()> {
        let known = schema::MIGRATIONS.len() as i64;
        let version: i64 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version > known {
            return Err(StoreError::TooNew {
                path: self.path.display().to_string(),
                found: version,
                known,
            });
        }
        if version == known {
            return Ok(());
        }
        // Every pending migration in one transaction: one commit (one
        // `fsync` with FULL) for a new database instead of one per
        // migration, which was half of a fresh 1-step `wf run` (12.2 ms
        // against 6.9 ms on a migrated database). A failing migration
        // leaves the database as it was.
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Exclusive)?;
        // Another process may have migrated while we waited for the lock.
        let now: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if now == 0 {
            // A new database: made as the migrations would leave it.
            for sql in schema::CURRENT {
                tx.execute_batch(sql)?;
            }
        } else {
            for sql in schema::MIGRATIONS.iter().skip(now as usize) {
                tx.execute_batch(sql)?;
            }
        }
        if now < known {
            tx.execute_batch(&format!("PRAGMA user_version={known}"))?;
        }
        // A new database's schema is some 40 pages: one write, not 80.
        self.durability.commit(tx)?;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The folder (`<database>.live`) where running attempts copy their
    /// output as it comes, masked, for `wf logs --follow`; made (mode 0700)
    /// when an attempt needs it, removed when empty.
    pub fn live_dir(&self) -> PathBuf {
        Self::live_dir_of(&self.path)
    }

    /// [`SqliteStore::live_dir`] of the database at `path`.
    pub fn live_dir_of(path: &std::path::Path) -> PathBuf {
        PathBuf::from(format!("{}.live", path.display()))
    }

    /// Starts an IMMEDIATE write transaction (takes the write lock up front, so
    /// it never fails half-way with SQLITE_BUSY on upgrade).
    fn write(&mut self) -> Result<rusqlite::Transaction<'_>> {
        Ok(self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?)
    }

    /// A runner's write transaction ([`fenced`]).
    fn fenced(&mut self, fence: &Fence) -> Result<rusqlite::Transaction<'_>> {
        fenced(&mut self.conn, fence)
    }

    /// Runs `f` in a fenced transaction whose commit is not fsynced
    /// (`synchronous=NORMAL` for this one commit). For what must survive a
    /// crash of wf but not of the machine: the commit reaches the operating
    /// system before this returns, and the next durable commit flushes it
    /// with the rest of the WAL. (A process group, say, does not outlive a
    /// power loss.) NORMAL, not OFF: in WAL mode both skip the commit's
    /// sync, but a checkpoint this commit runs must still sync the WAL
    /// before and the database after, or the WAL could be reused over pages
    /// the database file does not hold on disk yet.
    fn fenced_unsynced<T>(
        &mut self,
        fence: &Fence,
        f: impl FnOnce(&Connection) -> Result<T>,
    ) -> Result<T> {
        self.unsynced(|s| {
            let tx = s.fenced(fence)?;
            let out = f(&tx)?;
            tx.commit()?;
            Ok(out)
        })
    }

    /// Runs `f` with the connection set to `synchronous=NORMAL` (see
    /// [`SqliteStore::fenced_unsynced`]); its commits must not go through
    /// `Durability::commit` (`walbuf` gathers only synced ones).
    fn unsynced<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        // Cached statements: this runs once a step, and parsing costs more
        // than running them.
        let set = |conn: &Connection, sql: &str| -> Result<()> {
            conn.prepare_cached(sql)?.execute([])?;
            Ok(())
        };
        set(&self.conn, "PRAGMA synchronous=NORMAL")?;
        let result = f(self);
        let restored = set(&self.conn, self.durability.pragma());
        if restored.is_err() {
            // The connection stays NORMAL: say so, so that no commit is
            // taken for a synced one (`walbuf` gathers only those).
            self.durability = Durability::Normal;
        }
        let out = result?;
        restored?;
        Ok(out)
    }

    // ---- the engine-level interface: every operation of wf on its history ----

    pub fn instance(&self, id: &str) -> Result<InstanceRow> {
        history::instance(&self.conn, id)
    }

    /// The instance, its runs, steps, events, fire time and (when
    /// `attempts`) its attempts, in one read transaction: one snapshot of
    /// the WAL, whatever commits meanwhile.
    pub fn view(&self, id: &str, attempts: bool) -> Result<InstanceView> {
        let began = self.begin_snapshot()?;
        let c = &self.conn;
        let view = (|| {
            Ok(InstanceView {
                instance: history::instance(c, id)?,
                runs: history::runs(c, id)?,
                steps: history::steps(c, id)?,
                attempts: if attempts {
                    history::attempts(c, id)?
                } else {
                    Vec::new()
                },
                events: history::delivered_events(c, id)?,
                fire: schedules::instance_fire(c, id)?,
                children: history::children(c, id)?,
                actions: actions::actions(c, id)?,
            })
        })();
        if began {
            self.end_snapshot();
        }
        view
    }

    /// Begins a read transaction (its snapshot is taken by the first read)
    /// for [`Store::snapshot`](crate::store::Store::snapshot); false when
    /// one is open already (the reads then belong to it).
    pub fn begin_snapshot(&self) -> Result<bool> {
        if !self.conn.is_autocommit() {
            return Ok(false);
        }
        self.conn.execute_batch("BEGIN DEFERRED")?;
        Ok(true)
    }

    /// Ends what [`SqliteStore::begin_snapshot`] began.
    pub fn end_snapshot(&self) {
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("COMMIT");
        }
    }

    /// Instances, newest first, as `filter` says.
    pub fn list_instances(&self, filter: &ListFilter) -> Result<Vec<InstanceRow>> {
        list::list_instances(&self.conn, filter)
    }

    pub fn count_instances(&self, filter: &ListFilter) -> Result<u64> {
        list::count_instances(&self.conn, filter)
    }

    pub fn count_by_status(
        &self,
        filter: &ListFilter,
        cap: u64,
    ) -> Result<Vec<(crate::vocab::InstanceStatus, u64)>> {
        list::count_by_status(&self.conn, filter, cap)
    }

    pub fn children_counts(&self, parents: &[InstanceId]) -> Result<Vec<(InstanceId, u64)>> {
        list::children_counts(&self.conn, parents)
    }

    pub fn runs(&self, id: &str) -> Result<Vec<RunRow>> {
        history::runs(&self.conn, id)
    }

    pub fn state_patches(&self, id: &str) -> Result<Vec<(String, Value)>> {
        history::state_patches(&self.conn, id)
    }

    pub fn steps(&self, id: &str) -> Result<Vec<StepRow>> {
        history::steps(&self.conn, id)
    }

    pub fn attempts(&self, id: &str) -> Result<Vec<AttemptRow>> {
        history::attempts(&self.conn, id)
    }

    /// The entry of a `cache:` step's key not expired at `now`.
    pub fn cache_entry(
        &self,
        at: (&str, &str, &str, &str),
        now: crate::vocab::Timestamp,
    ) -> Result<Option<crate::store::CacheEntry>> {
        cache::cache_entry(&self.conn, at, now)
    }

    /// The logs of one attempt of `key` (the last when `attempt` is None).
    pub fn attempt_logs(
        &self,
        id: &str,
        key: &str,
        attempt: Option<i64>,
    ) -> Result<Option<AttemptLogs>> {
        history::attempt_logs(&self.conn, id, key, attempt)
    }

    pub fn definition_step_ids(&self, hash: &str) -> Result<Option<Vec<String>>> {
        history::definition_step_ids(&self.conn, hash)
    }

    pub fn definition(&self, hash: &str) -> Result<Option<DefinitionRow>> {
        history::definition(&self.conn, hash)
    }

    pub fn spans(&self, id: &str) -> Result<Vec<SpanRow>> {
        spans::spans(&self.conn, id)
    }

    /// Feeds every span of an instance to `f`, in order, without holding them all.
    pub fn each_span<E: From<StoreError>>(
        &self,
        id: &str,
        f: impl FnMut(SpanRow) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        spans::each_span(&self.conn, id, f)
    }

    pub fn children(&self, id: &str) -> Result<Vec<InstanceRow>> {
        history::children(&self.conn, id)
    }

    pub fn attempt_span(
        &self,
        id: &str,
        key: &str,
        attempt: i64,
    ) -> Result<Option<(String, String)>> {
        spans::attempt_span(&self.conn, id, key, attempt)
    }

    pub fn run_trace(&self, id: &str, run: i64) -> Result<Option<RunTrace>> {
        spans::run_trace(&self.conn, id, run)
    }

    /// Up to `limit` spans not sent live yet, after `after`.
    pub fn unexported_spans(
        &self,
        id: &str,
        after: Option<&SpanRow>,
        limit: usize,
    ) -> Result<Vec<SpanRow>> {
        spans::unexported_spans(&self.conn, id, after, limit)
    }

    /// The result of a completed instance (`outputs:`), if it has one.
    pub fn outputs(&self, id: &str) -> Result<Option<Value>> {
        history::outputs(&self.conn, id)
    }

    /// 0: no cancel asked; 1: cancel; 2: terminate (no compensations).
    pub fn cancel_requested(&self, id: &str) -> Result<CancelRequest> {
        history::cancel_requested(&self.conn, id)
    }

    /// Events delivered and not taken, after event `after`.
    pub fn events_after(&self, id: &str, after: i64) -> Result<Vec<EventRow>> {
        history::events_after(&self.conn, id, after)
    }

    /// Instances a worker should look at now, oldest first: sleeping ones
    /// whose timer is due, waiting ones whose event arrived or timed out, and
    /// running ones (whose holder may be gone).
    pub fn due_instances(&self) -> Result<Vec<DueInstance>> {
        lease::due_instances(&self.conn)
    }

    /// Pins a new instance and `defs`; false (nothing written) when the id is taken.
    pub fn create_instance(
        &mut self,
        row: &InstanceRow,
        defs: &[DefinitionRow],
        detail: &str,
        holder_alive: &dyn Fn(&str) -> bool,
    ) -> Result<bool> {
        let tx = self.write()?;
        if history::instance(&tx, &row.id).is_ok() {
            return Ok(false);
        }
        history::insert_instance(&tx, row, defs, detail)?;
        queue::arrive(
            &tx,
            row,
            chrono::Utc::now().timestamp_millis(),
            holder_alive,
        )?;
        tx.commit()?;
        Ok(true)
    }

    /// Admits the instance `fence` holds if its queue has room for it now.
    pub fn admit(
        &mut self,
        fence: &Fence,
        holder_alive: &dyn Fn(&str) -> bool,
    ) -> Result<crate::store::queue::Admission> {
        let tx = self.fenced(fence)?;
        let now_ms = chrono::Utc::now().timestamp_millis();
        let admission = queue::admit_one(&tx, &fence.instance, now_ms, holder_alive)?;
        tx.commit()?;
        Ok(admission)
    }

    /// Takes a step lock for a unit of the instance `fence` holds, if it
    /// has room.
    pub fn take_lock(
        &mut self,
        fence: &Fence,
        key: &str,
        limit: u32,
        unit: &str,
        holder_alive: &dyn Fn(&str) -> bool,
    ) -> Result<bool> {
        let tx = self.fenced(fence)?;
        let taken = queue::take_lock(&tx, fence, key, limit, unit, holder_alive)?;
        tx.commit()?;
        Ok(taken)
    }

    /// Every key with admitted or queued instances (`wf queue list`).
    pub fn queues(&self) -> Result<Vec<crate::store::queue::QueueSummary>> {
        queue::summaries(&self.conn)
    }

    /// Where an instance stands in its queue (`wf inspect`).
    pub fn queue_standing(
        &self,
        id: &str,
        holder_alive: &dyn Fn(&str) -> bool,
    ) -> Result<Option<crate::store::queue::Admission>> {
        queue::standing(&self.conn, id, holder_alive)
    }

    /// Admits queued instances that have room, leased to `owner`.
    pub fn admit_queued(
        &mut self,
        owner: &str,
        ttl_ms: i64,
        max: usize,
        holder_alive: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<InstanceId>> {
        let keys = queue::admissible_keys(&self.conn, max, holder_alive)?;
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let tx = self.write()?;
        let ids = queue::admit_queued(&tx, &keys, owner, ttl_ms, max, holder_alive)?;
        tx.commit()?;
        Ok(ids)
    }

    /// Asks whatever process drives the instance to cancel it.
    pub fn request_cancel(
        &mut self,
        id: &str,
        ask: CancelRequest,
        action: Option<&ActionRow>,
    ) -> Result<()> {
        let tx = self.write()?;
        history::request_cancel(&tx, id, ask)?;
        if let Some(a) = action {
            actions::insert_action(&tx, a)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Delivers an event (`wake`: the instance waits for it, make it due).
    pub fn deliver_event(
        &mut self,
        id: &str,
        name: &str,
        payload: &Value,
        traceparent: Option<&str>,
        wake: bool,
        action: &ActionRow,
    ) -> Result<()> {
        let tx = self.write()?;
        history::insert_event(&tx, id, name, payload, traceparent, wake)?;
        actions::insert_action(&tx, action)?;
        tx.commit()?;
        Ok(())
    }

    /// Claims the instance for `owner` (raising its epoch) unless a live
    /// holder has it (`Err(holder)`), and reads its history, in one transaction.
    pub fn take_over(
        &mut self,
        id: &str,
        owner: &str,
        ttl_ms: i64,
        holder_alive: impl Fn(&str) -> bool,
    ) -> Result<std::result::Result<(Fence, History), String>> {
        let tx = self.write()?;
        // Under the write lock: the expiry is set from now.
        let granted = std::time::Instant::now();
        let fence = match lease::acquire_lease(&tx, id, owner, ttl_ms, holder_alive)? {
            Ok(fence) => fence,
            Err(holder) => return Ok(Err(holder)),
        };
        let mut history = history::history(&tx, id)?;
        tx.commit()?;
        history.granted = Some(granted);
        Ok(Ok((fence, history)))
    }

    /// Extends the lease; `Fenced` once another process took the instance.
    pub fn renew(&self, fence: &Fence, ttl_ms: i64) -> Result<()> {
        lease::renew_lease(&self.conn, fence, ttl_ms)
    }

    /// Gives the instance up (if the fence still holds it).
    pub fn release(&mut self, fence: &Fence) -> Result<()> {
        let tx = self.write()?;
        lease::release_lease(&tx, fence)?;
        tx.commit()?;
        Ok(())
    }

    /// Marks spans sent live, under the fence.
    pub fn mark_exported(&mut self, fence: &Fence, spans: &[SpanRow]) -> Result<()> {
        let tx = self.fenced(fence)?;
        spans::mark_exported(&tx, spans)?;
        tx.commit()?;
        Ok(())
    }

    pub fn claim_due(
        &mut self,
        owner: &str,
        ttl_ms: i64,
        limit: usize,
        skip: &[InstanceId],
    ) -> Result<Vec<InstanceId>> {
        let tx = self.write()?;
        let ids = lease::claim_due(&tx, owner, ttl_ms, limit, skip)?;
        tx.commit()?;
        Ok(ids)
    }

    /// Up to 6 ids that start with `prefix`, the exact match (if any) first.
    /// Every command that takes an id resolves it here: a range of the
    /// primary key, not a look at every instance (6.5 ms at 100,000).
    pub fn ids_with_prefix(&self, prefix: &str) -> Result<Vec<String>> {
        use rusqlite::types::Value as Sql;
        let end = prefix_end(prefix).map_or(Sql::Blob(Vec::new()), Sql::Text);
        let mut stmt = self.conn.prepare_cached(IDS_WITH_PREFIX_SQL)?;
        let matches: Vec<String> = stmt
            .query_map(params![prefix, end], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(matches)
    }

    /// The most recently created instance, if any.
    pub fn latest_instance_id(&self) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row(
                "SELECT id FROM instances WHERE parent_id IS NULL ORDER BY created_at DESC, rowid DESC LIMIT 1",
                [],
                |r| r.get(0),
            )
            .optional()?)
    }
}

impl Drop for SqliteStore {
    /// The checkpoint SQLite makes when the last connection closes skips
    /// the database file's sync, never the WAL's (`closing`).
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take()
            && closing::may_skip_db_sync(&conn)
        {
            closing::close(conn);
        }
    }
}
