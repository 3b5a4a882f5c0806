//! `wf upgrade ID… --to FILE` and `wf upgrade --workflow NAME --to FILE`:
//! moves instances that are not running onto a new definition of their
//! workflow (SPEC §3 Upgrades), printing each one's plan; `--dry-run`
//! prints the plans and writes nothing. The engine decides
//! (`engine::upgrade`); this renders.

use crate::engine::upgrade::{self, Applied, Outcome, Plan, Preview, Target, Targets};
use crate::exit::ExitStatus;
use crate::printer::Printer;
use crate::vocab::InstanceId;
use crate::workflow::Workflow;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Instance ids (any unique prefix)
    #[arg(required_unless_present = "workflow", conflicts_with = "workflow")]
    pub ids: Vec<String>,
    /// Every instance of this workflow that has not ended (those running are named, not moved)
    #[arg(long, value_name = "NAME")]
    pub workflow: Option<String>,
    /// The new definition
    #[arg(long, value_name = "FILE")]
    pub to: PathBuf,
    /// A step renamed: OLD in the instance's definition is NEW in FILE (repeatable)
    #[arg(long = "map", value_name = "OLD=NEW")]
    pub map: Vec<String>,
    /// Run a new step that comes before a completed one at the next resume, instead of refusing
    #[arg(long)]
    pub allow_gaps: bool,
    /// Print the plans; write nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Print the plans as JSON on stdout
    #[arg(long)]
    pub json: bool,
}

/// One instance's line of the output.
#[derive(Debug, serde::Serialize)]
struct Done {
    id: InstanceId,
    /// `upgraded`, `planned` (a dry run), `refused`, `held`, `not_movable`,
    /// `other_workflow`.
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    holder: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    workflow: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<Plan>,
}

pub async fn run(args: Args, db: Option<PathBuf>, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let renames = renames(&args.map)?;
    let new = Workflow::load(&args.to)?;
    let (workflow_path, base_dir) = crate::workflow::origin(&args.to);
    let base_dir = base_dir.display().to_string();
    let mut store = super::open_existing(db).await?;
    let mut ids = Vec::with_capacity(args.ids.len());
    for prefix in &args.ids {
        ids.push(store.resolve_id(prefix).await?);
    }
    let targets = match &args.workflow {
        Some(name) => Targets::Workflow(name),
        None => Targets::Ids(&ids),
    };
    let previews = upgrade::preview(&store, targets, &new, &renames, args.allow_gaps).await?;
    let mut out = Vec::with_capacity(previews.len());
    for Preview {
        id,
        status,
        outcome,
    } in previews
    {
        let planned = matches!(&outcome, Outcome::Planned { plan } if !plan.is_refused());
        let done = if args.dry_run || !planned {
            from_preview(id, status, outcome)
        } else {
            let to = Target {
                wf: &new,
                workflow_path: &workflow_path,
                base_dir: &base_dir,
            };
            let applied = upgrade::apply(
                &mut store,
                &id,
                &to,
                &renames,
                args.allow_gaps,
                &crate::vocab::Actor::cli(),
            )
            .await?;
            from_applied(id, applied)
        };
        out.push(done);
    }
    if args.json {
        printer.json(&out);
    } else {
        for d in &out {
            say(printer, d, args.dry_run);
        }
    }
    let held = out.iter().any(|d| d.outcome == "held");
    let refused = out
        .iter()
        .any(|d| matches!(d.outcome, "refused" | "not_movable" | "other_workflow"));
    Ok(if held {
        ExitStatus::Held
    } else if refused {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}

/// The `--map OLD=NEW` pairs.
fn renames(map: &[String]) -> Result<Vec<(String, String)>, crate::exit::UsageError> {
    map.iter()
        .map(|m| match m.split_once('=') {
            Some((o, n)) if !o.is_empty() && !n.is_empty() => Ok((o.to_string(), n.to_string())),
            _ => Err(crate::exit::UsageError(format!(
                "--map {m}: expected OLD=NEW (a step of the instance's definition, then its id in the new file)"
            ))),
        })
        .collect()
}

fn from_preview(id: InstanceId, status: &'static str, outcome: Outcome) -> Done {
    let mut d = Done {
        id,
        outcome: "planned",
        status: Some(status),
        holder: None,
        workflow: None,
        plan: None,
    };
    match outcome {
        Outcome::Planned { plan } => {
            if plan.is_refused() {
                d.outcome = "refused";
            }
            d.plan = Some(plan);
        }
        Outcome::NotMovable { holder: Some(h) } => {
            d.outcome = "held";
            d.holder = Some(h);
        }
        Outcome::NotMovable { holder: None } => d.outcome = "not_movable",
        Outcome::OtherWorkflow { workflow } => {
            d.outcome = "other_workflow";
            d.workflow = Some(workflow);
        }
    }
    d
}

fn from_applied(id: InstanceId, applied: Applied) -> Done {
    let mut d = Done {
        id,
        outcome: "upgraded",
        status: None,
        holder: None,
        workflow: None,
        plan: None,
    };
    match applied {
        Applied::Upgraded(plan) => d.plan = Some(plan),
        Applied::Refused(plan) => {
            d.outcome = "refused";
            d.plan = Some(plan);
        }
        Applied::NotMovable { status } => {
            d.outcome = "not_movable";
            d.status = Some(status.as_str());
        }
        Applied::Held { holder } => {
            d.outcome = "held";
            d.holder = Some(holder);
        }
        Applied::OtherWorkflow { workflow } => {
            d.outcome = "other_workflow";
            d.workflow = Some(workflow);
        }
    }
    d
}

/// One instance's plan for people: a line, then a table of its steps and
/// the refusals.
fn say(printer: &Printer, d: &Done, dry_run: bool) {
    let id = d.id.as_str();
    match d.outcome {
        "held" => printer.error(&format!(
            "instance {id} is running in another process ({}): not upgraded",
            d.holder.as_deref().unwrap_or("?")
        )),
        "not_movable" => printer.error(&format!(
            "instance {id} is {}: only an instance that is not running and has not ended is upgraded",
            d.status.unwrap_or("?")
        )),
        "other_workflow" => printer.error(&format!(
            "instance {id} is of workflow `{}`, not of the new file's",
            d.workflow.as_deref().unwrap_or("?")
        )),
        _ => {}
    }
    let Some(plan) = &d.plan else { return };
    let verb = match (d.outcome, dry_run) {
        ("refused", _) => "would not be upgraded",
        (_, true) => "would be upgraded",
        _ => "upgraded",
    };
    printer.data(&format!(
        "instance {id} {verb} from {} to {}",
        crate::vocab::short(&plan.from),
        crate::vocab::short(&plan.to)
    ));
    let mut table = printer.table();
    table.set_header(vec!["STEP", "PLAN", "NOW"]);
    for s in &plan.steps {
        let step = match &s.from {
            Some(from) => format!("{} (was {from})", s.step),
            None => s.step.clone(),
        };
        table.add_row(vec![
            step,
            s.fate.as_str().to_string(),
            s.status.map_or("-", |st| st.as_str()).to_string(),
        ]);
    }
    printer.data(&table.to_string());
    for (name, value) in &plan.inputs_added {
        printer.data(&format!("input `{name}` added: {value}"));
    }
    for r in &plan.refusals {
        printer.error(&format!("instance {id}: {r}"));
    }
}
