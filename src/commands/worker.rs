//! `wf worker`: resume every instance that is due — elapsed timers, delivered
//! events, dead leases — until stopped (`--once`: one sweep, then exit).
//! Several workers may share a database: the lease taken by each run keeps
//! any instance to one worker at a time.

use crate::engine::{self, EngineError, RunOptions, RunOutcome};
use crate::exit::{ExitStatus, UsageError};
use crate::printer::Printer;
use crate::store::{self, Store};
use std::collections::HashMap;
use std::path::PathBuf;
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
    let store = Store::open(&location).await?;
    let mut tasks: JoinSet<(String, Result<RunOutcome, EngineError>)> = JoinSet::new();
    let mut active: Vec<String> = Vec::new();
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
    let mut rest: HashMap<String, Instant> = HashMap::new();
    // Runs that ended in an error (not a workflow failure): `--once` exits 1.
    let mut errors = 0usize;
    printer.info(&format!(
        "worker on {} (concurrency {})",
        location.describe(),
        args.concurrency
    ));
    loop {
        if !stopping {
            for id in due_instances(&store).await? {
                if active.len() >= args.concurrency {
                    break;
                }
                if active.contains(&id) || rest.get(&id).is_some_and(|t| *t > Instant::now()) {
                    continue;
                }
                if args.once {
                    rest.insert(
                        id.clone(),
                        Instant::now() + Duration::from_secs(365 * 86_400),
                    );
                }
                active.push(id.clone());
                let location = location.clone();
                let observer = observer.clone();
                let opts = RunOptions {
                    inline_wait: args.inline_wait,
                    ..RunOptions::default()
                };
                tasks.spawn_local(async move {
                    let result = match Store::open(&location).await {
                        Ok(mut s) => {
                            engine::drive::drive(&mut s, &id, opts, observer.as_ref()).await
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
                                let reason = match &outcome {
                                    RunOutcome::Failed(r) | RunOutcome::Sleeping(r) | RunOutcome::Waiting(r) => Some(r.clone()),
                                    _ => None,
                                };
                                printer.data(&serde_json::json!({ "id": id, "outcome": outcome.as_str(), "reason": reason }).to_string());
                            }
                            printer.info(&format!("instance {id}: {}", describe(&outcome)))
                        }
                        // Another worker got there first: not an error for us.
                        Err(EngineError::Held { .. }) | Err(EngineError::NotResumable(_)) => {}
                        Err(e) => {
                            if args.json {
                                printer.data(&serde_json::json!({ "id": id, "error": e.to_string() }).to_string());
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
            _ = store.wait_for_work(args.poll), if !args.once && !stopping => {}
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

/// Instances a worker should pick up now, oldest first.
async fn due_instances(store: &Store) -> anyhow::Result<Vec<String>> {
    let now_ms = chrono::Utc::now().timestamp_millis();
    let mut due = Vec::new();
    for row in store.due_instances().await? {
        let store::DueInstance {
            id,
            status,
            lease_owner: owner,
            lease_expires_ms: expires,
        } = row;
        if status == "running" {
            // Only instances whose runner is gone.
            let alive = match (&owner, expires) {
                (Some(o), Some(exp)) => exp > now_ms && engine::lease::holder_alive(o),
                _ => false,
            };
            if alive {
                continue;
            }
        }
        due.push(id);
    }
    Ok(due)
}
