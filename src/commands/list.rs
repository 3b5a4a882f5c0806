//! `wf list`: instances, newest first, as a table or JSON
//! ([`InstanceSummary`]).

use super::short_id;
use crate::engine::actions::ListQuery;
use crate::exit::ExitStatus;
use crate::printer::Printer;
use crate::store::Store;
use crate::views::{InstanceSummary, ShownStatus};

/// How many instances `wf list` shows without `--limit` (docs/commands.md).
const DEFAULT_LIMIT: usize = 50;

/// The narrowest the WORKFLOW column wraps to before UPDATED is left out.
const MIN_WORKFLOW_WIDTH: usize = 10;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only instances with this status
    #[arg(long)]
    pub status: Option<String>,
    /// Only instances of this workflow (its `name`)
    #[arg(long, value_name = "NAME")]
    pub workflow: Option<String>,
    /// Only instances created within this long (`1h`, `7d`)
    #[arg(long, value_name = "DURATION", value_parser = super::parse_duration_flag)]
    pub since: Option<std::time::Duration>,
    /// Only the children of this instance (any unique prefix of its id)
    #[arg(long, value_name = "ID", conflicts_with = "roots")]
    pub parent: Option<String>,
    /// Only instances without a parent (not made by a `workflow:` step)
    #[arg(long)]
    pub roots: bool,
    /// Only instances with this label (repeatable: all of them)
    #[arg(long = "label", value_name = "NAME=VALUE", value_parser = crate::workflow::parse_label_filter)]
    pub label: Vec<(String, String)>,
    /// Only instances of this queue key (`queue.key`, rendered)
    #[arg(long, value_name = "KEY")]
    pub queue: Option<String>,
    /// Only instances whose id starts with PREFIX
    #[arg(long = "id", value_name = "PREFIX")]
    pub id_prefix: Option<String>,
    /// Only instances whose error holds these words (each a whole word or
    /// the start of one, in any order; case aside)
    #[arg(long, value_name = "WORDS")]
    pub error: Option<String>,
    /// How many instances of each status the other filters match, instead
    /// of the instances
    #[arg(long, conflicts_with_all = ["status", "limit"])]
    pub counts: bool,
    /// At most this many instances, the newest (default 50; 0: all)
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// JSON on stdout
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: Args, store: &Store, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let query = ListQuery {
        status: args
            .status
            .as_deref()
            .map(crate::engine::actions::list_status)
            .transpose()?,
        workflow: args.workflow.clone(),
        since: args.since,
        parent: args.parent.clone(),
        roots: args.roots,
        labels: args.label.clone(),
        queue: args.queue.clone(),
        id_prefix: args.id_prefix.clone(),
        error: args.error.clone(),
        limit: args.limit.unwrap_or(DEFAULT_LIMIT),
        after: None,
        count_more: true,
    };
    if args.counts {
        return counts(store, &query, args.json, printer).await;
    }
    let (rows, more) = crate::engine::actions::list(store, &query).await?;
    let rows: Vec<InstanceSummary> = rows
        .iter()
        .map(|i| InstanceSummary::new(i, ShownStatus::of(i)))
        .collect();
    // After the data, on stderr: what was left out.
    let say_more = || {
        if more > 0 {
            printer.info(&format!(
                "… and {more} more; --limit N shows N (--limit 0 shows all)"
            ));
        }
    };
    if args.json {
        printer.json(&rows);
        say_more();
        return Ok(ExitStatus::Success);
    }
    if rows.is_empty() {
        printer.info("no instances");
        return Ok(ExitStatus::Success);
    }
    // PARENT is last: piped, a root's empty cell moves no column after it.
    let cells = rows
        .iter()
        .map(|i| {
            vec![
                comfy_table::Cell::new(short_id(i.id)),
                comfy_table::Cell::new(i.workflow),
                printer.status_cell(i.status.as_str()),
                comfy_table::Cell::new(printer.when(i.created_at)),
                comfy_table::Cell::new(i.duration_ms.map_or(String::new(), |ms| {
                    crate::workflow::duration::human(std::time::Duration::from_millis(
                        ms.max(0) as u64
                    ))
                })),
                comfy_table::Cell::new(printer.when(i.updated_at)),
                comfy_table::Cell::new(i.parent.map_or("", |p| short_id(p))),
            ]
        })
        .collect();
    // Only WORKFLOW wraps; when even so the table is wider than the
    // terminal (`--time-format iso`), UPDATED is left out.
    let (table, _) = printer.fitted(
        &[
            "ID", "WORKFLOW", "STATUS", "CREATED", "DURATION", "UPDATED", "PARENT",
        ],
        cells,
        Some(1),
        MIN_WORKFLOW_WIDTH,
        &[5],
    );
    printer.data(&table.to_string());
    say_more();
    Ok(ExitStatus::Success)
}

/// `wf list --counts`: a STATUS / COUNT table (a count that stopped at its
/// cap marked `+`), or `--json`'s `{statuses: [{status, count, at_least}],
/// total, at_least}`.
async fn counts(
    store: &Store,
    query: &ListQuery,
    json: bool,
    printer: &Printer,
) -> anyhow::Result<ExitStatus> {
    let counts = crate::engine::actions::counts(store, query).await?;
    if json {
        printer.json(&crate::views::CountsView::from(&counts));
        return Ok(ExitStatus::Success);
    }
    let plus = |at_least: bool| if at_least { "+" } else { "" };
    let mut cells: Vec<Vec<comfy_table::Cell>> = counts
        .statuses
        .iter()
        .filter(|c| c.count > 0)
        .map(|c| {
            vec![
                printer.status_cell(c.status.as_str()),
                comfy_table::Cell::new(format!("{}{}", c.count, plus(c.at_least))),
            ]
        })
        .collect();
    cells.push(vec![
        comfy_table::Cell::new("total"),
        comfy_table::Cell::new(format!("{}{}", counts.total, plus(counts.at_least))),
    ]);
    let mut table = printer.table();
    table.set_header(["STATUS", "COUNT"]);
    table.add_rows(cells);
    printer.data(&table.to_string());
    Ok(ExitStatus::Success)
}
