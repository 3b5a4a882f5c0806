//! The log of a worker, `wf worker`'s and `wf serve --worker`'s: a line on
//! stderr for each run that ends and for what each schedule does (and, with
//! `--json`, a [`WorkerLine`] on stdout for each run that ends). Printed by
//! both interfaces, so it lives beside the printer, below them.

use crate::engine::fire::{self, Fired};
use crate::engine::worker::WorkerObserver;
use crate::engine::{EngineError, RunOutcome};
use crate::printer::Printer;
use crate::views::WorkerLine;
use crate::vocab::short as short_id;
use crate::vocab::{InstanceId, Timestamp};

/// The worker's log: a line on stderr for each run that ends and for what
/// each schedule does; with `--json`, a [`WorkerLine`] on stdout for each
/// run that ends.
pub struct WorkerLog<'a> {
    pub printer: &'a Printer,
    pub json: bool,
}

impl WorkerObserver for WorkerLog<'_> {
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
            .map_or("-".to_string(), |i| short_id(i).to_string())
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
            short_id(id)
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
            short_id(previous)
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
