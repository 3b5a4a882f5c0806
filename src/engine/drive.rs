//! One run of an instance, from the outside: take the lease (raising the
//! fencing epoch), end what a dead or stalled predecessor left running, turn
//! its unfinished history into `crashed` records, start the run, let the
//! [`Runner`] drive it, close it, export its spans, release the lease. Every
//! write here is a batch of [`Write`]s committed under the fence.

use super::advice::{self, Remedy};
use super::lease::{self, Heartbeat};
use super::redact::Redactor;
use super::runner::{RunOptions, RunOutcome, RunStart, Runner, Stop};
use super::{EngineError, Observer, procs, restart, shell};
use crate::store::{self, AttemptEnd, StepRow, Store, StoreError, Write};
use crate::telemetry::{self, recorder};
use crate::vocab::{
    AttemptOutcome, CancelRequest, ErrorType, InstanceId, InstanceStatus, RunEnd, StepStatus,
    Timestamp, UnitKey,
};
use crate::workflow::Workflow;
use opentelemetry::KeyValue;
use opentelemetry::trace::Link;
use opentelemetry::trace::TraceContextExt as _;
use std::collections::HashMap;
use std::sync::Arc;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// Drives instance `id` until it completes, fails, suspends or is interrupted
/// (one run, closed by its final commit), then sends the spans it committed
/// to the live exporters, if any are configured (never failing the run; see
/// `telemetry::export`), and releases the instance.
pub async fn drive(
    store: &mut Store,
    id: &InstanceId,
    opts: RunOptions,
    observer: &dyn Observer,
) -> Result<RunOutcome, EngineError> {
    recorder::install();
    let ttl = lease::ttl().map_err(EngineError::Input)?;
    // An owner given by the caller created or claimed the instance for this
    // run (`wf run`, a worker): it is taken at once, and checked under the
    // lease. Otherwise it is checked first, so that refusing it writes nothing.
    let claimed = opts.owner.is_some();
    let owner = opts.owner.clone().unwrap_or_else(lease::owner_name);
    let mut wf = None;
    if !claimed {
        let inst = store.instance(id).await?;
        check_resumable(store, &inst, &opts).await?;
        let pinned = workflow_of(store, &inst, &opts).await?;
        super::check_secrets(&pinned)?;
        wf = Some(pinned);
    }

    // Take the lease (raising the epoch: whoever held it can write no more),
    // and read the history as it stands, in one transaction.
    let (fence, mut history) = match store
        .take_over(id, &owner, lease::ttl_ms(ttl), lease::holder_alive)
        .await?
    {
        Ok(taken) => taken,
        Err(holder) => {
            return Err(EngineError::Held {
                id: id.clone(),
                holder,
            });
        }
    };
    // Again under the lease: another process may have finished it meanwhile.
    if let Err(e) = check_resumable(store, &history.instance, &opts).await {
        store.release(&fence).await?;
        return Err(e);
    }
    let wf = match wf {
        Some(wf) => wf,
        None => match workflow_of(store, &history.instance, &opts).await {
            Ok(wf) => wf,
            Err(e) => {
                store.release(&fence).await?;
                return Err(e);
            }
        },
    };
    // Claimed (by a worker: `wf run` checked the secrets before it created
    // the instance) without a secret it needs.
    if let Some(name) = super::missing_secret(&wf) {
        if history.last_run > 0 {
            // It ran elsewhere: left as it is, for a process that has the secret.
            store.release(&fence).await?;
            return Err(super::unset_secret(name));
        }
        // Nothing of it ran (a scheduled or detached instance): it fails,
        // so that it does not stay due (nor hold its schedule's `overlap`)
        // forever.
        let why = format!(
            "secret `{name}` is not set in the environment of the worker that claimed it ({owner}): export {name} where `wf worker` runs; `wf resume {} --retry-failed` then runs the instance",
            &id[..id.len().min(12)]
        );
        store
            .commit(
                &fence,
                &[
                    Write::Status {
                        status: InstanceStatus::Failed,
                        wake_at: None,
                        waiting_event: None,
                        error: Some(why.clone()),
                    },
                    Write::Release,
                ],
            )
            .await?;
        return Ok(RunOutcome::Failed(why));
    }
    // What a restart resets, decided on the history read under the lease:
    // from its step; for `--retry-failed` after compensations ran, from the
    // first step they undid (what they undid runs again too, said when the
    // run starts).
    let compensated = if opts.retry_failed && history.instance.status == InstanceStatus::Failed {
        restart::compensated(&wf, &history.steps)
    } else {
        Vec::new()
    };
    let restart_plan = match opts
        .restart
        .as_deref()
        .or(compensated.first().map(String::as_str))
    {
        Some(from) => match restart::fill_patches(store, id, &mut history.steps)
            .await
            .map_err(EngineError::from)
            .and_then(|()| Ok(restart::plan(&wf, &history.steps, from)?))
        {
            Ok(plan) => Some(plan),
            Err(e) => {
                store.release(&fence).await?;
                return Err(e);
            }
        },
        None => None,
    };
    let retry_note = match (&restart_plan, compensated.is_empty()) {
        (Some(plan), false) => {
            let quoted = |ids: &[String]| {
                ids.iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            Some(format!(
                "--retry-failed: running {} again: the failure's compensations undid {}",
                quoted(&plan.reset_steps),
                quoted(&compensated)
            ))
        }
        _ => None,
    };
    let (heartbeat, lost) = Heartbeat::start(store.location(), fence.clone(), ttl);
    // What unfinished attempts left running on this host ends before
    // anything starts again: two attempts of one step never run at once.
    // An attempt whose group was never recorded (its holder stopped or died
    // just after starting it) is found by its processes' variables.
    for a in &history.open {
        let groups = match &a.process {
            Some(p) => vec![p.clone()],
            None => procs::unrecorded(id, &a.key, a.attempt),
        };
        for p in &groups {
            let ended = procs::end_leftover(p, shell::KILL_GRACE).await;
            if ended > 0 {
                observer.message(&format!(
                    "{}: ended {ended} process(es) left running by attempt {}",
                    a.key, a.attempt
                ));
            }
        }
    }

    // Sized for every step up front: growing a map of 10,000 rows by
    // doubling briefly holds the old table and the new one.
    let store::History {
        instance: mut inst,
        steps,
        open,
        abandoned_runs,
        last_run,
        traces,
        uncounted,
        unspanned,
        events,
        cancel_requested,
    } = history;
    let mut records: HashMap<String, StepRow> =
        HashMap::with_capacity(steps.len().max(wf.steps.len()));
    records.extend(steps.into_iter().map(|r| (r.key.clone(), r)));
    let mut uncounted_by_key: HashMap<String, Vec<i64>> = HashMap::new();
    for (key, attempt) in uncounted {
        uncounted_by_key.entry(key).or_default().push(attempt);
    }

    // Recover whatever a dead (or stalled) predecessor left behind.
    let mut writes = Vec::new();
    rebuild_spans(id, &wf, &unspanned, &traces, &mut writes);
    recover_crashed(
        id,
        &wf,
        &open,
        &traces,
        &uncounted_by_key,
        &mut records,
        &mut writes,
    );
    for &crashed in &abandoned_runs {
        if let Some((trace, span, parent, start)) = traces.get(&crashed) {
            let links = traces
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
    if !abandoned_runs.is_empty() {
        writes.push(Write::CloseAbandonedRuns);
    }

    // This run, and its trace: a child of the caller's TRACEPARENT, else a new trace.
    let run = last_run + 1;
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
    writes.push(Write::StartRun {
        run,
        trace: trace.clone(),
        restart_from: opts.restart.clone(),
    });
    // A restart: the reset rows, the state rebuilt from the kept steps'
    // patches, no cancel request nor result of the ending restarted from.
    let mut cancel_requested = cancel_requested;
    if let Some(plan) = restart_plan {
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
    // Committed with the run's first decisions (`Runner::opening`).
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
                rec.retry_at = Some(store::now());
            }
        }
    }

    // A restart gives the workflow's `timeout` a fresh start: it counts from
    // the newest restart, else from the instance's creation.
    let deadline_from = if opts.restart.is_some() {
        Some(store::now())
    } else if wf.timeout.is_some() && last_run > 0 {
        advice::deadline_start(&store.runs(id).await?)
    } else {
        None
    };
    let mut runner = Runner::new(RunStart {
        wf: wf.clone(),
        inst,
        run,
        records,
        opts,
        observer,
        trace,
        root,
        fence: fence.clone(),
        lost,
        uncounted: uncounted_by_key,
        events,
        caller: caller
            .map(|sc| (sc.trace_flags(), sc.trace_state().clone()))
            .unwrap_or((
                opentelemetry::trace::TraceFlags::SAMPLED,
                opentelemetry::trace::TraceState::default(),
            )),
        live_dir: Some(store.live_dir()),
        deadline_from,
        opening: writes,
    });
    runner.sched.terminate = terminate;
    if cancel {
        runner.stop(Stop::Cancel);
    }
    observer.run_started(id, &wf.name, run, wf.steps.len());
    if let Some(note) = &retry_note {
        observer.message(note);
    }
    let outcome = runner.main_loop(store).await;
    if outcome.is_err() {
        // Whatever stopped the run, its steps' processes (their whole
        // groups) end with it: no exit path leaves one behind.
        runner.abandon().await;
    }
    if let Err(e) = &outcome
        && (fenced_holder(e).is_some()
            || matches!(e, EngineError::Store(StoreError::Unreachable { .. })))
    {
        // Another process owns the instance now, or the database is out of
        // reach: write nothing (it resumes from what was recorded).
        return Err(lost_lease(
            id,
            outcome.err().unwrap_or_else(|| unreachable!()),
        ));
    }
    // With no live export to do under the lease, the last commit gives it
    // up too (the heartbeat stopped first, so no renewal follows it).
    let release_in_close = !telemetry::export::configured();
    let mut heartbeat = Some(heartbeat);
    if release_in_close {
        drop(heartbeat.take());
    }
    let closed = close_run(store, &mut runner, outcome, release_in_close).await;
    // The live copies of this run's attempts are gone: so is their folder.
    let live = store.live_dir();
    let _ = std::fs::remove_dir(live.join(id.as_str()));
    let _ = std::fs::remove_dir(&live);
    if let Err(e) = closed {
        return Err(lost_lease(id, e));
    }
    let outcome = closed?;
    if !release_in_close {
        // Still under the lease: no other process can export these spans meanwhile.
        telemetry::export::export_instance(store, &fence).await;
        drop(heartbeat);
        store.release(&fence).await?;
    }
    Ok(outcome)
}

/// The holder named by a refused (fenced) write.
fn fenced_holder(e: &EngineError) -> Option<String> {
    match e {
        EngineError::Store(StoreError::Fenced { holder, .. }) => {
            Some(holder.clone().unwrap_or_else(|| "another process".into()))
        }
        EngineError::LeaseLost { holder, .. } => Some(holder.clone()),
        _ => None,
    }
}

/// A refused write means another process took the instance over: say so,
/// naming it (exit 5). Any other error passes through.
fn lost_lease(id: &str, e: EngineError) -> EngineError {
    match fenced_holder(&e) {
        Some(holder) => EngineError::LeaseLost {
            id: id.into(),
            holder,
        },
        None => e,
    }
}

/// Closes the run whatever happened, so history never shows a run in progress.
async fn close_run(
    store: &mut Store,
    runner: &mut Runner<'_>,
    outcome: Result<RunOutcome, EngineError>,
    release: bool,
) -> Result<RunOutcome, EngineError> {
    let run = runner.run;
    // Decisions not committed when the run stopped on an error are dropped,
    // as a failed transaction drops them.
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            runner.sched.writes.truncate(runner.sched.opening);
            runner.write_root_span(RunEnd::Failed, Some(&e.to_string()))?;
            runner.sched.writes.push(Write::FinishRun {
                run,
                outcome: RunEnd::Failed,
            });
            if release {
                runner.sched.writes.push(Write::Release);
            }
            let writes = std::mem::take(&mut runner.sched.writes);
            store.commit(&runner.fence, &writes).await?;
            return Err(e);
        }
    };
    let failure = match &outcome {
        RunOutcome::Failed(reason) => Some(reason.as_str()),
        _ => None,
    };
    match &outcome {
        RunOutcome::Failed(_) => {
            runner.abandon_retries(StepStatus::Failed, "the workflow failed")?;
        }
        RunOutcome::Canceled => {
            runner.abandon_retries(StepStatus::Canceled, "the instance was canceled")?;
        }
        _ => {}
    }
    runner.write_root_span(outcome.end(), failure)?;
    use InstanceStatus as S;
    let (status, wake_at, waiting_event, error) = match &outcome {
        RunOutcome::Completed => (S::Completed, None, None, None),
        RunOutcome::Failed(reason) => (S::Failed, None, None, Some(reason.clone())),
        RunOutcome::Sleeping(wake) => (S::Sleeping, Some(*wake), None, None),
        RunOutcome::Waiting(event) => (
            S::Waiting,
            runner.sched.next_wake(),
            Some(event.clone()),
            None,
        ),
        RunOutcome::Canceled => (S::Canceled, None, None, None),
        // Stopped while it only waited for a timer or an event: it stays
        // sleeping or waiting, as it was.
        RunOutcome::Interrupted if runner.idle_when_stopped => {
            match runner
                .sched
                .suspend_outcome(runner.sched.next_wake(), Timestamp::now())
            {
                RunOutcome::Waiting(event) => {
                    (S::Waiting, runner.sched.next_wake(), Some(event), None)
                }
                RunOutcome::Sleeping(wake) => (S::Sleeping, Some(wake), None, None),
                _ => (S::Running, None, None, None),
            }
        }
        // Left `running` without a lease: `wf list` shows it as interrupted, `wf resume` continues it.
        RunOutcome::Interrupted => (S::Running, None, None, None),
    };
    runner.sched.writes.push(Write::Status {
        status,
        wake_at,
        waiting_event,
        error,
    });
    runner.sched.writes.push(Write::FinishRun {
        run,
        outcome: outcome.end(),
    });
    if release {
        runner.sched.writes.push(Write::Release);
    }
    let writes = std::mem::take(&mut runner.sched.writes);
    store.commit(&runner.fence, &writes).await?;
    Ok(outcome)
}

/// The spans of `(trace id, instance, run)` of `workflow` that ended since
/// the last call, as writes, with secrets masked by `redactor`, except those
/// in `skip`; stored without the attributes the instance already says
/// ([`store::SpanRow::slim`]).
pub(super) fn ended_spans(
    (trace_id, instance, run): (&str, &str, i64),
    workflow: &str,
    redactor: Option<&Redactor>,
    skip: &[String],
) -> Vec<Write> {
    recorder::take(trace_id, instance)
        .into_iter()
        .filter_map(|span| {
            let mut row = recorder::row(&span, run);
            if skip.contains(&row.span_id) {
                return None;
            }
            if let Some(r) = redactor.filter(|r| !r.is_empty()) {
                r.value(&mut row.attributes);
                row.status_message = row.status_message.map(|m| r.text(m.as_str()));
            }
            row.slim(workflow);
            Some(Write::Span(Box::new(row)))
        })
        .collect()
}

/// The workflow `inst` runs: the caller's when it is the pinned one, else
/// the pinned definition.
async fn workflow_of(
    store: &Store,
    inst: &store::InstanceRow,
    opts: &RunOptions,
) -> Result<Arc<Workflow>, EngineError> {
    let wf = match &opts.workflow {
        Some(wf) if wf.hash == inst.definition_hash => wf.clone(),
        _ => Arc::new(pinned_workflow(store, inst).await?),
    };
    Ok(wf)
}

/// The instance's pinned definition: its compiled form when this version of
/// wf wrote it for exactly this text, else the pinned YAML parsed again.
pub async fn pinned_workflow(
    store: &Store,
    inst: &store::InstanceRow,
) -> Result<Workflow, EngineError> {
    if let Some(compiled) = store.definition_compiled(&inst.definition_hash).await?
        && let Some(wf) = Workflow::from_compiled(&compiled, &inst.definition)
        && wf.hash == inst.definition_hash
    {
        return Ok(wf);
    }
    Ok(Workflow::from_pinned(
        &inst.definition,
        &format!("{} (pinned definition of {})", inst.workflow_path, inst.id),
    )?)
}

/// Whether `inst` may be driven with `opts` (completed and canceled instances
/// never; failed ones only with `--retry-failed`, and not once the
/// workflow's `timeout` passed: the run would time out at once). A refusal
/// of a failed instance says what can change its result ([`advice`]).
async fn check_resumable(
    store: &Store,
    inst: &store::InstanceRow,
    opts: &RunOptions,
) -> Result<(), EngineError> {
    let id = &inst.id;
    if opts.restart.is_some() {
        return Ok(restart::check_ended(id, inst.status.as_str())?);
    }
    match inst.status {
        InstanceStatus::Completed => Err(EngineError::NotResumable(format!(
            "instance {id} already completed"
        ))),
        InstanceStatus::Canceled => Err(EngineError::NotResumable(format!(
            "instance {id} was canceled; it cannot be resumed"
        ))),
        InstanceStatus::Failed if opts.cancel => Err(EngineError::NotResumable(format!(
            "instance {id} already failed; there is nothing to cancel"
        ))),
        InstanceStatus::Failed => {
            let remedy = advice::remedy_of(store, inst).await?;
            let refused = !opts.retry_failed || matches!(remedy, Remedy::DeadlinePassed { .. });
            if !refused {
                return Ok(());
            }
            Err(EngineError::NotResumable(format!(
                "instance {id} failed{}; {}",
                inst.error
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default(),
                remedy.advice(&id[..id.len().min(12)], &inst.workflow_path)
            )))
        }
        _ => Ok(()),
    }
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
        KeyValue::new("workflow.step.id", a.key.clone()),
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
/// their spans rebuilt, and their unit is retried or fails.
fn recover_crashed(
    id: &str,
    wf: &Workflow,
    open: &[store::OpenAttempt],
    traces: &std::collections::BTreeMap<i64, store::RunTrace>,
    uncounted: &HashMap<String, Vec<i64>>,
    records: &mut HashMap<String, StepRow>,
    writes: &mut Vec<Write>,
) {
    let message = "the process running this attempt died before it finished";
    for a in open {
        let key = a.key.clone();
        let end = AttemptEnd {
            outcome: AttemptOutcome::Crashed,
            error_type: Some(ErrorType::Crashed),
            error_message: Some(message.into()),
            exit_code: None,
            finished_at: store::now(),
            stdout: Vec::new(),
            stderr: Vec::new(),
        };
        writes.push(Write::EndAttempt {
            key: key.clone(),
            attempt: a.attempt,
            end: end.clone(),
        });
        if let Some((span_id, started_ns)) = &a.span {
            let crashed = store::UnspannedAttempt {
                key: key.clone(),
                attempt: a.attempt,
                run: a.run,
                span_id: span_id.clone(),
                started_ns: *started_ns,
                finished_at: None,
                outcome: AttemptOutcome::Crashed,
                error_type: Some(ErrorType::Crashed),
                error_message: Some(message.into()),
            };
            rebuild_attempt_span(id, wf, traces, &crashed, None, writes);
        }
        let Some(rec) = records.get_mut(&key) else {
            continue;
        };
        let Some(step) = wf.step(&rec.step_id) else {
            continue;
        };
        let retry = if UnitKey::parse(&key).compensation {
            step.compensate
                .as_ref()
                .map(|c| &c.retry)
                .unwrap_or(&step.retry)
        } else {
            &step.retry
        };
        rec.outcome = Some(AttemptOutcome::Crashed);
        rec.error_type = Some(ErrorType::Crashed);
        rec.error_message = end.error_message.clone();
        let base = rec.budget_base;
        let not_counted = uncounted
            .get(&key)
            .map_or(0, |v| v.iter().filter(|&&n| n > base).count() as i64);
        let used = rec.attempts.max(a.attempt) - base - not_counted;
        if used >= i64::from(retry.max_attempts) || !retry.is_retryable(&ErrorType::Crashed) {
            rec.status = StepStatus::Failed;
            rec.finished_at = Some(end.finished_at);
            rec.error_message = Some(format!(
                "{message} ({used} of {} attempt(s) used; `wf resume {id} --retry-failed` gives it another)",
                retry.max_attempts
            ));
        } else {
            rec.status = StepStatus::Retrying;
            rec.retry_at = None;
        }
        writes.push(Write::Step(Box::new(rec.clone())));
    }
}
