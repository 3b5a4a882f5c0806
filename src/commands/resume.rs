//! `wf resume ID`: continue an interrupted, sleeping or waiting instance from
//! its history, running its pinned definition.

use super::run::{Ending, finish};
use crate::engine::{self, RunOptions};
use crate::exit::ExitStatus;
use crate::printer::Printer;
use crate::vocab::{InstanceStatus, Timestamp};

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Instance id (any unique prefix); several, or the filters below,
    /// resume many: the plan first, then one question
    #[arg(
        value_name = "ID",
        required_unless_present_any = ["workflow", "status", "label", "since", "error", "queue"],
        conflicts_with_all = ["workflow", "status", "label", "since", "error", "queue"]
    )]
    pub ids: Vec<String>,
    #[command(flatten)]
    pub select: super::bulk::Select,
    /// Fire a pending timer now instead of waiting for it
    #[arg(long)]
    pub now: bool,
    /// Give failed steps a fresh attempt budget and continue
    #[arg(long)]
    pub retry_failed: bool,
    /// Run `cache:` steps without looking for a kept result (what they
    /// complete is still kept)
    #[arg(long)]
    pub no_cache: bool,
    #[command(flatten)]
    pub ending: Ending,
}

pub async fn run(args: Args, db: Option<PathBuf>, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let mut store = super::open_existing(db).await?;
    if args.select.is_bulk(&args.ids) {
        if args.now {
            return Err(engine::EngineError::Input(
                "--now fires one instance's timer: give one id".into(),
            )
            .into());
        }
        let action = if args.retry_failed {
            engine::actions::bulk::Bulk::RetryFailed
        } else {
            engine::actions::bulk::Bulk::Resume
        };
        return super::bulk::run(
            &mut store,
            action,
            &args.ids,
            &args.select,
            "",
            args.ending.json,
            printer,
        )
        .await;
    }
    let id = store.resolve_id(&args.ids[0]).await?;
    let how = engine::actions::Resume {
        now: args.now,
        retry: args.retry_failed,
        no_cache: args.no_cache,
    };
    let (opts, wake_at) =
        match engine::actions::resume(&store, &id, how, &crate::vocab::Actor::cli()).await {
            Ok(ready) => {
                let sleeping = ready.instance.status == InstanceStatus::Sleeping;
                (ready.run.opts, ready.instance.wake_at.filter(|_| sleeping))
            }
            Err(e) if completed(&e) => return Ok(nothing_to_do(printer, &id)),
            // Ended by its queue before it ran: its run says so, and why
            // (`RunOutcome::Skipped`).
            Err(engine::EngineError::NotResumable {
                why: engine::Unresumable::Skipped,
                ..
            }) => (RunOptions::default(), None),
            Err(e) => return Err(e.into()),
        };
    let mut inline_wait = args.ending.inline_wait;
    // A sleeping instance is resumed when its timer is due: wait for it here.
    if !args.now
        && let Some(wake) = wake_at
    {
        let until = wake.since(Timestamp::now());
        if !until.is_zero() {
            printer.info(&format!(
                "waiting until {wake} for the timer (use --now to fire it now)"
            ));
            inline_wait = inline_wait.max(until + Duration::from_millis(50));
        }
    }
    let opts = RunOptions {
        inline_wait,
        no_cache: args.no_cache,
        traceparent: super::traceparent(),
        tracestate: std::env::var("TRACESTATE").ok(),
        ..opts
    };
    let progress = printer.progress();
    let started = std::time::Instant::now();
    let outcome = engine::drive::drive(&mut store, &id, opts, &progress).await;
    progress.finish();
    match outcome {
        Ok(outcome) => Ok(finish(
            printer,
            &store,
            &id,
            &outcome,
            started.elapsed(),
            args.ending.json,
        )
        .await),
        // Completed by another process while we waited for the lease.
        Err(e) if completed(&e) => Ok(nothing_to_do(printer, &id)),
        Err(e) => Err(e.into()),
    }
}

/// Whether `e` refused an instance that completed: not an error to resume.
fn completed(e: &engine::EngineError) -> bool {
    matches!(
        e,
        engine::EngineError::NotResumable {
            why: engine::Unresumable::Completed,
            ..
        }
    )
}

fn nothing_to_do(printer: &Printer, id: &crate::vocab::InstanceId) -> ExitStatus {
    printer.info(&format!("instance {id} already completed; nothing to do"));
    ExitStatus::Success
}
