//! An in-memory [`RunStore`] for the runner's unit tests: it keeps every
//! commit (how it was made and what it held) for the test to read back,
//! and lets the test play the other processes a run shares its instance
//! with: take the instance over (every later commit refused, as a raised
//! fence refuses it), ask for a cancel, deliver an event, hold a step lock
//! and give it back. Only what a run's own decisions depend on is kept:
//! the events not taken, the locks' holders, the cancel request.

use crate::store::{
    CancelRequest, EventRow, Fence, PendingCommit, Result, RunStore, StoreError, Write,
};
use crate::vocab::InstanceId;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// How a commit was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum How {
    /// `commit`: durable when it returns.
    Synced,
    /// `begin_commit`: durable once `done` returned.
    Begun,
    /// `commit_before_sync`: durable with the next synced one.
    BeforeSync,
    /// `commit_unsynced`: never waited for.
    Unsynced,
}

/// A commit the store made.
#[derive(Debug, Clone)]
pub(super) struct Commit {
    pub how: How,
    pub writes: Vec<Write>,
}

impl Commit {
    /// Its writes, each in a few words (see [`describe`]), spans left out.
    pub fn said(&self) -> Vec<String> {
        self.writes
            .iter()
            .filter(|w| !matches!(w, Write::Span(_)))
            .map(describe)
            .collect()
    }
}

/// A write in a few words: `start a#1`, `end a#1 ok`, `a completed`.
pub(super) fn describe(w: &Write) -> String {
    match w {
        Write::StartAttempt { key, attempt, .. } => format!("start {key}#{attempt}"),
        Write::EndAttempt { key, attempt, end } => {
            format!("end {key}#{attempt} {}", end.outcome.as_str())
        }
        Write::Step(r) => format!("{} {}", r.key, r.status.as_str()),
        Write::TakeEvent { event, key } => format!("{key} takes event {event}"),
        Write::ReleaseLock { key } => format!("{key} releases its lock"),
        Write::Status { status, .. } => format!("instance {}", status.as_str()),
        Write::FinishRun { run, outcome } => format!("run {run} {}", outcome.as_str()),
        other => {
            let debug = format!("{other:?}");
            debug
                .split(|c: char| !c.is_alphanumeric())
                .next()
                .unwrap_or_default()
                .to_string()
        }
    }
}

#[derive(Default)]
struct State {
    commits: Vec<Commit>,
    /// Who took the instance over: every commit from then on is refused.
    taken_by: Option<String>,
    /// The commit (counted from 1, every kind) at which the instance is
    /// taken over by `"host-b"`, if the test set one.
    taken_at: Option<usize>,
    tried: usize,
    cancel: CancelRequest,
    events: Vec<EventRow>,
    /// Step locks' holders: lock key -> (instance, unit key).
    locks: HashMap<String, Vec<(String, String)>>,
    lock_tries: usize,
    /// `cache:` entries, by workflow, step, key and part.
    cache: HashMap<(String, String, String, String), crate::store::CacheEntry>,
}

/// The store; clones share it (the test keeps one, the run uses another).
#[derive(Clone)]
pub(super) struct Memory {
    state: Rc<RefCell<State>>,
}

impl Memory {
    pub fn new() -> Memory {
        Memory {
            state: Rc::default(),
        }
    }

    /// The commits made so far.
    pub fn commits(&self) -> Vec<Commit> {
        self.state.borrow().commits.clone()
    }

    /// Every write made so far, described, in order.
    pub fn said(&self) -> Vec<String> {
        self.commits().iter().flat_map(Commit::said).collect()
    }

    /// Another process takes the instance over now.
    pub fn take_over(&self, holder: &str) {
        self.state.borrow_mut().taken_by = Some(holder.to_string());
    }

    /// The instance is taken over by `host-b` as commit `n` (from 1) is
    /// tried: that one and every later one is refused.
    pub fn taken_over_at(&self, n: usize) {
        self.state.borrow_mut().taken_at = Some(n);
    }

    /// Another process asks the instance to cancel (or terminate).
    pub fn ask(&self, ask: CancelRequest) {
        self.state.borrow_mut().cancel = ask;
    }

    /// Another process delivers event `name` to the instance.
    pub fn deliver(&self, name: &str, payload: &str) {
        let mut s = self.state.borrow_mut();
        let id = s.events.len() as i64 + 1;
        s.events.push(EventRow {
            id,
            name: name.into(),
            payload: payload.into(),
            traceparent: None,
        });
    }

    /// Instance `holder` holds step lock `lock`.
    pub fn hold_lock(&self, lock: &str, holder: &str) {
        self.state
            .borrow_mut()
            .locks
            .entry(lock.into())
            .or_default()
            .push((holder.into(), "elsewhere".into()));
    }

    /// Instance `holder` gives step lock `lock` back.
    pub fn give_back(&self, lock: &str, holder: &str) {
        if let Some(h) = self.state.borrow_mut().locks.get_mut(lock) {
            h.retain(|(i, _)| i != holder);
        }
    }

    /// Who holds step lock `lock`: (instance, unit key).
    pub fn holders(&self, lock: &str) -> Vec<(String, String)> {
        self.state
            .borrow()
            .locks
            .get(lock)
            .cloned()
            .unwrap_or_default()
    }

    /// How many times a step lock was asked for.
    pub fn lock_tries(&self) -> usize {
        self.state.borrow().lock_tries
    }

    /// Makes (or refuses) one commit.
    fn apply(&self, how: How, fence: &Fence, writes: &[Write]) -> Result<()> {
        let mut s = self.state.borrow_mut();
        s.tried += 1;
        if s.taken_at == Some(s.tried) {
            s.taken_by = Some("host-b".into());
        }
        match &s.taken_by {
            Some(holder) => Err(StoreError::Fenced {
                id: fence.instance.clone(),
                holder: Some(holder.clone()),
            }),
            None => {
                for w in writes {
                    s.apply_one(fence, w);
                }
                s.commits.push(Commit {
                    how,
                    writes: writes.to_vec(),
                });
                Ok(())
            }
        }
    }
}

impl State {
    /// What a write changes of what the run reads back.
    fn apply_one(&mut self, fence: &Fence, w: &Write) {
        let me = fence.instance.as_str();
        match w {
            Write::TakeEvent { event, .. } => self.events.retain(|e| e.id != *event),
            Write::ReleaseLock { key } => {
                for holders in self.locks.values_mut() {
                    holders.retain(|(i, k)| !(i == me && key == k));
                }
            }
            Write::ReleaseLocks => {
                for holders in self.locks.values_mut() {
                    holders.retain(|(i, _)| i != me);
                }
            }
            Write::PutCache(e) => {
                let at = (
                    e.workflow.clone(),
                    e.step_id.clone(),
                    e.key.clone(),
                    e.part.clone(),
                );
                self.cache.insert(at, (**e).clone());
            }
            _ => {}
        }
    }
}

impl RunStore for Memory {
    fn system(&self) -> &'static str {
        "memory"
    }

    fn is_lent(&self) -> bool {
        false
    }

    async fn commit(&mut self, fence: &Fence, writes: &[Write]) -> Result<()> {
        self.apply(How::Synced, fence, writes)
    }

    async fn commit_before_sync(&mut self, fence: &Fence, writes: &[Write]) -> Result<()> {
        self.apply(How::BeforeSync, fence, writes)
    }

    async fn commit_unsynced(&mut self, fence: &Fence, writes: &[Write]) -> Result<()> {
        self.apply(How::Unsynced, fence, writes)
    }

    async fn begin_commit(
        &mut self,
        fence: &Fence,
        writes: Vec<Write>,
    ) -> Result<PendingCommit<'_>> {
        // Refused, its refusal comes from `done`, as a server's reply does:
        // after the processes it records were started, held.
        Ok(PendingCommit::made(
            self.apply(How::Begun, fence, &writes),
            true,
        ))
    }

    async fn poll(&self, _id: &InstanceId) -> Result<(CancelRequest, Vec<EventRow>)> {
        let s = self.state.borrow();
        Ok((s.cancel, s.events.clone()))
    }

    async fn cache_entry(
        &self,
        (workflow, step, key, part): (&str, &str, &str, &str),
        now: crate::vocab::Timestamp,
    ) -> Result<Option<crate::store::CacheEntry>> {
        let s = self.state.borrow();
        let at = (workflow.into(), step.into(), key.into(), part.into());
        Ok(s.cache
            .get(&at)
            .filter(|e| e.expires_at.is_none_or(|t| t > now))
            .cloned())
    }

    async fn request_cancel(&mut self, _id: &InstanceId, _ask: CancelRequest) -> Result<()> {
        // Asked only of children, which these runs make none of.
        Ok(())
    }

    async fn take_lock(
        &mut self,
        fence: &Fence,
        key: &str,
        limit: u32,
        unit: &str,
        _holder_alive: &dyn Fn(&str) -> bool,
    ) -> Result<bool> {
        let mut s = self.state.borrow_mut();
        s.lock_tries += 1;
        if let Some(holder) = &s.taken_by {
            return Err(StoreError::Fenced {
                id: fence.instance.clone(),
                holder: Some(holder.clone()),
            });
        }
        let holders = s.locks.entry(key.into()).or_default();
        if holders.len() >= limit as usize {
            return Ok(false);
        }
        holders.push((fence.instance.as_str().into(), unit.into()));
        Ok(true)
    }
}
