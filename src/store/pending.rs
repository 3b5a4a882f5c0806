//! A commit under way ([`Store::begin_commit`](super::Store::begin_commit)):
//! begun, left to proceed while the caller does something else, and waited
//! for with [`PendingCommit::done`]. The engine starts the processes whose
//! attempts the commit records meanwhile, each held at its exec until
//! `done` returned `Ok` (docs/execution.md: nothing of an attempt runs
//! before its record is durable), so that a step pays for the longer of the
//! two rather than for both.
//!
//! What "under way" means is each backend's: on SQLite the transaction (and
//! the WAL's sync that makes it durable) is made on a thread of wf's own
//! (`sqlite/offthread.rs`); on PostgreSQL the commit's requests are written
//! to the server before `begin_commit` returns, and `done` awaits the reply
//! (`pg/write.rs`). Either way nothing may depend on the commit before
//! `done` returned, and a commit that fails applies nothing.

use super::{Result, StoreError};
use std::future::Future;
use std::pin::Pin;

/// A commit begun and not yet waited for; see the module's doc.
#[must_use = "a commit under way is durable only once `done` returned Ok"]
pub struct PendingCommit<'s> {
    state: State<'s>,
    here: bool,
}

enum State<'s> {
    /// Made already (its outcome known when it was begun).
    Made(Result<()>),
    /// Made by another thread, which sends its outcome.
    Elsewhere(tokio::sync::oneshot::Receiver<Result<()>>),
    /// Sent to a server, its reply awaited.
    Sent(Pin<Box<dyn Future<Output = Result<()>> + 's>>),
}

impl<'s> PendingCommit<'s> {
    /// A commit whose outcome is known already; `here`: see
    /// [`PendingCommit::made_here`].
    pub(crate) fn made(result: Result<()>, here: bool) -> PendingCommit<'s> {
        PendingCommit {
            state: State::Made(result),
            here,
        }
    }

    /// A commit made by a thread of this process, which sends its outcome
    /// on `outcome` once the transaction committed (or failed).
    pub(super) fn elsewhere(
        outcome: tokio::sync::oneshot::Receiver<Result<()>>,
    ) -> PendingCommit<'s> {
        PendingCommit {
            state: State::Elsewhere(outcome),
            here: true,
        }
    }

    /// A commit sent to a server: `reply` gives its outcome.
    pub(super) fn sent(reply: Pin<Box<dyn Future<Output = Result<()>> + 's>>) -> PendingCommit<'s> {
        PendingCommit {
            state: State::Sent(reply),
            here: false,
        }
    }

    /// Whether this machine does the commit's work while it is under way
    /// (SQLite: a thread of wf's own runs the transaction and its sync), as
    /// opposed to a server (PostgreSQL). Work the caller does meanwhile then
    /// competes with the commit for the CPUs: the engine recycles the last
    /// step's output file during a commit only when it is not made here
    /// (measured both ways, bench/RESULTS.md).
    pub fn made_here(&self) -> bool {
        self.here
    }

    /// Waits until the commit is durable (as the database is set to make
    /// it) or failed (nothing of it applied; `Fenced` if the fence no
    /// longer held).
    pub async fn done(self) -> Result<()> {
        match self.state {
            State::Made(result) => result,
            State::Elsewhere(outcome) => outcome
                .await
                .unwrap_or_else(|_| Err(StoreError::Sql("the commit thread is gone".into()))),
            State::Sent(reply) => reply.await,
        }
    }
}
