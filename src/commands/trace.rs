//! `wf trace [ID] [--format tree|otlp|json] [--all]`: the trace of each run of
//! an instance (the latest one by default, every one with `--all`), read from
//! the spans stored with the results they describe.
//!
//! - `tree`: per run, the root span and the spans beneath it (docs/traces.md).
//! - `json`: an array of runs ([`TraceRunView`]), each `{instance_id,
//!   workflow, run, outcome, trace_id, span_id, parent_span_id, started_at,
//!   finished_at, duration_ms, spans}` where each span is `{trace_id,
//!   span_id, parent_span_id, name, kind, start_ns, end_ns, start_time,
//!   end_time, duration_ms, offset_ms, status, status_message, attributes,
//!   links}` (times RFC 3339 UTC with nanoseconds).
//! - `otlp`: one OTLP/JSON `ExportTraceServiceRequest`.

use crate::exit::{ExitStatus, UsageError};
use crate::printer::Printer;
use crate::store::{InstanceRow, RunRow, RunTrace, SpanRow, Store};
use crate::telemetry::{otlp, tree};
use crate::views::{TraceRunView, run_numbers};
use crate::vocab::InstanceId;
use std::collections::BTreeMap;
use std::io::Write as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The span tree of each run, for people
    Tree,
    /// OTLP/JSON: one ExportTraceServiceRequest
    Otlp,
    /// Runs and their spans as JSON, for scripts
    Json,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Instance id (any unique prefix; default: the latest instance)
    #[arg(conflicts_with = "all")]
    pub id: Option<String>,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Tree)]
    pub format: Format,
    /// Every instance, oldest first
    #[arg(long)]
    pub all: bool,
}

/// One instance's recorded trace data.
struct Traced {
    instance: InstanceRow,
    runs: Vec<RunRow>,
    spans: Vec<SpanRow>,
    /// Each run's trace identity, by run number (`--format json`).
    traces: BTreeMap<i64, RunTrace>,
}

/// `--format otlp`: the spans stream from the database to stdout.
async fn print_otlp(
    store: &Store,
    ids: &[InstanceId],
    printer: &Printer,
) -> anyhow::Result<ExitStatus> {
    let mut out = printer.data_writer();
    let written = async {
        let mut request = otlp::RequestWriter::new(&mut out, &otlp::resource());
        for id in ids {
            store.each_span(id, |row| request.span(row)).await?;
        }
        request.finish()
    }
    .await;
    match written {
        // A reader that stopped early (`| head`) is not an error.
        Err(otlp::OtlpError::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(otlp::OtlpError::Json(e))
            if e.io_error_kind() == Some(std::io::ErrorKind::BrokenPipe) => {}
        other => other?,
    }
    Ok(ExitStatus::Success)
}

pub async fn run(args: Args, store: &Store, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let ids: Vec<InstanceId> = if args.all {
        let mut all = store.list_instances(&Default::default()).await?;
        all.reverse(); // oldest first, like the runs within an instance
        all.into_iter().map(|i| i.id).collect()
    } else {
        match &args.id {
            Some(prefix) => vec![store.resolve_id(prefix).await?],
            None => vec![store.latest_instance_id().await?.ok_or_else(|| {
                UsageError(format!(
                    "no instances in {} yet: start one with `wf run FILE`",
                    store.describe()
                ))
            })?],
        }
    };
    let load = async |with_traces: bool| -> anyhow::Result<Vec<Traced>> {
        let mut traced = Vec::with_capacity(ids.len());
        for id in &ids {
            let instance = store.instance(id).await?;
            let runs = store.runs(id).await?;
            let spans = store.spans(id).await?;
            let mut traces = BTreeMap::new();
            if with_traces {
                for n in run_numbers(&runs, &spans) {
                    if let Some(t) = store.run_trace(id, n).await? {
                        traces.insert(n, t);
                    }
                }
            }
            traced.push(Traced {
                instance,
                runs,
                spans,
                traces,
            });
        }
        Ok(traced)
    };
    // Each format reads in one snapshot: a run is shown with the spans it
    // had at one moment.
    match args.format {
        Format::Tree => {
            let traced = store.snapshot(async |_: &Store| load(false).await).await?;
            print_tree(&traced, args.all, printer);
        }
        Format::Json => {
            let traced = store.snapshot(async |_: &Store| load(true).await).await?;
            let runs: Vec<TraceRunView> = traced
                .iter()
                .flat_map(|t| TraceRunView::all(&t.instance, &t.runs, &t.spans, &t.traces))
                .collect();
            let mut out = printer.data_writer();
            let written = serde_json::to_writer_pretty(&mut out, &runs)
                .map_err(std::io::Error::from)
                .and_then(|()| writeln!(out))
                .and_then(|()| out.flush());
            match written {
                // A reader that stopped early (`| head`) is not an error.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                other => other?,
            }
        }
        Format::Otlp => {
            return store
                .snapshot(async |_: &Store| print_otlp(store, &ids, printer).await)
                .await;
        }
    }
    Ok(ExitStatus::Success)
}

fn print_tree(traced: &[Traced], all: bool, printer: &Printer) {
    for (i, t) in traced.iter().enumerate() {
        if all {
            if i > 0 {
                printer.data("");
            }
            printer.data(&format!(
                "instance {} ({})",
                t.instance.id, t.instance.workflow
            ));
        }
        let lines = tree::render(&t.instance.workflow, &t.runs, &t.spans);
        if lines.is_empty() {
            printer.info(&format!("instance {} has no recorded spans", t.instance.id));
        }
        for line in lines {
            printer.data(&line);
        }
    }
}
