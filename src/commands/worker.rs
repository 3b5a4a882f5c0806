//! `wf worker`: resume every instance that is due — elapsed timers, delivered
//! events, dead leases — until stopped (`--once`: one sweep, then exit).
//! The loop is the engine's (`engine::worker`); this command parses the
//! flags, opens the store, prints the worker's log and turns how it ended
//! into the exit status.

use crate::engine::worker::{Options, Worker, WorkerEnd};
use crate::exit::{ExitStatus, UsageError};
use crate::printer::Printer;
use crate::store::Store;
use crate::worker_log::WorkerLog;
use std::path::PathBuf;
use std::time::Duration;

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

pub async fn run(args: Args, db: Option<PathBuf>, printer: &Printer) -> anyhow::Result<ExitStatus> {
    if args.concurrency == 0 {
        return Err(UsageError("--concurrency must be at least 1".into()).into());
    }
    let location = super::db_location(db)?;
    let store = Store::open(&location).await?;
    let options = Options {
        once: args.once,
        concurrency: args.concurrency,
        poll: args.poll,
        inline_wait: args.inline_wait,
    };
    let worker = Worker::new(store, location.clone(), options)?;
    printer.info(&format!(
        "worker on {} (concurrency {})",
        location.describe(),
        args.concurrency
    ));
    let log = WorkerLog {
        printer,
        json: args.json,
    };
    Ok(match worker.run(&log).await? {
        WorkerEnd::Stopped => ExitStatus::Interrupted,
        WorkerEnd::Swept { errors } if errors > 0 => ExitStatus::Failure,
        WorkerEnd::Swept { .. } => ExitStatus::Success,
    })
}
