//! `wf queue list`: the keys of the workflows' `queue:` blocks and where
//! each stands: admitted, queued, the limit, the rate left, the oldest
//! queued instance's age (docs/flow-control.md). `wf queue show KEY`: one
//! key's admitted instances and its line, in the order it admits them.

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
    /// One key: the instances holding its slots, then those waiting, in
    /// the order they are admitted (priority, then age)
    Show {
        /// The queue key (as `wf queue list` shows it)
        key: String,
        /// Show at most N of each list
        #[arg(long, default_value_t = 50, value_name = "N")]
        limit: usize,
        /// `{key, limit, rate, rate_left, admitted: [...], admitted_total,
        /// waiting: [...], waiting_total}`
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(args: Args, db: Option<PathBuf>, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let json = match args.command {
        Sub::List { json } => json,
        Sub::Show { key, limit, json } => return show(&key, limit, json, db, printer).await,
    };
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

/// `wf queue show KEY`: the admitted instances, then the line.
async fn show(
    key: &str,
    limit: usize,
    json: bool,
    db: Option<PathBuf>,
    printer: &Printer,
) -> anyhow::Result<ExitStatus> {
    let store = super::open_existing(db).await?;
    let shown = crate::engine::actions::queue_show(&store, key, limit).await?;
    let now = Timestamp::now();
    let view = crate::views::QueueLineView::new(key, &shown, now);
    if json {
        printer.json(&view);
        return Ok(ExitStatus::Success);
    }
    let limits = match (view.limit, &view.rate) {
        (Some(l), Some(r)) => format!(" (concurrency {l}, rate {r})"),
        (Some(l), None) => format!(" (concurrency {l})"),
        (None, Some(r)) => format!(" (rate {r})"),
        (None, None) => String::new(),
    };
    printer.data(&format!(
        "queue `{key}`{limits}: {} admitted, {} waiting",
        view.admitted_total, view.waiting_total
    ));
    for (title, members, total) in [
        (
            "admitted, oldest first",
            &view.admitted,
            view.admitted_total,
        ),
        (
            "waiting, in the order they are admitted",
            &view.waiting,
            view.waiting_total,
        ),
    ] {
        if members.is_empty() {
            continue;
        }
        printer.data("");
        printer.data(&format!("{title}:"));
        let mut table = printer.table();
        table.set_header(["#", "INSTANCE", "WORKFLOW", "STATUS", "PRIORITY", "AGE"]);
        for (i, m) in members.iter().enumerate() {
            table.add_row([
                m.position.unwrap_or(i + 1).to_string(),
                crate::vocab::short(m.id.as_str()).to_string(),
                m.workflow.to_string(),
                m.status.as_str().to_string(),
                m.priority.to_string(),
                crate::workflow::duration::human(std::time::Duration::from_millis(
                    m.age_ms.max(0) as u64
                )),
            ]);
        }
        printer.keep_columns(&mut table, None);
        printer.data(&table.to_string());
        if total > members.len() as i64 {
            printer.data(&format!(
                "… and {} more (--limit N shows more)",
                total - members.len() as i64
            ));
        }
    }
    Ok(ExitStatus::Success)
}
