//! `wf cancel ID`: cancel an instance. A sleeping, waiting or interrupted
//! instance is canceled here and now, its compensations run; one that another
//! process is running gets a cancel request that process acts on (it stops its
//! steps, compensates, and exits 4).

use super::run::report;
use crate::engine::{self, EngineError, RunOptions};
use crate::exit::{ExitStatus, UsageError};
use crate::printer::Printer;
use crate::views::RunReport;
use crate::vocab::CancelRequest;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Instance id (any unique prefix)
    pub id: String,
    /// Print `{id, status, exit_code}` as JSON on stdout
    #[arg(long)]
    pub json: bool,
    /// Cancel without running any compensation (for when one is broken)
    #[arg(long)]
    pub terminate: bool,
}

pub async fn run(args: Args, db: Option<PathBuf>, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let mut store = super::open_existing(db).await?;
    let id = store.resolve_id(&args.id).await?;
    let inst = store.instance(&id).await?;
    if inst.status.is_ended() {
        return Err(UsageError(format!(
            "instance {id} is already {}; there is nothing to cancel",
            inst.status
        ))
        .into());
    }
    // Ask first, so a process running the instance right now stops too.
    let ask = if args.terminate {
        CancelRequest::Terminate
    } else {
        CancelRequest::Cancel
    };
    store.request_cancel(&id, ask).await?;
    let opts = RunOptions {
        cancel: true,
        terminate: args.terminate,
        ..RunOptions::default()
    };
    let progress = printer.progress();
    let outcome = engine::drive::drive(&mut store, &id, opts, &progress).await;
    progress.finish();
    match outcome {
        Ok(outcome) => {
            report(printer, &id, &outcome, args.json, None);
            Ok(ExitStatus::Success)
        }
        Err(EngineError::Held { holder, .. }) => {
            printer.info(&format!(
                "instance {id} is running in another process ({holder}); it was asked to cancel and will stop shortly"
            ));
            if args.json {
                printer.json(&RunReport::canceling(&id));
            }
            Ok(ExitStatus::Success)
        }
        Err(e) => Err(e.into()),
    }
}
