//! Connections shared by many runs of one process: the children a parent
//! runs in its process ([`Store::Lent`]). Each of those runs holds a store
//! for as long as it runs (a `sleep 0.1` step's child: 0.1 s), but uses it
//! for a moment now and then (its commits, its polls); with a connection of
//! its own each, a fan-out of 100 children opened 100 connections, each a
//! backend process with cold caches on PostgreSQL (14–18 ms of the server's
//! CPU apiece) and a cold page cache and statement cache on SQLite
//! (bench/RESULTS.md). A lent store takes one of a few connections for each
//! call and gives it back when the call returned, so the children share
//! them as the steps of one run share the runner's.
//!
//! A connection is held for one call only, never across two: so no call
//! can wait for a connection while holding another, and a transaction the
//! store makes in several round trips has its connection to itself
//! (PostgreSQL) for its whole length. The children of one run share one
//! [`Shared`], and their children another: a child's call that holds a
//! connection goes on only while its parent polls it (`engine::runner::
//! children`), which a parent waiting for a connection of the same set
//! would not do.
//! On PostgreSQL a commit begun and left under way (`begin_commit`) keeps
//! its connection until its outcome is in.

use super::{Fence, Location, PendingCommit, Result, Store, StoreError, Write};
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// How many connections the lent stores of one process share on
/// PostgreSQL, where each call waits for a round trip and several may be
/// under way at once (a fan-out of 100 children: 2 and 4 measured alike,
/// 1 and 8 slower, bench/RESULTS.md). SQLite's calls do not wait, and its
/// writers take turns anyway: one connection is enough, and one keeps its
/// page and statement caches warm (its commits are made in groups,
/// [`Shared::commit`]).
const PG_CONNECTIONS: usize = 4;

/// The connections to one database that lent stores share.
pub struct Shared {
    location: Location,
    max: usize,
    state: Mutex<State>,
    freed: tokio::sync::Notify,
    /// SQLite: the commits waiting to be made together ([`Shared::commit`]).
    group: Mutex<Group>,
}

#[derive(Default)]
struct Group {
    waiting: Vec<Member>,
    /// A task is making the waiting commits (and those that come meanwhile).
    flushing: bool,
}

/// A commit waiting for its group, and where its outcome goes.
struct Member {
    fence: Fence,
    writes: Vec<Write>,
    /// Waits for the disk (else left to the next synced commit).
    synced: bool,
    done: oneshot::Sender<Result<()>>,
}

#[derive(Default)]
struct State {
    /// Connections not in use.
    idle: Vec<Store>,
    /// Connections open (in use, idle, or being opened).
    open: usize,
}

impl Shared {
    /// A store for a child run in its parent's process: its calls go
    /// through these shared connections, and its commits are ones its
    /// parent goes on from ([`Store::is_lent`]).
    pub fn lend(self: &Arc<Shared>) -> Store {
        Store::Lent(self.clone())
    }

    pub fn new(location: Location) -> Arc<Shared> {
        let max = match &location {
            Location::Sqlite(_) => 1,
            Location::Postgres(_) => PG_CONNECTIONS,
        };
        Shared::with_max(location, max)
    }

    /// At most `max` connections.
    pub fn with_max(location: Location, max: usize) -> Arc<Shared> {
        Arc::new(Shared {
            location,
            max: max.max(1),
            state: Mutex::default(),
            freed: tokio::sync::Notify::new(),
            group: Mutex::default(),
        })
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A connection for one call: an idle one, a new one while fewer than
    /// the maximum are open, else the next one given back.
    pub async fn take(self: &Arc<Shared>) -> Result<Lease> {
        loop {
            let freed = self.freed.notified();
            let idle = {
                let mut state = self.state();
                match state.idle.pop() {
                    Some(store) => Some(Some(store)),
                    None if state.open < self.max => {
                        state.open += 1;
                        Some(None)
                    }
                    None => None,
                }
            };
            match idle {
                Some(Some(store)) => return Ok(self.lease(store)),
                Some(None) => {
                    return match Store::open(&self.location).await {
                        Ok(store) => Ok(self.lease(store)),
                        Err(e) => {
                            self.state().open -= 1;
                            self.freed.notify_one();
                            Err(e)
                        }
                    };
                }
                None => freed.await,
            }
        }
    }

    /// Whether commits are made in groups ([`Shared::commit`]): on SQLite,
    /// whose writes wait for one another anyway (one writer at a time), each
    /// commit's sync is what costs; on PostgreSQL the server already makes
    /// concurrent commits' WAL flushes one.
    pub fn groups_commits(&self) -> bool {
        matches!(self.location, Location::Sqlite(_))
    }

    /// Commits `writes` under `fence` together with the other commits of
    /// the lent stores that are ready by the time this thread is free (a
    /// task of its own makes them, after the task that runs the children
    /// has polled every one that was ready): one transaction and one sync
    /// for them all, each member applied or refused on its own fence
    /// (`SqliteStore::commit_group`). The outcome comes on the receiver.
    /// `synced`: false for a commit whose sync the next synced commit may
    /// make (`Store::commit_before_sync`); a group syncs when any member
    /// asks for it.
    pub fn commit(
        self: &Arc<Shared>,
        fence: &Fence,
        writes: Vec<Write>,
        synced: bool,
    ) -> oneshot::Receiver<Result<()>> {
        let (done, outcome) = oneshot::channel();
        let start = {
            let mut group = self.group();
            group.waiting.push(Member {
                fence: fence.clone(),
                writes,
                synced,
                done,
            });
            !std::mem::replace(&mut group.flushing, true)
        };
        if start {
            tokio::spawn(self.clone().flush());
        }
        outcome
    }

    fn group(&self) -> std::sync::MutexGuard<'_, Group> {
        self.group
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Makes the waiting commits, a group a transaction, until none waits.
    async fn flush(self: Arc<Shared>) {
        loop {
            let members = {
                let mut group = self.group();
                if group.waiting.is_empty() {
                    group.flushing = false;
                    return;
                }
                std::mem::take(&mut group.waiting)
            };
            let outcomes = match self.take().await {
                Ok(mut lease) => match &mut *lease {
                    Store::Sqlite(s) => {
                        let each: Vec<(&Fence, &[Write])> = members
                            .iter()
                            .map(|m| (&m.fence, m.writes.as_slice()))
                            .collect();
                        s.commit_group(&each, members.iter().any(|m| m.synced))
                    }
                    _ => Err(StoreError::Sql("commits are grouped on SQLite only".into())),
                },
                Err(e) => Err(e),
            };
            match outcomes {
                Ok(outcomes) => {
                    for (member, outcome) in members.into_iter().zip(outcomes) {
                        let _ = member.done.send(outcome);
                    }
                }
                Err(e) => {
                    for member in members {
                        let _ = member.done.send(Err(same_error(&e)));
                    }
                }
            }
        }
    }

    fn lease(self: &Arc<Shared>, store: Store) -> Lease {
        Lease {
            store: Some(store),
            shared: self.clone(),
        }
    }
}

/// A shared connection, held for one call; given back when dropped (closed
/// instead if it was lost: the next call opens another).
pub struct Lease {
    store: Option<Store>,
    shared: Arc<Shared>,
}

impl Deref for Lease {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.store.as_ref().expect("held until dropped")
    }
}

impl DerefMut for Lease {
    fn deref_mut(&mut self) -> &mut Store {
        self.store.as_mut().expect("held until dropped")
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(store) = self.store.take() {
            let mut state = self.shared.state();
            if store.is_usable() {
                state.idle.push(store);
            } else {
                state.open -= 1;
            }
        }
        self.shared.freed.notify_one();
    }
}

/// [`Store::begin_commit`] on a shared connection: on SQLite, in a group
/// ([`Shared::commit`]); on PostgreSQL, the connection held (and the
/// commit's requests written) until the outcome is in.
pub(super) async fn begin_commit(
    shared: &Arc<Shared>,
    fence: &Fence,
    writes: Vec<Write>,
) -> Result<PendingCommit<'static>> {
    if shared.groups_commits() {
        return Ok(PendingCommit::sent(Box::pin(grouped(
            shared.commit(fence, writes, true),
        ))));
    }
    let mut lease = shared.take().await?;
    let fence = fence.clone();
    let mut reply: std::pin::Pin<Box<dyn Future<Output = Result<()>>>> = Box::pin(async move {
        match &mut *lease {
            Store::Postgres(p) => p.begin_commit(&fence, writes).await.done().await,
            _ => Err(StoreError::Sql(
                "a shared connection is itself shared".into(),
            )),
        }
    });
    // Polled once: its requests are on their way before this returns.
    let waker = futures_util::task::noop_waker();
    match reply
        .as_mut()
        .poll(&mut std::task::Context::from_waker(&waker))
    {
        std::task::Poll::Ready(r) => Ok(PendingCommit::made(r, false)),
        std::task::Poll::Pending => Ok(PendingCommit::sent(reply)),
    }
}

/// `e` again, for each member of a group whose transaction failed.
fn same_error(e: &StoreError) -> StoreError {
    match e {
        StoreError::ReadOnly(s) => StoreError::ReadOnly(s.clone()),
        StoreError::Corrupt(s) => StoreError::Corrupt(s.clone()),
        StoreError::Busy(s) => StoreError::Busy(s.clone()),
        other => StoreError::Sql(match other {
            StoreError::Sql(s) => s.clone(),
            _ => other.to_string(),
        }),
    }
}

/// What a grouped commit's outcome is when its group was dropped unmade
/// (the runtime ended first).
pub(super) async fn grouped(outcome: oneshot::Receiver<Result<()>>) -> Result<()> {
    outcome
        .await
        .unwrap_or_else(|_| Err(StoreError::Sql("the commit was dropped unmade".into())))
}
