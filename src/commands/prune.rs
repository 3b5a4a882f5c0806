//! `wf prune --older-than D`: deletes ended instances (completed, failed,
//! canceled, skipped by their queue) that have not changed for `D`, with their runs, steps,
//! attempts, logs, spans and events. Never touches a running, sleeping or
//! waiting instance. Deletes a bounded batch per transaction, so a runner
//! never waits long for the database. `--archive FILE` keeps each batch
//! first (`engine::db::archive`).

use crate::exit::{ExitStatus, UsageError};
use crate::printer::Printer;
use crate::store::Pruned;
use crate::views::PruneView;
use crate::vocab::{InstanceStatus, Timestamp};
use std::path::PathBuf;
use std::time::Duration;

/// Instances deleted per transaction.
const BATCH: usize = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Ended {
    Completed,
    Failed,
    Canceled,
    Skipped,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Instances that have not changed for this long (`30d`, `12h`, `0s` for any)
    #[arg(long, value_name = "DURATION", value_parser = super::parse_duration_flag)]
    pub older_than: Duration,
    /// Only instances with these statuses (default: all four)
    #[arg(long, value_enum, value_delimiter = ',')]
    pub status: Vec<Ended>,
    /// Count what would be deleted; delete nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Then give the freed space back to the file system (SQLite: VACUUM)
    #[arg(long)]
    pub vacuum: bool,
    /// Before deleting, append each instance (rows, logs, spans) as one
    /// JSON line to FILE, synced (zstd when it ends in `.zst`); `wf db
    /// import FILE` brings them back
    #[arg(long, value_name = "FILE")]
    pub archive: Option<PathBuf>,
    /// `{dry_run, instances, runs, steps, attempts, spans, events}` on stdout
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: Args, db: Option<PathBuf>, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let location = super::db_location(db)?;
    let Some(mut store) = crate::store::Store::open_existing(&location).await? else {
        return Err(UsageError(format!(
            "no database at {}: nothing to prune",
            location.describe()
        ))
        .into());
    };
    let cutoff = chrono::Duration::from_std(args.older_than)
        .ok()
        .and_then(|d| chrono::Utc::now().checked_sub_signed(d))
        .ok_or_else(|| UsageError(format!("--older-than {:?} is too long", args.older_than)))?;
    let mut statuses: Vec<InstanceStatus> = if args.status.is_empty() {
        vec![
            Ended::Completed,
            Ended::Failed,
            Ended::Canceled,
            Ended::Skipped,
        ]
    } else {
        args.status.clone()
    }
    .into_iter()
    .map(|s| match s {
        Ended::Completed => InstanceStatus::Completed,
        Ended::Failed => InstanceStatus::Failed,
        Ended::Canceled => InstanceStatus::Canceled,
        Ended::Skipped => InstanceStatus::Skipped,
    })
    .collect();
    statuses.dedup();
    let mut archive = match &args.archive {
        Some(path) if !args.dry_run => Some(crate::engine::db::archive::FileArchive::open(path)?),
        _ => None,
    };
    let pruned = store
        .prune(
            Timestamp::from(cutoff),
            &statuses,
            BATCH,
            args.dry_run,
            archive
                .as_mut()
                .map(|a| a as &mut dyn crate::store::portable::Archive),
            &crate::vocab::Actor::cli(),
        )
        .await?;
    let vacuumed = if args.vacuum && !args.dry_run {
        store.vacuum().await?
    } else {
        false
    };
    if args.json {
        printer.json(&PruneView::new(&pruned, args.dry_run));
    } else {
        let verb = if args.dry_run {
            "would delete"
        } else {
            "deleted"
        };
        printer.data(&format!("{verb} {}", describe(&pruned)));
        if let (Some(a), Some(path)) = (&archive, &args.archive) {
            printer.info(&format!(
                "archived {} instance{} to {}",
                a.records,
                if a.records == 1 { "" } else { "s" },
                path.display()
            ));
        }
    }
    if args.vacuum && !args.dry_run && !vacuumed {
        printer.info("PostgreSQL gives the space back by itself (autovacuum): nothing to vacuum");
    }
    Ok(ExitStatus::Success)
}

fn describe(p: &Pruned) -> String {
    let n = |count: u64, what: &str| format!("{count} {what}{}", if count == 1 { "" } else { "s" });
    format!(
        "{} ({}, {}, {}, {}, {})",
        n(p.instances, "instance"),
        n(p.runs, "run"),
        n(p.steps, "step"),
        n(p.attempts, "attempt"),
        n(p.spans, "span"),
        n(p.events, "event")
    )
}
