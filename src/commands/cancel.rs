//! `wf cancel ID`: cancel an instance. A sleeping, waiting or interrupted
//! instance is canceled here and now, its compensations run; one that another
//! process is running gets a cancel request that process acts on (it stops its
//! steps, compensates, and exits 4).

use super::run::report;
use crate::engine::{self, EngineError};
use crate::exit::ExitStatus;
use crate::printer::Printer;
use crate::views::RunReport;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Instance id (any unique prefix); several, or the filters below,
    /// cancel many: the plan first, then one question
    #[arg(
        value_name = "ID",
        required_unless_present_any = ["workflow", "status", "label", "since", "error", "queue"],
        conflicts_with_all = ["workflow", "status", "label", "since", "error", "queue"]
    )]
    pub ids: Vec<String>,
    #[command(flatten)]
    pub select: super::bulk::Select,
    /// Print `{id, status, exit_code}` as JSON on stdout
    #[arg(long)]
    pub json: bool,
    /// Cancel without running any compensation (for when one is broken)
    #[arg(long)]
    pub terminate: bool,
    /// Why: recorded with the action (`wf inspect` shows who canceled, when and why)
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub reason: String,
}

pub async fn run(args: Args, db: Option<PathBuf>, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let mut store = super::open_existing(db).await?;
    if args.select.is_bulk(&args.ids) {
        if args.terminate {
            return Err(engine::EngineError::Input(
                "--terminate ends one instance at a time: give one id".into(),
            )
            .into());
        }
        return super::bulk::run(
            &mut store,
            engine::actions::bulk::Bulk::Cancel,
            &args.ids,
            &args.select,
            &args.reason,
            args.json,
            printer,
        )
        .await;
    }
    let id = store.resolve_id(&args.ids[0]).await?;
    let asked = engine::actions::cancel(
        &mut store,
        &id,
        args.terminate,
        &crate::vocab::Actor::cli(),
        &args.reason,
    )
    .await?;
    // Driven here even when another process was seen running it: it may
    // have died since; a live one holds it and acts on the request itself.
    let progress = printer.progress();
    let outcome = engine::drive::drive(&mut store, &id, asked.run.opts, &progress).await;
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
