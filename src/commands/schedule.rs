//! `wf schedule add FILE | rm NAME | list`: register a workflow's
//! `on.schedule` for `wf worker`, remove it, and show the next fire times.
//! Registering pins the definition, as `wf run` pins an instance's: a
//! scheduled instance runs the text registered, whatever the file says now.

use super::short_id;
use crate::engine::fire;
use crate::exit::{ExitStatus, UsageError};
use crate::printer::Printer;
use crate::store::{InstanceRow, ScheduleRow, Store};
use crate::views::{ScheduleAdded, ScheduleView, ShownStatus};
use crate::vocab::Timestamp;
use crate::workflow::Workflow;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

#[derive(Debug, clap::Subcommand)]
pub enum Sub {
    /// Register the `on.schedule` of a workflow file (again: replace it)
    Add {
        /// The workflow file
        file: PathBuf,
        /// `{workflow, schedules: [...]}` on stdout
        #[arg(long)]
        json: bool,
    },
    /// Remove the schedules of a workflow (its `name`)
    Rm {
        /// The workflow's name
        name: String,
    },
    /// Registered schedules and their next fire times
    List {
        /// An array of `{workflow, spec, timezone, overlap, next_fire_at, last_instance}`
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(args: Args, db: Option<PathBuf>, printer: &Printer) -> anyhow::Result<ExitStatus> {
    match args.command {
        Sub::Add { file, json } => {
            let wf = Workflow::load(&file)?;
            let mut store = super::open(db).await?;
            if wf.schedules.is_empty() {
                return Err(UsageError(format!(
                    "{} has no `on.schedule`: nothing to register",
                    file.display()
                ))
                .into());
            }
            // The same registry as `wf workflow add`: the workflow is
            // registered under its name with all its triggers.
            let rows = crate::engine::registry::register(
                &mut store,
                &wf,
                &file,
                &crate::vocab::Actor::cli(),
                crate::vocab::ActionKind::ScheduleAdd,
            )
            .await?
            .schedules;
            if !wf.secrets.is_empty() {
                let unset: Vec<&str> = wf
                    .secrets
                    .iter()
                    .filter(|s| std::env::var_os(s).is_none())
                    .map(String::as_str)
                    .collect();
                printer.info(&format!(
                    "note: its instances read the secret{} {} from the environment of `wf worker`: export {} where the worker runs (an instance started without one fails){}",
                    if wf.secrets.len() == 1 { "" } else { "s" },
                    wf.secrets.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", "),
                    if wf.secrets.len() == 1 { "it" } else { "them" },
                    if unset.is_empty() {
                        String::new()
                    } else {
                        format!("; not set here: {}", unset.join(", "))
                    }
                ));
            }
            if json {
                let last = fire::last_instances(&store, &rows).await?;
                printer.json(&ScheduleAdded {
                    workflow: &wf.name,
                    schedules: views(&rows, &last),
                });
            } else {
                for r in &rows {
                    printer.info(&format!(
                        "schedule {}: {}; next fire {}",
                        entry_name(r),
                        describe(r),
                        Timestamp::from_ms(r.next_fire_ms)
                    ));
                }
            }
            Ok(ExitStatus::Success)
        }
        Sub::Rm { name } => {
            let mut store = super::open_existing(db).await?;
            let action = crate::store::ActionRow::global(
                crate::vocab::ActionKind::ScheduleRm,
                &crate::vocab::Actor::cli(),
                name.as_str(),
            );
            let n = store.remove_schedules(&name, Some(&action)).await?;
            if n == 0 {
                let names = registered_names(&store).await?;
                return Err(UsageError(if names.is_empty() {
                    format!("no schedule is registered for `{name}` (none is registered)")
                } else {
                    format!(
                        "no schedule is registered for `{name}` (registered: {})",
                        names.join(", ")
                    )
                })
                .into());
            }
            printer.info(&format!(
                "removed {n} schedule{} of {name}",
                if n == 1 { "" } else { "s" }
            ));
            Ok(ExitStatus::Success)
        }
        Sub::List { json } => {
            let store = super::open_existing(db).await?;
            let rows = store.schedules().await?;
            if json {
                let last = fire::last_instances(&store, &rows).await?;
                printer.json(&views(&rows, &last));
                return Ok(ExitStatus::Success);
            }
            if rows.is_empty() {
                printer.info("no schedules (`wf schedule add FILE` registers one)");
                return Ok(ExitStatus::Success);
            }
            let mut table = printer.table();
            table.set_header([
                "WORKFLOW",
                "SCHEDULE",
                "OVERLAP",
                "NEXT FIRE",
                "LAST INSTANCE",
            ]);
            for r in &rows {
                let last = match (&r.last_instance, fire::last_instance(&store, r).await?) {
                    (None, _) => "-".to_string(),
                    (Some(id), Some(i)) => format!("{} {}", short_id(id), ShownStatus::of(&i)),
                    (Some(id), None) => format!("{} (pruned)", short_id(id)),
                };
                let next = match r.buffered_ms {
                    Some(_) => format!(
                        "{} (+1 buffered)",
                        printer.when(Timestamp::from_ms(r.next_fire_ms))
                    ),
                    None => printer.when(Timestamp::from_ms(r.next_fire_ms)),
                };
                table.add_row(vec![
                    entry_name(r),
                    describe(r),
                    r.overlap.clone(),
                    next,
                    last,
                ]);
            }
            printer.keep_columns(&mut table, Some(1));
            printer.data(&table.to_string());
            Ok(ExitStatus::Success)
        }
    }
}

fn entry_name(r: &ScheduleRow) -> String {
    fire::entry_name(&r.workflow, r.idx)
}

/// `*/15 * * * * (Europe/Paris)`, or `every 30s`.
fn describe(r: &ScheduleRow) -> String {
    match &r.timezone {
        Some(tz) => format!("{} ({tz})", r.spec),
        None => r.spec.clone(),
    }
}

async fn registered_names(store: &Store) -> anyhow::Result<Vec<String>> {
    let mut names: Vec<String> = store
        .schedules()
        .await?
        .into_iter()
        .map(|r| r.workflow)
        .collect();
    names.dedup();
    Ok(names)
}

/// The entries as `--json` shows them (docs/commands.md), each with its
/// last instance.
fn views<'a>(rows: &'a [ScheduleRow], last: &[Option<InstanceRow>]) -> Vec<ScheduleView<'a>> {
    rows.iter()
        .zip(last)
        .map(|(r, l)| ScheduleView::new(r, l.as_ref()))
        .collect()
}
