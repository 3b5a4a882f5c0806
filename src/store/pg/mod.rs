//! The PostgreSQL backend: one history shared by workers on many machines.
//!
//! - One connection per store, driven by its own task; wf never blocks on it
//!   (every method is `async`), and statements are prepared once per
//!   connection.
//! - A step's batch of writes (its attempt, its result, the next attempt,
//!   their spans) is one statement, fence included, in a transaction of its
//!   own; any other batch is one transaction sent as one pipeline (BEGIN,
//!   the fence check, the writes, COMMIT) without waiting for each reply.
//!   Either way a commit costs about one round trip.
//! - The fence (`check_fence`, see `schema`) locks the instance's row for
//!   the transaction and aborts it unless the runner's epoch is current; a
//!   step's statement does the same check inline and writes nothing unless
//!   it holds (`batch::one_statement`).
//! - Workers learn of new work by `LISTEN`ing on `wf_<schema>`: `wf signal`,
//!   new instances and released leases `NOTIFY` it; polling covers a lost
//!   notification.
//!
//! Its files mirror `sqlite/`'s by name and job (`store`'s doc lists them);
//! this module holds the connection's requests (`query`, `exec`, `pipeline`).

/// The server's clock in unix ms: every lease is set and judged by it, never
/// by a client's, so a worker whose clock runs ahead cannot take a live
/// holder's instance, nor one whose clock lags hold a lease longer.
macro_rules! server_ms {
    () => {
        "(extract(epoch from clock_timestamp()) * 1000)::bigint"
    };
}

/// A lease's time left by the server's clock (ms, negative once expired);
/// `history::lease_expiry` turns it into an expiry by this process's clock.
macro_rules! lease_left {
    () => {
        concat!("lease_expires_ms - ", server_ms!())
    };
}

/// An instance's place under its queue (`instance_row`'s columns 21–25).
macro_rules! queue_cols {
    () => {
        "queue_key, queue_priority, queue_limits, queue_hold, admitted"
    };
}

mod actions;
mod batch;
mod cache;
mod conn;
mod copy;
mod history;
mod insert;
mod lease;
mod line;
mod list;
mod load;
mod metrics;
mod portable;
mod prune;
#[cfg(test)]
mod query_plans;
mod queue;
mod registry;
mod schedules;
mod schema;
mod spans;
mod target;
mod text;
mod types;
mod url;
mod write;

use super::{Result, StoreError};
use crate::vocab::InstanceId;
use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::Poll;
use std::time::Instant;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row, Statement};

pub use conn::{call_deadline, unanswered};
pub use target::PgTarget;
#[cfg(test)]
pub(super) use write::CommitPath;

/// The SQLSTATE `check_fence` raises.
const FENCED: &str = "WF001";
/// The SQLSTATE `check_commit` raises for a commit that is in already.
const COMMITTED: &str = "WF002";

/// A statement parameter, owned so that a pipeline can outlive its builder.
pub(super) type Param = Box<dyn ToSql + Sync + Send>;

/// One request of a pipeline.
pub(super) enum Op {
    /// A statement with no parameters, as simple query text (BEGIN, COMMIT).
    Simple(&'static str),
    /// A statement whose rows are not wanted: its row count is.
    Exec(&'static str, Vec<Param>),
    /// A query whose rows are.
    Query(&'static str, Vec<Param>),
}

/// What a request of a pipeline returned.
pub(super) enum Out {
    Done,
    Count(u64),
    Rows(Vec<Row>),
}

impl Out {
    pub(super) fn rows(self) -> Vec<Row> {
        match self {
            Out::Rows(r) => r,
            _ => Vec::new(),
        }
    }

    pub(super) fn count(&self) -> u64 {
        match self {
            Out::Count(n) => *n,
            _ => 0,
        }
    }

    /// The number a `SELECT count(*)` answered (a statement whose
    /// data-modifying CTEs leave its own count meaningless).
    pub(super) fn counted(&self) -> u64 {
        match self {
            Out::Rows(rows) => rows
                .first()
                .and_then(|r| r.try_get::<_, i64>(0).ok())
                .map_or(0, |n| u64::try_from(n).unwrap_or(0)),
            other => other.count(),
        }
    }
}

pub struct PgStore {
    conn: conn::Conn,
    target: PgTarget,
    /// How messages name the database (`target.describe()`, kept).
    shown: String,
    /// The statements prepared on the connection of this generation.
    statements: Mutex<(u64, HashMap<Sql, Statement>)>,
    /// The statements built at run time (`wf list`'s, one per shape of its
    /// filters) prepared on the connection of this generation, by text:
    /// at most [`MAX_BUILT`], else emptied first.
    built: Mutex<(u64, HashMap<String, Statement>)>,
}

/// The most built statements kept prepared on a connection. `wf list`'s
/// shapes number 48 for each count of `--label`s.
const MAX_BUILT: usize = 256;

/// A statement's text: a constant (its prepared form kept by address), or
/// one built at run time from a request's shape (kept by its text).
#[derive(Debug, Clone, Copy)]
pub(super) enum Text<'a> {
    Fixed(&'static str),
    Built(&'a str),
}

impl From<&'static str> for Text<'_> {
    fn from(sql: &'static str) -> Self {
        Text::Fixed(sql)
    }
}

impl PgStore {
    /// Connects and brings the schema up to date.
    pub async fn open(target: &PgTarget) -> Result<PgStore> {
        let store = Self::connect(target).await?;
        store.migrate(true).await?;
        Ok(store)
    }

    /// [`PgStore::open`] of a schema wf made already; `None` (and nothing
    /// created) when the server has none by that name.
    pub async fn open_existing(target: &PgTarget) -> Result<Option<PgStore>> {
        let store = Self::connect(target).await?;
        Ok(store.migrate(false).await?.then_some(store))
    }

    /// A connection to `target`, its schema not looked at yet.
    async fn connect(target: &PgTarget) -> Result<PgStore> {
        let conn = conn::Conn::open(target)
            .await
            .map_err(|reason| StoreError::Open {
                path: target.describe(),
                reason,
            })?;
        Ok(PgStore {
            conn,
            target: target.clone(),
            shown: target.describe(),
            statements: Mutex::new((0, HashMap::new())),
            built: Mutex::new((0, HashMap::new())),
        })
    }

    pub fn is_usable(&self) -> bool {
        !self.conn.is_closed()
    }

    /// The connection now (it may be replaced after a failure: see
    /// `conn`). For what is not sent again when it fails.
    pub(super) fn client(&self) -> std::sync::Arc<Client> {
        self.conn.current().1
    }

    pub fn target(&self) -> &PgTarget {
        &self.target
    }

    /// Live copies of running attempts' output (`wf logs --follow`) stay on
    /// the machine that runs them, in a folder per user, database and schema
    /// (`$XDG_RUNTIME_DIR`, else the temp dir; a folder there that is not
    /// the user's own, or that others may write to, is not used).
    pub fn live_dir(&self) -> PathBuf {
        Self::live_dir_of(&self.target)
    }

    /// [`PgStore::live_dir`] of the database at `target`.
    pub fn live_dir_of(target: &PgTarget) -> PathBuf {
        use sha2::Digest;
        let key = format!("{}/{}", target.describe(), target.schema);
        let hash = hex::encode(&sha2::Sha256::digest(key.as_bytes())[..8]);
        let base = std::env::var_os("XDG_RUNTIME_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        base.join(format!("wf-live-{}-{hash}", nix::unistd::geteuid()))
    }

    /// Brings the schema up to date; one that was never made is made only
    /// with `create` (false: nothing is made, and the answer is false).
    async fn migrate(&self, create: bool) -> Result<bool> {
        let client = self.client();
        let known = schema::MIGRATIONS.len() as i64;
        let fail = |reason: String| StoreError::Open {
            path: self.target.describe(),
            reason,
        };
        let schema = &self.target.schema;
        // Quoted: a keyword (`select`, `user`) is a schema name too.
        let q = target::quoted(schema);
        let asked = format!("SELECT max(version) FROM {q}.migrations");
        let version = match self
            .timed(0, Instant::now(), client.query_one(&asked, &[]))
            .await
        {
            Ok(row) => row.get::<_, Option<i64>>(0).unwrap_or(0),
            Err(e) if missing_schema(&e) => 0,
            Err(e) => return Err(fail(sql_reason(&e))),
        };
        if version > known {
            return Err(StoreError::TooNew {
                path: format!("{} (schema {schema})", self.target.describe()),
                found: version,
                known,
            });
        }
        if version == known {
            return Ok(true);
        }
        if version == 0 && !create {
            return Ok(false);
        }
        let applied = self
            .timed(0, Instant::now(), async {
                client.batch_execute("BEGIN").await?;
                client
                    .execute(
                        "SELECT pg_advisory_xact_lock(hashtext('wf migrations ' || $1::text))",
                        &[schema],
                    )
                    .await?;
                client
                    .batch_execute(&format!(
                        "CREATE SCHEMA IF NOT EXISTS {q}; \
                     CREATE TABLE IF NOT EXISTS {q}.migrations \
                     (version BIGINT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
                    ))
                    .await?;
                // Another process may have migrated while we waited for the lock.
                let now: i64 = client
                    .query_one(
                        &format!("SELECT COALESCE(max(version), 0) FROM {q}.migrations"),
                        &[],
                    )
                    .await?
                    .get(0);
                if now > known {
                    client.batch_execute("ROLLBACK").await?;
                    return Ok(Some(now));
                }
                for (i, sql) in schema::MIGRATIONS.iter().enumerate().skip(now as usize) {
                    client.batch_execute(sql).await?;
                    client
                        .execute(
                            &format!("INSERT INTO {q}.migrations (version) VALUES ($1)"),
                            &[&(i as i64 + 1)],
                        )
                        .await?;
                }
                client.batch_execute("COMMIT").await?;
                Ok::<_, tokio_postgres::Error>(None)
            })
            .await;
        match applied {
            Ok(None) => Ok(true),
            Ok(Some(found)) => Err(StoreError::TooNew {
                path: format!("{} (schema {schema})", self.target.describe()),
                found,
                known,
            }),
            Err(e) => {
                self.rollback_on(0, &client).await;
                Err(fail(format!(
                    "cannot create the schema: {}",
                    sql_reason(&e)
                )))
            }
        }
    }

    /// The prepared form of `sql` on `client`, the connection of generation
    /// `generation`.
    async fn statement(
        &self,
        generation: u64,
        client: &Client,
        sql: Text<'_>,
    ) -> std::result::Result<Statement, tokio_postgres::Error> {
        let sql = match sql {
            Text::Fixed(sql) => sql,
            Text::Built(sql) => return self.built_statement(generation, client, sql).await,
        };
        if let Some(s) = self.prepared(generation, |m| m.get(&Sql(sql)).cloned()) {
            return Ok(s);
        }
        let s = client.prepare(sql).await?;
        self.prepared(generation, |m| m.insert(Sql(sql), s.clone()));
        Ok(s)
    }

    /// [`PgStore::statement`] of a text built at run time.
    async fn built_statement(
        &self,
        generation: u64,
        client: &Client,
        sql: &str,
    ) -> std::result::Result<Statement, tokio_postgres::Error> {
        let found = of_generation(&self.built, generation, |m| m.get(sql).cloned());
        if let Some(s) = found {
            return Ok(s);
        }
        let s = client.prepare(sql).await?;
        of_generation(&self.built, generation, |m| {
            if m.len() >= MAX_BUILT {
                m.clear();
            }
            m.insert(sql.to_string(), s.clone())
        });
        Ok(s)
    }

    /// `f` on the statements prepared on the connection of `generation`
    /// (none yet if it is new).
    fn prepared<T>(
        &self,
        generation: u64,
        f: impl FnOnce(&mut HashMap<Sql, Statement>) -> Option<T>,
    ) -> Option<T> {
        of_generation(&self.statements, generation, f)
    }

    /// After `e` on the connection of `generation`: `Ok` to send the request
    /// again on a new connection (the old one is gone, see `conn`), or the
    /// error to report. `started`: when the request was first sent;
    /// `WF_DB_RETRY` counts from then, or from when the server first left
    /// a call of this process unanswered if that was earlier.
    async fn recover(
        &self,
        e: tokio_postgres::Error,
        generation: u64,
        started: Instant,
    ) -> Result<()> {
        if !conn::transient(&e) {
            return Err(self.fail(e));
        }
        conn::unanswered(&self.shown, started);
        let since = conn::down_since(&self.shown).map_or(started, |d| d.min(started));
        let why = self
            .conn
            .condemned(generation)
            .unwrap_or_else(|| sql_reason(&e));
        self.conn
            .reconnect(&self.target, generation, since, why)
            .await
    }

    /// `call`, made on the connection of `generation`, within its deadline
    /// ([`conn::call_deadline`], and no later than `WF_DB_RETRY` after the
    /// server first left a call unanswered, but at least a second). Past
    /// it the connection is condemned: `call` then fails as on a lost
    /// connection (its task is ended), and the caller's `recover` sends it
    /// again on a new one, or gives up.
    async fn timed<T>(
        &self,
        generation: u64,
        started: Instant,
        call: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>,
    ) -> std::result::Result<T, tokio_postgres::Error> {
        let mut limit = conn::call_deadline();
        if let Some(down) = conn::down_since(&self.shown) {
            let left = conn::retry_window().saturating_sub(down.min(started).elapsed());
            limit = limit.min(left.max(std::time::Duration::from_secs(1)));
        }
        let mut call = std::pin::pin!(call);
        let out = match tokio::time::timeout(limit, &mut call).await {
            Ok(out) => out,
            Err(_) => {
                conn::unanswered(&self.shown, started);
                self.conn.condemn(
                    generation,
                    format!("the server did not answer within {}", conn::shown(limit)),
                );
                call.await
            }
        };
        if out.is_ok() {
            conn::answered(&self.shown);
        }
        out
    }

    /// Rolls back the transaction open on `client`, the connection of
    /// `generation` (within a call's deadline; a connection that does not
    /// answer is condemned, which ends the transaction too).
    pub(super) async fn rollback_on(&self, generation: u64, client: &Client) {
        let _ = self
            .timed(generation, Instant::now(), client.batch_execute("ROLLBACK"))
            .await;
    }

    /// [`PgStore::rollback_on`] the current connection.
    pub(super) async fn rollback(&self) {
        let (generation, client) = self.conn.current();
        self.rollback_on(generation, &client).await;
    }

    /// One query, its rows; sent again on a new connection if the one it
    /// went on is lost (every query wf sends is a read, or a write that
    /// is the same when applied twice: a claim, a renewal).
    pub(super) async fn query(
        &self,
        sql: impl Into<Text<'_>>,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>> {
        let sql = sql.into();
        let started = Instant::now();
        loop {
            let (generation, client) = self.conn.current();
            let sent = self.timed(generation, started, async {
                let stmt = self.statement(generation, &client, sql).await?;
                client.query(&stmt, params).await
            });
            match sent.await {
                Ok(rows) => return Ok(rows),
                Err(e) => self.recover(e, generation, started).await?,
            }
        }
    }

    /// One statement, its row count; sent again as [`PgStore::query`] is
    /// (the statements are idempotent: a renewal, a cancel request, a
    /// removal).
    pub(super) async fn exec(
        &self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64> {
        let started = Instant::now();
        loop {
            let (generation, client) = self.conn.current();
            let sent = self.timed(generation, started, async {
                let stmt = self.statement(generation, &client, sql.into()).await?;
                client.execute(&stmt, params).await
            });
            match sent.await {
                Ok(n) => return Ok(n),
                Err(e) => self.recover(e, generation, started).await?,
            }
        }
    }

    /// Begins a read-only REPEATABLE READ transaction on the current
    /// connection, for [`Store::snapshot`](crate::store::Store::snapshot);
    /// returns the connection's generation.
    pub(super) async fn begin_snapshot(&self) -> Result<u64> {
        let started = Instant::now();
        loop {
            let (generation, client) = self.conn.current();
            let begin = client.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
            match self.timed(generation, started, begin).await {
                Ok(()) => return Ok(generation),
                Err(e) => self.recover(e, generation, started).await?,
            }
        }
    }

    /// Ends the transaction [`PgStore::begin_snapshot`] began; false when
    /// the connection was replaced meanwhile (some reads ran outside it).
    pub(super) async fn end_snapshot(&self, generation: u64) -> bool {
        let (now, client) = self.conn.current();
        if now != generation {
            return false;
        }
        self.timed(generation, Instant::now(), client.batch_execute("COMMIT"))
            .await
            .is_ok()
    }

    /// Sends every request without waiting for the replies in between (one
    /// round trip for all), then collects the replies. The first error is
    /// returned; a transaction the pipeline began is rolled back.
    ///
    /// On a lost connection, a pipeline that is a whole transaction from
    /// its BEGIN (or one statement) is sent again on a new one: its first
    /// sending either committed whole or not at all, and wf's are
    /// idempotent (a fenced commit carries an id the server checks, see
    /// `write`). A pipeline that continues a transaction is not: that
    /// transaction is gone, and the error is reported.
    pub(super) async fn pipeline(&self, ops: Vec<Op>) -> Result<Vec<Out>> {
        let began = matches!(ops.first(), Some(Op::Simple(s)) if s.starts_with("BEGIN"));
        let whole = began || matches!(ops.as_slice(), [Op::Exec(..) | Op::Query(..)]);
        let started = Instant::now();
        loop {
            let (generation, client) = self.conn.current();
            let sent = self.timed(generation, started, async {
                let statements = self.prepare_all(generation, &client, &ops).await?;
                match send_pipeline(&client, &ops, &statements).await {
                    (outs, None) => Ok(outs),
                    (_, Some(e)) => Err(e),
                }
            });
            let e = match sent.await {
                Ok(outs) => return Ok(outs),
                Err(e) => e,
            };
            if whole && conn::transient(&e) {
                self.recover(e, generation, started).await?;
                continue;
            }
            if began {
                self.rollback_on(generation, &client).await;
            }
            if conn::transient(&e)
                && let Some(why) = self.conn.condemned(generation)
            {
                return Err(StoreError::Open {
                    path: self.shown.clone(),
                    reason: why,
                });
            }
            return Err(self.fail(e));
        }
    }

    /// Sends a pipeline that ends its own transaction (…, COMMIT) and
    /// returns once its requests are queued on the connection, before the
    /// replies: whatever is sent next on this connection runs after it. Its
    /// errors are not reported here, nor is it sent again once sent: what
    /// it records need not outlive a lost connection (a process group's
    /// record; a runner finds an unrecorded group by its processes'
    /// variables).
    pub(super) async fn pipeline_in_background(&self, ops: Vec<Op>) -> Result<()> {
        // Preparing is waited for, and made again on a new connection.
        let started = Instant::now();
        let (client, statements) = loop {
            let (generation, client) = self.conn.current();
            let prepared = self.prepare_all(generation, &client, &ops);
            match self.timed(generation, started, prepared).await {
                Ok(statements) => break (client, statements),
                Err(e) => self.recover(e, generation, started).await?,
            }
        };
        let mut sent = Box::pin(async move {
            let _ = send_pipeline(&client, &ops, &statements).await;
        });
        // The first poll queues every request, in order.
        let waker = futures_util::task::noop_waker();
        if sent
            .as_mut()
            .poll(&mut std::task::Context::from_waker(&waker))
            .is_pending()
        {
            tokio::spawn(sent);
        }
        Ok(())
    }

    /// The prepared statements `ops` use (preparing, pipelined, those this
    /// connection has not seen yet).
    async fn prepare_all(
        &self,
        generation: u64,
        client: &Client,
        ops: &[Op],
    ) -> std::result::Result<HashMap<Sql, Statement>, tokio_postgres::Error> {
        let mut missing: Vec<Sql> = Vec::new();
        self.prepared(generation, |m| {
            for op in ops {
                if let Op::Exec(sql, _) | Op::Query(sql, _) = op
                    && !m.contains_key(&Sql(sql))
                    && !missing.contains(&Sql(sql))
                {
                    missing.push(Sql(sql));
                }
            }
            Some(())
        });
        let prepared =
            futures_util::future::join_all(missing.iter().map(|sql| client.prepare(sql.0))).await;
        let mut statements = HashMap::new();
        for (sql, s) in missing.iter().zip(prepared) {
            statements.insert(*sql, s?);
        }
        self.prepared(generation, |m| {
            for (sql, s) in &statements {
                m.insert(*sql, s.clone());
            }
            for op in ops {
                if let Op::Exec(sql, _) | Op::Query(sql, _) = op
                    && let Some(s) = m.get(&Sql(sql))
                {
                    statements.insert(Sql(sql), s.clone());
                }
            }
            Some(())
        });
        Ok(statements)
    }

    /// Waits for a notification on this schema's channel, or `timeout`.
    pub async fn wait_for_work(&self, timeout: std::time::Duration) {
        use std::sync::atomic::Ordering;
        if !self.conn.listening.swap(true, Ordering::Relaxed) {
            let listen = format!("LISTEN \"wf_{}\"", self.target.schema);
            let (generation, client) = self.conn.current();
            let listened = self.timed(generation, Instant::now(), client.batch_execute(&listen));
            if listened.await.is_err() {
                self.conn.listening.store(false, Ordering::Relaxed);
            }
        }
        let mut guard = self.conn.notifications().await;
        let Some(rx) = guard.as_mut() else {
            tokio::time::sleep(timeout).await;
            return;
        };
        match tokio::time::timeout(timeout, rx.recv()).await {
            // One wake-up for a burst of notifications.
            Ok(Some(())) => while rx.try_recv().is_ok() {},
            // The connection is gone: its next request makes a new one.
            Ok(None) => {
                *guard = None;
                drop(guard);
                tokio::time::sleep(timeout).await;
            }
            Err(_) => {}
        }
    }
}

#[cfg(test)]
impl PgStore {
    /// A store on schema `schema` of the tests' server (`WF_TEST_PG`, which
    /// `scripts/test` sets for its PostgreSQL pass), made afresh: the
    /// schema is dropped first. `None` without a server.
    pub(in crate::store) async fn for_test(schema: &str) -> Option<PgStore> {
        let url = std::env::var("WF_TEST_PG").ok()?;
        let target = PgTarget::parse(&url).expect("WF_TEST_PG").in_schema(schema);
        let (client, connection) = target
            .config
            .connect(target.connector().expect("TLS"))
            .await
            .expect("connect");
        tokio::spawn(connection);
        client
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {} CASCADE",
                target::quoted(schema)
            ))
            .await
            .expect("drop");
        Some(PgStore::open(&target).await.expect("open"))
    }
}

/// `f` on the statements of `cache` prepared on the connection of
/// `generation` (none yet if it is new: the cache is emptied for it).
fn of_generation<K, T>(
    cache: &Mutex<(u64, HashMap<K, Statement>)>,
    generation: u64,
    f: impl FnOnce(&mut HashMap<K, Statement>) -> Option<T>,
) -> Option<T> {
    let mut m = cache.lock().ok()?;
    if m.0 != generation {
        *m = (generation, HashMap::new());
    }
    f(&mut m.1)
}

/// A constant statement's text, known by where it is: a `'static` string,
/// so its address and length name it (a text built at run time is kept by
/// the text itself, [`Text::Built`]), and a long text is not hashed whole on every commit
/// (SipHash over the 2.5 KB step statement, three times a commit, was 1.5%
/// of wf's CPU). The same text at two addresses is prepared twice: harmless.
#[derive(Clone, Copy, Debug)]
struct Sql(&'static str);

impl PartialEq for Sql {
    fn eq(&self, other: &Sql) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for Sql {}

impl std::hash::Hash for Sql {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.0.as_ptr() as usize, self.0.len()).hash(state);
    }
}

/// Sends every request without waiting for the replies in between (one
/// round trip for all), then collects the replies and the first error.
async fn send_pipeline(
    client: &Client,
    ops: &[Op],
    statements: &HashMap<Sql, Statement>,
) -> (Vec<Out>, Option<tokio_postgres::Error>) {
    type Request<'a> =
        Pin<Box<dyn Future<Output = std::result::Result<Out, tokio_postgres::Error>> + Send + 'a>>;
    let params: Vec<(&Op, Vec<&(dyn ToSql + Sync)>)> = ops
        .iter()
        .map(|op| {
            let p = match op {
                Op::Exec(_, p) | Op::Query(_, p) => {
                    p.iter().map(|b| &**b as &(dyn ToSql + Sync)).collect()
                }
                Op::Simple(_) => Vec::new(),
            };
            (op, p)
        })
        .collect();
    let mut requests: Vec<futures_util::future::MaybeDone<Request<'_>>> = Vec::new();
    for (op, p) in &params {
        let request: Request<'_> = match op {
            Op::Simple(sql) => {
                Box::pin(async move { client.batch_execute(sql).await.map(|()| Out::Done) })
            }
            Op::Exec(sql, _) => {
                let stmt = &statements[&Sql(sql)];
                Box::pin(async move { client.execute(stmt, p).await.map(Out::Count) })
            }
            Op::Query(sql, _) => {
                let stmt = &statements[&Sql(sql)];
                Box::pin(async move { client.query(stmt, p).await.map(Out::Rows) })
            }
        };
        requests.push(futures_util::future::maybe_done(request));
    }
    // Poll each once, in order: that queues its request on the connection.
    std::future::poll_fn(|cx| {
        for r in &mut requests {
            let _ = Pin::new(r).poll(cx);
        }
        Poll::Ready(())
    })
    .await;
    let mut outs = Vec::with_capacity(requests.len());
    let mut first_error = None;
    for mut r in requests {
        (&mut r).await;
        match Pin::new(&mut r).take_output() {
            Some(Ok(out)) => outs.push(out),
            Some(Err(e)) => {
                if first_error.is_none() {
                    first_error = Some(e);
                }
                outs.push(Out::Done);
            }
            None => outs.push(Out::Done),
        }
    }
    (outs, first_error)
}

/// Whether the error says the schema or its tables do not exist yet.
fn missing_schema(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    matches!(e.code(), Some(c) if *c == SqlState::UNDEFINED_TABLE || *c == SqlState::INVALID_SCHEMA_NAME)
}

/// A connection error in one line, without the password (the server never
/// echoes it; tokio-postgres does not either).
fn connect_reason(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{} ({})", db.message(), db.code().code());
    }
    format!("cannot connect: {}", target::one_line(e))
}

fn sql_reason(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{} ({})", db.message(), db.code().code());
    }
    if e.is_closed() {
        return "the connection to the server was lost".into();
    }
    target::one_line(e)
}

impl PgStore {
    /// A statement's error as the store reports it, naming the database
    /// (never the password); the fence's refusal is [`StoreError::Fenced`]
    /// (the caller fills in the id).
    pub(super) fn fail(&self, e: tokio_postgres::Error) -> StoreError {
        if let Some(db) = e.as_db_error()
            && db.code().code() == COMMITTED
        {
            return StoreError::Committed;
        }
        if let Some(db) = e.as_db_error()
            && db.code().code() == FENCED
        {
            let holder = Some(db.message().to_string()).filter(|h| !h.is_empty());
            return StoreError::Fenced {
                id: InstanceId::default(),
                holder,
            };
        }
        StoreError::Open {
            path: self.target.describe(),
            reason: sql_reason(&e),
        }
    }
}
