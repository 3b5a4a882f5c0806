//! The connection to the server, and getting it back when it is lost.
//!
//! A restart or a failover of the server, or `pg_terminate_backend`, ends
//! the connection; that is not a workflow failure (docs/postgres.md). Every statement
//! the store sends goes through [`Conn::current`], and an error that says the
//! connection is gone ([`transient`]) makes the store connect again with
//! backoff ([`Conn::reconnect`]) and send the request again, for as long as
//! `WF_DB_RETRY` allows (default 60 s); then [`StoreError::Unreachable`]
//! (exit 6). What may be sent again is the store's business (`PgStore`):
//! reads, and writes that are idempotent or carry a commit id the server
//! checks (a commit whose reply was lost is looked up, never guessed).
//!
//! A server that stops answering without closing the connection (a
//! partition that drops packets: a black hole) must be noticed too, so no
//! call waits forever (docs/postgres.md, "Partitions"): a connection and its
//! startup have [`connect_deadline`], every call [`call_deadline`], and a
//! call past it condemns its connection ([`Conn::condemn`]: its task is
//! ended, so every request on it fails as on a lost connection and is sent
//! again on a new one). The sockets keep TCP keepalive and a TCP user
//! timeout shorter than a call's deadline ([`PgTarget`]'s defaults), so the
//! kernel has given up on a condemned connection's unacknowledged data
//! before a request is sent again: a partition that heals never delivers a
//! request wf gave up on. `WF_DB_RETRY` counts from the first call the
//! server left unanswered, in this process ([`down_since`]), not from each
//! request's own failure.

use super::PgTarget;
use crate::store::{Result, StoreError};
use futures_util::StreamExt;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, Client};

/// How long a lost connection is tried again when `WF_DB_RETRY` is unset.
pub const DEFAULT_RETRY: Duration = Duration::from_secs(60);

/// How long one call may wait for the server when `WF_DB_TIMEOUT` is unset.
pub const DEFAULT_CALL_DEADLINE: Duration = Duration::from_secs(30);

/// `WF_DB_RETRY` (a duration such as `60s`; `0s`: give up at once).
pub fn retry_window() -> Duration {
    duration_var("WF_DB_RETRY").unwrap_or(DEFAULT_RETRY)
}

/// `WF_DB_TIMEOUT`: how long one call (a statement, a pipeline, a
/// transaction's step) waits for the server's answer before its connection
/// is taken as lost (default 30 s, at least 100 ms).
pub fn call_deadline() -> Duration {
    duration_var("WF_DB_TIMEOUT")
        .unwrap_or(DEFAULT_CALL_DEADLINE)
        .max(Duration::from_millis(100))
}

/// How long a connection and its startup (TLS, authentication) may take:
/// the URL's `connect_timeout` (default 10 s), and never more than a
/// call's deadline.
pub fn connect_deadline(target: &PgTarget) -> Duration {
    target
        .config
        .get_connect_timeout()
        .copied()
        .unwrap_or(Duration::from_secs(10))
        .min(call_deadline())
}

/// Why `WF_DB_RETRY` or `WF_DB_TIMEOUT` cannot be read, if one cannot
/// (checked when a target is read, `PgTarget::parse`, so that a typo is
/// said rather than taken for the default).
pub fn unreadable_var() -> Option<String> {
    ["WF_DB_RETRY", "WF_DB_TIMEOUT"]
        .into_iter()
        .find_map(|name| {
            let v = std::env::var(name).ok()?;
            let v = v.trim();
            if v.is_empty() {
                return None;
            }
            crate::workflow::duration::parse(v)
                .err()
                .map(|e| format!("{name} `{v}` is not a duration such as 30s: {e}"))
        })
}

/// A duration variable; unset, empty or unreadable (said by
/// [`unreadable_var`]): `None`.
fn duration_var(name: &str) -> Option<Duration> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| crate::workflow::duration::parse(v.trim()).ok())
}

/// Since when the server at each target (as messages name it) has left a
/// call of this process unanswered; gone at its next answer. Every request
/// gives up `WF_DB_RETRY` after the earlier of its own first failure and
/// this: a run whose heartbeat found the server gone 20 s ago does not wait
/// a whole `WF_DB_RETRY` again for its next commit.
static DOWN: std::sync::Mutex<Vec<(String, Instant)>> = std::sync::Mutex::new(Vec::new());
/// Whether any target is in [`DOWN`] (a call's answer looks at nothing else).
static ANY_DOWN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn down() -> std::sync::MutexGuard<'static, Vec<(String, Instant)>> {
    DOWN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The server at `target` left a call sent at `sent` unanswered.
pub fn unanswered(target: &str, sent: Instant) {
    let mut down = down();
    if !down.iter().any(|(t, _)| t == target) {
        down.push((target.to_string(), sent));
        ANY_DOWN.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The server at `target` answered.
pub fn answered(target: &str) {
    if !ANY_DOWN.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let mut down = down();
    down.retain(|(t, _)| t != target);
    ANY_DOWN.store(!down.is_empty(), std::sync::atomic::Ordering::Relaxed);
}

/// Since when the server at `target` has not answered this process, if
/// it has not.
pub fn down_since(target: &str) -> Option<Instant> {
    if !ANY_DOWN.load(std::sync::atomic::Ordering::Relaxed) {
        return None;
    }
    down().iter().find(|(t, _)| t == target).map(|(_, at)| *at)
}

/// `d` in the words messages use (`1.5s`, `30s`).
pub fn shown(d: Duration) -> String {
    crate::workflow::duration::human(d)
}

/// The live connection (its generation counts reconnections) and the
/// notifications (`LISTEN`) it receives.
pub(super) struct Conn {
    current: RwLock<(u64, Arc<Client>)>,
    /// The task driving the current connection: ended to condemn it.
    driver: std::sync::Mutex<tokio::task::AbortHandle>,
    /// Why the connection of a generation was condemned.
    condemned: std::sync::Mutex<Option<(u64, String)>>,
    notifications: tokio::sync::Mutex<Option<mpsc::UnboundedReceiver<()>>>,
    /// Whether this connection `LISTEN`s (a new one does not yet).
    pub(super) listening: std::sync::atomic::AtomicBool,
    reconnecting: tokio::sync::Mutex<()>,
}

/// A connection, the task that drives it, and its notifications.
type Connected = (
    Client,
    tokio::task::AbortHandle,
    mpsc::UnboundedReceiver<()>,
);

/// Connects (within `within`: the socket, TLS and the startup), and drives
/// the connection on a task of its own that forwards notifications; `Err`:
/// why not, in one line without the password.
async fn connect(target: &PgTarget, within: Duration) -> std::result::Result<Connected, String> {
    let connector = target.connector().map_err(|e| match e {
        StoreError::Open { reason, .. } => reason,
        other => other.to_string(),
    })?;
    let (client, mut connection) =
        match tokio::time::timeout(within, target.config.connect(connector)).await {
            Ok(made) => made.map_err(|e| super::connect_reason(&e))?,
            Err(_) => {
                return Err(format!(
                    "cannot connect: no answer within {}",
                    shown(within)
                ));
            }
        };
    let (tx, rx) = mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
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
    Ok((client, driver.abort_handle(), rx))
}

impl Conn {
    /// The first connection (not tried again: a server that cannot be
    /// reached at all is said so at once).
    pub(super) async fn open(target: &PgTarget) -> std::result::Result<Conn, String> {
        let (client, driver, rx) = connect(target, connect_deadline(target)).await?;
        Ok(Conn {
            current: RwLock::new((0, Arc::new(client))),
            driver: std::sync::Mutex::new(driver),
            condemned: std::sync::Mutex::new(None),
            notifications: tokio::sync::Mutex::new(Some(rx)),
            listening: false.into(),
            reconnecting: tokio::sync::Mutex::new(()),
        })
    }

    /// The connection now, and its generation.
    pub(super) fn current(&self) -> (u64, Arc<Client>) {
        match self.current.read() {
            Ok(c) => (c.0, c.1.clone()),
            Err(poisoned) => {
                let c = poisoned.into_inner();
                (c.0, c.1.clone())
            }
        }
    }

    pub(super) fn is_closed(&self) -> bool {
        self.current().1.is_closed()
    }

    /// Ends the connection of `generation` (if it is still the current
    /// one): the server did not answer a call on it within its deadline.
    /// Its task ends, so every request on it fails as on a lost
    /// connection, and the next is made on a new one.
    pub(super) fn condemn(&self, generation: u64, why: String) {
        if self.current().0 != generation {
            return;
        }
        *self
            .condemned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((generation, why));
        self.driver
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .abort();
    }

    /// Why the connection of `generation` was condemned, if it was.
    pub(super) fn condemned(&self, generation: u64) -> Option<String> {
        match &*self
            .condemned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            Some((g, why)) if *g == generation => Some(why.clone()),
            _ => None,
        }
    }

    /// The notifications of the current connection.
    pub(super) async fn notifications(
        &self,
    ) -> tokio::sync::MutexGuard<'_, Option<mpsc::UnboundedReceiver<()>>> {
        self.notifications.lock().await
    }

    /// Connects again after generation `lost` failed with `why`, with
    /// backoff (100 ms doubling to 2 s), until `since` + `WF_DB_RETRY`
    /// (each try within its deadline and what is left of that).
    /// Another caller may have done it already: then this returns at once.
    pub(super) async fn reconnect(
        &self,
        target: &PgTarget,
        lost: u64,
        since: Instant,
        why: String,
    ) -> Result<()> {
        let _one_at_a_time = self.reconnecting.lock().await;
        if self.current().0 != lost {
            return Ok(());
        }
        let window = retry_window();
        let mut wait = Duration::from_millis(100);
        let mut last = why;
        loop {
            if since.elapsed() >= window {
                return Err(StoreError::Unreachable {
                    path: target.describe(),
                    after: window,
                    reason: last,
                });
            }
            let left = window.saturating_sub(since.elapsed());
            let within = connect_deadline(target).min(left.max(Duration::from_millis(1)));
            match connect(target, within).await {
                Ok((client, driver, rx)) => {
                    *self
                        .current
                        .write()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) =
                        (lost + 1, Arc::new(client));
                    *self
                        .driver
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = driver;
                    *self.notifications.lock().await = Some(rx);
                    self.listening
                        .store(false, std::sync::atomic::Ordering::Relaxed);
                    return Ok(());
                }
                Err(reason) => last = reason,
            }
            let left = window.saturating_sub(since.elapsed());
            tokio::time::sleep(wait.min(left)).await;
            wait = (wait * 2).min(Duration::from_secs(2));
        }
    }
}

/// Whether `e` says the connection is gone (or going) rather than that the
/// request was wrong: it was closed, failed at the socket, or the server
/// is shutting down, restarting or ending this backend (SQLSTATE class 08,
/// 57P01-57P03).
pub(super) fn transient(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    if let Some(db) = e.as_db_error() {
        let code = db.code().code();
        return code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03");
    }
    // No SQLSTATE: the socket failed (reset, broken pipe) or TLS did.
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    false
}
