//! `wf logs ID [STEP] [--attempt N]`: the captured stdout and stderr of a
//! step attempt (the last one by default), or of every attempt when no step
//! is named.

use crate::engine;
use crate::exit::{ExitStatus, UsageError};
use crate::printer::Printer;
use crate::store::Store;
use crate::views::{LogView, LogsView};
use crate::vocab::{AttemptOutcome, InstanceId};

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
    /// Stream the attempt's output while it runs (waiting for it to start),
    /// until it ends
    #[arg(long, short, requires = "step", conflicts_with = "json")]
    pub follow: bool,
}

/// How often `--follow` looks for more output.
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// `--follow`: prints the attempt's output as its live copy grows, then,
/// once the attempt has an outcome, whatever the copy had not shown yet from
/// the stored logs (the same masked text).
async fn follow(
    store: &Store,
    id: &InstanceId,
    step: &str,
    attempt: Option<i64>,
    printer: &Printer,
) -> anyhow::Result<ExitStatus> {
    use engine::logs::Look;
    use std::io::Write as _;
    engine::logs::check_step(store, id, step).await?;
    let mut printed = [0usize; 2];
    let mut current: Option<i64> = None;
    loop {
        let look = engine::logs::look(store, id, step, attempt).await?;
        let n = match &look {
            // Not started yet: wait for it, unless the instance is over.
            Look::None(true) => {
                return Err(
                    UsageError(format!("step `{step}` of instance {id} has no attempts")).into(),
                );
            }
            Look::None(false) => {
                std::thread::sleep(FOLLOW_EVERY);
                continue;
            }
            Look::Running(n) | Look::Ended(n, ..) => *n,
        };
        if current != Some(n) {
            current = Some(n);
            printed = [0, 0];
        }
        if let Look::Ended(_, _, stdout, stderr) = look {
            printer.raw(stdout.get(printed[0]..).unwrap_or_default());
            let _ = std::io::stderr().write_all(stderr.get(printed[1]..).unwrap_or_default());
            return Ok(ExitStatus::Success);
        }
        let live = store.live_dir();
        for (i, ext) in ["out", "err"].into_iter().enumerate() {
            if let Some(more) = engine::logs::live_since(&live, id, step, n, ext, printed[i]) {
                printed[i] += more.len();
                if i == 0 {
                    printer.raw(&more);
                } else {
                    let _ = std::io::stderr().write_all(&more);
                }
            }
        }
        std::thread::sleep(FOLLOW_EVERY);
    }
}

/// Captured text as the multi-step listing shows it: ending with a newline
/// when it has any text at all.
fn with_newline(mut text: Vec<u8>) -> Vec<u8> {
    if text.last().is_some_and(|&b| b != b'\n') {
        text.push(b'\n');
    }
    text
}

pub async fn run(args: Args, store: &Store, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let id = store.resolve_id(&args.id).await?;
    // A matrix combination may be named by its values.
    let step = match &args.step {
        Some(s) => Some(engine::logs::unit_key(store, &id, s).await?),
        None => None,
    };
    if let (true, Some(step)) = (args.follow, &step) {
        return follow(store, &id, step, args.attempt, printer).await;
    }
    // What is printed was all true at one moment; it is read first and
    // printed after, so that no pager holds the read open.
    let logs = engine::logs::read(store, &id, step.as_deref(), args.attempt).await?;
    if args.json {
        printer.json(&LogsView {
            id: &id,
            logs: logs
                .iter()
                .map(|l| LogView::new(&l.key, l.attempt, l.outcome, &l.stdout, &l.stderr))
                .collect(),
        });
        return Ok(ExitStatus::Success);
    }
    if args.step.is_some() {
        // One attempt: its streams as they were, stderr to stderr.
        for l in logs {
            printer.raw(&l.stdout);
            if !l.stderr.is_empty() {
                eprint!("{}", String::from_utf8_lossy(&l.stderr));
            }
            if l.stdout.is_empty()
                && l.stderr.is_empty()
                && l.outcome == Some(AttemptOutcome::Crashed)
            {
                printer.info(&format!(
                    "attempt {} of step `{}` crashed (its runner died): it captured nothing",
                    l.attempt, l.key
                ));
            }
        }
        return Ok(ExitStatus::Success);
    }
    for l in logs {
        printer.data(&format!(
            "==> {} (attempt {}, {}) <==",
            l.key,
            l.attempt,
            l.outcome.map_or("running", AttemptOutcome::as_str)
        ));
        // Each output ends its line, so the next header starts one.
        printer.raw(&with_newline(l.stdout));
        if !l.stderr.is_empty() {
            printer.data("--- stderr ---");
            printer.raw(&with_newline(l.stderr));
        }
    }
    Ok(ExitStatus::Success)
}
