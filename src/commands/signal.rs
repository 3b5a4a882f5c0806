//! `wf signal ID EVENT [--data JSON]`: store an event durably for an instance.
//! An event sent before the instance reaches its `wait_for_event` step is kept
//! and used when it gets there.

use crate::engine::{self, redact::Redactor};
use crate::exit::{ExitStatus, UsageError};
use crate::printer::Printer;
use crate::store::Store;
use crate::views::SignalView;
use crate::vocab::InstanceStatus;
use crate::workflow::Action;
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
    if args.event.trim().is_empty() {
        return Err(UsageError("event name is empty".into()).into());
    }
    if args.event.starts_with(crate::vocab::CHILD_EVENT_PREFIX) {
        return Err(UsageError(format!(
            "event names that start with `{}` are the ends of child instances, which wf delivers itself",
            crate::vocab::CHILD_EVENT_PREFIX
        ))
        .into());
    }
    let payload: Value = match &args.data {
        None => Value::Null,
        Some(text) => serde_json::from_str(text)
            .map_err(|e| UsageError(format!("--data is not valid JSON: {e}")))?,
    };
    let id = store.resolve_id(&args.id).await?;
    let inst = store.instance(&id).await?;
    if inst.status.is_ended() {
        return Err(UsageError(format!(
            "instance {id} is {}; it takes no more events",
            inst.status
        ))
        .into());
    }
    let traceparent = super::traceparent();
    // The workflow's secrets, as far as this process knows their values, are
    // masked in the payload like in everything else wf writes.
    let mut payload = payload;
    if let Ok(wf) = engine::drive::pinned_workflow(store, &inst).await {
        Redactor::for_secrets(&wf.secrets).value(&mut payload);
        // Names match exactly: a misspelt one would wait in the store for
        // ever. It is kept (a restart or a later step may want it), but said.
        let mut waits: Vec<&str> = wf
            .steps
            .iter()
            .filter_map(|s| match &s.action {
                Action::WaitForEvent { name, .. } => Some(name.as_str()),
                _ => None,
            })
            .collect();
        let mut seen = std::collections::HashSet::new();
        waits.retain(|n| seen.insert(*n));
        if !waits.contains(&args.event.as_str()) {
            printer.warn(&match waits.as_slice() {
                [] => format!(
                    "workflow {} never waits for an event; `{}` is stored but no step will take it",
                    wf.name, args.event
                ),
                names => format!(
                    "workflow {} never waits for `{}` (it waits for {}); the event is stored",
                    wf.name,
                    args.event,
                    names
                        .iter()
                        .map(|n| format!("`{n}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
    }
    // A waiting instance becomes due at once for `wf worker`.
    let wakes = inst.status == InstanceStatus::Waiting
        && inst
            .waiting_event
            .as_deref()
            .is_some_and(|e| e.split(',').any(|n| n == args.event));
    store
        .deliver_event(&id, &args.event, &payload, traceparent.as_deref(), wakes)
        .await?;
    if args.json {
        printer.json(&SignalView::delivered(&id, &args.event));
    }
    printer.info(&format!(
        "event `{}` delivered to instance {id}",
        args.event
    ));
    Ok(ExitStatus::Success)
}
