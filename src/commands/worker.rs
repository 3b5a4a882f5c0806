//! `wf worker`: resume every instance that is due — elapsed timers, delivered
//! events, dead leases — until stopped (`--once`: one sweep, then exit).
//! The loop is the engine's (`engine::worker`); this command parses the
//! flags, opens the store, prints the worker's log and turns how it ended
//! into the exit status.

use crate::engine::fire::{self, Fired};
use crate::engine::worker::{Options, Worker, WorkerEnd, WorkerObserver};
use crate::engine::{EngineError, RunOutcome};
use crate::exit::{ExitStatus, UsageError};
use crate::printer::Printer;
use crate::store::Store;
use crate::views::WorkerLine;
use crate::vocab::{InstanceId, Timestamp};
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
    let log = Log {
        printer,
        json: args.json,
    };
    Ok(match worker.run(&log).await? {
        WorkerEnd::Stopped => ExitStatus::Interrupted,
        WorkerEnd::Swept { errors } if errors > 0 => ExitStatus::Failure,
        WorkerEnd::Swept { .. } => ExitStatus::Success,
    })
}

/// The worker's log: a line on stderr for each run that ends and for what
/// each schedule does; with `--json`, a [`WorkerLine`] on stdout for each
/// run that ends.
struct Log<'a> {
    printer: &'a Printer,
    json: bool,
}

impl WorkerObserver for Log<'_> {
    fn fired(&self, fired: &Fired) {
        log_fire(self.printer, fired);
    }

    fn run_ended(&self, id: &InstanceId, outcome: &RunOutcome) {
        if self.json {
            self.printer.json_line(&WorkerLine::ended(id, outcome));
        }
        self.printer
            .info(&format!("instance {id}: {}", describe(outcome)));
    }

    fn run_failed(&self, id: &InstanceId, error: &EngineError) {
        if self.json {
            self.printer.json_line(&WorkerLine::error(id, error));
        }
        self.printer.error(&format!("instance {id}: {error}"));
    }

    fn trouble(&self, error: EngineError) {
        self.printer
            .error(&format!("{:#}; trying again", anyhow::Error::from(error)));
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

fn describe(o: &RunOutcome) -> String {
    match o {
        RunOutcome::Failed(reason) => format!("failed: {reason}"),
        RunOutcome::Sleeping(wake) => format!("sleeping until {wake}"),
        RunOutcome::Waiting(event) => format!("waiting for event `{event}`"),
        other => other.as_str().to_string(),
    }
}
