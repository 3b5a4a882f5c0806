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
mod calls;
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
use std::path::PathBuf;
use std::sync::Mutex;
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
