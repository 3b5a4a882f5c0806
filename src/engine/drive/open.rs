//! Opening a run: what a dead (or stalled) predecessor left is recovered
//! (spans it never stored rebuilt, open attempts `crashed`, runs closed),
//! the run's trace is started, and the writes that open it are decided
//! (the restart's reset rows, `--retry-failed`'s fresh budgets, fired
//! timers, the instance `running`), to be committed with the run's first
//! decisions.

use super::super::restart;
use super::super::runner::ended_spans;
use super::super::runner::{CarriedAttempt, RunOptions};
use super::super::scheduler::{Scheduler, recovery};
use crate::store::{self, StepRow, Write};
use crate::telemetry::{self, recorder};
use crate::vocab::{
    ActionKind, Actor, AttemptOutcome, CancelRequest, ErrorType, InstanceId, InstanceStatus,
    StepStatus, Timestamp, UnitKeyBuf,
};
use crate::workflow::Workflow;
use opentelemetry::KeyValue;
use opentelemetry::trace::Link;
use opentelemetry::trace::TraceContextExt as _;
use std::collections::HashMap;
use std::sync::Arc;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// A run about to start: its records, its trace, and the writes that open
/// it (committed with its first decisions, `Runner::opening`).
pub(super) struct Opened {
    pub(super) inst: store::InstanceRow,
    pub(super) run: i64,
    pub(super) records: HashMap<UnitKeyBuf, StepRow>,
    pub(super) uncounted: HashMap<UnitKeyBuf, Vec<i64>>,
    pub(super) events: Vec<store::EventRow>,
    pub(super) trace: store::RunTrace,
    pub(super) root: tracing::Span,
    pub(super) caller: Option<opentelemetry::trace::SpanContext>,
    pub(super) cancel: bool,
    pub(super) terminate: bool,
    pub(super) writes: Vec<Write>,
    /// The `workflow:` attempts an earlier run began that wait on their
    /// children: their spans are stored when they end.
    pub(super) carried: HashMap<UnitKeyBuf, CarriedAttempt>,
    /// Who started or resumed this run ([`run_actor`]).
    pub(super) actor: Option<Actor>,
}

/// Who a run is by: a first run is its instance's starter's (whoever
/// drives it: a worker runs a schedule's or a webhook's start); a later
/// one the asker's, else the starter's.
fn run_actor(run: i64, asker: Option<&Actor>, starter: Option<&Actor>) -> Option<Actor> {
    if run == 1 {
        starter.or(asker).cloned()
    } else {
        asker.or(starter).cloned()
    }
}

/// Opens the next run on `history`: recovers what a dead predecessor left
/// (`recover`), starts the run's trace, and decides the writes that open
/// it (the restart's reset rows, `--retry-failed`'s fresh budgets, fired
/// timers, the instance `running`).
pub(super) fn open_run(
    id: &InstanceId,
    wf: &Arc<Workflow>,
    history: store::History,
    plan: Option<restart::Plan>,
    opts: &RunOptions,
) -> Opened {
    // Sized for every step up front: growing a map of 10,000 rows by
    // doubling briefly holds the old table and the new one.
    let store::History {
        instance: mut inst,
        steps,
        mut open,
        abandoned_runs,
        last_run,
        last_definition,
        traces,
        uncounted,
        unspanned,
        events,
        cancel_requested,
        granted: _,
    } = history;
    let mut records: HashMap<UnitKeyBuf, StepRow> =
        HashMap::with_capacity(steps.len().max(wf.steps.len()));
    records.extend(steps.into_iter().map(|r| (r.key.clone(), r)));
    // A `workflow:` attempt waiting on its child is not over: the child
    // (made in the attempt's commit) runs on, and its end is the attempt's.
    let mut carried = HashMap::new();
    open.retain(|a| {
        let waits = records.get(&a.key).is_some_and(|r| {
            r.attempts == a.attempt
                && (Scheduler::waits_on_child(wf, r) || Scheduler::compensates_child(wf, r))
        });
        if waits
            && let Some((span_id, start_ns)) = &a.span
            && let Some((trace_id, root_span_id, _, _)) = traces.get(&a.run)
        {
            carried.insert(
                a.key.clone(),
                CarriedAttempt {
                    attempt: a.attempt,
                    run: a.run,
                    trace_id: trace_id.clone(),
                    root_span_id: root_span_id.clone(),
                    span_id: span_id.clone(),
                    start_ns: *start_ns,
                },
            );
        }
        !waits
    });
    let mut uncounted_by_key: HashMap<UnitKeyBuf, Vec<i64>> = HashMap::new();
    for (key, attempt) in uncounted {
        uncounted_by_key.entry(key).or_default().push(attempt);
    }
    let mut writes = recover(
        id,
        wf,
        &Leftovers {
            unspanned: &unspanned,
            open: &open,
            abandoned_runs: &abandoned_runs,
            traces: &traces,
        },
        &uncounted_by_key,
        &mut records,
    );
    let run = last_run + 1;
    let (root, trace, caller) = start_trace(id, wf, run, opts, &traces);
    // Its labels, on each run's root (`workflow.label.<name>`).
    for (name, value) in &inst.labels {
        root.set_attribute(format!("workflow.label.{name}"), value.clone());
    }
    // The first run on a definition `wf upgrade` moved it onto says from
    // which (its link to the last run's root is there as for any run).
    if let Some(from) = last_definition.filter(|h| *h != inst.definition_hash) {
        root.set_attribute("wf.upgrade.from", from);
        root.set_attribute("wf.upgrade.to", inst.definition_hash.clone());
    }
    let actor = run_actor(run, opts.actor.as_ref(), inst.started_by.as_ref());
    if let Some(a) = &actor {
        root.set_attribute("wf.actor", a.to_string());
    }
    writes.push(Write::StartRun {
        run,
        trace: trace.clone(),
        restart_from: opts.restart.clone(),
        definition_hash: inst.definition_hash.clone(),
    });
    // The action the run opens for, by whoever asked (a first run's
    // resume is its start, recorded with the instance).
    if let (Some((kind, detail)), Some(by)) = (&opts.action, &opts.actor)
        && !(run == 1 && *kind == ActionKind::Resume)
    {
        writes.push(Write::Action(Box::new(store::ActionRow::on(
            id,
            *kind,
            by,
            detail.clone(),
        ))));
    }
    // Step locks a dead predecessor held (its attempts are over) are given back.
    if wf.has_locks() {
        writes.push(Write::ReleaseLocks);
    }
    // A restart: the reset rows, the state rebuilt from the kept steps'
    // patches, no cancel request nor result of the ending restarted from.
    let mut cancel_requested = cancel_requested;
    if let Some(plan) = plan {
        for row in plan.rows {
            writes.push(Write::Step(Box::new(row.clone())));
            records.insert(row.key.clone(), row);
        }
        writes.push(Write::State(plan.state.clone()));
        writes.push(Write::Reopen);
        inst.state = plan.state;
        cancel_requested = CancelRequest::None;
    }
    if opts.retry_failed {
        for rec in records
            .values_mut()
            .filter(|r| r.status == StepStatus::Failed)
        {
            rec.status = StepStatus::Pending;
            rec.budget_base = rec.attempts;
            rec.retry_at = None;
            rec.finished_at = None;
            writes.push(Write::Step(Box::new(rec.clone())));
        }
    }
    let cancel = opts.cancel || cancel_requested.is_asked();
    let terminate = (opts.cancel && opts.terminate) || cancel_requested == CancelRequest::Terminate;
    writes.push(Write::Status {
        status: InstanceStatus::Running,
        wake_at: None,
        waiting_event: None,
        error: None,
    });
    if opts.fire_timers {
        for rec in records.values_mut() {
            if rec.retry_at.is_some()
                && matches!(rec.status, StepStatus::Sleeping | StepStatus::Retrying)
            {
                rec.retry_at = Some(Timestamp::now());
            }
        }
    }
    Opened {
        inst,
        run,
        records,
        uncounted: uncounted_by_key,
        events,
        trace,
        root,
        caller,
        cancel,
        terminate,
        writes,
        carried,
        actor,
    }
}

/// What a dead (or stalled) predecessor left unfinished.
struct Leftovers<'a> {
    unspanned: &'a [store::UnspannedAttempt],
    open: &'a [store::OpenAttempt],
    abandoned_runs: &'a [i64],
    traces: &'a std::collections::BTreeMap<i64, store::RunTrace>,
}

/// The writes that recover what a predecessor left: the spans it never
/// stored, its open attempts `crashed`, its runs closed `crashed` with
/// their root spans rebuilt.
fn recover(
    id: &InstanceId,
    wf: &Workflow,
    left: &Leftovers<'_>,
    uncounted: &HashMap<UnitKeyBuf, Vec<i64>>,
    records: &mut HashMap<UnitKeyBuf, StepRow>,
) -> Vec<Write> {
    let mut writes = Vec::new();
    rebuild_spans(id, wf, left.unspanned, left.traces, &mut writes);
    recover_crashed(
        id,
        wf,
        left.open,
        left.traces,
        uncounted,
        records,
        &mut writes,
    );
    for &crashed in left.abandoned_runs {
        if let Some((trace, span, parent, start)) = left.traces.get(&crashed) {
            let links = left
                .traces
                .get(&(crashed - 1))
                .and_then(|prev| recorder::span_context(&prev.0, &prev.1, false))
                .map(|sc| Link::new(sc, vec![KeyValue::new("workflow.run", crashed - 1)], 0))
                .into_iter()
                .collect();
            recorder::rebuild(recorder::Rebuilt {
                trace_id: trace,
                span_id: span,
                parent: parent.as_deref(),
                name: format!("{}/workflow", wf.name),
                start_ns: *start,
                attributes: vec![
                    KeyValue::new("workflow.name", wf.name.clone()),
                    KeyValue::new("workflow.instance.id", id.to_string()),
                    KeyValue::new("workflow.run", crashed),
                    KeyValue::new("workflow.outcome", "crashed"),
                ],
                links,
                error: "the process running this run died",
                end_ns: None,
            });
            writes.extend(ended_spans((trace, id, crashed), &wf.name, None, &[]));
        }
    }
    if !left.abandoned_runs.is_empty() {
        writes.push(Write::CloseAbandonedRuns);
    }
    writes
}

/// Run `run`'s root span and trace identity: a child of the caller's
/// `TRACEPARENT`, else a new trace (or the instance's own, with
/// `trace: { per: instance }`), linked to the run before it.
fn start_trace(
    id: &InstanceId,
    wf: &Workflow,
    run: i64,
    opts: &RunOptions,
    traces: &std::collections::BTreeMap<i64, store::RunTrace>,
) -> (
    tracing::Span,
    store::RunTrace,
    Option<opentelemetry::trace::SpanContext>,
) {
    let caller = opts
        .traceparent
        .as_deref()
        .and_then(|tp| telemetry::extract(tp, opts.tracestate.as_deref()));
    // `trace: { per: instance }`: every run in the trace named after the
    // instance; a caller's context is then linked, not the parent.
    if wf.trace_per_instance {
        recorder::pin_trace_id(&recorder::instance_trace_id(id));
    }
    let root = tracing::info_span!(
        parent: None,
        "workflow",
        otel.name = format!("{}/workflow", wf.name),
        workflow.name = wf.name.as_str(),
        workflow.instance.id = id.as_str(),
        workflow.run = run,
    );
    if let Some(from) = &opts.restart {
        root.set_attribute("workflow.restart.from", from.clone());
    }
    if wf.trace_per_instance {
        // The ids are made when the span's context is first asked for.
        let _ = recorder::ids(&root);
    }
    recorder::unpin();
    let parent = if wf.trace_per_instance {
        if let Some(sc) = caller.clone() {
            root.add_link_with_attributes(sc, vec![KeyValue::new("wf.link", "caller")]);
        }
        None
    } else {
        caller.clone()
    };
    if let Some(sc) = &parent {
        let _ = root.set_parent(opentelemetry::Context::new().with_remote_span_context(sc.clone()));
    }
    if let Some(sc) = traces
        .get(&(run - 1))
        .and_then(|prev| recorder::span_context(&prev.0, &prev.1, false))
    {
        root.add_link_with_attributes(sc, vec![KeyValue::new("workflow.run", run - 1)]);
    }
    let (trace_id, root_id) = recorder::ids(&root);
    let trace = (
        trace_id,
        root_id,
        parent.map(|sc| sc.span_id().to_string()),
        telemetry::now_ns(),
    );
    (root, trace, caller)
}

/// The spans of finished attempts that a predecessor died before storing
/// (a successful attempt's span is stored by the commit after its result's):
/// rebuilt from the attempts' rows, with their ids, times and outcomes.
fn rebuild_spans(
    id: &str,
    wf: &Workflow,
    unspanned: &[store::UnspannedAttempt],
    traces: &std::collections::BTreeMap<i64, store::RunTrace>,
    writes: &mut Vec<Write>,
) {
    for a in unspanned {
        // Stored to the millisecond: the end of that millisecond, so that
        // what it did (its process) lies within it.
        let end_ns = a
            .finished_at
            .map(|t| t.ms().saturating_mul(1_000_000) + 999_999);
        rebuild_attempt_span(id, wf, traces, a, end_ns, writes);
    }
}

/// Rebuilds the span of attempt `a` under its run's root from what its row
/// holds (id, start, outcome, error), ended at `end_ns` (else now), and
/// stores it.
fn rebuild_attempt_span(
    id: &str,
    wf: &Workflow,
    traces: &std::collections::BTreeMap<i64, store::RunTrace>,
    a: &store::UnspannedAttempt,
    end_ns: Option<i64>,
    writes: &mut Vec<Write>,
) {
    let Some((trace, root, _, _)) = traces.get(&a.run) else {
        return;
    };
    let mut attributes = vec![
        KeyValue::new("workflow.name", wf.name.clone()),
        KeyValue::new("workflow.instance.id", id.to_string()),
        KeyValue::new("workflow.step.id", a.key.to_string()),
        KeyValue::new("workflow.step.attempt", a.attempt),
        KeyValue::new("workflow.step.outcome", a.outcome.as_str()),
    ];
    if let Some(t) = &a.error_type {
        attributes.push(KeyValue::new("error.type", t.text()));
    }
    let error_type = a.error_type.as_ref().map(ErrorType::text);
    let error = match (&error_type, &a.error_message) {
        (Some(_), Some(m)) => m.as_str(),
        (Some(t), None) => t,
        _ => "",
    };
    recorder::rebuild(recorder::Rebuilt {
        trace_id: trace,
        span_id: &a.span_id,
        parent: Some(root),
        name: format!("{}/{}", wf.name, a.key),
        start_ns: a.started_ns,
        attributes,
        links: Vec::new(),
        error,
        end_ns,
    });
    writes.extend(ended_spans((trace, id, a.run), &wf.name, None, &[]));
}

/// Attempts that never got an outcome belong to a process that died (or lost
/// the instance): they become `crashed` (counted towards `max_attempts`), with
/// their spans rebuilt, and their unit is retried or fails
/// (`scheduler::recovery`).
fn recover_crashed(
    id: &InstanceId,
    wf: &Workflow,
    open: &[store::OpenAttempt],
    traces: &std::collections::BTreeMap<i64, store::RunTrace>,
    uncounted: &HashMap<UnitKeyBuf, Vec<i64>>,
    records: &mut HashMap<UnitKeyBuf, StepRow>,
    writes: &mut Vec<Write>,
) {
    for a in open {
        if let Some((span_id, started_ns)) = &a.span {
            let crashed = store::UnspannedAttempt {
                key: a.key.clone(),
                attempt: a.attempt,
                run: a.run,
                span_id: span_id.clone(),
                started_ns: *started_ns,
                finished_at: None,
                outcome: AttemptOutcome::Crashed,
                error_type: Some(ErrorType::Crashed),
                error_message: Some(recovery::CRASHED.into()),
            };
            rebuild_attempt_span(id, wf, traces, &crashed, None, writes);
        }
    }
    writes.extend(recovery::close_crashed(
        id,
        wf,
        open,
        uncounted,
        records,
        Timestamp::now(),
    ));
}
