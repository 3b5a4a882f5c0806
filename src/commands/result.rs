//! `wf result ID [--wait] [--json]`: the `outputs` of a completed instance.
//! Exit 0 with the outputs; 1 with the error if it failed; 4 if it was
//! canceled; 3 while it is suspended (or running, without `--wait`), so a
//! script can tell "not yet" from "never". `--wait` blocks until it ends.

use crate::exit::ExitStatus;
use crate::printer::Printer;
use crate::store::Store;
use crate::views::ResultView;
use crate::vocab::InstanceStatus;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Instance id (any unique prefix)
    pub id: String,
    /// Block until the instance has ended (completed, failed or canceled)
    #[arg(long)]
    pub wait: bool,
    /// `{id, status, outputs, error}` on stdout
    #[arg(long)]
    pub json: bool,
}

/// How often `--wait` looks at the instance (a read of one row) when
/// nothing wakes it sooner (on PostgreSQL, the end of a run notifies it).
const WAIT_EVERY: Duration = Duration::from_millis(200);

pub async fn run(args: Args, store: &Store, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let id = store.resolve_id(&args.id).await?;
    loop {
        let inst = store.instance(&id).await?;
        let ended = inst.status.is_ended();
        if ended || !args.wait {
            break;
        }
        tokio::select! {
            _ = store.wait_for_work(WAIT_EVERY) => {}
            _ = tokio::signal::ctrl_c() => return Ok(ExitStatus::Interrupted),
        }
    }
    let (inst, outputs) = crate::engine::actions::result(store, &id).await?;
    let view = ResultView::new(&inst, &outputs);
    if args.json {
        printer.json(&view);
    }
    Ok(match inst.status {
        InstanceStatus::Completed => {
            if !args.json {
                printer.json(&outputs);
            }
            ExitStatus::Success
        }
        InstanceStatus::Failed => {
            printer.error(&format!(
                "instance {id} failed: {}",
                inst.error.as_deref().unwrap_or("(no reason recorded)")
            ));
            ExitStatus::Failure
        }
        InstanceStatus::Canceled => {
            printer.info(&format!("instance {id} was canceled; it has no result"));
            ExitStatus::Canceled
        }
        _ => {
            printer.info(&format!(
                "instance {id} is {}; it has no result yet (`wf result {} --wait` waits for it)",
                view.status,
                super::short_id(&id)
            ));
            ExitStatus::Suspended
        }
    })
}
