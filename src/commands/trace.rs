//! `wf trace [ID] [--format tree|otlp|json] [--all]`: the trace of each run of
//! an instance (the latest one by default, every one with `--all`), read from
//! the spans stored with the results they describe.
//!
//! - `tree`: per run, the root span and the spans beneath it (docs/traces.md),
//!   the runs of the children of `workflow:` steps under the attempts that
//!   made them (`--depth N` levels at most). On a terminal it fits the
//!   terminal's width, span names relative to their workflow; piped or
//!   with `--wide`, lines and names are whole.
//! - `json`: an array of runs ([`TraceRunView`]), each `{instance_id,
//!   workflow, run, outcome, trace_id, span_id, parent_span_id, started_at,
//!   finished_at, duration_ms, spans}` where each span is `{trace_id,
//!   span_id, parent_span_id, name, kind, start_ns, end_ns, start_time,
//!   end_time, duration_ms, offset_ms, status, status_message, attributes,
//!   links}` (times RFC 3339 UTC with nanoseconds).
//! - `otlp`: one OTLP/JSON `ExportTraceServiceRequest`.
//!
//! `json` and `otlp` take the children's runs too, after their parent's.

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
    /// Instance id (any unique prefix; default: the latest instance not a child)
    #[arg(conflicts_with = "all")]
    pub id: Option<String>,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Tree)]
    pub format: Format,
    /// Every instance, oldest first, each by itself (children not nested)
    #[arg(long)]
    pub all: bool,
    /// Nest children of `workflow:` steps this many levels deep at most
    /// (default: all; 0: none)
    #[arg(long, value_name = "N", conflicts_with = "all")]
    pub depth: Option<usize>,
    /// Whole lines on a terminal too: full span names, every detail on its
    /// span's line (as when piped), however wide
    #[arg(long)]
    pub wide: bool,
}

/// One instance's recorded trace data, and its children's.
struct Traced {
    instance: InstanceRow,
    runs: Vec<RunRow>,
    spans: Vec<SpanRow>,
    /// Each run's trace identity, by run number (`--format json`).
    traces: BTreeMap<i64, RunTrace>,
    children: Vec<Traced>,
}

impl Traced {
    /// The instance and its children, depth first: the order of `--format
    /// json` and `otlp`.
    fn each(&self) -> Vec<&Traced> {
        let mut all = vec![self];
        for c in &self.children {
            all.extend(c.each());
        }
        all
    }

    /// What `telemetry::tree` draws of it.
    fn tree(&self) -> tree::Traced<'_> {
        tree::Traced {
            id: self.instance.id.as_str(),
            workflow: &self.instance.workflow,
            runs: &self.runs,
            spans: &self.spans,
            children: self
                .children
                .iter()
                .filter_map(|c| {
                    let p = c.instance.parent.as_ref()?;
                    Some(tree::Child {
                        key: &p.key,
                        attempt: p.attempt,
                        traced: c.tree(),
                    })
                })
                .collect(),
        }
    }
}

/// Reads instance `id`'s trace data and its children's, `depth` levels
/// down (`traces`: each run's trace identity too).
async fn load(
    store: &Store,
    id: &InstanceId,
    depth: usize,
    traces: bool,
) -> anyhow::Result<Traced> {
    let instance = store.instance(id).await?;
    let runs = store.runs(id).await?;
    let spans = store.spans(id).await?;
    let mut by_run = BTreeMap::new();
    if traces {
        for n in run_numbers(&runs, &spans) {
            if let Some(t) = store.run_trace(id, n).await? {
                by_run.insert(n, t);
            }
        }
    }
    let mut children = Vec::new();
    if depth > 0 {
        for child in store.children(id).await? {
            children.push(Box::pin(load(store, &child.id, depth - 1, traces)).await?);
        }
    }
    Ok(Traced {
        instance,
        runs,
        spans,
        traces: by_run,
        children,
    })
}

/// `--format otlp`: the spans stream from the database to stdout.
async fn print_otlp(
    store: &Store,
    ids: &[InstanceId],
    printer: &Printer,
) -> anyhow::Result<ExitStatus> {
    let mut out = printer.data_writer();
    let written = async { crate::engine::actions::write_otlp(store, ids, &mut out).await }.await;
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
    // `--all` shows each instance by itself; else children are nested.
    let depth = if args.all {
        0
    } else {
        args.depth.unwrap_or(usize::MAX)
    };
    let load_all = async |with_traces: bool| -> anyhow::Result<Vec<Traced>> {
        let mut traced = Vec::with_capacity(ids.len());
        for id in &ids {
            traced.push(load(store, id, depth, with_traces).await?);
        }
        Ok(traced)
    };
    // Each format reads in one snapshot: a run is shown with the spans it
    // had at one moment.
    match args.format {
        Format::Tree => {
            let traced = store
                .snapshot(async |_: &Store| load_all(false).await)
                .await?;
            // On a terminal the tree fits it, unless `--wide`.
            let width = if args.wide { None } else { printer.width() };
            print_tree(&traced, args.all, width, printer);
        }
        Format::Json => {
            let traced = store
                .snapshot(async |_: &Store| load_all(true).await)
                .await?;
            let runs: Vec<TraceRunView> = traced
                .iter()
                .flat_map(Traced::each)
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
                .snapshot(async |_: &Store| {
                    let mut all = Vec::new();
                    for id in &ids {
                        all.extend(
                            crate::engine::actions::with_descendants(store, id.clone(), depth)
                                .await?,
                        );
                    }
                    print_otlp(store, &all, printer).await
                })
                .await;
        }
    }
    Ok(ExitStatus::Success)
}

fn print_tree(traced: &[Traced], all: bool, width: Option<usize>, printer: &Printer) {
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
        let lines = tree::render_traced(&t.tree(), width);
        if lines.is_empty() {
            printer.info(&format!("instance {} has no recorded spans", t.instance.id));
        }
        for line in lines {
            printer.data(&line);
        }
    }
}
