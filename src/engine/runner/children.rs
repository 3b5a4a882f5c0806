//! Children of `workflow:` steps run in the parent's process, concurrently
//! with its other steps: each is driven as `wf resume CHILD` would drive it
//! (its own lease, its own run; the database through the few connections
//! the children share, `store::shared`), as a future the parent's loop
//! polls. Whoever ends a child delivers its end to the parent
//! in the child's last commit, so the parent learns of it by its events
//! whether the child ran here or elsewhere: one that another process holds
//! (a worker that claimed it first) is left to it, and one that already
//! ended is not run again. A child the parent's coming commit makes leased
//! to this process is opened before that commit, which records its first
//! decisions too ([`InProcess::open`], `drive::open_claimed`). A child run
//! here that ends hands its last commit to the parent's run
//! ([`ChildEnd`]), which makes it with the end of its step: one
//! transaction where there were two, and the parent need not read its
//! events back to learn of it.

use super::{EngineError, InstanceId, RunOptions};
use crate::engine::output_files::SharedOutputFiles;
use crate::store::{ChildWrites, Shared, Store, Write};
use crate::workflow::Workflow;
use futures_util::future::{FutureExt as _, LocalBoxFuture};
use futures_util::stream::{FuturesUnordered, StreamExt as _};
use std::sync::Arc;
use std::time::Duration;

/// How a child's run is made and driven: the driver's (`drive`), handed
/// to the runner when it is made ([`super::RunStart::child_runs`]), so
/// that the runner, which the driver drives, never calls back into it.
/// A child run here reports nothing to an observer (its step hears of its
/// end through the parent's events; its lines are not printed: the
/// parent's are).
pub(in crate::engine) trait ChildRuns {
    /// Opens the run of the child `opts.claimed` names, which the coming
    /// commit leases to this process; `None` when it is to be taken as any
    /// instance is, by [`ChildRuns::drive`].
    fn open(
        &self,
        location: crate::store::Location,
        live_dir: std::path::PathBuf,
        opts: RunOptions,
    ) -> Option<Box<dyn OpenedChild>>;

    /// Drives child `id` as `wf resume` would (its lease taken, its
    /// history read).
    fn drive(
        &self,
        store: Store,
        id: InstanceId,
        opts: RunOptions,
    ) -> LocalBoxFuture<'static, Result<super::RunOutcome, EngineError>>;
}

/// A child's run opened before the commit that makes the child.
pub(in crate::engine) trait OpenedChild {
    /// Its first decisions, for the parent's commit to make; what they
    /// start waits for that commit (the run's first turn).
    fn first_writes(&mut self) -> Vec<Write>;

    /// Whether those decisions start work outside the database: attempts,
    /// or those of children opened with it.
    fn starts_work(&self) -> bool;

    /// Runs it to its end on `store`.
    fn run(
        self: Box<Self>,
        store: Store,
    ) -> LocalBoxFuture<'static, Result<super::RunOutcome, EngineError>>;
}

/// The last commit of a child run here that ended, handed to its
/// parent's run (`drive::close_run`) rather than made: its writes, under
/// its fence ([`Write::Child`] in the parent's next commit), and the event
/// they deliver to the parent, which its step takes at once.
#[derive(Debug)]
pub struct ChildEnd {
    pub(in crate::engine) fence: crate::store::Fence,
    pub(in crate::engine) writes: Vec<Write>,
    pub(in crate::engine) name: String,
    pub(in crate::engine) payload: String,
}

/// Where a child's run leaves its [`ChildEnd`] for its parent's
/// (`RunOptions::end_to_parent`).
#[derive(Debug, Clone, Default)]
pub struct EndSlot(Arc<std::sync::Mutex<Option<ChildEnd>>>);

impl EndSlot {
    pub(in crate::engine) fn put(&self, end: ChildEnd) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(end);
    }

    fn take(&self) -> Option<ChildEnd> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

/// How a child's run here ended, for its parent's: what the parent says
/// of it, and its end, when its run handed it over.
pub(super) struct Ran {
    /// The child whose run this was.
    id: InstanceId,
    pub(super) said: Option<String>,
    pub(super) end: Option<ChildEnd>,
}

/// A child to run here: its pinned definition when the parent holds it,
/// and, for one made by this run, the span of the attempt that made it
/// (W3C `traceparent`), which its first run is a child of.
pub(super) struct Start {
    pub(super) id: InstanceId,
    pub(super) workflow: Option<Arc<Workflow>>,
    pub(super) parent_span: Option<String>,
    /// Made leased to this process by the commit that made it.
    pub(super) claimed: Option<Box<super::Claimed>>,
    /// Its run, opened before that commit, which makes its first
    /// decisions too ([`InProcess::open`]).
    pub(super) opened: Option<Box<dyn OpenedChild>>,
    /// Where its run leaves its end.
    pub(super) end: EndSlot,
}

impl Start {
    /// Whether the commit that makes this child lets work start outside
    /// the database: its first attempts (or those of its own children,
    /// opened with it).
    pub(super) fn starts_work(&self) -> bool {
        self.opened.as_ref().is_some_and(|r| r.starts_work())
    }
}

/// The children running in this process; each reports, when its run
/// ended, why it could not run, if it could not.
pub(super) struct InProcess {
    running: FuturesUnordered<LocalBoxFuture<'static, Ran>>,
    /// The connections the children's runs share, a call at a time
    /// (`store::shared`). Theirs, not this run's nor their children's: a
    /// child's call that holds one while it waits for its reply goes on
    /// only when this run polls it, and this run polls its children only
    /// between its own calls, so a call of this run must never wait for
    /// one of their connections (a chain of 16 nested children, sharing
    /// four, stopped so).
    shared: Arc<Shared>,
    /// The children's `$WF_OUTPUT` files: one folder and one spare for
    /// them all.
    files: SharedOutputFiles,
    /// The children with a run going here, and a run asked of one of them
    /// meanwhile (to end it: `Effect::EndChild`), started once that run
    /// ends. Started at once it would be refused (the child is held, by
    /// this process), and if the run going ended suspended, not having
    /// seen the cancel request yet, nothing would run the child to its
    /// end, and the parent would wait for it.
    here: std::collections::HashSet<InstanceId>,
    again: std::collections::HashMap<InstanceId, (Start, Duration)>,
    /// How their runs are made.
    runs: &'static dyn ChildRuns,
}

impl InProcess {
    pub(super) fn new(shared: Arc<Shared>, runs: &'static dyn ChildRuns) -> InProcess {
        InProcess {
            runs,
            running: FuturesUnordered::new(),
            shared,
            files: SharedOutputFiles::default(),
            here: std::collections::HashSet::new(),
            again: std::collections::HashMap::new(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// Opens the run of a child the coming commit makes leased to this
    /// process (`drive::open_claimed`), and returns its first decisions
    /// for that commit to make ([`Write::Child`]); `None` (and nothing
    /// opened) when it is to be taken as any instance is, by its run.
    pub(super) fn open(&mut self, start: &mut Start, inline_wait: Duration) -> Option<Write> {
        let fence = start.claimed.as_ref()?.fence.clone();
        let opts = self.options(start, inline_wait);
        let live_dir = self.shared.lend().live_dir();
        let location = self.shared.location().clone();
        let mut opened = self.runs.open(location, live_dir, opts)?;
        let writes = opened.first_writes();
        start.opened = Some(opened);
        Some(Write::Child(Box::new(ChildWrites { fence, writes })))
    }

    /// How a child is run here (with the parent's inline wait).
    fn options(&self, start: &Start, inline_wait: Duration) -> RunOptions {
        // Made by this run's last commit: leased to this process by it
        // (`Runner::lease_child`), or else taken at once (as `wf run` takes
        // what it created; a worker woken for it that got there first keeps
        // it, and it is left to it); one made earlier is checked first, so
        // that refusing it writes nothing.
        let owner = match &start.claimed {
            Some(c) => Some(c.fence.owner.clone()),
            None => start
                .parent_span
                .is_some()
                .then(crate::engine::lease::owner_name),
        };
        RunOptions {
            inline_wait,
            workflow: start.workflow.clone(),
            parent_span: start.parent_span.clone(),
            owner,
            claimed: start.claimed.clone(),
            output_files: Some(self.files.clone()),
            end_to_parent: Some(start.end.clone()),
            ..RunOptions::default()
        }
    }

    /// Starts driving a child (with the parent's inline wait).
    pub(super) fn start(&mut self, mut start: Start, inline_wait: Duration) {
        if start.opened.is_none() && self.here.contains(&start.id) {
            self.again.insert(start.id.clone(), (start, inline_wait));
            return;
        }
        self.here.insert(start.id.clone());
        let shared = self.shared.clone();
        if let Some(ready) = start.opened.take() {
            // Opened, its first decisions made by the commit that made it.
            let (id, slot) = (start.id, start.end);
            self.running.push(Box::pin(async move {
                let ran = ready.run(shared.lend()).await;
                Ran {
                    said: said_of(&id, ran.map(|_| ())),
                    end: slot.take(),
                    id,
                }
            }));
            return;
        }
        let opts = self.options(&start, inline_wait);
        let (id, slot) = (start.id, start.end);
        let runs = self.runs;
        self.running.push(Box::pin(async move {
            // Taken at once, it would fail for want of a secret: it is
            // left, unclaimed, for a process that has it.
            if opts.owner.is_some()
                && let Some(name) = opts
                    .workflow
                    .as_deref()
                    .and_then(crate::engine::missing_secret)
            {
                let e = crate::engine::unset_secret(name);
                return Ran {
                    said: Some(format!(
                        "child instance {id} could not run here: {e}; the step waits for it (`wf resume {id}`)"
                    )),
                    end: None,
                    id,
                };
            }
            let ran = runs
                .drive(shared.lend(), id.clone(), opts)
                .await
                .map(|_| ());
            Ran {
                said: said_of(&id, ran),
                end: slot.take(),
                id,
            }
        }));
    }

    /// A child's run here ended: the run asked of it meanwhile, if one
    /// was, starts now.
    fn ended(&mut self, ran: Ran) -> Ran {
        self.here.remove(&ran.id);
        if let Some((start, inline_wait)) = self.again.remove(&ran.id) {
            self.start(start, inline_wait);
        }
        ran
    }

    /// Resolves when a child's run ended; never while none runs.
    pub(super) async fn next_ended(&mut self) -> Ran {
        match self.running.next().await {
            Some(ran) => self.ended(ran),
            None => std::future::pending().await,
        }
    }

    /// The children whose runs ended too, by now (without waiting): their
    /// ends go into one commit of the parent's rather than one each (a
    /// fan-out's children end together).
    pub(super) fn also_ended(&mut self) -> Vec<Ran> {
        let mut ran = Vec::new();
        while let Some(Some(r)) = self.running.next().now_or_never() {
            ran.push(self.ended(r));
        }
        ran
    }

    /// Waits for every child running here.
    pub(super) async fn finish(&mut self) -> Vec<Ran> {
        let mut ran = Vec::new();
        while let Some(r) = self.running.next().await {
            ran.push(self.ended(r));
        }
        ran
    }
}

/// What the parent says of a child's run that ended so: nothing when it
/// ran, or was held elsewhere or ended already (its end reaches the parent
/// all the same); anything else leaves it for `wf resume CHILD` or a
/// worker, and is said.
fn said_of(id: &InstanceId, ran: Result<(), EngineError>) -> Option<String> {
    match ran {
        Ok(())
        | Err(
            EngineError::Held { .. }
            | EngineError::NotResumable { .. }
            | EngineError::NothingToCancel { .. },
        ) => None,
        Err(e) => Some(format!(
            "child instance {id} could not run here: {e}; the step waits for it (`wf resume {id}`)"
        )),
    }
}
