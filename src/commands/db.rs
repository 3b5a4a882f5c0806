//! `wf db`: an operator's commands over a whole history (docs/operations.md).
//! `backup DEST` makes a consistent copy of a live history in a new SQLite
//! file; `copy --to DB` moves the history to another database (SQLite to
//! PostgreSQL and back), continued with `--resume`; `import FILE` brings
//! back what `wf prune --archive` kept; `check` names what is wrong with
//! it; `actions` lists who did what to the registry, the tokens and the
//! history as a whole. Each renders a use case of `engine::db`.

use crate::engine::db;
use crate::exit::ExitStatus;
use crate::printer::Printer;
use crate::store::Location;
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

#[derive(Debug, clap::Subcommand)]
pub enum Sub {
    /// Write a consistent copy of the whole history, while wf runs, to a new
    /// SQLite file any wf opens with `--db DEST`
    Backup {
        /// The new file (never replaced)
        dest: PathBuf,
        /// `{path, instances, bytes}`
        #[arg(long)]
        json: bool,
    },
    /// Copy the whole history into another database (SQLite to PostgreSQL
    /// and back), in-flight instances included (their leases cleared, so
    /// the target's workers take them up)
    Copy {
        /// The target: a path or a `postgres://` URL; it must hold no
        /// history, but that of a copy continued with --resume
        #[arg(long, value_name = "DB")]
        to: OsString,
        /// Continue an interrupted copy: the instances the target holds are
        /// skipped
        #[arg(long)]
        resume: bool,
        /// `{instances, written, skipped}`
        #[arg(long)]
        json: bool,
    },
    /// Bring back the instances an archive holds (`wf prune --archive`); those
    /// the database holds already are skipped
    Import {
        /// The archive (JSON lines; zstd when it ends in `.zst`)
        file: PathBuf,
        /// `{records, written, skipped}`
        #[arg(long)]
        json: bool,
    },
    /// Check the history: the database's integrity and wf's invariants, each
    /// problem named with the instance it hurts (exit 1 if any)
    Check {
        /// `{sound, problems: [{check, instance, detail}]}`
        #[arg(long)]
        json: bool,
    },
    /// Who did what to the registry, the tokens and the history as a whole
    /// (each batch of `wf prune`), newest first
    Actions {
        /// At most this many
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// An array of `{at, action, actor, detail}`
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(args: Args, db: Option<PathBuf>, printer: &Printer) -> anyhow::Result<ExitStatus> {
    match args.command {
        Sub::Actions { limit, json } => {
            let store = super::open_existing(db).await?;
            let rows = db::actions(&store, limit).await?;
            if json {
                let views: Vec<crate::views::ActionView> =
                    rows.iter().map(crate::views::ActionView::from).collect();
                printer.json(&views);
            } else if rows.is_empty() {
                printer.info("no action on the registry, the tokens or the history was recorded");
            } else {
                // The detail (how many a prune deleted) wraps rather than drops.
                let cells = rows.iter().map(super::inspect::action_cells).collect();
                let (table, _) =
                    printer.fitted(&super::inspect::ACTION_HEADER, cells, Some(3), 16, &[]);
                printer.data(&table.to_string());
            }
            Ok(ExitStatus::Success)
        }
        Sub::Backup { dest, json } => {
            let store = super::open_existing(db).await?;
            let bar = printer.progress_bar("backing up", 0);
            let made = db::backup::backup(&store, &dest, &mut |done, of| {
                bar.set_length(of);
                bar.set_position(done);
            })
            .await;
            bar.finish_and_clear();
            let made = made?;
            if json {
                printer.json(&made);
            } else {
                printer.info(&format!(
                    "backed up {} instance{} to {} ({} bytes)",
                    made.instances,
                    if made.instances == 1 { "" } else { "s" },
                    made.path.display(),
                    made.bytes
                ));
            }
            Ok(ExitStatus::Success)
        }
        Sub::Copy { to, resume, json } => {
            let source = super::open_existing(db).await?;
            let location = Location::parse(&to)?;
            let bar = printer.progress_bar("copying", 0);
            let copied = db::copy::copy_into(&source, &location, resume, &mut |done, of| {
                bar.set_length(of);
                bar.set_position(done);
            })
            .await;
            bar.finish_and_clear();
            let (copied, target) = copied.map_err(|e| match e {
                crate::engine::EngineError::Input(m) => {
                    anyhow::Error::from(super::UsageError(format!("--to: {m}")))
                }
                e => e.into(),
            })?;
            if json {
                printer.json(&copied);
            } else {
                printer.info(&format!(
                    "copied {} of {} instance{} to {}{}",
                    copied.written,
                    copied.instances,
                    if copied.instances == 1 { "" } else { "s" },
                    target,
                    if copied.skipped > 0 {
                        format!(" ({} there already)", copied.skipped)
                    } else {
                        String::new()
                    }
                ));
            }
            Ok(ExitStatus::Success)
        }
        Sub::Import { file, json } => {
            let mut store = super::open(db).await?;
            let done = db::archive::import(&mut store, &file).await?;
            if json {
                printer.json(&done);
            } else {
                printer.info(&format!(
                    "imported {} of {} archived instance{}{}",
                    done.written,
                    done.records,
                    if done.records == 1 { "" } else { "s" },
                    if done.skipped > 0 {
                        format!(" ({} there already)", done.skipped)
                    } else {
                        String::new()
                    }
                ));
            }
            Ok(ExitStatus::Success)
        }
        Sub::Check { json } => {
            let store = super::open_existing(db).await?;
            let found = db::check::check(&store).await?;
            if json {
                printer.json(&crate::views::CheckView::new(&found));
            } else if found.is_empty() {
                printer.info(&format!("{}: sound", store.describe()));
            } else {
                let mut table = printer.table();
                table.set_header(["CHECK", "INSTANCE", "DETAIL"]);
                for f in &found {
                    table.add_row([
                        f.check.to_string(),
                        f.instance.clone().unwrap_or_else(|| "-".into()),
                        f.detail.clone(),
                    ]);
                }
                printer.data(&table.to_string());
                printer.error(&format!(
                    "{}: {} problem{}",
                    store.describe(),
                    found.len(),
                    if found.len() == 1 { "" } else { "s" }
                ));
            }
            Ok(if found.is_empty() {
                ExitStatus::Success
            } else {
                ExitStatus::Failure
            })
        }
    }
}
