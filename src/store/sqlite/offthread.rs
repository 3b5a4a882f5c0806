//! A commit made on a thread of wf's own while wf's thread goes on: the
//! connection is lent to the `wf-commit` thread for the one transaction
//! (statements, commit, and with `synchronous=FULL` the WAL's sync) and comes
//! back when it is done.
//!
//! Why: the engine starts a step's process while the commit that records
//! its attempt is under way, holding the process at its exec until the
//! commit returned (`engine::spawn::hold`), so a step pays for the longer of
//! the two rather than for both. A transaction on wf's thread would keep it
//! from starting the process for as long as the transaction takes (about
//! 100 µs a step here, then the sync's 120–190 µs).
//!
//! The connection is moved, not shared: while it is away the store has none
//! ([`Conn`]), and whatever uses the store next waits for it to come back
//! (the engine awaits the commit first; a caller that gave up on it waits
//! at its next statement, or when the store is dropped). Moving a
//! connection between threads is what SQLite's multi-thread mode allows:
//! one thread at a time.

use super::SqliteStore;
use crate::store::{Fence, PendingCommit, Result, StoreError, Write};
use rusqlite::Connection;
use std::cell::{Cell, OnceCell};
use std::ops::{Deref, DerefMut};
use std::sync::OnceLock;
use std::sync::mpsc;

/// The store's connection: here, or lent to the commit thread and on its
/// way back (taken back, waiting if need be, at the next use).
pub(super) struct Conn {
    here: OnceCell<Connection>,
    away: Cell<Option<mpsc::Receiver<Connection>>>,
}

impl Conn {
    pub(super) fn new(conn: Connection) -> Conn {
        Conn {
            here: OnceCell::from(conn),
            away: Cell::new(None),
        }
    }

    /// Waits for the lent connection. It always comes back: the thread
    /// sends it back whatever the transaction did, a panic included.
    fn back(&self) -> Connection {
        self.away
            .take()
            .and_then(|rx| rx.recv().ok())
            .expect("the commit thread gives the connection back")
    }

    /// Lends the connection out: the store has none until it is sent back
    /// on the returned sender.
    fn lend(&mut self) -> (Connection, mpsc::SyncSender<Connection>) {
        let conn = match self.here.take() {
            Some(c) => c,
            None => self.back(),
        };
        let (tx, rx) = mpsc::sync_channel(1);
        self.away.set(Some(rx));
        (conn, tx)
    }
}

impl Conn {
    /// The connection, taken out (waiting for it if it is lent); `None`
    /// once taken.
    pub(super) fn take(&mut self) -> Option<Connection> {
        match self.here.take() {
            Some(c) => Some(c),
            None => self.away.take().and_then(|rx| rx.recv().ok()),
        }
    }
}

impl Deref for Conn {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.here.get_or_init(|| self.back())
    }
}

impl DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut Connection {
        if self.here.get().is_none() {
            let conn = self.back();
            let _ = self.here.set(conn);
        }
        self.here.get_mut().expect("set above")
    }
}

impl Drop for Conn {
    /// A lent connection is closed here, after its transaction, not on
    /// the commit thread in the middle of wf's exit.
    fn drop(&mut self) {
        if let Some(rx) = self.away.take() {
            drop(rx.recv());
        }
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// The commit thread, started at the first commit lent to it (`None` if it
/// could not be: commits are then made on wf's thread).
fn committer() -> Option<&'static mpsc::Sender<Job>> {
    static COMMITTER: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();
    COMMITTER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("wf-commit".into())
                .spawn(move || {
                    for job in rx {
                        job();
                    }
                })
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

impl SqliteStore {
    /// Commits `writes` (fenced, as `commit`) on the commit thread, and
    /// returns while it is under way. Where there is no such thread, the
    /// commit is made here before this returns (`Err`: refused, nothing
    /// applied).
    pub fn begin_commit(
        &mut self,
        fence: &Fence,
        writes: Vec<Write>,
    ) -> Result<PendingCommit<'static>> {
        let Some(committer) = committer() else {
            self.commit(fence, &writes)?;
            return Ok(PendingCommit::made(Ok(()), true));
        };
        let durability = self.durability;
        let (mut conn, give_back) = self.conn.lend();
        let (done, committed) = tokio::sync::oneshot::channel();
        let fence = fence.clone();
        let job: Job = Box::new(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                super::write::commit(&mut conn, durability, &fence, &writes)
            }))
            .unwrap_or_else(|_| Err(StoreError::Sql("the commit panicked".into())));
            // The connection first: once the result is in, the store may
            // want it at once.
            let _ = give_back.send(conn);
            let _ = done.send(result);
            drop(writes);
        });
        if let Err(mpsc::SendError(job)) = committer.send(job) {
            // The thread is gone: run it here (it gives the connection back).
            job();
        }
        Ok(PendingCommit::elsewhere(committed))
    }
}
