//! `wf run FILE`: validate the workflow, pin it in a new instance, and drive
//! that instance until it completes, fails or suspends.

use super::{outcome_status, parse_duration_flag};
use crate::engine::{self, RunOptions, RunOutcome};
use crate::exit::{ExitStatus, UsageError};
use crate::printer::Printer;
use crate::views::{RunReport, ShownStatus};
use crate::vocab::{InstanceId, InstanceStatus, StepStatus};
use crate::workflow::{Workflow, io_reason};
use anyhow::Context as _;
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::time::Duration;

/// What `run`, `resume` and `restart` share: how long a run waits inline,
/// and how it reports its end (see [`report`]).
#[derive(Debug, clap::Args)]
pub struct Ending {
    /// Longest timer or retry backoff waited for inside the run; longer ones suspend it
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_flag, default_value = "30s")]
    pub inline_wait: Duration,
    /// Print `{id, status, exit_code}` as JSON on stdout when the run ends
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The workflow file
    pub file: PathBuf,
    /// An input value (repeatable)
    #[arg(long = "input", value_name = "KEY=VALUE")]
    pub input: Vec<String>,
    /// Input values from a JSON object file
    #[arg(long = "inputs", value_name = "FILE.json")]
    pub inputs_file: Option<PathBuf>,
    /// Instance id (default: a random one)
    #[arg(long)]
    pub id: Option<String>,
    /// A label of the instance, over the file's (repeatable)
    #[arg(long = "label", value_name = "NAME=VALUE", value_parser = super::parse_label)]
    pub label: Vec<(String, String)>,
    /// Record the instance for workers (`wf worker`) and print its id at once
    #[arg(long)]
    pub detach: bool,
    /// Run `cache:` steps without looking for a kept result (what they
    /// complete is still kept)
    #[arg(long, conflicts_with = "detach")]
    pub no_cache: bool,
    #[command(flatten)]
    pub ending: Ending,
}

pub async fn run(args: Args, db: Option<PathBuf>, printer: &Printer) -> anyhow::Result<ExitStatus> {
    // Everything that can be wrong with the input is checked before the database is touched.
    let wf = Workflow::load(&args.file)?;
    let given = collect_inputs(&args)?;
    let inputs = engine::resolve_inputs(&wf, given)?;
    let labels = engine::render_labels(&wf, &inputs, &args.label)?;
    // A detached instance runs where a worker runs: the secrets are
    // looked for there.
    if !args.detach {
        engine::check_secrets(&wf)?;
    }

    let owner = engine::lease::owner_name();
    let lease_to = (!args.detach).then_some(owner.as_str());
    // The id is known before anything is written, so that it can be named
    // whatever happens from here (a database lost mid-way: exit 6).
    let id = args
        .id
        .clone()
        .map_or_else(InstanceId::random, InstanceId::from);
    // The row, with every check of its id and of what its inputs render
    // (queue key and priority), before the database is opened or created.
    let row = engine::new_instance(engine::NewInstance {
        wf: &wf,
        origin: &engine::Origin::of(&args.file),
        inputs,
        id: Some(id.clone()),
        owner: lease_to,
        labels,
        started_by: crate::vocab::Actor::cli(),
    })?;

    let mut store = super::open(db).await?;
    let created =
        engine::record_instance(&mut store, &wf, row, lease_to, &start_detail(&args)).await;
    match created {
        Err(engine::EngineError::Exists(existing)) => {
            return Ok(exists(printer, &existing, args.ending.json));
        }
        Err(e) => {
            let file = args.file.display();
            return Err(unreachable_names(e, || {
                format!(
                    "instance {id} may or may not have been created, `wf run {file} --id {id}` starts it or says what became of it"
                )
            }));
        }
        Ok(_) => {}
    }
    if args.detach {
        let inst = store.instance(&id).await?;
        return Ok(detached(printer, &inst, args.ending.json));
    }
    let opts = RunOptions {
        owner: Some(owner),
        no_cache: args.no_cache,
        inline_wait: args.ending.inline_wait,
        workflow: Some(std::sync::Arc::new(wf)),
        traceparent: super::traceparent(),
        tracestate: std::env::var("TRACESTATE").ok(),
        ..RunOptions::default()
    };
    let progress = printer.progress();
    let started = std::time::Instant::now();
    let outcome = engine::drive::drive(&mut store, &id, opts, &progress).await;
    progress.finish();
    let short = &id[..id.len().min(12)];
    let outcome = outcome.map_err(|e| {
        unreachable_names(e, || {
            format!(
                "instance {id} stopped (what was recorded stays), `wf resume {short}` continues it once the database is back"
            )
        })
    })?;
    Ok(finish(
        printer,
        &store,
        &id,
        &outcome,
        started.elapsed(),
        args.ending.json,
    )
    .await)
}

/// How `run`, `resume` and `restart` end: the summary line, then how the
/// run ended (a failure with what can change its result), and the exit
/// status.
pub async fn finish(
    printer: &Printer,
    store: &crate::store::Store,
    id: &InstanceId,
    outcome: &RunOutcome,
    took: Duration,
    json: bool,
) -> ExitStatus {
    // (A queue's verdict before any run: no steps to sum up.)
    if !matches!(outcome, RunOutcome::Queued(_) | RunOutcome::Skipped(_)) {
        summarize(printer, store, id, took).await;
    }
    let advice = match outcome {
        RunOutcome::Failed(_) if !json => failure_advice(store, id).await,
        _ => None,
    };
    report(printer, id, outcome, json, advice.as_deref())
}

/// What can change the result of failed instance `id` (`engine::advice`);
/// `None` if it cannot be read.
async fn failure_advice(store: &crate::store::Store, id: &InstanceId) -> Option<String> {
    let inst = store.instance(id).await.ok()?;
    let remedy = engine::advice::remedy_of(store, &inst).await.ok()?;
    Some(remedy.advice(super::short_id(id), &inst.workflow_path))
}

/// `e`, with `what` said first when it is the database out of reach (exit
/// 6): the id, and how to go on once it is back.
fn unreachable_names(e: engine::EngineError, what: impl FnOnce() -> String) -> anyhow::Error {
    let is_unreachable = |e: &engine::EngineError| {
        matches!(
            e,
            engine::EngineError::Store(crate::store::StoreError::Unreachable { .. })
        )
    };
    let unreachable = match &e {
        engine::EngineError::Lapsed { then, .. } => is_unreachable(then),
        e => is_unreachable(e),
    };
    let e = anyhow::Error::from(e);
    if unreachable { e.context(what()) } else { e }
}

/// `wf run --id ID` of an instance that exists with the same definition and
/// inputs: a no-op that says what became of it, with the exit code of its
/// status (0 completed, 1 failed, 3 suspended, 4 canceled, 5 running under
/// another process, 130 interrupted).
/// `wf run --detach`: the instance is recorded, due for the workers; its
/// id on stdout (`{id, status}` with `--json`).
/// One with a queue is `queued` (a worker admits it), or `skipped` at once
/// by `on_full: skip` (exit 4).
fn detached(printer: &Printer, inst: &crate::store::InstanceRow, json: bool) -> ExitStatus {
    let id = &inst.id;
    let code = match inst.status {
        InstanceStatus::Skipped => ExitStatus::Canceled,
        _ => ExitStatus::Success,
    };
    if json {
        printer.json(&RunReport::exists(
            id,
            ShownStatus::Stored(inst.status),
            code.code(),
        ));
        return code;
    }
    printer.data(id);
    let short = super::short_id(id);
    match inst.status {
        InstanceStatus::Skipped => printer.info(&format!(
            "instance {short} {}",
            inst.error.as_deref().unwrap_or("skipped by its queue")
        )),
        InstanceStatus::Queued => printer.info(&format!(
            "instance {short} recorded, queued: `wf worker` admits it when its queue has room"
        )),
        _ => printer.info(&format!(
            "instance {short} recorded, due: `wf worker` runs it"
        )),
    }
    code
}

fn exists(printer: &Printer, existing: &crate::store::InstanceRow, json: bool) -> ExitStatus {
    let status = ShownStatus::of(existing);
    let code = match status {
        ShownStatus::Stored(InstanceStatus::Completed) => ExitStatus::Success,
        ShownStatus::Stored(InstanceStatus::Failed) => ExitStatus::Failure,
        ShownStatus::Stored(
            InstanceStatus::Pending
            | InstanceStatus::Sleeping
            | InstanceStatus::Waiting
            | InstanceStatus::Queued,
        ) => ExitStatus::Suspended,
        ShownStatus::Stored(InstanceStatus::Canceled | InstanceStatus::Skipped) => {
            ExitStatus::Canceled
        }
        ShownStatus::Stored(InstanceStatus::Running) => ExitStatus::Held,
        ShownStatus::Interrupted => ExitStatus::Interrupted,
    };
    if json {
        printer.json(&RunReport::exists(&existing.id, status, code.code()));
    } else {
        printer.data(&format!(
            "instance {} exists already, with the same definition and inputs: {status}",
            existing.id
        ));
    }
    code
}

/// One line on stderr when a run ends: how long it took and how its steps
/// stand (for_each items and compensations are parts of their step).
pub async fn summarize(
    printer: &Printer,
    store: &crate::store::Store,
    id: &InstanceId,
    took: Duration,
) {
    // Two queries, one of which reads the definition: not for nothing.
    if !printer.informs() {
        return;
    }
    let Ok(steps) = store.steps(id).await else {
        return;
    };
    let total = match store.instance(id).await {
        Ok(i) => store
            .definition_step_ids(&i.definition_hash)
            .await
            .ok()
            .flatten()
            .map_or(0, |ids| ids.len()),
        Err(_) => 0,
    };
    let (mut ok, mut failed, mut canceled, mut skipped) = (0, 0, 0, 0);
    for s in steps.iter().filter(|s| s.key.is_step()) {
        match s.status {
            StepStatus::Completed => ok += 1,
            StepStatus::Failed => failed += 1,
            StepStatus::Canceled => canceled += 1,
            StepStatus::Skipped => skipped += 1,
            _ => {}
        }
    }
    let not_run = total.saturating_sub(ok + failed + canceled + skipped);
    printer.info(&format!(
        "run took {}: {ok} step(s) ok, {failed} failed, {canceled} canceled, {skipped} skipped, {not_run} not run",
        crate::workflow::duration::human(took)
    ));
}

/// Prints how a run ended (a failure followed by `advice`, what to do
/// about it) and returns the matching exit status.
pub fn report(
    printer: &Printer,
    id: &InstanceId,
    outcome: &RunOutcome,
    json: bool,
    advice: Option<&str>,
) -> ExitStatus {
    let status = outcome_status(outcome);
    if json {
        printer.json(&RunReport::ended(id, outcome, status.code()));
        return status;
    }
    let short = &id[..id.len().min(12)];
    let line = match outcome {
        RunOutcome::Completed => format!("instance {id} completed"),
        RunOutcome::Failed(reason) => match advice {
            Some(advice) => format!("instance {id} failed: {reason}\n{advice}"),
            None => format!("instance {id} failed: {reason}"),
        },
        RunOutcome::Sleeping(wake) => {
            format!(
                "instance {id} sleeping until {wake}; continue with `wf resume {short}` (or `wf worker`)"
            )
        }
        RunOutcome::Waiting(events) => {
            // Child instances' ends come by themselves; events are sent.
            let (events, children) = crate::vocab::split_awaited(events);
            let mut parts = Vec::new();
            if !events.is_empty() {
                let events = events.join(",");
                parts.push(format!(
                    "for event `{events}`; deliver it with `wf signal {short} {events}`"
                ));
            }
            match children[..] {
                [] => {}
                [child] => parts.push(format!(
                    "for child instance {child}; continue it with `wf resume {}` (or `wf worker`)",
                    &child[..child.len().min(12)]
                )),
                _ => parts.push(format!(
                    "for child instances {}; continue them with `wf resume ID` (or `wf worker`)",
                    children.join(", ")
                )),
            }
            format!("instance {id} waiting {}", parts.join("; and "))
        }
        RunOutcome::Canceled => format!("instance {id} canceled"),
        RunOutcome::Queued(why) => format!(
            "instance {id} queued ({why}); `wf worker` admits it when there is room (or `wf resume {short}` waits for it)"
        ),
        RunOutcome::Skipped(why) => format!("instance {id} {why}"),
        RunOutcome::Interrupted => {
            format!("instance {id} interrupted; continue with `wf resume {short}`")
        }
    };
    printer.data(&line);
    status
}

/// Largest `--inputs` file read.
const MAX_INPUTS_BYTES: u64 = 16 * 1024 * 1024;

fn collect_inputs(args: &Args) -> anyhow::Result<Map<String, Value>> {
    let mut out = Map::new();
    if let Some(path) = &args.inputs_file {
        // Bounded: a device or pipe (`/dev/zero`) may never end.
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| {
                use std::io::Read as _;
                f.take(MAX_INPUTS_BYTES + 1).read_to_end(&mut bytes)
            })
            .map_err(|e| UsageError(format!("--inputs {}: {}", path.display(), io_reason(&e))))?;
        if bytes.len() as u64 > MAX_INPUTS_BYTES {
            return Err(UsageError(format!(
                "--inputs {}: file is over {MAX_INPUTS_BYTES} bytes",
                path.display()
            ))
            .into());
        }
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|e| UsageError(format!("--inputs {}: invalid JSON: {e}", path.display())))?;
        match v {
            Value::Object(m) => out.extend(m),
            _ => {
                return Err(UsageError(format!(
                    "--inputs {}: expected a JSON object",
                    path.display()
                ))
                .into());
            }
        }
    }
    for item in &args.input {
        let (k, v) = item
            .split_once('=')
            .filter(|(k, _)| !k.trim().is_empty())
            .ok_or_else(|| UsageError(format!("--input `{item}`: expected KEY=VALUE")))
            .context("bad --input")?;
        out.insert(k.trim().to_string(), Value::String(v.to_string()));
    }
    Ok(out)
}

/// The detail of a `wf run`'s `start` action: the file it ran, and
/// `--detach`.
fn start_detail(args: &Args) -> String {
    let file = if crate::workflow::is_stdin(&args.file) {
        "stdin".to_string()
    } else {
        args.file.display().to_string()
    };
    if args.detach {
        format!("{file} (detached)")
    } else {
        file
    }
}
