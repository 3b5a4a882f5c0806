//! `wf cancel` and `wf resume [--retry-failed]` over many instances: given
//! more than one id, or a list's filters (`--workflow`, `--status`,
//! `--label`, `--since`, `--error`, `--queue`) instead of ids. The plan
//! comes first (a line per instance: what the action would do to it, as
//! the inspector's confirmation says it), then one question (`--yes`
//! answers it; without a terminal it must), then each instance's turn
//! through the use case of one, its run driven here in turn as `wf
//! cancel ID` and `wf resume ID` drive theirs, and a line per instance
//! saying how it ended. `--dry-run` stops after the plan.

use super::short_id;
use crate::engine::actions::ListQuery;
use crate::engine::actions::bulk::{self, Bulk, Intent, Planned, Selection, Turn};
use crate::engine::{EngineError, RunOptions};
use crate::exit::ExitStatus;
use crate::printer::Printer;
use crate::store::Store;
use crate::views::BulkLine;
use crate::vocab::{Actor, InstanceId, ShownStatus};
use std::io::IsTerminal;

/// The filters that choose instances instead of ids.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Select {
    /// Every instance of this workflow (with the other filters)
    #[arg(long, value_name = "NAME", help_heading = "Many instances")]
    pub workflow: Option<String>,
    /// Every instance with this status
    #[arg(long, value_name = "STATUS", help_heading = "Many instances")]
    pub status: Option<String>,
    /// Every instance with this label (repeatable: all of them)
    #[arg(long = "label", value_name = "NAME=VALUE", value_parser = crate::workflow::parse_label_filter, help_heading = "Many instances")]
    pub label: Vec<(String, String)>,
    /// Every instance created within this long
    #[arg(long, value_name = "DURATION", value_parser = super::parse_duration_flag, help_heading = "Many instances")]
    pub since: Option<std::time::Duration>,
    /// Every instance whose error holds these words
    #[arg(long, value_name = "WORDS", help_heading = "Many instances")]
    pub error: Option<String>,
    /// Every instance of this queue key
    #[arg(long, value_name = "KEY", help_heading = "Many instances")]
    pub queue: Option<String>,
    /// Print what would be done to each instance, and do nothing
    #[arg(long, help_heading = "Many instances")]
    pub dry_run: bool,
    /// Go on without asking (needed without a terminal)
    #[arg(long, short = 'y', help_heading = "Many instances")]
    pub yes: bool,
}

impl Select {
    /// Whether a filter is given (rather than ids alone).
    pub fn filters(&self) -> bool {
        self.workflow.is_some()
            || self.status.is_some()
            || !self.label.is_empty()
            || self.since.is_some()
            || self.error.is_some()
            || self.queue.is_some()
    }

    /// Whether `ids` and these flags ask for the bulk form (more than one
    /// id, a filter, or `--dry-run`).
    pub fn is_bulk(&self, ids: &[String]) -> bool {
        ids.len() > 1 || self.filters() || self.dry_run
    }

    fn selection(&self, ids: &[String]) -> anyhow::Result<Selection> {
        if !self.filters() {
            return Ok(Selection::Ids(ids.to_vec()));
        }
        Ok(Selection::Matching(ListQuery {
            status: self
                .status
                .as_deref()
                .map(crate::engine::actions::list_status)
                .transpose()?,
            workflow: self.workflow.clone(),
            since: self.since,
            labels: self.label.clone(),
            queue: self.queue.clone(),
            error: self.error.clone(),
            ..ListQuery::default()
        }))
    }
}

/// `wf cancel` / `wf resume` over the instances `ids` and `select` name.
pub async fn run(
    store: &mut Store,
    action: Bulk,
    ids: &[String],
    select: &Select,
    reason: &str,
    json: bool,
    printer: &Printer,
) -> anyhow::Result<ExitStatus> {
    let by = Actor::cli();
    let chosen = bulk::select(store, &select.selection(ids)?).await?;
    if chosen.is_empty() {
        printer.info("no instances match");
        if json {
            printer.json(&Vec::<BulkLine>::new());
        }
        return Ok(ExitStatus::Success);
    }
    let plan = bulk::plan(store, action, &chosen, &by).await?;
    let acting = plan.iter().filter(|p| !p.intent.skipped()).count();
    if select.dry_run || !json {
        show_plan(printer, &plan, select.dry_run && json);
    }
    if select.dry_run {
        return Ok(ExitStatus::Success);
    }
    if acting == 0 {
        printer.info("nothing to do: every instance is left as it is");
        if json {
            printer.json(&lines(&plan, |_| ("skipped", String::new())));
        }
        return Ok(ExitStatus::Success);
    }
    if !select.yes && !confirm(printer, action, acting)? {
        printer.info("nothing done");
        return Ok(ExitStatus::Failure);
    }
    let mut done = Vec::with_capacity(plan.len());
    let mut failed = false;
    for p in &plan {
        let (outcome, detail) = if let Intent::Skip(why) = &p.intent {
            ("skipped", why.clone())
        } else {
            match turn(store, action, &p.id, &by, reason, printer).await {
                Ok(said) => said,
                Err(e) => {
                    failed = true;
                    ("failed", e.to_string())
                }
            }
        };
        let status = match store.instance(&p.id).await {
            Ok(i) => ShownStatus::of(&i),
            Err(_) => p.status,
        };
        done.push(BulkLine {
            status,
            ..BulkLine::of(p, outcome, detail)
        });
    }
    if json {
        printer.json(&done);
    } else {
        let mut table = printer.table();
        table.set_header(["ID", "WORKFLOW", "OUTCOME", "STATUS", "DETAIL"]);
        for l in &done {
            table.add_row(vec![
                comfy_table::Cell::new(short_id(l.id.as_str())),
                comfy_table::Cell::new(&l.workflow),
                comfy_table::Cell::new(l.outcome),
                printer.status_cell(l.status.as_str()),
                comfy_table::Cell::new(&l.detail),
            ]);
        }
        printer.data(&table.to_string());
    }
    Ok(if failed {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}

/// The plan, a line per instance (on stderr, unless it is all the command
/// prints: `--dry-run`, where `as_json` prints it as JSON on stdout).
fn show_plan(printer: &Printer, plan: &[Planned], as_json: bool) {
    if as_json {
        printer.json(&lines(plan, |_| ("planned", String::new())));
        return;
    }
    let mut table = printer.table();
    table.set_header(["ID", "WORKFLOW", "STATUS", "PLAN"]);
    for p in plan {
        table.add_row(vec![
            comfy_table::Cell::new(short_id(p.id.as_str())),
            comfy_table::Cell::new(&p.workflow),
            printer.status_cell(p.status.as_str()),
            comfy_table::Cell::new(p.intent.text()),
        ]);
    }
    printer.data(&table.to_string());
}

fn lines(plan: &[Planned], said: impl Fn(&Planned) -> (&'static str, String)) -> Vec<BulkLine> {
    plan.iter()
        .map(|p| {
            let (outcome, detail) = said(p);
            BulkLine::of(p, outcome, detail)
        })
        .collect()
}

/// Asks on the terminal; without one, `--yes` is needed.
fn confirm(printer: &Printer, action: Bulk, n: usize) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        return Err(EngineError::Input(format!(
            "{n} instances would be changed: add --yes to go on without a terminal (--dry-run shows the plan)"
        ))
        .into());
    }
    printer.info(&format!(
        "{} these {n} instances? [y/N]",
        capitalized(action.verb())
    ));
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

/// One instance's turn, its run driven here: the outcome and what to say.
async fn turn(
    store: &mut Store,
    action: Bulk,
    id: &InstanceId,
    by: &Actor,
    reason: &str,
    printer: &Printer,
) -> Result<(&'static str, String), EngineError> {
    let run = match bulk::apply(store, action, id, by, reason).await? {
        Turn::Skipped(why) => return Ok(("skipped", why)),
        Turn::Canceled(asked) => {
            if let Some(holder) = asked.held_by {
                return Ok(("canceling", format!("its runner {holder} ends it")));
            }
            asked.run
        }
        Turn::Resumed(ready) => ready.run,
    };
    let opts = RunOptions {
        traceparent: super::traceparent(),
        ..run.opts
    };
    let progress = printer.progress();
    let outcome = crate::engine::drive::drive(store, id, opts, &progress).await;
    progress.finish();
    let word = match action {
        Bulk::Cancel => "canceled",
        Bulk::RetryFailed | Bulk::Resume => "resumed",
    };
    match outcome {
        Ok(_) => Ok((word, String::new())),
        Err(EngineError::Held { holder, .. }) => Ok((
            "canceling",
            format!("running in {holder}, which acts on it"),
        )),
        Err(e) => Err(e),
    }
}
