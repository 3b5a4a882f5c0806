//! `wf inspect ID`: the instance header (workflow, status, inputs, state,
//! runs) and a table of its steps; `--attempts` adds every attempt, `--json`
//! gives the same for scripts in the stable shape of docs/commands.md.

use super::display_status;
use crate::exit::ExitStatus;
use crate::printer::Printer;
use crate::store::{self, AttemptRow, InstanceRow, StepRow, Store};
use crate::vocab::{ErrorType, InstanceStatus, StepStatus, Timestamp, UnitKey};
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

pub async fn run(args: Args, store: &Store, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let id = store.resolve_id(&args.id).await?;
    // One snapshot: a step's row and the state its commit patched together.
    let store::InstanceView {
        instance: inst,
        runs,
        steps,
        attempts,
        events,
        fire,
    } = store.view(&id, args.attempts).await?;
    // Step order comes from the pinned definition's step list (no YAML parse needed).
    let step_ids = match store.definition_step_ids(&inst.definition_hash).await? {
        Some(ids) => ids,
        None => Workflow::from_pinned(&inst.definition, &inst.workflow_path)
            .map(|wf| wf.steps.into_iter().map(|s| s.id).collect())
            .unwrap_or_default(),
    };
    let steps = ordered_steps(&step_ids, steps);

    if args.json {
        let mut v = to_json(&inst, &runs, &steps, &attempts, args.attempts);
        v["schedule"] = json!(fire);
        v["events"] = events_json(&events);
        printer.json(&v);
        return Ok(ExitStatus::Success);
    }

    let status = display_status(&inst);
    let mut header = vec![
        ("Instance", inst.id.to_string()),
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
    if let Some(f) = &fire {
        let spec = match &f.timezone {
            Some(tz) => format!("{} ({tz})", f.spec),
            None => f.spec.clone(),
        };
        header.push((
            "Schedule",
            format!(
                "{}: {spec}, fire time {}",
                crate::engine::fire::entry_name(&f.workflow, f.index),
                f.fire_at
            ),
        ));
    }
    if let Some(wake) = &inst.wake_at
        && inst.status == InstanceStatus::Sleeping
    {
        header.push(("Wakes at", wake.to_string()));
    }
    if let Some(event) = &inst.waiting_event
        && inst.status == InstanceStatus::Waiting
    {
        header.push(("Waiting for", format!("event `{event}`")));
        if let Some(wake) = &inst.wake_at {
            header.push(("Times out at", wake.to_string()));
        }
    }
    if let Some(err) = &inst.error {
        // One line on a terminal (the whole text is in --json); whole when
        // piped.
        header.push((
            "Error",
            match printer.width() {
                Some(w) => super::cut(err, w.saturating_sub(HEADER_WIDTH).max(20)),
                None => super::cut(err, usize::MAX),
            },
        ));
    }
    header.push(("Inputs", compact(&inst.inputs)));
    header.push(("State", compact(&inst.state)));
    header.push(("Created", inst.created_at.to_string()));
    header.push((
        "Runs",
        runs.iter()
            .map(|r| {
                format!(
                    "#{} {}{}",
                    r.number,
                    r.outcome.map_or("running", |o| o.as_str()),
                    r.restart_from
                        .as_deref()
                        .map(|s| format!(" (restart from {s})"))
                        .unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join(", "),
    ));
    for (k, v) in header {
        printer.data(&format!("{:<HEADER_WIDTH$}{v}", format!("{k}:")));
    }
    printer.data("");

    // The last outcome is in STATUS and ERROR (and every one in --attempts).
    // On a narrow terminal, a long step name leaves out TOOK, then TRIES.
    let rows: Vec<Vec<Cell>> = steps
        .iter()
        .map(|s| {
            vec![
                Cell::new(&s.key),
                printer.status_cell(s.status.as_str()),
                Cell::new(s.attempts),
                Cell::new(s.error_type.as_ref().map_or("-".into(), ErrorType::text)),
                Cell::new(duration(s.started_at, s.finished_at)),
            ]
        })
        .collect();
    let (table, _) = printer.fitted(
        &["STEP", "STATUS", "TRIES", "ERROR", "TOOK"],
        rows,
        Some(3),
        12,
        &[4, 2],
    );
    printer.data(&table.to_string());

    if args.attempts {
        printer.data("");
        print_attempts(printer, &attempts);
    }
    if !events.is_empty() {
        printer.data("");
        let mut table = printer.table();
        table.set_header(["EVENT", "RECEIVED", "TAKEN BY"]);
        for e in &events {
            table.add_row(vec![
                Cell::new(&e.name),
                Cell::new(printer.when(e.received_at)),
                Cell::new(e.consumed_by.as_deref().unwrap_or("-")),
            ]);
        }
        printer.keep_columns(&mut table, None);
        printer.data(&table.to_string());
    }
    Ok(ExitStatus::Success)
}

/// Width of the header's labels (`Times out at:` and a space).
const HEADER_WIDTH: usize = 14;

/// The narrowest the attempts table's error column may be before other
/// columns make room or the errors move below the table.
const MIN_ERROR_WIDTH: usize = 16;

/// Every attempt, one row each. The error column takes what the other
/// columns leave of the terminal; when that is too narrow (long step names
/// on 80 columns), RUN and STARTED are left out, then the errors move under
/// the table (one letter per line helps nobody).
fn print_attempts(printer: &Printer, attempts: &[AttemptRow]) {
    let error = |a: &AttemptRow| {
        a.error_type
            .as_ref()
            .map(|t| crate::printer::error_text(&t.text(), a.error_message.as_deref()))
    };
    // The exit code is in the error type (`exit.9`) and in --json.
    let rows: Vec<Vec<Cell>> = attempts
        .iter()
        .map(|a| {
            vec![
                Cell::new(&a.step_key),
                Cell::new(a.attempt),
                Cell::new(a.run),
                printer.status_cell(a.outcome.map_or("running", |o| o.as_str())),
                Cell::new(error(a).map_or_else(|| "-".into(), |e| super::cut(&e, 60))),
                Cell::new(printer.when(a.started_at)),
                Cell::new(duration(Some(a.started_at), a.finished_at)),
            ]
        })
        .collect();
    let (table, kept) = printer.fitted(
        &["STEP", "TRY", "RUN", "OUTCOME", "ERROR", "STARTED", "TOOK"],
        rows,
        Some(4),
        MIN_ERROR_WIDTH,
        &[2, 5, 4, 6],
    );
    printer.data(&table.to_string());
    if kept[4] {
        return;
    }
    // Whole, word-wrapped under the attempt it belongs to.
    let width = printer.width().unwrap_or(usize::MAX);
    for a in attempts {
        if let Some(e) = error(a) {
            printer.data(&format!("{} #{}:", a.step_key, a.attempt));
            for line in wrap(&e, width.saturating_sub(2).max(MIN_ERROR_WIDTH)) {
                printer.data(&format!("  {line}"));
            }
        }
    }
}

/// `text` in lines of at most `width` characters, broken between words
/// (a word longer than that has a line of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// Delivered events for `--json`: name, payload, when, which step took it.
fn events_json(events: &[store::DeliveredEvent]) -> Value {
    events
        .iter()
        .map(|e| {
            json!({
                "name": e.name,
                "data": serde_json::from_str::<Value>(&e.payload).unwrap_or(Value::Null),
                "received_at": e.received_at,
                "consumed_by": e.consumed_by,
            })
        })
        .collect()
}

/// Steps in definition order (pending ones included), then any rows the
/// definition no longer names. Rows a restart (or a `--retry-failed` that
/// ran compensated steps again) left as placeholders are not shown: the
/// compensation of a step run again, until it is needed again, and the
/// items of a `for_each` list that shrank. They only carry attempt numbers
/// (their attempts stay in `--attempts`).
fn ordered_steps(step_ids: &[String], rows: Vec<StepRow>) -> Vec<StepRow> {
    let lists: std::collections::HashMap<String, usize> = rows
        .iter()
        .filter(|r| r.key == r.step_id)
        .filter_map(|r| Some((r.key.clone(), r.items.as_array()?.len())))
        .collect();
    let rows = rows.into_iter().filter(|r| {
        let key = UnitKey::parse(&r.key);
        let placeholder_compensation = key.compensation && r.status == StepStatus::Pending;
        let dropped_item = !key.compensation
            && key
                .item
                .is_some_and(|i| lists.get(&r.step_id).is_some_and(|&len| i >= len));
        !placeholder_compensation && !dropped_item
    });
    // Rows by the step they belong to: the step itself, its for_each items, its compensations.
    let mut by_step: std::collections::HashMap<String, Vec<StepRow>> =
        std::collections::HashMap::new();
    for r in rows {
        by_step.entry(r.step_id.clone()).or_default().push(r);
    }
    let mut out = Vec::new();
    let mut rest = Vec::new();
    for id in step_ids {
        let group = by_step.remove(id).unwrap_or_default();
        // The step's own row first, then its items in order.
        let (mut own, others): (Vec<StepRow>, Vec<StepRow>) = group
            .into_iter()
            .partition(|r| !UnitKey::parse(&r.key).compensation);
        own.sort_by_key(|r| {
            UnitKey::parse(&r.key)
                .item
                .map_or(0, |i| i.saturating_add(1))
        });
        if own.first().is_none_or(|r| r.key != *id) {
            out.push(StepRow::pending(id, id));
        }
        out.extend(own);
        rest.extend(others);
    }
    // Compensations (in the order they ran: the reverse of their steps'),
    // and rows of steps the definition no longer names; those not started
    // last.
    rest.extend(by_step.into_values().flatten());
    rest.sort_by(|a, b| {
        (a.started_at.is_none(), &a.started_at, &a.key).cmp(&(
            b.started_at.is_none(),
            &b.started_at,
            &b.key,
        ))
    });
    out.extend(rest);
    out
}

fn compact(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 200 {
        format!("{}…", s.chars().take(200).collect::<String>())
    } else {
        s
    }
}

fn duration(start: Option<Timestamp>, end: Option<Timestamp>) -> String {
    match (start, end) {
        (Some(s), Some(e)) => human(e.since(s)),
        (Some(s), None) => format!("{}…", human(Timestamp::now().since(s))),
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
    let mut by_key: std::collections::HashMap<&str, Vec<&AttemptRow>> =
        std::collections::HashMap::new();
    for a in attempts {
        by_key.entry(a.step_key.as_str()).or_default().push(a);
    }
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
                && matches!(
                    s.status,
                    StepStatus::Retrying | StepStatus::Sleeping | StepStatus::Waiting
                )
            {
                v["wake_at"] = json!(s.retry_at);
            }
            if with_attempts {
                v["attempt_list"] = by_key
                    .get(s.key.as_str())
                    .into_iter()
                    .flatten()
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
            "restart_from": r.restart_from,
        })).collect::<Vec<_>>(),
        "steps": steps,
    })
}
