//! One run of an instance, from the outside: take the lease (raising the
//! fencing epoch), end what a dead or stalled predecessor left running, turn
//! its unfinished history into `crashed` records, start the run, let the
//! [`Runner`] drive it, close it, export its spans, release the lease. Every
//! write here is a batch of [`Write`]s committed under the fence.
//!
//! `drive` reads as those steps: `claim`, `plan_restart`, `end_leftovers`,
//! `open::open_run` (recovery, the run's trace, its opening writes), the
//! runner's loop, `finish`.

mod admit;
mod child;
mod open;

use super::pinned::workflow_of;
use open::open_run;

use super::advice::{self, Remedy};
use super::lease::{self, Heartbeat};
use super::runner::{
    ChildEnd, ChildRuns, OpenedChild, RunOptions, RunOutcome, RunStart, Runner, Signals, Stop,
};
use super::{EngineError, Observer, Unresumable, procs, restart, shell};
use crate::store::{self, RunStore, Store, StoreError, Write};
use crate::telemetry::{self, recorder};
use crate::vocab::{InstanceId, InstanceStatus, RunEnd, ShownStatus, Timestamp};
use crate::workflow::Workflow;
use futures_util::future::LocalBoxFuture;
use std::sync::Arc;

/// Drives instance `id` until it completes, fails, suspends or is interrupted
/// (one run, closed by its final commit), then sends the spans it committed
/// to the live exporters, if any are configured (never failing the run; see
/// `telemetry::export`), and releases the instance.
pub async fn drive(
    store: &mut Store,
    id: &InstanceId,
    opts: RunOptions,
    observer: &dyn Observer,
) -> Result<RunOutcome, EngineError> {
    recorder::install();
    let ttl = lease::ttl().map_err(EngineError::Input)?;
    // The lease lasts a TTL from no earlier than its takeover set it (the
    // store says when; a child made leased by its parent's commit, from
    // before that commit): from then on its holder watches it (`lapse`).
    let asked = std::time::Instant::now();
    let (fence, mut history, wf) = match claim(store, id, &opts, ttl).await? {
        Claim::Run(fence, history, wf) => (fence, *history, wf),
        Claim::Ended(outcome) => return Ok(outcome),
    };
    let granted = match &opts.claimed {
        Some(c) => c.granted,
        None => history.granted.unwrap_or(asked),
    };
    let watch = super::lapse::Watch::hold(id, ttl, granted);
    if let Some(outcome) =
        admit::admit(store, &fence, &mut history, &opts, observer, ttl, &watch).await?
    {
        return Ok(outcome);
    }
    let restart = match plan_restart(store, id, &wf, &opts, &mut history).await {
        Ok(restart) => restart,
        Err(e) => {
            store.release(&fence).await?;
            return Err(e);
        }
    };
    // A child's first run is a child of the attempt that made it, in its
    // trace (unless the caller gave a context of its own).
    let mut opts = opts;
    let parent_span = opts.parent_span.take();
    if history.last_run == 0
        && opts.traceparent.is_none()
        && let Some(p) = &history.instance.parent
    {
        opts.traceparent = match parent_span {
            Some(tp) => Some(tp),
            None => store
                .attempt_span(&p.id, &p.key, p.attempt)
                .await?
                .and_then(|(trace, span)| telemetry::TraceParent::of(&trace, &span))
                .map(|t| t.to_string()),
        };
    }
    let (heartbeat, lost) = Heartbeat::start(store.location(), fence.clone(), ttl, &watch);
    end_leftovers(id, &history, observer).await;
    // A restart gives the workflow's `timeout` a fresh start: it counts from
    // the newest restart, else from the instance's creation.
    let deadline_from = if opts.restart.is_some() {
        Some(Timestamp::now())
    } else if wf.timeout.is_some() && history.last_run > 0 {
        advice::deadline_start(&store.runs(id).await?)
    } else {
        None
    };
    let ready = ready(Setup {
        location: store.location(),
        live_dir: store.live_dir(),
        fence,
        history,
        wf,
        restart,
        opts,
        observer,
        deadline_from,
        heartbeat,
        lost,
    });
    run_ready(store, ready).await
}

/// A run opened and about to go: its runner, its heartbeat, its fence.
struct Ready<'o> {
    runner: Runner<'o>,
    heartbeat: Heartbeat,
    fence: store::Fence,
}

/// What [`ready`] opens a run from.
struct Setup<'o> {
    location: store::Location,
    live_dir: std::path::PathBuf,
    fence: store::Fence,
    history: store::History,
    wf: Arc<Workflow>,
    restart: Restart,
    opts: RunOptions,
    observer: &'o dyn Observer,
    deadline_from: Option<Timestamp>,
    heartbeat: Heartbeat,
    lost: super::lapse::LeaseNews,
}

/// How the runner runs children in its process: opened here
/// (`child::open_claimed`) or driven as any instance (`drive`), reporting
/// to no observer (its step hears of its end through the parent's events;
/// its lines are not printed: the parent's are).
struct ChildRunsHere;

static CHILD_RUNS: ChildRunsHere = ChildRunsHere;

impl ChildRuns for ChildRunsHere {
    fn open(
        &self,
        location: store::Location,
        live_dir: std::path::PathBuf,
        opts: RunOptions,
    ) -> Option<Box<dyn OpenedChild>> {
        let ready = child::open_claimed(location, live_dir, opts, &super::UNOBSERVED)?;
        Some(Box::new(ready))
    }

    fn drive(
        &self,
        mut store: Store,
        id: InstanceId,
        opts: RunOptions,
    ) -> LocalBoxFuture<'static, Result<RunOutcome, EngineError>> {
        Box::pin(async move { drive(&mut store, &id, opts, &super::UNOBSERVED).await })
    }
}

impl OpenedChild for Ready<'static> {
    fn first_writes(&mut self) -> Vec<Write> {
        self.runner.open_in_parent()
    }

    fn starts_work(&self) -> bool {
        self.runner.first_decisions_start_work()
    }

    fn run(
        self: Box<Self>,
        mut store: Store,
    ) -> LocalBoxFuture<'static, Result<RunOutcome, EngineError>> {
        Box::pin(async move { run_ready(&mut store, *self).await })
    }
}

/// Opens the run (`open::open_run`: recovery, its trace, its opening
/// writes) and makes its runner; nothing is read or written here.
fn ready(setup: Setup<'_>) -> Ready<'_> {
    let (wf, observer, fence) = (setup.wf, setup.observer, setup.fence);
    let id = fence.instance.clone();
    let opened = open_run(&id, &wf, setup.history, setup.restart.plan, &setup.opts);
    let (run, cancel, terminate) = (opened.run, opened.cancel, opened.terminate);
    let mut opts = setup.opts;
    opts.actor = opened.actor;
    let mut runner = Runner::new(RunStart {
        child_runs: &CHILD_RUNS,
        wf: wf.clone(),
        inst: opened.inst,
        run,
        records: opened.records,
        opts,
        observer,
        trace: opened.trace,
        root: opened.root,
        fence: fence.clone(),
        lost: setup.lost,
        uncounted: opened.uncounted,
        events: opened.events,
        caller: opened
            .caller
            .map(|sc| (sc.trace_flags(), sc.trace_state().clone()))
            .unwrap_or((
                opentelemetry::trace::TraceFlags::SAMPLED,
                opentelemetry::trace::TraceState::default(),
            )),
        live_dir: Some(setup.live_dir),
        shared: store::Shared::new(setup.location),
        deadline_from: setup.deadline_from,
        opening: opened.writes,
        carried: opened.carried,
    });
    runner.sched.set_terminate(terminate);
    if cancel {
        runner.stop(Stop::Cancel);
    }
    observer.run_started(&id, &wf.name, run, wf.steps.len());
    if let Some(note) = &setup.restart.note {
        observer.message(note);
    }
    Ready {
        runner,
        heartbeat: setup.heartbeat,
        fence,
    }
}

/// Drives a run [`ready`] opened to its end (`finish`).
async fn run_ready(store: &mut Store, ready: Ready<'_>) -> Result<RunOutcome, EngineError> {
    let Ready {
        mut runner,
        heartbeat,
        fence,
    } = ready;
    let outcome = match Signals::install() {
        Ok(mut signals) => runner.main_loop(store, &mut signals).await,
        Err(e) => Err(e),
    };
    finish(store, &mut runner, outcome, heartbeat, &fence).await
}

/// What taking an instance amounted to.
enum Claim {
    /// Taken, with its history and definition: run it.
    Run(store::Fence, Box<store::History>, Arc<Workflow>),
    /// Ended at once (a claimed instance that lacks a secret and never ran).
    Ended(RunOutcome),
}

/// Takes the lease (raising the epoch: whoever held it can write no more)
/// and reads the history as it stands, in one transaction; checks, under
/// the lease, that the instance may run (released again if not).
async fn claim(
    store: &mut Store,
    id: &InstanceId,
    opts: &RunOptions,
    ttl: std::time::Duration,
) -> Result<Claim, EngineError> {
    // An owner given by the caller created or claimed the instance for this
    // run (`wf run`, a worker): it is taken at once, and checked under the
    // lease. Otherwise it is checked first, so that refusing it writes nothing.
    let claimed = opts.owner.is_some();
    let owner = opts.owner.clone().unwrap_or_else(lease::owner_name);
    let mut wf = None;
    if !claimed {
        let inst = store.instance(id).await?;
        check_resumable(store, &inst, opts).await?;
        let pinned = workflow_of(store, &inst, opts).await?;
        super::check_secrets(&pinned)?;
        wf = Some(pinned);
    }
    // Made leased to this run by its parent's commit: held already, and
    // its history is its row.
    let taken = match opts.claimed.as_deref() {
        Some(c) => Ok((c.fence.clone(), store::History::fresh(c.instance.clone()))),
        None => {
            store
                .take_over(id, &owner, lease::ttl_ms(ttl), lease::holder_alive)
                .await?
        }
    };
    let (fence, history) = match taken {
        Ok(taken) => taken,
        Err(holder) => {
            return Err(EngineError::Held {
                id: id.clone(),
                holder,
            });
        }
    };
    // Ended by its queue before it ran (`on_full: skip`, a debounce).
    if history.instance.status == InstanceStatus::Skipped && opts.restart.is_none() {
        store.release(&fence).await?;
        let why = history.instance.error.clone();
        return Ok(Claim::Ended(RunOutcome::Skipped(
            why.unwrap_or_else(|| "skipped by its queue".into()),
        )));
    }
    // Again under the lease: another process may have finished it meanwhile.
    if let Err(e) = check_resumable(store, &history.instance, opts).await {
        store.release(&fence).await?;
        return Err(e);
    }
    let wf = match wf {
        Some(wf) => wf,
        None => match workflow_of(store, &history.instance, opts).await {
            Ok(wf) => wf,
            Err(e) => {
                store.release(&fence).await?;
                return Err(e);
            }
        },
    };
    // Claimed (by a worker: `wf run` checked the secrets before it created
    // the instance) without a secret it needs.
    if let Some(name) = super::missing_secret(&wf) {
        if history.last_run > 0 {
            // It ran elsewhere: left as it is, for a process that has the secret.
            store.release(&fence).await?;
            return Err(super::unset_secret(name));
        }
        // Nothing of it ran (a scheduled or detached instance): it fails,
        // so that it does not stay due (nor hold its schedule's `overlap`)
        // forever.
        let why = format!(
            "secret `{name}` is not set in the environment of the process that claimed it ({owner}): export {name} where `wf worker` (or the parent's `wf run`) runs; `wf resume {} --retry-failed` then runs the instance",
            &id[..id.len().min(12)]
        );
        store
            .commit(
                &fence,
                &[
                    Write::Status {
                        status: InstanceStatus::Failed,
                        wake_at: None,
                        waiting_event: None,
                        error: Some(why.clone()),
                    },
                    Write::Release,
                ],
            )
            .await?;
        return Ok(Claim::Ended(RunOutcome::Failed(why)));
    }
    Ok(Claim::Run(fence, Box::new(history), wf))
}

/// What a restart resets, and what the run says of it when it starts.
struct Restart {
    plan: Option<restart::Plan>,
    note: Option<String>,
}

/// Decides what a restart resets, on the history read under the lease:
/// from its step; for `--retry-failed` after compensations ran, from the
/// first step they undid (what they undid runs again too, said when the
/// run starts).
async fn plan_restart(
    store: &Store,
    id: &InstanceId,
    wf: &Workflow,
    opts: &RunOptions,
    history: &mut store::History,
) -> Result<Restart, EngineError> {
    let compensated = if opts.retry_failed {
        restart::undone_by_failure(wf, history.instance.status, &history.steps)
    } else {
        Vec::new()
    };
    let Some(from) = opts
        .restart
        .as_deref()
        .or(compensated.first().map(String::as_str))
    else {
        return Ok(Restart {
            plan: None,
            note: None,
        });
    };
    restart::fill_patches(store, id, &mut history.steps).await?;
    let plan = restart::plan(wf, &history.steps, from)?;
    let note = (!compensated.is_empty()).then(|| {
        format!(
            "--retry-failed: {}",
            restart::retry_note(&plan.reset_steps, &compensated)
        )
    });
    Ok(Restart {
        plan: Some(plan),
        note,
    })
}

/// Ends what unfinished attempts left running on this host before anything
/// starts again: two attempts of one step never run at once. An attempt
/// whose group was never recorded (its holder stopped or died just after
/// starting it) is found by its processes' variables, its run's trace
/// among them.
async fn end_leftovers(id: &InstanceId, history: &store::History, observer: &dyn Observer) {
    for a in &history.open {
        let groups = match &a.process {
            Some(p) => vec![p.clone()],
            None => {
                let trace = history.traces.get(&a.run).map(|t| t.0.as_str());
                procs::unrecorded(id, &a.key, a.attempt, trace)
            }
        };
        for p in &groups {
            let ended = procs::end_leftover(p, shell::KILL_GRACE).await;
            if ended > 0 {
                observer.message(&format!(
                    "{}: ended {ended} process(es) left running by attempt {}",
                    a.key, a.attempt
                ));
            }
        }
    }
}

/// Ends the run after its loop: its processes on an error, its final
/// commit (with the release, when no live export follows), the live
/// export, the lease.
async fn finish(
    store: &mut Store,
    runner: &mut Runner<'_>,
    outcome: Result<RunOutcome, EngineError>,
    heartbeat: Heartbeat,
    fence: &store::Fence,
) -> Result<RunOutcome, EngineError> {
    let id = fence.instance.clone();
    if outcome.is_err() {
        // Whatever stopped the run, its steps' processes (their whole
        // groups) end with it: no exit path leaves one behind.
        runner.abandon().await;
    }
    if let Err(e) = &outcome
        && (refused(e) == Some(&id)
            || matches!(e, EngineError::Store(StoreError::Unreachable { .. })))
    {
        // Another process owns the instance now, or the database is out of
        // reach: write nothing (it resumes from what was recorded). The
        // ends of children run here that it had not committed yet are
        // still theirs to make, each on its own.
        if refused(e).is_some() {
            for w in runner.handed_ends(None) {
                if let Write::Child(child) = w {
                    let _ = store.commit_before_sync(&child.fence, &child.writes).await;
                }
            }
        }
        let e = lost_lease(&id, outcome.err().unwrap_or_else(|| unreachable!()));
        return Err(runner.with_lapse(e));
    }
    // With no live export to do under the lease, the last commit gives it
    // up too (the heartbeat stopped first, so no renewal follows it).
    let release_in_close = !telemetry::export::configured();
    let mut heartbeat = Some(heartbeat);
    if release_in_close {
        drop(heartbeat.take());
    }
    let closed = close_run(store, runner, outcome, release_in_close).await;
    // The live copies of this run's attempts are gone: so is their folder.
    let live = store.live_dir();
    let _ = std::fs::remove_dir(live.join(id.as_str()));
    let _ = std::fs::remove_dir(&live);
    let outcome = closed.map_err(|e| runner.with_lapse(lost_lease(&id, e)))?;
    if !release_in_close {
        // Still under the lease: no other process can export these spans meanwhile.
        telemetry::export::export_instance(store, fence).await;
        drop(heartbeat);
        store.release(fence).await?;
    }
    // Its lease lapsed: its steps were stopped and their attempts are
    // recorded `interrupted` (the fence held when the database answered
    // again), the instance left for `wf resume` or a worker.
    if let Some(unrenewed) = runner.lapsed {
        return Err(EngineError::LeaseLapsed {
            id,
            unrenewed: crate::workflow::duration::human(unrenewed),
        });
    }
    Ok(outcome)
}

/// The instance whose fence refused a write: the run's own, or a child's
/// whose end it made with its own (`Write::Child`).
fn refused(e: &EngineError) -> Option<&InstanceId> {
    match e {
        EngineError::Store(StoreError::Fenced { id, .. }) | EngineError::LeaseLost { id, .. } => {
            Some(id)
        }
        _ => None,
    }
}

/// The holder named by a refused (fenced) write.
fn fenced_holder(e: &EngineError) -> Option<String> {
    match e {
        EngineError::Store(StoreError::Fenced { holder, .. }) => {
            Some(holder.clone().unwrap_or_else(|| "another process".into()))
        }
        EngineError::LeaseLost { holder, .. } => Some(holder.clone()),
        _ => None,
    }
}

/// A refused write means another process took the instance over: say so,
/// naming it (exit 5), or the child whose end this run was making with
/// its own (its run closed, the instance left for `wf resume`, as after
/// any error). Any other error passes through.
fn lost_lease(id: &InstanceId, e: EngineError) -> EngineError {
    match (fenced_holder(&e), refused(&e)) {
        (Some(holder), Some(child)) if child != id => EngineError::ChildLost {
            id: id.clone(),
            child: child.clone(),
            holder,
        },
        (Some(holder), _) => EngineError::LeaseLost {
            id: id.clone(),
            holder,
        },
        (None, _) => e,
    }
}

/// Closes the run whatever happened, so history never shows a run in
/// progress: the scheduler decides how ([`Scheduler::close`]); this writes
/// the root span and the run's end, gives up the lease, and commits.
///
/// [`Scheduler::close`]: super::scheduler::Scheduler::close
pub(in crate::engine) async fn close_run(
    store: &mut impl RunStore,
    runner: &mut Runner<'_>,
    outcome: Result<RunOutcome, EngineError>,
    release: bool,
) -> Result<RunOutcome, EngineError> {
    let run = runner.run;
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            // Decisions not committed are dropped, but the ends of children
            // run here are theirs (not that of the child whose fence
            // refused them).
            let ends = runner.handed_ends(refused(&e));
            runner.sched.close_on_error(ends);
            runner.write_root_span(RunEnd::Failed, Some(&e.to_string()));
            runner.sched.push_write(Write::FinishRun {
                run,
                outcome: RunEnd::Failed,
            });
            if release {
                runner.sched.push_write(Write::Release);
            }
            let writes = runner.sched.take_writes();
            store.commit(&runner.fence, &writes).await?;
            return Err(e);
        }
    };
    let failure = match &outcome {
        RunOutcome::Failed(reason) => Some(reason.as_str()),
        _ => None,
    };
    runner.write_root_span(outcome.end(), failure);
    let closed = runner.sched.close(
        &runner.id,
        runner.parent.as_ref(),
        &outcome,
        runner.idle_when_stopped,
        Timestamp::now(),
    )?;
    runner.sched.push_write(Write::FinishRun {
        run,
        outcome: outcome.end(),
    });
    if release {
        runner.sched.push_write(Write::Release);
    }
    let writes = runner.sched.take_writes();
    // A child run in its parent's process that ended, its lease given up
    // with it: its parent's run makes this commit with its step's end
    // (`runner::children::ChildEnd`).
    if let (Some(slot), Some((name, payload)), true) = (
        runner.end_slot(),
        closed.parent_event,
        release && store.is_lent(),
    ) {
        slot.put(ChildEnd {
            fence: runner.fence.clone(),
            writes,
            name,
            payload,
        });
        return Ok(outcome);
    }
    if store.is_lent() {
        // A child run in its parent's process: its parent goes on from
        // this commit, and syncs before anything depends on it
        // (`Runner::defers_sync`).
        store.commit_before_sync(&runner.fence, &writes).await?;
    } else {
        store.commit(&runner.fence, &writes).await?;
    }
    Ok(outcome)
}

/// Whether `inst` may be driven with `opts` (completed and canceled instances
/// never; failed ones only with `--retry-failed`, and not once the
/// workflow's `timeout` passed: the run would time out at once). A refusal
/// of a failed instance says what can change its result ([`advice`]).
pub(crate) async fn check_resumable(
    store: &Store,
    inst: &store::InstanceRow,
    opts: &RunOptions,
) -> Result<(), EngineError> {
    let id = &inst.id;
    if opts.restart.is_some() {
        return Ok(restart::check_ended(id, ShownStatus::Stored(inst.status))?);
    }
    let refused = |why| {
        Err(EngineError::NotResumable {
            id: id.clone(),
            why,
        })
    };
    match inst.status {
        InstanceStatus::Completed => refused(Unresumable::Completed),
        InstanceStatus::Canceled => refused(Unresumable::Canceled),
        InstanceStatus::Failed if opts.cancel => Err(EngineError::NothingToCancel {
            id: id.clone(),
            status: inst.status,
        }),
        InstanceStatus::Failed => {
            let remedy = advice::remedy_of(store, inst).await?;
            if opts.retry_failed && !matches!(remedy, Remedy::DeadlinePassed { .. }) {
                return Ok(());
            }
            refused(Unresumable::Failed(Box::new(super::FailedRun {
                error: inst.error.clone(),
                remedy,
                retry: opts.retry_failed,
                short: id[..id.len().min(12)].to_string(),
                file: inst.workflow_path.clone(),
            })))
        }
        _ => Ok(()),
    }
}
