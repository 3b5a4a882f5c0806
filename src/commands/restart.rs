//! `wf restart ID --from STEP [--as NEWID]`: run STEP and every step that
//! depends on it again, in a new run of the instance; the other completed
//! steps keep their results (`engine::restart` decides what is reset). With
//! `--as`, the instance is first copied to NEWID and the copy is restarted:
//! the original is only read.

use super::run::{Ending, finish};
use crate::engine::{self, EngineError, RunOptions, restart};
use crate::exit::{ExitStatus, UsageError};
use crate::printer::Printer;

use crate::views::ShownStatus;
use crate::vocab::{InstanceId, Timestamp};
use std::path::PathBuf;
use std::sync::Arc;

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
    let mut store = super::open(db).await?;
    let id = store.resolve_id(&args.id).await?;
    let inst = store.instance(&id).await?;
    // Refused before anything is written: a live holder is named (exit 5),
    // an instance that has not ended is a usage error (exit 2).
    match ShownStatus::of(&inst).as_str() {
        "running" => {
            return Err(EngineError::Held {
                holder: inst.lease_owner.clone().unwrap_or_default(),
                id,
            }
            .into());
        }
        status => restart::check_ended(&id, status)?,
    }
    let wf = engine::drive::pinned_workflow(&store, &inst).await?;
    let mut rows = store.steps(&id).await?;
    restart::fill_patches(&store, &id, &mut rows).await?;
    let plan = restart::plan(&wf, &rows, &args.from)?;
    engine::check_secrets(&wf)?;
    let target = match &args.as_id {
        Some(new) => {
            engine::check_id(new)?;
            let new = InstanceId::from(new.as_str());
            if !store.copy_instance(&id, &new, Timestamp::now()).await? {
                return Err(
                    UsageError(format!("an instance with id `{new}` already exists")).into(),
                );
            }
            new
        }
        None => id.clone(),
    };
    printer.info(&format!(
        "restarting {target} from `{}`: {} run again",
        args.from,
        plan.reset_steps.join(", ")
    ));
    let opts = RunOptions {
        inline_wait: args.ending.inline_wait,
        restart: Some(args.from.clone()),
        workflow: Some(Arc::new(wf)),
        traceparent: super::traceparent(),
        tracestate: std::env::var("TRACESTATE").ok(),
        ..RunOptions::default()
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
