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

/// What makes an instance due (`$1`: now as text): its timer elapsed, its
/// event arrived or timed out, a cancel was asked of it while it slept or
/// waited, or it is running (its holder may be gone).
/// The same for `claim_due` (`owner`) and `due_instances` (`records`).
///
/// `waiting_event` is the comma-separated list of the names awaited (a
/// `wait_for_event.name` holds no comma): an event matches when its name
/// equals one of them, case included, as the engine matches it; no pattern
/// operator touches a name, and a name holding a comma equals none of them.
macro_rules! due_sql {
    () => {
        "((status = 'sleeping' AND (wake_at IS NULL OR wake_at <= $1 OR cancel_requested > 0)) \
          OR (status = 'waiting' AND (cancel_requested > 0 OR (wake_at IS NOT NULL AND wake_at <= $1) OR EXISTS ( \
              SELECT 1 FROM events e WHERE e.instance_id = instances.id AND e.consumed_by IS NULL \
              AND e.name = ANY (string_to_array(instances.waiting_event, ','))))) \
          OR status = 'running')"
    };
}

/// The server's clock in unix ms: every lease is set and judged by it, never
/// by a client's, so a worker whose clock runs ahead cannot take a live
/// holder's instance, nor one whose clock lags hold a lease longer.
macro_rules! server_ms {
    () => {
        "(extract(epoch from clock_timestamp()) * 1000)::bigint"
    };
}

mod batch;
mod copy;
mod owner;
#[cfg(test)]
mod plans;
mod prune;
mod records;
mod schedules;
mod schema;
mod target;
mod text;
mod url;
mod write;

use super::{Result, StoreError};
use futures_util::StreamExt;
use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::Poll;
use tokio::sync::mpsc;
use tokio_postgres::types::ToSql;
use tokio_postgres::{AsyncMessage, Client, Row, Statement};

pub use target::PgTarget;

/// The SQLSTATE `check_fence` raises.
const FENCED: &str = "WF001";

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
}

pub struct PgStore {
    client: std::sync::Arc<Client>,
    target: PgTarget,
    statements: Mutex<HashMap<Sql, Statement>>,
    notifications: tokio::sync::Mutex<Option<mpsc::UnboundedReceiver<()>>>,
    listening: std::sync::atomic::AtomicBool,
}

impl PgStore {
    /// Connects and brings the schema up to date.
    pub async fn open(target: &PgTarget) -> Result<PgStore> {
        let fail = |reason: String| StoreError::Open {
            path: target.describe(),
            reason,
        };
        let (client, mut connection) = target
            .config
            .connect(target.connector()?)
            .await
            .map_err(|e| fail(connect_reason(&e)))?;
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(message) = messages.next().await {
                match message {
                    Ok(AsyncMessage::Notification(_)) => {
                        let _ = tx.send(());
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        });
        let store = PgStore {
            client: std::sync::Arc::new(client),
            target: target.clone(),
            statements: Mutex::new(HashMap::new()),
            notifications: tokio::sync::Mutex::new(Some(rx)),
            listening: false.into(),
        };
        store.migrate().await?;
        Ok(store)
    }

    pub fn is_usable(&self) -> bool {
        !self.client.is_closed()
    }

    pub fn target(&self) -> &PgTarget {
        &self.target
    }

    /// Live copies of running attempts' output (`wf logs --follow`) stay on
    /// the machine that runs them, in a folder per user, database and schema
    /// (`$XDG_RUNTIME_DIR`, else the temp dir; a folder there that is not
    /// the user's own, or that others may write to, is not used).
    pub fn live_dir(&self) -> PathBuf {
        use sha2::Digest;
        let key = format!("{}/{}", self.target.describe(), self.target.schema);
        let hash = hex::encode(&sha2::Sha256::digest(key.as_bytes())[..8]);
        let base = std::env::var_os("XDG_RUNTIME_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        base.join(format!("wf-live-{}-{hash}", nix::unistd::geteuid()))
    }

    async fn migrate(&self) -> Result<()> {
        let known = schema::MIGRATIONS.len() as i64;
        let fail = |reason: String| StoreError::Open {
            path: self.target.describe(),
            reason,
        };
        let schema = &self.target.schema;
        // Quoted: a keyword (`select`, `user`) is a schema name too.
        let q = target::quoted(schema);
        let version = match self
            .client
            .query_one(&format!("SELECT max(version) FROM {q}.migrations"), &[])
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
            return Ok(());
        }
        let applied = async {
            self.client.batch_execute("BEGIN").await?;
            self.client
                .execute(
                    "SELECT pg_advisory_xact_lock(hashtext('wf migrations ' || $1::text))",
                    &[schema],
                )
                .await?;
            self.client
                .batch_execute(&format!(
                    "CREATE SCHEMA IF NOT EXISTS {q}; \
                     CREATE TABLE IF NOT EXISTS {q}.migrations \
                     (version BIGINT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
                ))
                .await?;
            // Another process may have migrated while we waited for the lock.
            let now: i64 = self
                .client
                .query_one(
                    &format!("SELECT COALESCE(max(version), 0) FROM {q}.migrations"),
                    &[],
                )
                .await?
                .get(0);
            if now > known {
                self.client.batch_execute("ROLLBACK").await?;
                return Ok(Some(now));
            }
            for (i, sql) in schema::MIGRATIONS.iter().enumerate().skip(now as usize) {
                self.client.batch_execute(sql).await?;
                self.client
                    .execute(
                        &format!("INSERT INTO {q}.migrations (version) VALUES ($1)"),
                        &[&(i as i64 + 1)],
                    )
                    .await?;
            }
            self.client.batch_execute("COMMIT").await?;
            Ok::<_, tokio_postgres::Error>(None)
        }
        .await;
        match applied {
            Ok(None) => Ok(()),
            Ok(Some(found)) => Err(StoreError::TooNew {
                path: format!("{} (schema {schema})", self.target.describe()),
                found,
                known,
            }),
            Err(e) => {
                let _ = self.client.batch_execute("ROLLBACK").await;
                Err(fail(format!(
                    "cannot create the schema: {}",
                    sql_reason(&e)
                )))
            }
        }
    }

    /// The prepared form of `sql` on this connection.
    async fn statement(&self, sql: &'static str) -> Result<Statement> {
        if let Some(s) = self
            .statements
            .lock()
            .ok()
            .and_then(|m| m.get(&Sql(sql)).cloned())
        {
            return Ok(s);
        }
        let s = self.client.prepare(sql).await.map_err(|e| self.fail(e))?;
        if let Ok(mut m) = self.statements.lock() {
            m.insert(Sql(sql), s.clone());
        }
        Ok(s)
    }

    /// One query, its rows.
    pub(super) async fn query(
        &self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>> {
        let stmt = self.statement(sql).await?;
        self.client
            .query(&stmt, params)
            .await
            .map_err(|e| self.fail(e))
    }

    /// One statement, its row count.
    pub(super) async fn exec(
        &self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64> {
        let stmt = self.statement(sql).await?;
        self.client
            .execute(&stmt, params)
            .await
            .map_err(|e| self.fail(e))
    }

    /// Sends every request without waiting for the replies in between (one
    /// round trip for all), then collects the replies. The first error is
    /// returned; a transaction the pipeline began is rolled back.
    pub(super) async fn pipeline(&self, ops: Vec<Op>) -> Result<Vec<Out>> {
        let statements = self.prepare_all(&ops).await?;
        let began = matches!(ops.first(), Some(Op::Simple("BEGIN")));
        let (outs, error) = send_pipeline(&self.client, &ops, &statements).await;
        match error {
            None => Ok(outs),
            Some(e) => {
                if began {
                    let _ = self.client.batch_execute("ROLLBACK").await;
                }
                Err(self.fail(e))
            }
        }
    }

    /// Sends a pipeline that ends its own transaction (…, COMMIT) and
    /// returns once its requests are queued on the connection, before the
    /// replies: whatever is sent next on this connection runs after it. Its
    /// errors are not reported here: a refused fence or a lost connection
    /// fails the next synchronous commit anyway.
    pub(super) async fn pipeline_in_background(&self, ops: Vec<Op>) -> Result<()> {
        let statements = self.prepare_all(&ops).await?;
        let client = self.client.clone();
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
    async fn prepare_all(&self, ops: &[Op]) -> Result<HashMap<Sql, Statement>> {
        let mut missing: Vec<Sql> = Vec::new();
        if let Ok(m) = self.statements.lock() {
            for op in ops {
                if let Op::Exec(sql, _) | Op::Query(sql, _) = op
                    && !m.contains_key(&Sql(sql))
                    && !missing.contains(&Sql(sql))
                {
                    missing.push(Sql(sql));
                }
            }
        }
        let prepared =
            futures_util::future::join_all(missing.iter().map(|sql| self.client.prepare(sql.0)))
                .await;
        let mut statements = HashMap::new();
        for (sql, s) in missing.iter().zip(prepared) {
            statements.insert(*sql, s.map_err(|e| self.fail(e))?);
        }
        if let Ok(mut m) = self.statements.lock() {
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
        }
        Ok(statements)
    }

    /// Waits for a notification on this schema's channel, or `timeout`.
    pub async fn wait_for_work(&self, timeout: std::time::Duration) {
        use std::sync::atomic::Ordering;
        if !self.listening.swap(true, Ordering::Relaxed) {
            // `pg_notify('wf_' || current_schema(), …)`'s channel.
            let listen = format!("LISTEN \"wf_{}\"", self.target.schema);
            if self.client.batch_execute(&listen).await.is_err() {
                self.listening.store(false, Ordering::Relaxed);
            }
        }
        let mut guard = self.notifications.lock().await;
        let Some(rx) = guard.as_mut() else {
            tokio::time::sleep(timeout).await;
            return;
        };
        if let Ok(Some(())) = tokio::time::timeout(timeout, rx.recv()).await {
            // One wake-up for a burst of notifications.
            while rx.try_recv().is_ok() {}
        }
    }
}

/// A statement's text, known by where it is: every text wf prepares is a
/// `'static` string (a constant, or one made once), so its address and
/// length name it, and a long text is not hashed whole on every commit
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
        for r in requests.iter_mut() {
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
            && db.code().code() == FENCED
        {
            let holder = Some(db.message().to_string()).filter(|h| !h.is_empty());
            return StoreError::Fenced {
                id: String::new(),
                holder,
            };
        }
        StoreError::Open {
            path: self.target.describe(),
            reason: sql_reason(&e),
        }
    }
}
