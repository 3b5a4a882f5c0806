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

use super::PgTarget;
use crate::store::{Result, StoreError};
use futures_util::StreamExt;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, Client};

/// How long a lost connection is tried again when `WF_DB_RETRY` is unset.
pub const DEFAULT_RETRY: Duration = Duration::from_secs(60);

/// `WF_DB_RETRY` (a duration such as `60s`; `0s`: give up at once).
pub fn retry_window() -> Duration {
    std::env::var("WF_DB_RETRY")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| crate::workflow::duration::parse(v.trim()).ok())
        .unwrap_or(DEFAULT_RETRY)
}

/// The live connection (its generation counts reconnections) and the
/// notifications (`LISTEN`) it receives.
pub(super) struct Conn {
    current: RwLock<(u64, Arc<Client>)>,
    notifications: tokio::sync::Mutex<Option<mpsc::UnboundedReceiver<()>>>,
    /// Whether this connection `LISTEN`s (a new one does not yet).
    pub(super) listening: std::sync::atomic::AtomicBool,
    reconnecting: tokio::sync::Mutex<()>,
}

/// Connects, and drives the connection on a task of its own that forwards
/// notifications; `Err`: why not, in one line without the password.
async fn connect(
    target: &PgTarget,
) -> std::result::Result<(Client, mpsc::UnboundedReceiver<()>), String> {
    let connector = target.connector().map_err(|e| match e {
        StoreError::Open { reason, .. } => reason,
        other => other.to_string(),
    })?;
    let (client, mut connection) = target
        .config
        .connect(connector)
        .await
        .map_err(|e| super::connect_reason(&e))?;
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
    Ok((client, rx))
}

impl Conn {
    /// The first connection (not tried again: a server that cannot be
    /// reached at all is said so at once).
    pub(super) async fn open(target: &PgTarget) -> std::result::Result<Conn, String> {
        let (client, rx) = connect(target).await?;
        Ok(Conn {
            current: RwLock::new((0, Arc::new(client))),
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

    /// The notifications of the current connection.
    pub(super) async fn notifications(
        &self,
    ) -> tokio::sync::MutexGuard<'_, Option<mpsc::UnboundedReceiver<()>>> {
        self.notifications.lock().await
    }

    /// Connects again after generation `lost` failed with `why`, with
    /// backoff (100 ms doubling to 2 s), until `since` + `WF_DB_RETRY`.
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
            match connect(target).await {
                Ok((client, rx)) => {
                    *self
                        .current
                        .write()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) =
                        (lost + 1, Arc::new(client));
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
