//! `wf worker`'s loop: resume every instance that is due (elapsed timers,
//! delivered events, dead leases) and start the scheduled ones, up to a
//! number of runs at once, until stopped (`once`: one sweep). Several
//! workers may share a database: the lease taken by each run keeps any
//! instance to one worker at a time.
//!
//! The engine decides and drives; what a worker has to say (a run ended, a
//! schedule fired, the database is in trouble) goes to a [`WorkerObserver`],
//! and how it stopped is returned ([`WorkerEnd`]). `commands/worker.rs`
//! parses the arguments, opens the store, prints what the observer hears and
//! turns the end into an exit status.

use super::fire::{self, Fired};
use super::{EngineError, RunOptions, RunOutcome, drive, lease};
use crate::store::{Location, Pool, Store, StoreError};
use crate::vocab::{InstanceId, InstanceStatus};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::task::JoinSet;

/// How a worker works (`wf worker`'s flags).
#[derive(Debug, Clone)]
pub struct Options {
    /// One sweep over what is due now, then stop once those runs end.
    pub once: bool,
    /// Most instances driven at once (at least 1).
    pub concurrency: usize,
    /// How often to look for due instances and schedules.
    pub poll: Duration,
    /// Longest timer or retry backoff a run waits for inline.
    pub inline_wait: Duration,
}

/// What a worker reports as it works.
pub trait WorkerObserver {
    /// What a schedule entry did at a poll (a broken entry is reported
    /// once, not at every poll).
    fn fired(&self, fired: &Fired);
    /// The run of `id` ended.
    fn run_ended(&self, id: &InstanceId, outcome: &RunOutcome);
    /// The run of `id` ended in an error (not a workflow failure); the
    /// worker leaves the instance alone for a while (`once`: for the rest
    /// of the sweep).
    fn run_failed(&self, id: &InstanceId, error: &EngineError);
    /// A database error between runs (the store already tried to reconnect
    /// for `WF_DB_RETRY`): the worker goes on polling, since the database
    /// coming back is what it waits for. With `once` the error ends the
    /// worker instead, and is not reported here.
    fn trouble(&self, error: EngineError);
}

/// How a worker ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerEnd {
    /// SIGINT, SIGTERM or SIGHUP stopped it: the runs it had going were
    /// interrupted (resumable).
    Stopped,
    /// `once`: its sweep is over; `errors` runs ended in an error.
    Swept { errors: usize },
}

/// How often a worker records that it is alive.
const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);

/// How long a worker leaves an instance alone after its run ended in an error.
const ERROR_PAUSE: Duration = Duration::from_secs(30);

/// Whether a run ended because another process took its instance (or a
/// child of it) over: no reason to leave the instance alone for a while.
fn lost_lease(e: &EngineError) -> bool {
    if let EngineError::Lapsed { then, .. } = e {
        return lost_lease(then);
    }
    matches!(
        e,
        EngineError::LeaseLost { .. }
            | EngineError::LeaseLapsed { .. }
            | EngineError::ChildLost { .. }
            | EngineError::Store(StoreError::Fenced { .. })
    )
}

/// A worker, ready to run: its signals are caught from the moment it is
/// made (so that a SIGTERM sent once it said it started stops it cleanly).
pub struct Worker {
    store: Store,
    location: Location,
    options: Options,
    stop: [Signal; 3],
}

impl Worker {
    /// A worker over `store`, which opens more connections to `location`
    /// for its runs. From here, SIGINT, SIGTERM and SIGHUP stop it.
    pub fn new(store: Store, location: Location, options: Options) -> std::io::Result<Worker> {
        Ok(Worker {
            store,
            location,
            options,
            stop: [
                signal(SignalKind::interrupt())?,
                signal(SignalKind::terminate())?,
                signal(SignalKind::hangup())?,
            ],
        })
    }

    /// Works until stopped by a signal, or, with `once`, until the runs of
    /// one sweep have ended. An error: the lease TTL is not valid
    /// (`WF_LEASE_TTL`), or, with `once`, the database failed between runs.
    pub async fn run(self, observer: &dyn WorkerObserver) -> Result<WorkerEnd, EngineError> {
        // Runs share the thread (a store is not `Sync`): a local task set.
        tokio::task::LocalSet::new()
            .run_until(self.work(observer))
            .await
    }

    async fn work(self, observer: &dyn WorkerObserver) -> Result<WorkerEnd, EngineError> {
        let Worker {
            mut store,
            location,
            options: opts,
            stop: [mut sigint, mut sigterm, mut sighup],
        } = self;
        let mut tasks: JoinSet<(InstanceId, Result<RunOutcome, EngineError>)> = JoinSet::new();
        let mut active: Vec<InstanceId> = Vec::new();
        let mut stopping = false;
        // Instances not to pick up again before the given time: with `once`,
        // every instance this sweep already ran (it may still look due, e.g.
        // when its pinned definition no longer parses); otherwise, one whose
        // run ended in an error, so a broken instance is retried after a
        // pause instead of in a hot loop.
        let mut rest: HashMap<InstanceId, Instant> = HashMap::new();
        // Runs that ended in an error (not a workflow failure).
        let mut errors = 0usize;
        // One owner name for the worker: it claims instances under it, and
        // each run takes its instance over under the same name.
        let owner = lease::owner_name();
        let ttl = lease::ttl().map_err(EngineError::Input)?;
        // Connections kept between runs (a run needs one of its own while it lasts).
        let pool = Pool::new(location.clone());
        // When instances whose holder died on this host were last looked for.
        let mut last_scan: Option<Instant> = None;
        // The earliest fire time of a registered schedule still ahead, and
        // when schedules were last looked at (a buffered fire time waits for
        // an instance to end, which is seen by looking again).
        let mut next_fire: Option<i64> = None;
        let mut last_fired: Option<Instant> = None;
        let mut broken: HashSet<(String, i64)> = HashSet::new();
        // Its heartbeat (`/metrics`: worker liveness), at most every
        // [`HEARTBEAT_EVERY`].
        let started_ms = chrono::Utc::now().timestamp_millis();
        let mut last_beat: Option<Instant> = None;
        // The SQLite file as the worker opened it: deleted, moved or
        // replaced under it, the worker claims nothing more (what it would
        // write would go to a file nobody reads) and ends with the error
        // once its runs have.
        let file = location.file_id().and_then(Result::ok);
        let mut gone: Option<String> = None;
        loop {
            if gone.is_none()
                && let Err(why) = location.still(file)
            {
                observer.trouble(EngineError::Store(crate::store::StoreError::Open {
                    path: location.describe(),
                    reason: format!("{why}: claiming nothing more"),
                }));
                gone = Some(why);
                stopping = true;
            }
            let now_ms = chrono::Utc::now().timestamp_millis();
            if !stopping && last_beat.is_none_or(|t| t.elapsed() >= HEARTBEAT_EVERY) {
                last_beat = Some(Instant::now());
                if let Err(e) = store.heartbeat(&owner, started_ms).await {
                    trouble(observer, opts.once, e.into())?;
                }
            }
            if !stopping
                && (next_fire.is_none_or(|t| t <= now_ms)
                    || last_fired.is_none_or(|t| t.elapsed() >= opts.poll))
            {
                let (fired, ahead) = match fire::fire_due(&mut store, now_ms).await {
                    Ok(f) => f,
                    Err(e) => {
                        trouble(observer, opts.once, e)?;
                        (Vec::new(), next_fire)
                    }
                };
                next_fire = ahead;
                last_fired = Some(Instant::now());
                for f in &fired {
                    // A broken entry is said once, not at every poll.
                    if let Fired::Broken { workflow, idx, .. } = f
                        && !broken.insert((workflow.clone(), *idx))
                    {
                        continue;
                    }
                    observer.fired(f);
                }
            }
            if !stopping && active.len() < opts.concurrency {
                let now = Instant::now();
                let skip: Vec<InstanceId> = active
                    .iter()
                    .cloned()
                    .chain(
                        rest.iter()
                            .filter(|(_, t)| **t > now)
                            .map(|(id, _)| id.clone()),
                    )
                    .collect();
                let mut ids = match store
                    .claim_due(
                        &owner,
                        lease::ttl_ms(ttl),
                        opts.concurrency - active.len(),
                        &skip,
                    )
                    .await
                {
                    Ok(ids) => ids,
                    Err(e) => {
                        trouble(observer, opts.once, e.into())?;
                        Vec::new()
                    }
                };
                // Queued instances their queues have room for now, in each
                // queue's order (`queue:`).
                let room = opts.concurrency.saturating_sub(active.len() + ids.len());
                if room > 0 {
                    match store
                        .admit_queued(&owner, lease::ttl_ms(ttl), room, &lease::holder_alive)
                        .await
                    {
                        // (Admitted to this worker: it runs them, whatever
                        // `skip` says, or their slots would wait for the lease.)
                        Ok(admitted) => ids.extend(admitted),
                        Err(e) => trouble(observer, opts.once, e.into())?,
                    }
                }
                // Runs whose holder died on this host before its lease expired
                // (killed with SIGKILL, say): looked for at each poll.
                let room = active.len() + ids.len() < opts.concurrency;
                if room && (opts.once || last_scan.is_none_or(|t| t.elapsed() >= opts.poll)) {
                    last_scan = Some(now);
                    let found = match orphaned(&store).await {
                        Ok(found) => found,
                        Err(e) => {
                            trouble(observer, opts.once, e.into())?;
                            Vec::new()
                        }
                    };
                    for id in found {
                        if active.len() + ids.len() < opts.concurrency
                            && !skip.contains(&id)
                            && !ids.contains(&id)
                        {
                            ids.push(id);
                        }
                    }
                }
                for id in ids {
                    if opts.once {
                        rest.insert(
                            id.clone(),
                            Instant::now() + Duration::from_secs(365 * 86_400),
                        );
                    }
                    active.push(id.clone());
                    let pool = pool.clone();
                    // Taken up by the worker: a resume by it (a first
                    // run is the starter's, recorded already).
                    let run = RunOptions {
                        inline_wait: opts.inline_wait,
                        owner: Some(owner.clone()),
                        actor: Some(crate::vocab::Actor::Worker(owner.clone())),
                        action: Some((crate::vocab::ActionKind::Resume, String::new())),
                        ..RunOptions::default()
                    };
                    tasks.spawn_local(async move {
                        let result = match pool.take().await {
                            Ok(mut s) => {
                                let r = drive::drive(&mut s, &id, run, &super::UNOBSERVED).await;
                                pool.give(s);
                                r
                            }
                            Err(e) => Err(e.into()),
                        };
                        (id, result)
                    });
                }
            }
            if tasks.is_empty() && (opts.once || stopping) {
                break;
            }
            tokio::select! {
                Some(joined) = tasks.join_next() => {
                    if let Ok((id, result)) = joined {
                        active.retain(|a| a != &id);
                        match result {
                            Ok(outcome) => observer.run_ended(&id, &outcome),
                            // Another worker got there first: not an error for us.
                            Err(
                                EngineError::Held { .. }
                                | EngineError::NotResumable { .. }
                                | EngineError::NothingToCancel { .. },
                            ) => {}
                            Err(e) => {
                                observer.run_failed(&id, &e);
                                errors += 1;
                                // A lease lost is no fault of the instance's:
                                // it is claimed again as soon as the lease
                                // that took it is dead (expired, or its
                                // holder gone), as any other instance is.
                                if !opts.once && !lost_lease(&e) {
                                    rest.insert(id, Instant::now() + ERROR_PAUSE.max(opts.poll));
                                }
                            }
                        }
                    }
                }
                _ = store.wait_for_work(until_fire(next_fire, opts.poll)), if !opts.once && !stopping => {}
                _ = sigint.recv() => stopping = true,
                _ = sigterm.recv() => stopping = true,
                _ = sighup.recv() => stopping = true,
            }
        }
        // Gone: no longer counted alive (a worker that dies without this
        // stops beating, which is what the metric shows).
        let _ = store.worker_gone(&owner).await;
        if let Some(why) = gone {
            return Err(EngineError::Store(crate::store::StoreError::Open {
                path: location.describe(),
                reason: why,
            }));
        }
        Ok(if stopping {
            WorkerEnd::Stopped
        } else {
            WorkerEnd::Swept { errors }
        })
    }
}

/// A database error between runs: `once` ends with it; otherwise the
/// observer hears of it and the worker goes on.
fn trouble(observer: &dyn WorkerObserver, once: bool, e: EngineError) -> Result<(), EngineError> {
    if once {
        return Err(e);
    }
    observer.trouble(e);
    Ok(())
}

/// How long to wait for work: the poll interval, or less when a schedule
/// fires sooner.
fn until_fire(next_fire: Option<i64>, poll: Duration) -> Duration {
    match next_fire {
        Some(t) => {
            let ms = (t - chrono::Utc::now().timestamp_millis()).max(0) as u64;
            poll.min(Duration::from_millis(ms))
        }
        None => poll,
    }
}

/// Running instances whose holder was a process on this host that is gone,
/// while its lease has not expired yet (others are claimed by `claim_due`).
async fn orphaned(store: &Store) -> Result<Vec<InstanceId>, StoreError> {
    let now_ms = chrono::Utc::now().timestamp_millis();
    let mut ids = Vec::new();
    for row in store.due_instances().await? {
        if let (true, Some(owner), Some(expires)) = (
            row.status == InstanceStatus::Running,
            &row.lease_owner,
            row.lease_expires_ms,
        ) && expires > now_ms
            && !lease::holder_alive(owner)
        {
            ids.push(row.id);
        }
    }
    Ok(ids)
}
