//! The driver of one run: the async edge around the deterministic
//! scheduler (`engine::scheduler`). It feeds the scheduler what happened
//! (attempts that ended, signals, cancel requests, events, the time),
//! carries out the effects it returns (spawning jobs, telling the observer,
//! ending spans), and commits the writes it decided: each result (attempt
//! outcome, output, state patch) in one transaction together with the
//! starts of the units that result unblocks, so a sequential step costs one
//! commit. It owns what cannot be deterministic: the JoinSet of running
//! attempts, the signals, the heartbeat's word, the spawn hold and the
//! commit's overlap with it, the clock, and the run's spans.
//!
//! This file holds the runner and what a turn decides and carries out;
//! `turn` the loop (receiving what happens, handling it); `options`
//! what a run is asked to do and the signals that stop it, `launch`
//! starts an attempt's process or request, `commit` overlaps the commit
//! with the processes' start, `spans` keeps the run's trace, and `groups`
//! records the process groups of attempts that run long enough to need it.
//!
//! It asks of the store only what `store::RunStore` names, so that `tests`
//! drive it on an in-memory store that refuses commits, loses the lease,
//! cancels, delivers events and holds locks on cue.

mod children;
mod commit;
mod groups;
mod launch;
mod options;
mod spans;
mod turn;

use super::lapse::{Lapse, LeaseNews};
use super::output_files;
pub use super::scheduler::RunOutcome;
pub(super) use super::scheduler::Stop;
use super::scheduler::{Effect, Input, Job, Note, RunData, Scheduler, Settled, Setup, Unit};
use super::{AttemptResult, EngineError, Failure, Observer, http, lease, shell};
use crate::store::{self, Fence, RunStore, StepRow, Write};
use crate::telemetry::{self, recorder};
use crate::vocab::{InstanceId, Timestamp, UnitKeyBuf};
use crate::workflow::Workflow;
pub use children::{ChildEnd, EndSlot};
pub(in crate::engine) use children::{ChildRuns, OpenedChild};
use opentelemetry::KeyValue;
use opentelemetry::trace::Status;
pub(in crate::engine) use options::Signals;
pub use options::{Claimed, RunOptions};
pub use spans::CarriedAttempt;
pub(in crate::engine) use spans::ended_spans;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// How often a run looks for a cancel request or an awaited event while it
/// waits (docs/execution.md: they take effect within 200 ms).
const POLL_EVERY: Duration = Duration::from_millis(100);

/// Work whose start waits for the commit in progress, with the span made
/// for it when it was first tried.
type Deferred = (Unit, Job, i64, Option<tracing::Span>);

/// A job the scheduler decided to start, whose attempt the coming commit records.
type Spawn = (Unit, Box<Job>, i64);

struct Done {
    unit: Unit,
    attempt: i64,
    elapsed: Duration,
    result: AttemptResult,
    /// A shell attempt's `$WF_OUTPUT` file, read: for `output_files`.
    output_file: Option<output_files::OutputFile>,
}

/// What carrying out one step's effects left for the loop.
#[derive(Default)]
struct Applied {
    /// Jobs to start with (or after) the coming commit.
    spawns: Vec<Spawn>,
    /// Child instances to run once the coming commit made them.
    children: Vec<children::Start>,
    /// Child instances to cancel (or terminate: true) as the parent ends early.
    ending: Vec<(InstanceId, bool)>,
    /// Decide again at once (after committing).
    again: bool,
    /// The run is over.
    end: Option<RunOutcome>,
}

pub(super) struct Runner<'o> {
    wf: Arc<Workflow>,
    pub(super) id: InstanceId,
    pub(super) run: i64,
    /// The run's records and decisions: the deterministic core.
    pub(super) sched: Scheduler,
    opts: RunOptions,
    observer: &'o dyn Observer,
    output_files: output_files::SharedOutputFiles,
    tasks: JoinSet<Done>,
    /// A signal stopped the run while nothing ran but timers and waits
    /// (`drive` then leaves the instance sleeping or waiting).
    pub(in crate::engine) idle_when_stopped: bool,
    interrupt_tx: watch::Sender<bool>,
    /// Each running attempt's own stop word, by unit key.
    unit_stops: HashMap<UnitKeyBuf, watch::Sender<bool>>,
    /// What `cache:` units asked of the driver ([`Effect::HashFiles`],
    /// [`Effect::LookUpCache`]), answered after the turn's commit.
    cache_asks: Vec<Effect>,
    http: Option<reqwest::Client>,
    /// This run's trace: (trace_id, root span_id, parent span_id, start ns).
    trace: store::RunTrace,
    /// The run's root span, open until the run's final commit.
    root: tracing::Span,
    /// Attempt spans in flight, by unit key: the scheduler's span ids.
    spans: spans::AttemptSpans,
    /// Attempts whose success the next commit makes durable: their span ids
    /// and spans, open until that commit returned (`commit_spans`).
    committing: Vec<(String, tracing::Span)>,
    /// This run's claim on the instance: every write checks it.
    pub(super) fence: Fence,
    /// The heartbeat's word that another process took the instance over,
    /// or that the lease lapsed (`lapse`).
    lost: LeaseNews,
    /// When the lease lapsed, how long it had gone unrenewed: the run
    /// stopped its steps as an interrupt would (`Runner::lapsed`).
    pub(super) lapsed: Option<Duration>,
    /// Process groups of running attempts, not recorded yet (`groups`).
    started_groups: Vec<groups::PendingGroup>,
    /// Process groups of running attempts, by unit key and attempt, as
    /// the lease's watch knows them (`lapse`).
    live_groups: HashMap<(UnitKeyBuf, i64), i32>,
    /// Processes held at their exec until the commit in progress returns.
    held: Vec<u32>,
    /// How long the last commit that started work took, sent to returned
    /// (`commit::start_held`).
    commit_took: Duration,
    /// Children of `workflow:` steps run in this process (`children`).
    children: children::InProcess,
    /// The `workflow:` attempt that made this instance, if it is a child:
    /// its end is delivered to the parent (`drive::close_run`).
    pub(super) parent: Option<store::ParentRef>,
    /// Step locks asked for and not taken yet: (unit key, lock key, limit).
    lock_waits: Vec<(UnitKeyBuf, String, u32)>,
    /// A child's first decisions, which its parent's commit made durable
    /// ([`Runner::open_in_parent`]): carried out by the loop's first turn,
    /// which commits nothing.
    precommitted: Option<Applied>,
    /// Children run here ended since the last commit ([`Runner::defers_sync`]).
    children_ended: bool,
    /// Children run here whose ends their runs handed to this one, not
    /// committed yet ([`children::ChildEnd`]): their `Write::Child`s.
    handed: Vec<InstanceId>,
}

/// What a run starts from (see `drive`).
pub(super) struct RunStart<'o> {
    /// How the children it runs in this process are run (the driver's).
    pub child_runs: &'static dyn children::ChildRuns,
    pub wf: Arc<Workflow>,
    pub inst: store::InstanceRow,
    pub run: i64,
    pub records: HashMap<UnitKeyBuf, StepRow>,
    pub opts: RunOptions,
    pub observer: &'o dyn Observer,
    pub trace: store::RunTrace,
    pub root: tracing::Span,
    pub fence: Fence,
    pub lost: LeaseNews,
    pub uncounted: HashMap<UnitKeyBuf, Vec<i64>>,
    pub events: Vec<store::EventRow>,
    /// The caller's sampled flag and `tracestate`, passed on to steps.
    pub caller: (
        opentelemetry::trace::TraceFlags,
        opentelemetry::trace::TraceState,
    ),
    /// Where running attempts copy their output for `wf logs --follow`.
    pub live_dir: Option<PathBuf>,
    /// The connections children run in this process share (`children`).
    pub shared: Arc<store::Shared>,
    /// What the workflow's `timeout` counts from: the newest `wf restart`
    /// (RFC 3339), else the instance's creation.
    pub deadline_from: Option<Timestamp>,
    /// The writes that open the run, for its first commit ([`Runner::opening`]).
    pub opening: Vec<Write>,
    /// `workflow:` attempts begun by earlier runs, by unit key (`spans`).
    pub carried: HashMap<UnitKeyBuf, CarriedAttempt>,
}

impl<'o> Runner<'o> {
    pub(super) fn new(start: RunStart<'o>) -> Runner<'o> {
        let RunStart {
            child_runs,
            wf,
            inst,
            run,
            records,
            opts,
            observer,
            trace,
            root,
            fence,
            lost,
            uncounted,
            events,
            caller,
            live_dir,
            shared,
            deadline_from,
            opening,
            carried,
        } = start;
        let deadline = wf
            .timeout
            .map(|t| deadline_from.unwrap_or(inst.created_at).plus(t));
        let (interrupt_tx, _) = watch::channel(false);
        let spans = spans::AttemptSpans::new(&wf.name, &inst.id, &trace, carried);
        let sched = Scheduler::new(Setup {
            wf: wf.clone(),
            run: RunData {
                id: inst.id.clone(),
                number: run,
                base_dir: PathBuf::from(&inst.base_dir),
                live_dir,
                trace_id: trace.0.clone(),
                depth: inst.depth,
                parent: inst.parent.as_ref().map(|p| p.id.clone()),
                caller,
                actor: opts.actor.clone(),
                no_cache: opts.no_cache,
            },
            inputs: inst.inputs,
            state: inst.state,
            records,
            uncounted,
            deadline,
            events,
            opening,
            secrets: super::context::secret_values(&wf.secrets),
        });
        Runner {
            output_files: opts.output_files.clone().unwrap_or_default(),
            id: inst.id,
            wf,
            run,
            sched,
            opts,
            observer,
            tasks: JoinSet::new(),
            idle_when_stopped: false,
            interrupt_tx,
            unit_stops: HashMap::new(),
            cache_asks: Vec::new(),
            http: None,
            trace,
            root,
            spans,
            committing: Vec::new(),
            fence,
            lost,
            lapsed: None,
            started_groups: Vec::new(),
            live_groups: HashMap::new(),
            held: Vec::new(),
            commit_took: Duration::ZERO,
            children: children::InProcess::new(shared, child_runs),
            parent: inst.parent,
            lock_waits: Vec::new(),
            precommitted: None,
            children_ended: false,
            handed: Vec::new(),
        }
    }

    /// Where this run, a child's run in its parent's process, leaves its
    /// end for the parent's (`RunOptions::end_to_parent`).
    pub(super) fn end_slot(&self) -> Option<&EndSlot> {
        self.opts.end_to_parent.as_ref()
    }

    /// Takes the end of a child run here that its run handed over: its
    /// writes go into this run's next commit, and its event to the
    /// scheduler, which has the step that waits for it take it then.
    fn child_ended_here(&mut self, end: children::ChildEnd) {
        let (name, payload) = self.keep_child_end(end);
        self.decide(Input::ChildEnded { name, payload });
    }

    /// Puts the writes of a child's handed end into this run's next
    /// commit (`Write::Child`); its event's name and payload.
    fn keep_child_end(&mut self, end: children::ChildEnd) -> (String, String) {
        let children::ChildEnd {
            fence,
            writes,
            name,
            payload,
        } = end;
        self.handed.push(fence.instance.clone());
        self.sched
            .push_write(Write::Child(Box::new(store::ChildWrites { fence, writes })));
        (name, payload)
    }

    /// The handed ends of children ([`Runner::child_ended_here`]) among
    /// the writes not committed, but that of child `refused` (whose fence
    /// refused them): a run that stops on an error makes them still, on
    /// their own if it cannot make its own.
    pub(super) fn handed_ends(&self, refused: Option<&InstanceId>) -> Vec<Write> {
        self.sched
            .decided()
            .iter()
            .filter(|w| match w {
                Write::Child(c) => {
                    self.handed.contains(&c.fence.instance) && refused != Some(&c.fence.instance)
                }
                _ => false,
            })
            .cloned()
            .collect()
    }

    /// The first decisions of a child's run its parent opened before the
    /// commit that makes the child (`drive::open_claimed`): the writes
    /// that open the run and record its first attempts, for that commit
    /// to make (`Write::Child`). What they start waits for it: the loop's
    /// first turn.
    pub(super) fn open_in_parent(&mut self) -> Vec<Write> {
        let applied = self.decide(Input::Tick(Vec::new()));
        self.flush_spans(&[]);
        self.precommitted = Some(applied);
        self.sched.take_writes()
    }

    /// Whether the first decisions [`Runner::open_in_parent`] made start
    /// work outside the database: attempts, or those of children opened
    /// with it.
    pub(super) fn first_decisions_start_work(&self) -> bool {
        self.precommitted.as_ref().is_some_and(|a| {
            !a.spawns.is_empty() || a.children.iter().any(children::Start::starts_work)
        })
    }

    /// Runs the loop, then waits for the children it runs in this process
    /// (a signal stops them as it stops the run): none is left half-run.
    pub(super) async fn main_loop(
        &mut self,
        store: &mut impl RunStore,
        signals: &mut Signals,
    ) -> Result<RunOutcome, EngineError> {
        let outcome = self.decide_until_done(store, signals).await;
        for ran in self.children.finish().await {
            if let Some(said) = ran.said {
                self.observer.message(&said);
            }
            // Its step is not taken now: the run's last commit delivers
            // its event, as its own would have.
            if let Some(end) = ran.end {
                self.keep_child_end(end);
            }
        }
        outcome
    }

    /// Whether nothing runs, nothing is to start and nothing is asked for
    /// once `applied` is carried out: the run ends or suspends if the
    /// scheduler finds nothing more to do (`Input::Idle`).
    fn at_rest(&self, applied: &Applied) -> bool {
        applied.spawns.is_empty()
            && applied.children.is_empty()
            && applied.ending.is_empty()
            && !applied.again
            && self.lock_waits.is_empty()
            && self.cache_asks.is_empty()
            && !self.sched.has_running()
            && self.tasks.is_empty()
            && self.children.is_empty()
    }

    /// What an ended attempt leaves for the driver (its output file, its
    /// process group), and what it leaves for the scheduler.
    fn ended(&mut self, mut d: Done) -> Settled {
        if let Some(file) = d.output_file.take() {
            self.output_files.lock().spent(file);
        }
        let key = d.unit.key(&self.wf);
        self.unit_stops.remove(&key);
        self.group_ended(&key, d.attempt);
        Settled {
            unit: d.unit,
            attempt: d.attempt,
            elapsed: d.elapsed,
            result: d.result,
        }
    }

    /// Has the scheduler decide `input` now, and carries out its effects
    /// but the spawns, which wait for the commit that records them.
    fn decide(&mut self, input: Input) -> Applied {
        let effects = self.sched.step(Timestamp::now(), input, &mut self.spans);
        let mut applied = Applied::default();
        for effect in effects {
            match effect {
                Effect::Spawn { unit, job, attempt } => applied.spawns.push((unit, job, attempt)),
                Effect::Note(note) => self.tell(note),
                ask @ (Effect::HashFiles { .. } | Effect::LookUpCache { .. }) => {
                    self.cache_asks.push(ask);
                }
                Effect::CachedFrom { key, from } => {
                    self.spans.annotate(&key, "workflow.step.cached_from", from);
                }
                Effect::StopUnits { keys } => {
                    for key in keys {
                        if let Some(own) = self.unit_stops.get(&key) {
                            let _ = own.send(true);
                        }
                    }
                }
                Effect::Interrupt { fresh } => {
                    let _ = self.interrupt_tx.send(true);
                    if fresh {
                        // Compensations start after this: they get a channel
                        // of their own, which only a signal to this process trips.
                        self.interrupt_tx = watch::channel(false).0;
                    }
                }
                Effect::AttemptEnded {
                    key,
                    attempt,
                    outcome,
                    failure,
                } => self.end_attempt_span(&key, attempt, outcome, failure.as_ref()),
                Effect::TakeLock { key, lock, limit } => {
                    self.lock_waits.push((key, lock, limit));
                }
                Effect::Skipped { key } => {
                    let span = self.spans.new_span(&self.sched.shown_key(key));
                    span.set_attribute("workflow.step.outcome", "skipped");
                }
                Effect::LinkEvent { name, traceparent } => {
                    // The run an event wakes links to the context it was sent under.
                    if let Some(sc) =
                        telemetry::TraceParent::parse(&traceparent).map(|t| t.context())
                    {
                        self.root.add_link_with_attributes(
                            sc,
                            vec![KeyValue::new("wf.event.name", name)],
                        );
                    }
                }
                Effect::RunChild { id, workflow, made } => {
                    // Made now: its first run is a child of the attempt's
                    // span, which this run holds.
                    let parent_span = made.as_ref().and_then(|key| {
                        self.spans
                            .open
                            .get(key.as_str())
                            .and_then(|(_, span_id, _)| {
                                telemetry::TraceParent::of(&self.trace.0, span_id)
                            })
                            .map(|t| t.to_string())
                    });
                    let claimed = match (&made, &workflow) {
                        (Some(_), Some(child)) => self.lease_child(&id, child),
                        _ => None,
                    };
                    let mut start = children::Start {
                        id,
                        workflow,
                        parent_span,
                        claimed,
                        opened: None,
                        end: children::EndSlot::default(),
                    };
                    // Made leased to this process by the coming commit:
                    // its run is opened now, and that commit records its
                    // first decisions too.
                    if let Some(opening) = self.children.open(&mut start, self.opts.inline_wait) {
                        self.sched.push_write(opening);
                    }
                    applied.children.push(start);
                }
                Effect::EndChild { id, terminate } => applied.ending.push((id, terminate)),
                Effect::Again => applied.again = true,
                Effect::End(outcome) => applied.end = Some(outcome),
            }
        }
        applied
    }

    /// Makes child `id`, which the coming commit creates, leased to the
    /// process that will run it here (at epoch 0, as made), so that its
    /// run starts without a takeover of its own (one transaction less a
    /// child). Not one with a queue (admitted as it is first driven), nor
    /// one that lacks a secret (left unclaimed for a process that has it).
    fn lease_child(&mut self, id: &InstanceId, child: &Workflow) -> Option<Box<Claimed>> {
        if super::missing_secret(child).is_some() {
            return None;
        }
        let ttl = lease::ttl().unwrap_or(lease::DEFAULT_TTL);
        let owner = lease::owner_name();
        let expires_ms = Timestamp::now().ms() + lease::ttl_ms(ttl);
        let instance = self.sched.lease_child(id, &owner, expires_ms)?;
        Some(Box::new(Claimed {
            fence: Fence {
                instance: id.clone(),
                owner,
                epoch: 0,
            },
            instance,
            granted: Instant::now(),
        }))
    }

    /// Passes a note of the scheduler's to the observer.
    fn tell(&self, note: Note) {
        let o = self.observer;
        let shown = |key: UnitKeyBuf| self.sched.shown_key(key);
        match note {
            Note::StepStarted { key, attempt } => o.step_started(&shown(key), attempt),
            Note::StepFinished {
                key,
                attempt,
                outcome,
                failure,
                elapsed,
            } => o.step_finished(&shown(key), attempt, outcome, failure.as_ref(), elapsed),
            Note::StepSkipped { key } => o.step_skipped(&shown(key)),
            Note::StepRetrying {
                key,
                next_attempt,
                try_n,
                max_attempts,
                delay,
            } => o.step_retrying(&shown(key), next_attempt, try_n, max_attempts, delay),
            Note::FanOutFinished { key, items } => o.fan_out_finished(&shown(key), items),
            Note::Message(text) => o.message(&text),
        }
    }

    /// Looks for what other processes asked of this run: a cancel request (it
    /// starts canceling) or an awaited event (true: a waiting step can go on).
    async fn poll_external(&mut self, store: &impl RunStore) -> Result<bool, EngineError> {
        let (asked, delivered) = store.poll(&self.id).await?;
        self.decide(Input::CancelAsked(asked));
        if self.sched.awaited_events().is_empty() {
            return Ok(false);
        }
        Ok(self.decide(Input::Events(delivered)).again)
    }

    /// Asks for the step locks units wait for; true when one was taken
    /// (its unit starts at the next decision). A run that stops (or turns
    /// to compensations) asks for none: its units will not start.
    async fn try_locks(&mut self, store: &mut impl RunStore) -> Result<bool, EngineError> {
        if self.lock_waits.is_empty() {
            return Ok(false);
        }
        if self.sched.stopped().is_some() || self.sched.compensating() {
            self.lock_waits.clear();
            return Ok(false);
        }
        let mut taken = false;
        for (key, lock, limit) in std::mem::take(&mut self.lock_waits) {
            if store
                .take_lock(&self.fence, &lock, limit, &key, &lease::holder_alive)
                .await?
            {
                self.decide(Input::LockTaken(key));
                taken = true;
            } else {
                self.lock_waits.push((key, lock, limit));
            }
        }
        Ok(taken)
    }

    /// Answers what `cache:` units asked: the hashes of their keys' files,
    /// and the entries kept for their keys. True when one was answered
    /// (its unit goes on at the next decision).
    async fn answer_cache(&mut self, store: &impl RunStore) -> Result<bool, EngineError> {
        let asks = std::mem::take(&mut self.cache_asks);
        let answered = !asks.is_empty();
        for ask in asks {
            let (key, answer) = match ask {
                Effect::HashFiles { key, dir, calls } => {
                    // Off the run's thread: a large tree is read whole,
                    // and the steps running meanwhile go on being read.
                    let hashed = tokio::task::spawn_blocking(move || {
                        let mut files = serde_json::Map::new();
                        for patterns in &calls {
                            let h = crate::engine::hash_files::hash(&dir, patterns)?;
                            files.insert(patterns.join("\n"), h.into());
                        }
                        Ok(files)
                    })
                    .await
                    .unwrap_or_else(|e| Err(format!("hashFiles: {e}")));
                    (key, crate::engine::scheduler::CacheAnswer::Hashed(hashed))
                }
                Effect::LookUpCache {
                    key,
                    workflow,
                    step,
                    cache_key,
                    part,
                } => {
                    let at = (
                        workflow.as_str(),
                        step.as_str(),
                        cache_key.as_str(),
                        part.as_str(),
                    );
                    let found = store.cache_entry(at, Timestamp::now()).await?;
                    (
                        key,
                        crate::engine::scheduler::CacheAnswer::Found(found.map(Box::new)),
                    )
                }
                _ => continue,
            };
            self.decide(Input::Cache { key, answer });
        }
        Ok(answered)
    }

    /// The error of a run whose instance `holder` took over.
    fn fenced(&self, holder: String) -> EngineError {
        EngineError::LeaseLost {
            id: self.id.clone(),
            holder,
        }
    }

    /// `e`, which ended the run, said with the lapse of its lease before
    /// it if the lease lapsed (its steps then stopped by themselves,
    /// `stop::StopSignal::with_lease`, even while the run waited on the
    /// database): a worker's log says why the step stopped, not only what
    /// the database did then.
    pub(in crate::engine) fn with_lapse(&mut self, e: EngineError) -> EngineError {
        let unrenewed = self.lapsed.or_else(|| self.lost.watch().lapsed_after());
        match (unrenewed, &e) {
            (
                Some(d),
                EngineError::LeaseLost { .. }
                | EngineError::Store(crate::store::StoreError::Unreachable { .. }),
            ) => EngineError::Lapsed {
                id: self.id.clone(),
                unrenewed: crate::workflow::duration::human(d),
                then: Box::new(e),
            },
            _ => e,
        }
    }

    /// What the lease's news does to the run: a takeover ends it (the
    /// error); a lapse stops its steps as an interrupt does (their attempts
    /// recorded `interrupted` by the next commit, if the fence still holds
    /// then), and the run ends once they have (`drive::finish` says why).
    pub(super) fn heard(&mut self, news: Lapse) -> Result<(), EngineError> {
        match news {
            Lapse::TakenBy(holder) => Err(self.fenced(holder)),
            Lapse::Unrenewed(unrenewed) => {
                if self.lapsed.is_none() {
                    self.lapsed = Some(unrenewed);
                    self.observer.message(&format!(
                        "the lease on {} was not renewed for {} (the database does not answer): its steps are stopped before another process may take it over",
                        self.id,
                        crate::workflow::duration::human(unrenewed)
                    ));
                    self.stop(Stop::Signal);
                }
                Ok(())
            }
        }
    }

    /// Stops every step still running and waits for them to end, keeping
    /// nothing they report: another process owns the instance now.
    pub(super) async fn abandon(&mut self) {
        self.stop(Stop::Lost);
        let _ = self.interrupt_tx.send(true);
        while self.tasks.join_next().await.is_some() {}
    }

    /// Stops running units for `why` (see `Scheduler::step`).
    pub(super) fn stop(&mut self, why: Stop) {
        self.decide(Input::Stop(why));
    }
}

#[cfg(test)]
mod tests;
