//! `wf signal ID EVENT [--data JSON]`: store an event durably for an instance.
//! An event sent before the instance reaches its `wait_for_event` step is kept
//! and used when it gets there.

use crate::exit::{ExitStatus, UsageError};
use crate::printer::Printer;
use crate::store::{self, Store};
use rusqlite::params;
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
}

pub fn run(args: Args, store: &mut Store, printer: &Printer) -> anyhow::Result<ExitStatus> {
    if args.event.trim().is_empty() {
        return Err(UsageError("event name is empty".into()).into());
    }
    let payload: Value = match &args.data {
        None => Value::Null,
        Some(text) => serde_json::from_str(text)
            .map_err(|e| UsageError(format!("--data is not valid JSON: {e}")))?,
    };
    let id = store.resolve_id(&args.id)?;
    let inst = store::instance(store.conn(), &id)?;
    if matches!(inst.status.as_str(), "completed" | "failed" | "canceled") {
        return Err(UsageError(format!(
            "instance {id} is {}; it takes no more events",
            inst.status
        ))
        .into());
    }
    let traceparent = super::traceparent();
    let tx = store.write()?;
    tx.execute(
        "INSERT INTO events (instance_id, name, payload, traceparent, received_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![id, args.event, payload.to_string(), traceparent, store::now()],
    )?;
    // A waiting instance becomes due at once for `wf worker`.
    if inst.status == "waiting"
        && inst
            .waiting_event
            .as_deref()
            .is_some_and(|e| e.split(',').any(|n| n == args.event))
    {
        tx.execute(
            "UPDATE instances SET wake_at=?2 WHERE id=?1",
            params![id, store::now()],
        )?;
    }
    tx.commit()?;
    printer.info(&format!(
        "event `{}` delivered to instance {id}",
        args.event
    ));
    Ok(ExitStatus::Success)
}
