//! `wf inspect ID`: the instance header (workflow, status, inputs, state,
//! runs) and a table of its steps; `--attempts` adds every attempt, `--json`
//! gives the same for scripts in the stable shape of SPEC §4.

use super::display_status;
use crate::exit::ExitStatus;
use crate::printer::Printer;
use crate::store::{self, AttemptRow, InstanceRow, StepRow, Store};
use crate::workflow::{Workflow, duration::human};
use comfy_table::Cell;
use serde_json::{Value, json};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Instance id (any unique prefix)
    pub id: String,
    /// JSON on stdout
    #[arg(long)]
    pub json: bool,
    /// List every attempt of every step
    #[arg(long)]
    pub attempts: bool,
}

pub fn run(args: Args, store: &Store, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let id = store.resolve_id(&args.id)?;
    let c = store.conn();
    let inst = store::instance(c, &id)?;
    let runs = store::runs(c, &id)?;
    let steps = ordered_steps(&inst, store::steps(c, &id)?);
    let attempts = store::attempts(c, &id)?;

    if args.json {
        printer.json(&to_json(&inst, &runs, &steps, &attempts, args.attempts));
        return Ok(ExitStatus::Success);
    }

    let status = display_status(&inst);
    let mut header = vec![
        ("Instance", inst.id.clone()),
        (
            "Workflow",
            format!(
                "{} ({})",
                inst.workflow,
                &inst.definition_hash[..inst.definition_hash.len().min(12)]
            ),
        ),
        ("Status", status),
    ];
    if let Some(wake) = &inst.wake_at
        && inst.status == "sleeping"
    {
        header.push(("Wakes at", wake.clone()));
    }
    if let Some(event) = &inst.waiting_event
        && inst.status == "waiting"
    {
        header.push(("Waiting for", format!("event `{event}`")));
        if let Some(wake) = &inst.wake_at {
            header.push(("Times out at", wake.clone()));
        }
    }
    if let Some(err) = &inst.error {
        header.push(("Error", err.clone()));
    }
    header.push(("Inputs", compact(&inst.inputs)));
    header.push(("State", compact(&inst.state)));
    header.push(("Created", inst.created_at.clone()));
    header.push((
        "Runs",
        runs.iter()
            .map(|r| {
                format!(
                    "#{} {}",
                    r.number,
                    r.outcome.as_deref().unwrap_or("running")
                )
            })
            .collect::<Vec<_>>()
            .join(", "),
    ));
    for (k, v) in header {
        printer.data(&format!("{:<13}{v}", format!("{k}:")));
    }
    printer.data("");

    let mut table = printer.table();
    table.set_header(["STEP", "STATUS", "ATTEMPTS", "OUTCOME", "ERROR", "DURATION"]);
    for s in &steps {
        table.add_row(vec![
            Cell::new(&s.key),
            Cell::new(&s.status),
            Cell::new(s.attempts),
            Cell::new(s.outcome.as_deref().unwrap_or("-")),
            Cell::new(s.error_type.as_deref().unwrap_or("-")),
            Cell::new(duration(s.started_at.as_deref(), s.finished_at.as_deref())),
        ]);
    }
    printer.data(&table.to_string());

    if args.attempts {
        printer.data("");
        let mut table = printer.table();
        table.set_header([
            "STEP", "ATTEMPT", "RUN", "OUTCOME", "ERROR", "EXIT", "STARTED", "DURATION",
        ]);
        for a in &attempts {
            table.add_row(vec![
                Cell::new(&a.step_key),
                Cell::new(a.attempt),
                Cell::new(a.run),
                Cell::new(a.outcome.as_deref().unwrap_or("running")),
                Cell::new(match (&a.error_type, &a.error_message) {
                    (Some(t), Some(m)) => format!("{t}: {m}"),
                    (Some(t), None) => t.clone(),
                    _ => "-".into(),
                }),
                Cell::new(
                    a.exit_code
                        .map(|c| c.to_string())
                        .unwrap_or_else(|| "-".into()),
                ),
                Cell::new(&a.started_at),
                Cell::new(duration(Some(&a.started_at), a.finished_at.as_deref())),
            ]);
        }
        printer.data(&table.to_string());
    }
    Ok(ExitStatus::Success)
}

/// Steps in definition order (pending ones included), then any rows the
/// definition no longer names.
fn ordered_steps(inst: &InstanceRow, rows: Vec<StepRow>) -> Vec<StepRow> {
    let mut rows: std::collections::HashMap<String, StepRow> =
        rows.into_iter().map(|r| (r.key.clone(), r)).collect();
    let mut out = Vec::new();
    if let Ok(wf) = Workflow::from_pinned(&inst.definition, &inst.workflow_path) {
        for step in &wf.steps {
            let row = rows
                .remove(&step.id)
                .unwrap_or_else(|| StepRow::pending(&step.id, &step.id));
            out.push(row);
            let mut items: Vec<StepRow> = Vec::new();
            let prefix = format!("{}[", step.id);
            let keys: Vec<String> = rows
                .keys()
                .filter(|k| k.starts_with(&prefix))
                .cloned()
                .collect();
            for k in keys {
                if let Some(r) = rows.remove(&k) {
                    items.push(r);
                }
            }
            items.sort_by_key(|r| item_index(&r.key));
            out.extend(items);
        }
    }
    let mut rest: Vec<StepRow> = rows.into_values().collect();
    rest.sort_by(|a, b| a.key.cmp(&b.key));
    out.extend(rest);
    out
}

fn item_index(key: &str) -> usize {
    key.rsplit_once('[')
        .and_then(|(_, n)| n.trim_end_matches(']').parse().ok())
        .unwrap_or(usize::MAX)
}

fn compact(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 200 {
        format!("{}…", s.chars().take(200).collect::<String>())
    } else {
        s
    }
}

fn duration(start: Option<&str>, end: Option<&str>) -> String {
    match (
        start.and_then(store::parse_time),
        end.and_then(store::parse_time),
    ) {
        (Some(s), Some(e)) => human((e - s).to_std().unwrap_or_default()),
        (Some(s), None) => format!(
            "{}…",
            human((chrono::Utc::now() - s).to_std().unwrap_or_default())
        ),
        _ => "-".into(),
    }
}

fn to_json(
    inst: &InstanceRow,
    runs: &[store::RunRow],
    steps: &[StepRow],
    attempts: &[AttemptRow],
    with_attempts: bool,
) -> Value {
    let steps: Vec<Value> = steps
        .iter()
        .map(|s| {
            let mut v = json!({
                "id": s.key,
                "status": s.status,
                "attempts": s.attempts,
                "outcome": s.outcome,
                "error_type": s.error_type,
                "error_message": s.error_message,
                "started_at": s.started_at,
                "finished_at": s.finished_at,
                "output": s.output,
            });
            if s.retry_at.is_some()
                && matches!(s.status.as_str(), "retrying" | "sleeping" | "waiting")
            {
                v["wake_at"] = json!(s.retry_at);
            }
            if with_attempts {
                v["attempt_list"] = attempts
                    .iter()
                    .filter(|a| a.step_key == s.key)
                    .map(|a| {
                        json!({
                            "attempt": a.attempt,
                            "run": a.run,
                            "outcome": a.outcome,
                            "error_type": a.error_type,
                            "error_message": a.error_message,
                            "exit_code": a.exit_code,
                            "started_at": a.started_at,
                            "finished_at": a.finished_at,
                        })
                    })
                    .collect();
            }
            v
        })
        .collect();
    json!({
        "id": inst.id,
        "workflow": inst.workflow,
        "status": display_status(inst),
        "inputs": inst.inputs,
        "state": inst.state,
        "definition_hash": inst.definition_hash,
        "error": inst.error,
        "wake_at": inst.wake_at,
        "waiting_event": inst.waiting_event,
        "created_at": inst.created_at,
        "updated_at": inst.updated_at,
        "runs": runs.iter().map(|r| json!({
            "number": r.number,
            "outcome": r.outcome,
            "started_at": r.started_at,
            "finished_at": r.finished_at,
        })).collect::<Vec<_>>(),
        "steps": steps,
    })
}
