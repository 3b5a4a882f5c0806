//! `wf list`: instances, newest first, as a table or JSON.

use super::display_status;
use crate::exit::{ExitStatus, UsageError};
use crate::printer::Printer;
use crate::store::Store;
use serde_json::json;

const STATUSES: &[&str] = &[
    "running",
    "interrupted",
    "sleeping",
    "waiting",
    "completed",
    "failed",
    "canceled",
];

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only instances with this status
    #[arg(long)]
    pub status: Option<String>,
    /// JSON on stdout
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args, store: &Store, printer: &Printer) -> anyhow::Result<ExitStatus> {
    if let Some(s) = &args.status
        && !STATUSES.contains(&s.as_str())
    {
        return Err(UsageError(format!(
            "unknown status `{s}` (one of: {})",
            STATUSES.join(", ")
        ))
        .into());
    }
    // `interrupted` is a display status of `running` rows; filter after computing it.
    let stored = match args.status.as_deref() {
        Some("interrupted") => Some("running"),
        other => other,
    };
    let rows: Vec<_> = store
        .list_instances(stored)?
        .into_iter()
        .map(|i| {
            let status = display_status(&i);
            (i, status)
        })
        .filter(|(_, status)| args.status.as_deref().is_none_or(|s| s == status))
        .collect();
    if args.json {
        let items: Vec<_> = rows
            .iter()
            .map(|(i, status)| {
                json!({
                    "id": i.id,
                    "workflow": i.workflow,
                    "status": status,
                    "created_at": i.created_at,
                    "updated_at": i.updated_at,
                })
            })
            .collect();
        printer.json(&json!(items));
        return Ok(ExitStatus::Success);
    }
    if rows.is_empty() {
        printer.info("no instances");
        return Ok(ExitStatus::Success);
    }
    let mut table = printer.table();
    table.set_header(["ID", "WORKFLOW", "STATUS", "CREATED", "UPDATED"]);
    for (i, status) in &rows {
        table.add_row(vec![
            i.id.clone(),
            i.workflow.clone(),
            status.clone(),
            i.created_at.clone(),
            i.updated_at.clone(),
        ]);
    }
    printer.data(&table.to_string());
    Ok(ExitStatus::Success)
}
