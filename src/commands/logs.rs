//! `wf logs ID [STEP] [--attempt N]`: the captured stdout and stderr of a
//! step attempt (the last one by default), or of every attempt when no step
//! is named.

use crate::exit::{ExitStatus, UsageError};
use crate::printer::Printer;
use crate::store::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Instance id (any unique prefix)
    pub id: String,
    /// Step id (or `id[n]` for a for_each item); all steps when omitted
    pub step: Option<String>,
    /// Attempt number (default: the last)
    #[arg(long)]
    pub attempt: Option<i64>,
    /// `{id, logs: [{step, attempt, outcome, stdout, stderr}]}` on stdout
    #[arg(long)]
    pub json: bool,
}

/// One attempt's logs as JSON (text decoded as UTF-8, invalid bytes replaced).
fn log_json(
    step: &str,
    attempt: i64,
    outcome: Option<&str>,
    stdout: &[u8],
    stderr: &[u8],
) -> serde_json::Value {
    serde_json::json!({
        "step": step,
        "attempt": attempt,
        "outcome": outcome,
        "stdout": String::from_utf8_lossy(stdout),
        "stderr": String::from_utf8_lossy(stderr),
    })
}

pub fn run(args: Args, store: &Store, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let id = store.resolve_id(&args.id)?;
    match &args.step {
        Some(step) => {
            let Some((_, stdout, stderr)) = store.attempt_logs(&id, step, args.attempt)? else {
                let known: Vec<String> = store.steps(&id)?.into_iter().map(|s| s.key).collect();
                return Err(UsageError(match args.attempt {
                    Some(n) => format!("step `{step}` of instance {id} has no attempt {n}"),
                    None if known.contains(step) => {
                        format!("step `{step}` of instance {id} has no attempts")
                    }
                    None => format!(
                        "instance {id} has no step `{step}` (steps: {})",
                        known.join(", ")
                    ),
                })
                .into());
            };
            if args.json {
                let (n, _, _) = store.attempt_logs(&id, step, args.attempt)?.unwrap_or((
                    0,
                    Vec::new(),
                    Vec::new(),
                ));
                let outcome = store
                    .attempts(&id)?
                    .into_iter()
                    .find(|a| a.step_key == *step && a.attempt == n)
                    .and_then(|a| a.outcome);
                printer.json(&serde_json::json!({
                    "id": id,
                    "logs": [log_json(step, n, outcome.as_deref(), &stdout, &stderr)],
                }));
                return Ok(ExitStatus::Success);
            }
            printer.raw(&stdout);
            if !stderr.is_empty() {
                eprint!("{}", String::from_utf8_lossy(&stderr));
            }
        }
        None => {
            if args.attempt.is_some() {
                return Err(UsageError("--attempt needs a STEP".into()).into());
            }
            let mut all = Vec::new();
            for a in store.attempts(&id)? {
                let Some((_, stdout, stderr)) =
                    store.attempt_logs(&id, &a.step_key, Some(a.attempt))?
                else {
                    continue;
                };
                if args.json {
                    all.push(log_json(
                        &a.step_key,
                        a.attempt,
                        a.outcome.as_deref(),
                        &stdout,
                        &stderr,
                    ));
                    continue;
                }
                printer.data(&format!(
                    "==> {} (attempt {}, {}) <==",
                    a.step_key,
                    a.attempt,
                    a.outcome.as_deref().unwrap_or("running")
                ));
                printer.raw(&stdout);
                if !stderr.is_empty() {
                    printer.data("--- stderr ---");
                    printer.raw(&stderr);
                }
            }
            if args.json {
                printer.json(&serde_json::json!({ "id": id, "logs": all }));
            }
        }
    }
    Ok(ExitStatus::Success)
}
