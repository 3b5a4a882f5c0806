//! What one run asks of its store, and nothing more ([`RunStore`]): its
//! commits under the fence (synced, begun to overlap the processes' start,
//! or left to the next sync), the poll for cancel requests and events, the
//! step locks, the cancel asked of children it ends. `engine::runner` and
//! the run's close in `engine::drive` are written against this trait, not
//! against [`Store`]'s ~70 methods and three variants, so that a run can be
//! driven in unit tests by an in-memory store that refuses a commit, loses
//! a lease or delivers an event on cue (`engine/runner/tests`), the way
//! `engine/scheduler/tests` drive the scheduler with no store at all.
//!
//! [`Store`] implements it by delegation; the trait adds no behaviour.

use super::{CancelRequest, EventRow, Fence, PendingCommit, Result, Store, Write};
use crate::vocab::InstanceId;

/// The store as one run uses it; see the module's doc. Each method means
/// what [`Store`]'s of the same name does.
pub(crate) trait RunStore {
    /// The backend as OpenTelemetry's `db.system.name` names it.
    fn system(&self) -> &'static str;

    /// Whether this is a connection lent to a child run in its parent's
    /// process, whose commits reach the world through its parent's
    /// (`Runner::defers_sync`).
    fn is_lent(&self) -> bool;

    /// Applies `writes` under `fence` in one transaction, durably.
    async fn commit(&mut self, fence: &Fence, writes: &[Write]) -> Result<()>;

    /// Applies `writes` under `fence`, its sync left to the next synced
    /// commit (nothing outside the database may depend on it before).
    async fn commit_before_sync(&mut self, fence: &Fence, writes: &[Write]) -> Result<()>;

    /// Applies `writes` under `fence` without waiting for a sync: for
    /// records whose loss a crash makes harmless (process groups).
    async fn commit_unsynced(&mut self, fence: &Fence, writes: &[Write]) -> Result<()>;

    /// Begins the durable commit of `writes` under `fence`, to be waited
    /// for with [`PendingCommit::done`].
    async fn begin_commit(
        &mut self,
        fence: &Fence,
        writes: Vec<Write>,
    ) -> Result<PendingCommit<'_>>;

    /// The cancel request standing for `id`, and the events delivered to it
    /// and not taken.
    async fn poll(&self, id: &InstanceId) -> Result<(CancelRequest, Vec<EventRow>)>;

    /// Asks instance `id` to cancel (or terminate): a parent ending its
    /// children (recorded as no action: the parent's own end is).
    async fn request_cancel(&mut self, id: &InstanceId, ask: CancelRequest) -> Result<()>;

    /// Takes one of `limit` holds of step lock `key` for unit `unit` of
    /// the fenced instance, if one is free (a holder `holder_alive` says is
    /// dead frees its hold); true when taken.
    async fn take_lock(
        &mut self,
        fence: &Fence,
        key: &str,
        limit: u32,
        unit: &str,
        holder_alive: &dyn Fn(&str) -> bool,
    ) -> Result<bool>;

    /// The entry a `cache:` step's attempt takes its result from, if one
    /// is kept ([`Store::cache_entry`]).
    async fn cache_entry(
        &self,
        at: (&str, &str, &str, &str),
        now: crate::vocab::Timestamp,
    ) -> Result<Option<super::CacheEntry>>;
}

impl RunStore for Store {
    fn system(&self) -> &'static str {
        Store::system(self)
    }

    fn is_lent(&self) -> bool {
        Store::is_lent(self)
    }

    async fn commit(&mut self, fence: &Fence, writes: &[Write]) -> Result<()> {
        Store::commit(self, fence, writes).await
    }

    async fn commit_before_sync(&mut self, fence: &Fence, writes: &[Write]) -> Result<()> {
        Store::commit_before_sync(self, fence, writes).await
    }

    async fn commit_unsynced(&mut self, fence: &Fence, writes: &[Write]) -> Result<()> {
        Store::commit_unsynced(self, fence, writes).await
    }

    async fn begin_commit(
        &mut self,
        fence: &Fence,
        writes: Vec<Write>,
    ) -> Result<PendingCommit<'_>> {
        Store::begin_commit(self, fence, writes).await
    }

    async fn poll(&self, id: &InstanceId) -> Result<(CancelRequest, Vec<EventRow>)> {
        Store::poll(self, id).await
    }

    async fn request_cancel(&mut self, id: &InstanceId, ask: CancelRequest) -> Result<()> {
        Store::request_cancel(self, id, ask, None).await
    }

    async fn take_lock(
        &mut self,
        fence: &Fence,
        key: &str,
        limit: u32,
        unit: &str,
        holder_alive: &dyn Fn(&str) -> bool,
    ) -> Result<bool> {
        Store::take_lock(self, fence, key, limit, unit, holder_alive).await
    }

    async fn cache_entry(
        &self,
        at: (&str, &str, &str, &str),
        now: crate::vocab::Timestamp,
    ) -> Result<Option<super::CacheEntry>> {
        Store::cache_entry(self, at, now).await
    }
}
