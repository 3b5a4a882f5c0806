//! `wf inspect ID`: the instance header (workflow, status, inputs, state,
//! runs) and a table of its steps; `--attempts` adds every attempt, `--json`
//! gives the same for scripts in the stable shape of docs/commands.md
//! ([`InstanceView`]).

use crate::exit::ExitStatus;
use crate::printer::Printer;
use crate::store::{self, AttemptRow, Store};
use crate::views::{QueueStanding, ShownStatus};
use crate::vocab::{ErrorType, InstanceStatus, Timestamp};
use crate::workflow::duration::human;
use comfy_table::Cell;
use serde_json::Value;

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
    /// Print the definition it runs (after an upgrade: each one, then what changed, as a diff)
    #[arg(long)]
    pub definitions: bool,
    /// Print two of its runs side by side: what each did of each step (e.g. `--compare 1,2`)
    #[arg(long, value_name = "A,B")]
    pub compare: Option<String>,
}

pub async fn run(args: Args, store: &Store, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let id = store.resolve_id(&args.id).await?;
    let read =
        crate::views::ordered(crate::engine::actions::inspect(store, &id, args.attempts).await?);
    if let Some(pair) = &args.compare {
        return compare(store, &id, pair, args.json, printer).await;
    }
    let texts = match args.definitions {
        true => {
            crate::engine::actions::definitions_of_runs(store, &read.view.instance, &read.view.runs)
                .await?
        }
        false => Vec::new(),
    };
    if args.json {
        let mut view = crate::views::inspect_view(&read, args.attempts);
        if args.definitions {
            view.definitions = crate::views::definition_texts(&texts);
        }
        printer.json(&view);
        return Ok(ExitStatus::Success);
    }
    if args.definitions {
        for d in crate::views::definition_texts(&texts) {
            match &d.diff {
                None => {
                    printer.data(&format!(
                        "# definition {} (from run {})",
                        crate::vocab::short(d.hash),
                        d.from_run
                    ));
                    printer.data(d.source.unwrap_or_default().trim_end());
                }
                Some(diff) => {
                    printer.data("");
                    printer.data(&format!(
                        "# upgraded to {} (from run {}):",
                        crate::vocab::short(d.hash),
                        d.from_run
                    ));
                    printer.data(diff.trim_end());
                }
            }
        }
        return Ok(ExitStatus::Success);
    }
    let standing = read.standing;
    let step_ids = read.step_ids;
    let view = read.view;
    let store::InstanceView {
        instance: inst,
        runs,
        steps,
        attempts,
        events,
        fire,
        children,
        actions,
    } = view;

    let status = ShownStatus::of(&inst).to_string();
    let mut header = vec![
        ("Instance", inst.id.to_string()),
        (
            "Workflow",
            format!(
                "{} ({})",
                inst.workflow,
                crate::vocab::short(&inst.definition_hash)
            ),
        ),
        ("Status", status),
    ];
    let uses = crate::views::definition_uses(&runs, &inst.definition_hash);
    if !uses.is_empty() {
        header.push((
            "Definitions",
            uses.iter()
                .map(|u| format!("{} from run {}", crate::vocab::short(u.hash), u.from_run))
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    if !inst.labels.is_empty() {
        let labels: Vec<String> = inst
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        header.push(("Labels", labels.join(", ")));
    }
    if let Some(q) = &inst.queue {
        let standing = QueueStanding::new(q, standing.as_ref());
        let at = match (&standing.position, &standing.waiting_for) {
            (Some(pos), Some(why)) => format!(", queued at position {pos}: {why}"),
            _ if q.admitted => ", admitted".to_string(),
            _ => String::new(),
        };
        header.push((
            "Queue",
            format!("`{}` (priority {}){at}", q.key, q.priority),
        ));
    }
    if let Some(p) = &inst.parent {
        header.push((
            "Parent",
            format!("{} (step `{}`, attempt {})", p.id, p.key, p.attempt),
        ));
    }
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
        let (events, children) = crate::vocab::split_awaited(event);
        let mut what = Vec::new();
        if !events.is_empty() {
            what.push(format!("event `{}`", events.join(",")));
        }
        what.extend(children.iter().map(|c| format!("child {c}")));
        header.push(("Waiting for", what.join(", ")));
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
    if let Some(by) = &inst.started_by {
        header.push(("Started by", by.to_string()));
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
    let labels = crate::views::unit_labels(&steps);
    let shown = |key: &str| labels.get(key).cloned().unwrap_or_else(|| key.to_string());
    let rows: Vec<Vec<Cell>> = steps
        .iter()
        .map(|s| {
            let status = if crate::views::removed(&step_ids, s) {
                format!("{} (removed)", s.status.as_str())
            } else {
                s.status.as_str().to_string()
            };
            vec![
                Cell::new(shown(&s.key)),
                printer.status_cell(&status),
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
        print_attempts(printer, &attempts, &labels);
    }
    if !actions.is_empty() {
        printer.data("");
        print_actions(printer, &actions);
    }
    if !children.is_empty() {
        printer.data("");
        let mut table = printer.table();
        table.set_header(["CHILD", "STEP", "WORKFLOW", "STATUS", "TOOK"]);
        for c in &children {
            let (step, attempt) = c
                .parent
                .as_ref()
                .map_or(("-".into(), 0), |p| (shown(&p.key), p.attempt));
            let status = ShownStatus::of(c);
            let ended = c.status.is_ended().then_some(c.updated_at);
            table.add_row(vec![
                Cell::new(&c.id[..c.id.len().min(12)]),
                Cell::new(if attempt > 1 {
                    format!("{step} (attempt {attempt})")
                } else {
                    step
                }),
                Cell::new(&c.workflow),
                printer.status_cell(&status.to_string()),
                Cell::new(duration(Some(c.created_at), ended)),
            ]);
        }
        printer.keep_columns(&mut table, None);
        printer.data(&table.to_string());
    }
    if !events.is_empty() {
        printer.data("");
        let mut table = printer.table();
        table.set_header(["EVENT", "RECEIVED", "TAKEN BY"]);
        for e in &events {
            table.add_row(vec![
                Cell::new(&e.name),
                Cell::new(printer.when(e.received_at)),
                Cell::new(e.consumed_by.as_deref().map_or_else(|| "-".into(), shown)),
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
fn print_attempts(
    printer: &Printer,
    attempts: &[AttemptRow],
    labels: &std::collections::HashMap<String, String>,
) {
    let shown = |a: &AttemptRow| {
        labels
            .get(a.step_key.as_str())
            .map_or(a.step_key.as_str(), String::as_str)
            .to_string()
    };
    // A `cached` attempt names the attempt whose result it took.
    let error = |a: &AttemptRow| {
        a.error_type
            .as_ref()
            .map(|t| crate::printer::error_text(&t.text(), a.error_message.as_deref()))
            .or_else(|| {
                a.cached_from.as_ref().map(|f| {
                    format!(
                        "from {}#{}",
                        &f.instance[..f.instance.len().min(12)],
                        f.attempt
                    )
                })
            })
    };
    // The exit code is in the error type (`exit.9`) and in --json.
    let rows: Vec<Vec<Cell>> = attempts
        .iter()
        .map(|a| {
            vec![
                Cell::new(shown(a)),
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
            printer.data(&format!("{} #{}:", shown(a), a.attempt));
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

/// Who did what to the instance: ACTION / BY / AT / DETAIL, oldest first.
/// On a narrow terminal the detail is cut (`--json` has it whole).
fn print_actions(printer: &Printer, actions: &[store::ActionRow]) {
    let rows: Vec<Vec<Cell>> = actions.iter().map(action_cells).collect();
    let (table, _) = printer.fitted(&ACTION_HEADER, rows, Some(1), 16, &[3]);
    printer.data(&table.to_string());
}

/// The columns of a table of actions (`wf inspect`'s, `wf db actions`').
pub(super) const ACTION_HEADER: [&str; 4] = ["ACTION", "BY", "AT", "DETAIL"];

/// An action as a row of [`ACTION_HEADER`]'s columns.
pub(super) fn action_cells(a: &store::ActionRow) -> Vec<Cell> {
    vec![
        Cell::new(a.action.as_str()),
        Cell::new(a.actor.to_string()),
        Cell::new(a.at.to_string()),
        Cell::new(if a.detail.is_empty() { "-" } else { &a.detail }),
    ]
}

/// `--compare A,B`: two runs side by side, a row per step either ran.
async fn compare(
    store: &Store,
    id: &crate::vocab::InstanceId,
    pair: &str,
    json: bool,
    printer: &Printer,
) -> anyhow::Result<ExitStatus> {
    let runs = pair
        .split_once(',')
        .and_then(|(a, b)| Some((a.trim().parse::<i64>().ok()?, b.trim().parse::<i64>().ok()?)));
    let Some((a, b)) = runs else {
        return Err(crate::exit::UsageError(format!(
            "--compare {pair}: expected two run numbers, as in --compare 1,2"
        ))
        .into());
    };
    let view = store.view(id, true).await?;
    let Some(c) = crate::views::compare(&view.runs, &view.attempts, a, b) else {
        let have: Vec<String> = view.runs.iter().map(|r| r.number.to_string()).collect();
        return Err(crate::exit::UsageError(format!(
            "--compare {a},{b}: instance {id} has runs {}",
            if have.is_empty() {
                "none".into()
            } else {
                have.join(", ")
            }
        ))
        .into());
    };
    if json {
        printer.json(&c);
        return Ok(ExitStatus::Success);
    }
    let side = |r: &crate::views::compare::RunSide<'_>| {
        format!(
            "run {} {}{}",
            r.number,
            r.outcome.map_or("running", |o| o.as_str()),
            r.definition_hash
                .map(|h| format!(" ({})", crate::vocab::short(h)))
                .unwrap_or_default()
        )
    };
    printer.data(&format!("{} | {}", side(&c.a), side(&c.b)));
    let cell = |u: &Option<crate::views::UnitInRun<'_>>| match u {
        None => "-".to_string(),
        Some(u) => format!(
            "{} ×{}{}{}",
            u.outcome.map_or("running", |o| o.as_str()),
            u.attempts,
            u.error_type
                .as_deref()
                .map(|e| format!(" {e}"))
                .unwrap_or_default(),
            u.took_ms
                .map(|m| format!(" {}", human(std::time::Duration::from_millis(m as u64))))
                .unwrap_or_default()
        ),
    };
    let mut table = printer.table();
    table.set_header(vec![
        "STEP".to_string(),
        format!("RUN {a}"),
        format!("RUN {b}"),
        String::new(),
    ]);
    for r in &c.steps {
        table.add_row(vec![
            r.step.to_string(),
            cell(&r.a),
            cell(&r.b),
            if r.differs {
                "≠".into()
            } else {
                String::new()
            },
        ]);
    }
    printer.data(&table.to_string());
    Ok(ExitStatus::Success)
}
