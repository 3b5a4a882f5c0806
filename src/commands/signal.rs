//! `wf signal ID EVENT [--data JSON]`: store an event durably for an instance.
//! An event sent before the instance reaches its `wait_for_event` step is kept
//! and used when it gets there.

use crate::engine;
use crate::exit::{ExitStatus, UsageError};
use crate::printer::Printer;
use crate::store::Store;
use crate::views::SignalView;
use serde_json::Value;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Instance id (any unique prefix)
    pub id: String,
    /// Event name
    pub event: String,
    /// JSON payload (becomes the waiting step's output)
    #[arg(long, value_name = "JSON")]
    pub data: Option<String>,
    /// `{id, event, delivered}` on stdout
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: Args, store: &mut Store, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let payload: Value = match &args.data {
        None => Value::Null,
        Some(text) => serde_json::from_str(text)
            .map_err(|e| UsageError(format!("--data is not valid JSON: {e}")))?,
    };
    let id = store.resolve_id(&args.id).await?;
    let traceparent = super::traceparent();
    let delivered = engine::actions::signal(
        store,
        &id,
        &args.event,
        payload,
        traceparent.as_deref(),
        &crate::vocab::Actor::cli(),
    )
    .await?;
    if let Some(w) = &delivered.warning {
        printer.warn(w);
    }
    if args.json {
        printer.json(&SignalView::delivered(&id, &args.event));
    }
    printer.info(&format!(
        "event `{}` delivered to instance {id}",
        args.event
    ));
    Ok(ExitStatus::Success)
}
