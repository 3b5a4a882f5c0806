//! `wf queue list`: the keys of the workflows' `queue:` blocks and where
//! each stands: admitted, queued, the limit, the rate left, the oldest
//! queued instance's age (docs/flow-control.md).

use crate::exit::ExitStatus;
use crate::printer::Printer;
use crate::views::QueueView;
use crate::vocab::Timestamp;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

#[derive(Debug, clap::Subcommand)]
pub enum Sub {
    /// Queue keys with admitted or queued instances: admitted, queued,
    /// limit, rate left, oldest queued
    List {
        /// An array of `{key, admitted, queued, limit, rate, rate_left,
        /// oldest_queued_at, oldest_queued_age_ms}`
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(args: Args, db: Option<PathBuf>, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let Sub::List { json } = args.command;
    let queues = super::open_existing(db).await?.queues().await?;
    let now = Timestamp::now();
    let views: Vec<QueueView> = queues.iter().map(|q| QueueView::new(q, now)).collect();
    if json {
        printer.json(&views);
        return Ok(ExitStatus::Success);
    }
    if views.is_empty() {
        printer.info("no queue has admitted or queued instances");
        return Ok(ExitStatus::Success);
    }
    let mut table = printer.table();
    table.set_header([
        "KEY",
        "ADMITTED",
        "QUEUED",
        "LIMIT",
        "RATE LEFT",
        "OLDEST QUEUED",
    ]);
    let dash = || "-".to_string();
    for v in &views {
        table.add_row([
            v.key.to_string(),
            v.admitted.to_string(),
            v.queued.to_string(),
            v.limit.map_or_else(dash, |l| l.to_string()),
            match (&v.rate, v.rate_left) {
                (Some(rate), Some(left)) => format!("{left} of {rate}"),
                _ => dash(),
            },
            v.oldest_queued_age_ms.map_or_else(dash, |ms| {
                format!(
                    "{} ago",
                    crate::workflow::duration::human(std::time::Duration::from_millis(
                        ms.max(0) as u64
                    ))
                )
            }),
        ]);
    }
    printer.data(&table.to_string());
    Ok(ExitStatus::Success)
}
