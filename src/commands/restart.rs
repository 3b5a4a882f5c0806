//! `wf restart ID --from STEP [--as NEWID]`: run STEP and every step that
//! depends on it again, in a new run of the instance; the other completed
//! steps keep their results (`engine::restart` decides what is reset). With
//! `--as`, the instance is first copied to NEWID and the copy is restarted:
//! the original is only read.

use super::run::{Ending, finish};
use crate::engine::{self, RunOptions};
use crate::exit::ExitStatus;
use crate::printer::Printer;

use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Instance id (any unique prefix)
    pub id: String,
    /// The step to run again, with every step that depends on it
    #[arg(long, value_name = "STEP")]
    pub from: String,
    /// Restart a copy of the instance with this id, leaving the original untouched
    #[arg(long = "as", value_name = "NEWID")]
    pub as_id: Option<String>,
    #[command(flatten)]
    pub ending: Ending,
}

pub async fn run(args: Args, db: Option<PathBuf>, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let mut store = super::open_existing(db).await?;
    let id = store.resolve_id(&args.id).await?;
    let engine::actions::Restart { run, reset_steps } = engine::actions::prepare_restart(
        &mut store,
        &id,
        &args.from,
        args.as_id.as_deref(),
        &crate::vocab::Actor::cli(),
    )
    .await?;
    let target = run.id;
    printer.info(&format!(
        "restarting {target} {}",
        engine::actions::restart_words(&args.from, &reset_steps)
    ));
    let opts = RunOptions {
        inline_wait: args.ending.inline_wait,
        traceparent: super::traceparent(),
        tracestate: std::env::var("TRACESTATE").ok(),
        ..run.opts
    };
    let progress = printer.progress();
    let started = std::time::Instant::now();
    let outcome = engine::drive::drive(&mut store, &target, opts, &progress).await;
    progress.finish();
    let outcome = outcome?;
    Ok(finish(
        printer,
        &store,
        &target,
        &outcome,
        started.elapsed(),
        args.ending.json,
    )
    .await)
}
