//! `wf trace [ID] [--format tree|otlp|json] [--all]`: the trace of each run of
//! an instance (the latest one by default, every one with `--all`), read from
//! the spans stored with the results they describe.
//!
//! - `tree`: per run, the root span and the spans beneath it (docs/traces.md).
//! - `json`: an array of runs, each `{instance_id, workflow, run, outcome,
//!   trace_id, span_id, parent_span_id, started_at, finished_at, spans}` where
//!   each span is `{trace_id, span_id, parent_span_id, name, kind, start_ns,
//!   end_ns, start_time, end_time, duration_ms, status, status_message,
//!   attributes, links}` (times RFC 3339 UTC with nanoseconds).
//! - `otlp`: one OTLP/JSON `ExportTraceServiceRequest`.

use crate::exit::{ExitStatus, UsageError};
use crate::printer::Printer;
use crate::store::{InstanceRow, RunRow, SpanRow, Store};
use crate::telemetry::{otlp, tree};
use crate::vocab::{InstanceId, Timestamp};
use serde_json::Value;
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
    let load = async || -> anyhow::Result<Vec<Traced>> {
        let mut traced = Vec::with_capacity(ids.len());
        for id in &ids {
            traced.push(Traced {
                instance: store.instance(id).await?,
                runs: store.runs(id).await?,
                spans: store.spans(id).await?,
            });
        }
        Ok(traced)
    };
    // Each format reads in one snapshot: a run is shown with the spans it
    // had at one moment.
    match args.format {
        Format::Tree => {
            let traced = store.snapshot(async |_: &Store| load().await).await?;
            print_tree(&traced, args.all, printer);
        }
        Format::Json => {
            let runs = store
                .snapshot(async |_: &Store| -> anyhow::Result<Vec<Value>> {
                    let mut runs = Vec::new();
                    for t in &load().await? {
                        for run in runs_json(store, t).await? {
                            runs.push(serde_json::to_value(run)?);
                        }
                    }
                    Ok(runs)
                })
                .await?;
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

fn rfc3339_ns(ns: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(ns).to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

/// A span in `--format json`; serialized straight from the stored row (no
/// intermediate JSON tree: 20,000 spans are a lot of small maps).
#[derive(serde::Serialize)]
struct SpanJson<'a> {
    trace_id: &'a str,
    span_id: &'a str,
    parent_span_id: Option<&'a str>,
    name: &'a str,
    kind: &'a str,
    start_ns: i64,
    end_ns: i64,
    start_time: String,
    end_time: String,
    duration_ms: f64,
    /// Start, in ms after the run's root span started (the waterfall of `tree`).
    offset_ms: f64,
    status: &'a str,
    status_message: Option<&'a str>,
    attributes: &'a Value,
    links: &'a Value,
}

impl<'a> SpanJson<'a> {
    /// `s` in a run whose root span started at `run_start` (ns).
    fn new(s: &'a SpanRow, run_start: i64) -> SpanJson<'a> {
        SpanJson {
            trace_id: &s.trace_id,
            span_id: &s.span_id,
            parent_span_id: s.parent_span_id.as_deref(),
            name: &s.name,
            kind: &s.kind,
            start_ns: s.start_ns,
            end_ns: s.end_ns,
            start_time: rfc3339_ns(s.start_ns),
            end_time: rfc3339_ns(s.end_ns),
            duration_ms: (s.end_ns - s.start_ns).max(0) as f64 / 1e6,
            offset_ms: (s.start_ns - run_start).max(0) as f64 / 1e6,
            status: &s.status,
            status_message: s.status_message.as_deref(),
            attributes: &s.attributes,
            links: &s.links,
        }
    }
}

/// A run in `--format json`.
#[derive(serde::Serialize)]
struct RunJson<'a> {
    instance_id: &'a str,
    workflow: &'a str,
    run: i64,
    outcome: Option<String>,
    trace_id: Option<String>,
    span_id: Option<String>,
    parent_span_id: Option<String>,
    started_at: Option<Timestamp>,
    finished_at: Option<Timestamp>,
    /// The root span's duration: the run's total.
    duration_ms: Option<f64>,
    spans: Vec<SpanJson<'a>>,
}

async fn runs_json<'a>(store: &Store, t: &'a Traced) -> anyhow::Result<Vec<RunJson<'a>>> {
    let mut numbers: Vec<i64> = t.runs.iter().map(|r| r.number).collect();
    numbers.extend(t.spans.iter().map(|s| s.run));
    numbers.sort_unstable();
    numbers.dedup();
    let mut out = Vec::with_capacity(numbers.len());
    for n in numbers {
        let run = t.runs.iter().find(|r| r.number == n);
        let spans: Vec<&SpanRow> = t.spans.iter().filter(|s| s.run == n).collect();
        let root = spans.iter().find(|s| tree::is_root(s)).copied();
        let run_start = root
            .map(|r| r.start_ns)
            .or_else(|| spans.iter().map(|s| s.start_ns).min())
            .unwrap_or(0);
        let trace = store.run_trace(&t.instance.id, n).await?;
        let (trace_id, span_id, parent) = match (&trace, root) {
            (Some((t, s, p, _)), _) => (Some(t.clone()), Some(s.clone()), p.clone()),
            (None, Some(r)) => (
                Some(r.trace_id.clone()),
                Some(r.span_id.clone()),
                r.parent_span_id.clone(),
            ),
            (None, None) => (None, None, None),
        };
        let outcome = run
            .and_then(|r| r.outcome)
            .map(|o| o.to_string())
            .or_else(|| {
                root.and_then(|r| r.attributes.get("workflow.outcome"))
                    .and_then(Value::as_str)
                    .map(String::from)
            });
        out.push(RunJson {
            instance_id: &t.instance.id,
            workflow: &t.instance.workflow,
            run: n,
            outcome,
            trace_id,
            span_id,
            parent_span_id: parent,
            started_at: run.map(|r| r.started_at),
            finished_at: run.and_then(|r| r.finished_at),
            duration_ms: root.map(|r| (r.end_ns - r.start_ns).max(0) as f64 / 1e6),
            spans: spans.iter().map(|s| SpanJson::new(s, run_start)).collect(),
        });
    }
    Ok(out)
}
