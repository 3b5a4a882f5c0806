//! `wf upgrade ID… --to FILE` and `wf upgrade --workflow NAME --to FILE`:
//! moves instances that are not running onto a new definition of their
//! workflow (SPEC §3 Upgrades), printing each one's plan; `--dry-run`
//! prints the plans and writes nothing. The engine decides
//! (`engine::upgrade`); this renders.

use crate::engine::upgrade::{self, Done, Overall, Request, Target, Targets, Verdict};
use crate::exit::ExitStatus;
use crate::printer::Printer;
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
    /// The new definition [default: the one registered under the workflow's name (`wf workflow add`)]
    #[arg(long, value_name = "FILE")]
    pub to: Option<PathBuf>,
    /// A step renamed: OLD in the instance's definition is NEW in FILE (repeatable)
    #[arg(long = "map", value_name = "OLD=NEW")]
    pub map: Vec<String>,
    /// Run a new step that comes before a completed one at the next resume, instead of refusing
    #[arg(long)]
    pub allow_gaps: bool,
    /// Upgrade their children too, onto the definitions the new one calls (they keep theirs otherwise)
    #[arg(long)]
    pub children: bool,
    /// Print the plans; write nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Print the plans as JSON on stdout
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: Args, db: Option<PathBuf>, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let renames = renames(&args.map)?;
    let file = match &args.to {
        Some(path) => {
            let wf = Workflow::load(path)?;
            let (workflow_path, base_dir) = crate::workflow::origin(path);
            Some(Target {
                wf: std::sync::Arc::new(wf),
                workflow_path,
                base_dir: base_dir.display().to_string(),
            })
        }
        None => None,
    };
    let mut store = super::open_existing(db).await?;
    let mut ids = Vec::with_capacity(args.ids.len());
    for prefix in &args.ids {
        ids.push(store.resolve_id(prefix).await?);
    }
    let to = match file {
        Some(t) => t,
        None => {
            // The registered definition of the workflow named, or of the
            // first instance's.
            let name = match (&args.workflow, ids.first()) {
                (Some(name), _) => name.clone(),
                (None, Some(id)) => store.instance(id).await?.workflow,
                (None, None) => {
                    return Err(crate::exit::UsageError(
                        "name the instances, or --workflow NAME".into(),
                    )
                    .into());
                }
            };
            upgrade::registered_target(&store, &name).await?
        }
    };
    let targets = match &args.workflow {
        Some(name) => Targets::Workflow(name),
        None => Targets::Ids(&ids),
    };
    let out = upgrade::upgrade(
        &mut store,
        &Request {
            targets,
            to: &to,
            renames: &renames,
            allow_gaps: args.allow_gaps,
            children: args.children,
            dry_run: args.dry_run,
            actor: &crate::vocab::Actor::cli(),
        },
    )
    .await?;
    if args.json {
        printer.json(&out);
    } else {
        for d in &out {
            say(printer, d, args.dry_run);
        }
    }
    Ok(match upgrade::overall(&out) {
        Overall::Held => ExitStatus::Held,
        Overall::Refused => ExitStatus::Failure,
        Overall::Moved => ExitStatus::Success,
    })
}

/// The `--map OLD=NEW` pairs.
fn renames(map: &[String]) -> Result<Vec<(String, String)>, crate::exit::UsageError> {
    map.iter()
        .map(|m| {
            upgrade::plan::parse_rename(m).ok_or_else(|| {
                crate::exit::UsageError(format!(
                    "--map {m}: expected OLD=NEW (a step of the instance's definition, then its id in the new file)"
                ))
            })
        })
        .collect()
}

/// One instance's plan for people: a line, then a table of its steps and
/// the refusals.
fn say(printer: &Printer, d: &Done, dry_run: bool) {
    let id = match &d.parent {
        Some(p) => format!("{} (a child of {p})", d.id),
        None => d.id.to_string(),
    };
    // A refused plan's reasons follow its table, one line each.
    if d.outcome != Verdict::Refused
        && let Some(why) = d.why_not()
    {
        printer.error(&why);
    }
    if d.outcome == Verdict::Current {
        printer.data(&format!("instance {id} is on the new definition already"));
    }
    let Some(plan) = &d.plan else { return };
    let verb = match (d.outcome, dry_run) {
        (Verdict::Refused, _) => "would not be upgraded",
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
    if let Some(q) = &plan.queue {
        printer.data(&format!("queue: {}", q.words()));
    }
    for r in &plan.refusals {
        printer.error(&format!("instance {id}: {r}"));
    }
}
