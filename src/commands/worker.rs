//! `wf worker`: resume every instance that is due — elapsed timers, delivered
//! events, dead leases — until stopped (`--once`: one sweep, then exit).
//! Several workers may share a database: the lease taken by each run keeps
//! any instance to one worker at a time.

use crate::engine::fire::{self, Fired};
use crate::engine::{self, EngineError, RunOptions, RunOutcome};
use crate::exit::{ExitStatus, UsageError};
use crate::printer::Printer;
use crate::store::Store;
use crate::views::WorkerLine;
use crate::vocab::{InstanceId, InstanceStatus, Timestamp};
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// One sweep over the due instances, then exit
    #[arg(long)]
    pub once: bool,
    /// Most instances driven at once
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// How often to look for due instances
    #[arg(long, value_name = "DURATION", value_parser = super::parse_duration_flag, default_value = "500ms")]
    pub poll: Duration,
    /// Longest timer or retry backoff waited for inside a run
    #[arg(long, value_name = "DURATION", value_parser = super::parse_duration_flag, default_value = "30s")]
    pub inline_wait: Duration,
    /// One JSON object per line on stdout for each run that ends:
    /// `{id, outcome, reason}` or `{id, error}`
    #[arg(long)]
    pub json: bool,
}

/// Lines about each run, for a worker's log.
struct WorkerLog;
impl engine::Observer for WorkerLog {}

pub async fn run(args: Args, db: Option<PathBuf>, printer: &Printer) -> anyhow::Result<ExitStatus> {
    // Runs share the thread (a store is not `Sync`): a local task set.
    tokio::task::LocalSet::new()
        .run_until(work(args, db, printer))
        .await
}

async fn work(args: Args, db: Option<PathBuf>, printer: &Printer) -> anyhow::Result<ExitStatus> {
    if args.concurrency == 0 {
        return Err(UsageError("--concurrency must be at least 1".into()).into());
    }
    let location = super::db_location(db)?;
    let mut store = Store::open(&location).await?;
    let mut tasks: JoinSet<(InstanceId, Result<RunOutcome, EngineError>)> = JoinSet::new();
    let mut active: Vec<InstanceId> = Vec::new();
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut sighup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    let observer: Arc<dyn engine::Observer> = Arc::new(WorkerLog);
    let mut stopping = false;
    // Instances not to pick up again before the given time: with `--once`,
    // every instance this sweep already ran (it may still look due, e.g. when
    // its pinned definition no longer parses); otherwise, one whose run ended
    // in an error, so a broken instance is retried after a pause instead of in
    // a hot loop.
    let mut rest: HashMap<InstanceId, Instant> = HashMap::new();
    // Runs that ended in an error (not a workflow failure): `--once` exits 1.
    let mut errors = 0usize;
    printer.info(&format!(
        "worker on {} (concurrency {})",
        location.describe(),
        args.concurrency
    ));
    // One owner name for the worker: it claims instances under it, and each
    // run takes its instance over under the same name.
    let owner = engine::lease::owner_name();
    let ttl = engine::lease::ttl().map_err(UsageError)?;
    // Connections kept between runs (a run needs one of its own while it lasts).
    let pool: Rc<RefCell<Vec<Store>>> = Rc::new(RefCell::new(Vec::new()));
    // When instances whose holder died on this host were last looked for.
    let mut last_scan: Option<Instant> = None;
    // The earliest fire time of a registered schedule still ahead, and when
    // schedules were last looked at (a buffered fire time waits for an
    // instance to end, which is seen by looking again).
    let mut next_fire: Option<i64> = None;
    let mut last_fired: Option<Instant> = None;
    let mut broken: std::collections::HashSet<(String, i64)> = Default::default();
    loop {
        let now_ms = chrono::Utc::now().timestamp_millis();
        if !stopping
            && (next_fire.is_none_or(|t| t <= now_ms)
                || last_fired.is_none_or(|t| t.elapsed() >= args.poll))
        {
            let (fired, ahead) = match fire::fire_due(&mut store, now_ms).await {
                Ok(f) => f,
                Err(e) => {
                    database_trouble(printer, args.once, e.into())?;
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
                log_fire(printer, f);
            }
        }
        if !stopping && active.len() < args.concurrency {
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
                    engine::lease::ttl_ms(ttl),
                    args.concurrency - active.len(),
                    &skip,
                )
                .await
            {
                Ok(ids) => ids,
                Err(e) => {
                    database_trouble(printer, args.once, e.into())?;
                    Vec::new()
                }
            };
            // Runs whose holder died on this host before its lease expired
            // (killed with SIGKILL, say): looked for at each poll.
            let room = active.len() + ids.len() < args.concurrency;
            if room && (args.once || last_scan.is_none_or(|t| t.elapsed() >= args.poll)) {
                last_scan = Some(now);
                let found = match orphaned(&store).await {
                    Ok(found) => found,
                    Err(e) => {
                        database_trouble(printer, args.once, e)?;
                        Vec::new()
                    }
                };
                for id in found {
                    if active.len() + ids.len() < args.concurrency
                        && !skip.contains(&id)
                        && !ids.contains(&id)
                    {
                        ids.push(id);
                    }
                }
            }
            for id in ids {
                if args.once {
                    rest.insert(
                        id.clone(),
                        Instant::now() + Duration::from_secs(365 * 86_400),
                    );
                }
                active.push(id.clone());
                let location = location.clone();
                let observer = observer.clone();
                let pool = pool.clone();
                let opts = RunOptions {
                    inline_wait: args.inline_wait,
                    owner: Some(owner.clone()),
                    ..RunOptions::default()
                };
                tasks.spawn_local(async move {
                    let pooled = pool.borrow_mut().pop();
                    let opened = match pooled {
                        Some(s) => Ok(s),
                        None => Store::open(&location).await,
                    };
                    let result = match opened {
                        Ok(mut s) => {
                            let r =
                                engine::drive::drive(&mut s, &id, opts, observer.as_ref()).await;
                            if s.is_usable() {
                                pool.borrow_mut().push(s);
                            }
                            r
                        }
                        Err(e) => Err(e.into()),
                    };
                    (id, result)
                });
            }
        }
        if tasks.is_empty() && (args.once || stopping) {
            break;
        }
        tokio::select! {
            Some(joined) = tasks.join_next() => {
                if let Ok((id, result)) = joined {
                    active.retain(|a| a != &id);
                    match result {
                        Ok(outcome) => {
                            if args.json {
                                printer.json_line(&WorkerLine::ended(&id, &outcome));
                            }
                            printer.info(&format!("instance {id}: {}", describe(&outcome)));
                        }
                        // Another worker got there first: not an error for us.
                        Err(EngineError::Held { .. } | EngineError::NotResumable(_)) => {}
                        Err(e) => {
                            if args.json {
                                printer.json_line(&WorkerLine::error(&id, &e));
                            }
                            printer.error(&format!("instance {id}: {e}"));
                            errors += 1;
                            if !args.once {
                                rest.insert(id, Instant::now() + ERROR_PAUSE.max(args.poll));
                            }
                        }
                    }
                }
            }
            _ = store.wait_for_work(until_fire(next_fire, args.poll)), if !args.once && !stopping => {}
            _ = sigint.recv() => stopping = true,
            _ = sigterm.recv() => stopping = true,
            _ = sighup.recv() => stopping = true,
        }
    }
    Ok(if stopping {
        ExitStatus::Interrupted
    } else if args.once && errors > 0 {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}

/// A database error between runs (the store already tried to reconnect
/// for `WF_DB_RETRY`): a worker says so and goes on polling, since the
/// database coming back is what it waits for; `--once` ends with it.
fn database_trouble(printer: &Printer, once: bool, e: anyhow::Error) -> anyhow::Result<()> {
    if once {
        return Err(e);
    }
    printer.error(&format!("{e:#}; trying again"));
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

/// A line of the worker's log for what a schedule did.
fn log_fire(printer: &Printer, f: &Fired) {
    let name = fire::entry_name;
    let short = |id: &Option<InstanceId>| {
        id.as_deref()
            .map_or("-".to_string(), |i| super::short_id(i).to_string())
    };
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    match f {
        Fired::Started {
            workflow,
            idx,
            fire_ms,
            id,
        } => printer.info(&format!(
            "schedule {}: fire time {} started instance {}",
            name(workflow, *idx),
            Timestamp::from_ms(*fire_ms),
            super::short_id(id)
        )),
        Fired::Missed {
            workflow,
            idx,
            count,
            more,
            span,
            window_ms,
        } => printer.info(&format!(
            "schedule {}: skipped {}{count} fire time{} missed while no worker ran{} (catch-up window {})",
            name(workflow, *idx),
            if *more { "at least " } else { "" },
            plural(*count),
            span.map_or(String::new(), |(a, b)| format!(
                ", from {} until {}",
                Timestamp::from_ms(a),
                Timestamp::from_ms(b)
            )),
            crate::workflow::duration::format(*window_ms as u64),
        )),
        Fired::Overlapped {
            workflow,
            idx,
            count,
            previous,
        } => printer.info(&format!(
            "schedule {}: skipped {count} fire time{}: instance {} is still open (overlap)",
            name(workflow, *idx),
            plural(*count),
            short(previous)
        )),
        Fired::Buffered {
            workflow,
            idx,
            fire_ms,
            previous,
        } => printer.info(&format!(
            "schedule {}: fire time {} waits for instance {} to end (overlap: buffer_one)",
            name(workflow, *idx),
            Timestamp::from_ms(*fire_ms),
            short(previous)
        )),
        Fired::Canceled {
            workflow,
            idx,
            previous,
        } => printer.info(&format!(
            "schedule {}: asked instance {} to cancel (overlap: cancel_previous)",
            name(workflow, *idx),
            super::short_id(previous)
        )),
        Fired::AlreadyStarted {
            workflow,
            idx,
            fire_ms,
        } => printer.info(&format!(
            "schedule {}: fire time {} already started an instance: skipped",
            name(workflow, *idx),
            Timestamp::from_ms(*fire_ms)
        )),
        Fired::Broken {
            workflow,
            idx,
            error,
        } => printer.error(&format!("schedule {}: {error}", name(workflow, *idx))),
    }
}

/// How long a worker leaves an instance alone after its run ended in an error.
const ERROR_PAUSE: Duration = Duration::from_secs(30);

fn describe(o: &RunOutcome) -> String {
    match o {
        RunOutcome::Failed(reason) => format!("failed: {reason}"),
        RunOutcome::Sleeping(wake) => format!("sleeping until {wake}"),
        RunOutcome::Waiting(event) => format!("waiting for event `{event}`"),
        other => other.as_str().to_string(),
    }
}

/// Running instances whose holder was a process on this host that is gone,
/// while its lease has not expired yet (others are claimed by `claim_due`).
async fn orphaned(store: &Store) -> anyhow::Result<Vec<InstanceId>> {
    let now_ms = chrono::Utc::now().timestamp_millis();
    let mut ids = Vec::new();
    for row in store.due_instances().await? {
        if let (true, Some(owner), Some(expires)) = (
            row.status == InstanceStatus::Running,
            &row.lease_owner,
            row.lease_expires_ms,
        ) && expires > now_ms
            && !engine::lease::holder_alive(owner)
        {
            ids.push(row.id);
        }
    }
    Ok(ids)
}
