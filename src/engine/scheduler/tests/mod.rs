//! The scheduler driven without I/O: a workflow, the records history left
//! (or that earlier decisions made), a time, and the decisions expected.
//! Each test reads as a history: "a completed, b failed at 10:00 and is
//! due again at 10:01; what runs at 10:00:30?"

mod close;
mod driven;
mod matrix;
mod run;
mod secrets;

use super::retry::{Verdict, judge};
use super::*;
use crate::store::StepRow;
use crate::vocab::{
    AttemptOutcome, ErrorType, InstanceId, StepStatus, Timestamp, UnitKey, UnitKeyBuf,
};
use crate::workflow::{RetryPolicy, Workflow};
use serde_json::json;
use std::time::Duration;

fn workflow(yaml: &str) -> Arc<Workflow> {
    Arc::new(Workflow::from_pinned(yaml, "test.yaml").expect("a valid workflow"))
}

const T0: i64 = 1_800_000_000_000;

fn at(secs: i64) -> Timestamp {
    Timestamp::from_ms(T0 + secs * 1000)
}

/// A history: rows by key, as `wf` would have left them.
struct History {
    wf: Arc<Workflow>,
    rows: Vec<StepRow>,
    failed: Option<String>,
    /// The secrets' values the run is given.
    secrets: serde_json::Map<String, serde_json::Value>,
}

impl History {
    fn of(yaml: &str) -> History {
        History {
            wf: workflow(yaml),
            rows: Vec::new(),
            failed: None,
            secrets: serde_json::Map::new(),
        }
    }

    fn row(mut self, key: &str, status: StepStatus, f: impl FnOnce(&mut StepRow)) -> History {
        let step = UnitKey::parse(key).step.to_string();
        let mut r = StepRow::pending(key, &step);
        r.status = status;
        f(&mut r);
        self.rows.push(r);
        self
    }

    fn done(self, key: &str, seq: i64) -> History {
        self.row(key, StepStatus::Completed, |r| r.seq = Some(seq))
    }

    fn failed(mut self, key: &str) -> History {
        self.failed = Some(format!("step `{key}` failed"));
        self.row(key, StepStatus::Failed, |_| {})
    }

    fn scheduler(self) -> Scheduler {
        let records: HashMap<UnitKeyBuf, StepRow> =
            self.rows.into_iter().map(|r| (r.key.clone(), r)).collect();
        let s = Scheduler::new(Setup {
            wf: self.wf,
            run: run_data(),
            inputs: json!({}),
            state: json!({}),
            records,
            uncounted: HashMap::new(),
            deadline: None,
            events: Vec::new(),
            opening: Vec::new(),
            secrets: self.secrets,
        });
        assert_eq!(s.failed, self.failed, "the failure history implies");
        s
    }
}

/// The run the tests' schedulers decide for.
fn run_data() -> RunData {
    RunData {
        id: InstanceId::from("i1".to_string()),
        number: 1,
        base_dir: std::path::PathBuf::from("/work"),
        live_dir: None,
        trace_id: "0af7651916cd43dd8448eb211c80319c".into(),
        depth: 0,
        parent: None,
        caller: (
            opentelemetry::trace::TraceFlags::SAMPLED,
            opentelemetry::trace::TraceState::default(),
        ),
        actor: None,
        no_cache: false,
    }
}

/// The keys of what may start at `now`.
fn ready(s: &mut Scheduler, now: Timestamp) -> Vec<String> {
    s.candidates(now)
        .iter()
        .map(|u| u.key(&s.wf).to_string())
        .collect()
}

/// Marks `key` ended with `status`, as settling it would.
fn settle(s: &mut Scheduler, key: &str, status: StepStatus) {
    let step = UnitKey::parse(key).step.to_string();
    let r = s
        .records
        .entry(UnitKeyBuf::new(key))
        .or_insert_with(|| StepRow::pending(key, &step));
    r.status = status;
    if status == StepStatus::Completed {
        s.seq += 1;
        r.seq = Some(s.seq);
    }
    s.running.remove(key);
}

const CHAIN: &str = "name: chain
steps:
  - id: a
    run: 'true'
  - id: b
    needs: [a]
    run: 'true'
  - id: c
    needs: [b]
    run: 'true'
";

#[test]
fn a_chain_runs_one_step_after_another() {
    let mut s = History::of(CHAIN).scheduler();
    assert_eq!(ready(&mut s, at(0)), ["a"]);
    s.running.insert("a".into(), 1);
    assert!(ready(&mut s, at(0)).is_empty(), "a runs: nothing else");
    settle(&mut s, "a", StepStatus::Completed);
    assert_eq!(ready(&mut s, at(1)), ["b"]);
    settle(&mut s, "b", StepStatus::Completed);
    assert_eq!(ready(&mut s, at(2)), ["c"]);
    assert_eq!(s.final_outcome(at(2)), None, "c has not run");
    settle(&mut s, "c", StepStatus::Completed);
    assert!(ready(&mut s, at(3)).is_empty());
    assert_eq!(s.final_outcome(at(3)), Some(RunOutcome::Completed));
}

#[test]
fn a_resumed_chain_starts_where_history_left_it() {
    let mut s = History::of(CHAIN).done("a", 1).scheduler();
    assert_eq!(ready(&mut s, at(0)), ["b"]);
    assert!(!s.frontier.contains(&0), "a ended: off the frontier");
}

#[test]
fn a_step_without_needs_follows_the_one_before_it() {
    let mut s = History::of(
        "name: seq
steps:
  - id: a
    run: 'true'
  - id: b
    run: 'true'
",
    )
    .scheduler();
    assert_eq!(ready(&mut s, at(0)), ["a"]);
}

#[test]
fn a_fan_in_waits_for_every_need() {
    let mut s = History::of(
        "name: fan
steps:
  - id: a
    run: 'true'
  - id: b
    needs: []
    run: 'true'
  - id: c
    needs: [a, b]
    run: 'true'
",
    )
    .scheduler();
    assert_eq!(ready(&mut s, at(0)), ["a", "b"]);
    settle(&mut s, "a", StepStatus::Completed);
    s.running.insert("b".into(), 1);
    assert!(ready(&mut s, at(1)).is_empty());
    settle(&mut s, "b", StepStatus::Completed);
    assert_eq!(ready(&mut s, at(2)), ["c"]);
}

#[test]
fn a_failure_with_continue_on_error_lets_its_dependents_run() {
    let yaml = "name: coe
steps:
  - id: a
    run: 'false'
    continue_on_error: true
  - id: b
    needs: [a]
    run: 'true'
";
    let mut s = History::of(yaml)
        .row("a", StepStatus::Failed, |_| {})
        .scheduler();
    assert_eq!(ready(&mut s, at(0)), ["b"]);
}

#[test]
fn a_failure_stops_what_needs_it_and_fails_the_run() {
    let mut s = History::of(CHAIN).failed("a").scheduler();
    assert!(s.compensating());
    assert!(ready(&mut s, at(0)).is_empty());
    assert_eq!(
        s.final_outcome(at(0)),
        Some(RunOutcome::Failed("step `a` failed".into()))
    );
}

#[test]
fn a_retry_is_due_when_its_backoff_passed_and_wakes_the_run() {
    let mut s = History::of(CHAIN)
        .row("a", StepStatus::Retrying, |r| r.retry_at = Some(at(60)))
        .scheduler();
    assert!(ready(&mut s, at(59)).is_empty(), "backing off");
    assert_eq!(s.next_wake(), Some(at(60)));
    assert_eq!(s.next_timer(), Some(at(60)));
    assert_eq!(ready(&mut s, at(60)), ["a"]);
}

#[test]
fn the_workflow_deadline_wakes_the_run_unless_it_is_stopping() {
    let mut s = History::of(CHAIN).scheduler();
    s.deadline = Some(at(30));
    assert_eq!(s.next_wake(), Some(at(30)));
    s.stop = Some(Stop::Deadline);
    assert_eq!(s.next_wake(), None);
}

#[test]
fn handlers_run_after_a_failure_and_terminate_runs_none() {
    let yaml = "name: handlers
steps:
  - id: a
    run: 'false'
  - id: b
    needs: [a]
    run: 'true'
  - id: cleanup
    needs: [b]
    if: ${{ always() }}
    run: 'true'
";
    let mut s = History::of(yaml).failed("a").scheduler();
    assert_eq!(
        ready(&mut s, at(0)),
        ["cleanup"],
        "b will not run: its handler's need is settled"
    );
    s.running.insert("cleanup".into(), 1);
    assert!(s.handler_running());
    assert_eq!(s.final_outcome(at(0)), None, "the handler runs");
    settle(&mut s, "cleanup", StepStatus::Completed);
    assert!(s.final_outcome(at(1)).is_some());

    let mut s = History::of(yaml).failed("a").scheduler();
    s.terminate = true;
    assert!(ready(&mut s, at(0)).is_empty());
}

const SAGA: &str = "name: saga
steps:
  - id: a
    run: 'true'
    compensate: { run: 'true' }
  - id: b
    needs: [a]
    run: 'true'
    compensate: { run: 'true' }
  - id: c
    needs: [b]
    run: 'true'
  - id: d
    needs: [c]
    run: 'false'
";

#[test]
fn compensations_run_one_at_a_time_in_reverse_completion_order() {
    let mut s = History::of(SAGA)
        .done("a", 1)
        .done("b", 2)
        .done("c", 3)
        .failed("d")
        .scheduler();
    assert_eq!(ready(&mut s, at(0)), ["b:compensate"], "c has none");
    s.running.insert("b:compensate".into(), 1);
    assert!(ready(&mut s, at(0)).is_empty(), "one at a time");
    assert_eq!(s.final_outcome(at(0)), None);
    settle(&mut s, "b:compensate", StepStatus::Completed);
    assert_eq!(ready(&mut s, at(1)), ["a:compensate"]);
    // A failed compensation does not stop the others, nor run again.
    settle(&mut s, "a:compensate", StepStatus::Failed);
    assert!(ready(&mut s, at(2)).is_empty());
    assert!(!s.compensations_pending());
    assert!(matches!(
        s.final_outcome(at(2)),
        Some(RunOutcome::Failed(_))
    ));
}

#[test]
fn a_compensation_backing_off_holds_the_ones_before_it() {
    let mut s = History::of(SAGA)
        .done("a", 1)
        .done("b", 2)
        .failed("d")
        .row("b:compensate", StepStatus::Retrying, |r| {
            r.retry_at = Some(at(10));
        })
        .scheduler();
    assert!(ready(&mut s, at(5)).is_empty());
    assert_eq!(ready(&mut s, at(10)), ["b:compensate"]);
}

#[test]
fn a_cancel_compensates_and_ends_canceled() {
    let mut s = History::of(SAGA).done("a", 1).scheduler();
    s.stop = Some(Stop::Cancel);
    assert_eq!(ready(&mut s, at(0)), ["a:compensate"]);
    settle(&mut s, "a:compensate", StepStatus::Completed);
    assert_eq!(s.final_outcome(at(1)), Some(RunOutcome::Canceled));
}

#[test]
fn a_signal_ends_the_run_interrupted_whatever_is_left() {
    let mut s = History::of(CHAIN).scheduler();
    s.stop = Some(Stop::Signal);
    assert_eq!(s.final_outcome(at(0)), Some(RunOutcome::Interrupted));
}

const FAN_OUT: &str = "name: fan
steps:
  - id: s
    for_each: ${{ inputs.list }}
    max_parallel: 2
    run: 'true'
  - id: after
    needs: [s]
    run: 'true'
inputs:
  list: { default: [] }
";

#[test]
fn for_each_items_start_within_max_parallel_and_then_the_step_settles() {
    let mut s = History::of(FAN_OUT)
        .row("s", StepStatus::Running, |r| {
            r.items = json!([1, 2, 3]).into();
        })
        .scheduler();
    assert_eq!(ready(&mut s, at(0)), ["s[0]", "s[1]"]);
    s.running.insert("s[0]".into(), 1);
    assert_eq!(ready(&mut s, at(0)), ["s[1]"], "one slot left");
    s.running.insert("s[1]".into(), 1);
    assert!(ready(&mut s, at(0)).is_empty());
    settle(&mut s, "s[0]", StepStatus::Completed);
    assert_eq!(ready(&mut s, at(1)), ["s[2]"]);
    settle(&mut s, "s[1]", StepStatus::Completed);
    settle(&mut s, "s[2]", StepStatus::Completed);
    assert_eq!(
        ready(&mut s, at(2)),
        ["s"],
        "every item ended: the step settles"
    );
    settle(&mut s, "s", StepStatus::Completed);
    assert_eq!(ready(&mut s, at(3)), ["after"]);
}

#[test]
fn a_run_with_a_waiting_step_suspends_waiting_for_its_event() {
    let yaml = "name: wait
steps:
  - id: w
    wait_for_event: { name: approved, timeout: 1h }
  - id: z
    sleep: 1h
";
    let s = History::of(yaml)
        .row("w", StepStatus::Waiting, |r| r.retry_at = Some(at(3600)))
        .row("z", StepStatus::Sleeping, |r| r.retry_at = Some(at(60)))
        .scheduler();
    assert_eq!(
        s.suspend_outcome(s.next_wake(), at(0)),
        RunOutcome::Waiting("approved".into())
    );
    assert_eq!(s.next_wake(), Some(at(60)), "the sleep is due first");
    assert_eq!(
        s.next_timer(),
        Some(at(60)),
        "an event's timeout is no timer to wait for inline"
    );
    let s = History::of(yaml)
        .row("z", StepStatus::Sleeping, |r| r.retry_at = Some(at(60)))
        .scheduler();
    assert_eq!(
        s.suspend_outcome(s.next_wake(), at(0)),
        RunOutcome::Sleeping(at(60))
    );
}

#[test]
fn the_budget_counts_attempts_since_its_base_but_not_the_interrupted() {
    let mut s = History::of(CHAIN)
        .row("a", StepStatus::Pending, |r| {
            r.attempts = 5;
            r.budget_base = 3;
        })
        .scheduler();
    assert_eq!(s.budget_used("a", 3), 2);
    s.uncounted.insert("a".into(), vec![2, 4]);
    assert_eq!(s.budget_used("a", 3), 1, "attempt 4 was interrupted");
}

#[test]
fn put_writes_the_row_and_remembers_a_timer() {
    let mut s = History::of(CHAIN).scheduler();
    let a = Unit::step(0);
    s.record(&a).status = StepStatus::Retrying;
    s.record(&a).retry_at = Some(at(5));
    s.put(&a);
    assert!(s.timed.contains("a"));
    assert_eq!(s.next_wake(), Some(at(5)));
    assert!(matches!(&s.writes[..], [Write::Step(r)] if r.key == "a"));
}

fn policy(yaml: &str) -> RetryPolicy {
    let wf = workflow(&format!(
        "name: p\nsteps:\n  - id: a\n    run: 'true'\n    retry: {yaml}\n"
    ));
    wf.steps[0].retry.clone()
}

#[test]
fn a_failure_is_retried_within_its_budget_with_backoff() {
    let p = policy("{ max_attempts: 3, interval: 1s, backoff: exponential, multiplier: 2 }");
    let exit = ErrorType::Exit(1);
    let retry_in = |used| judge(&exit, &p, false, false, used, None).retry_in;
    assert_eq!(retry_in(1), Some(Duration::from_secs(1)));
    assert_eq!(retry_in(2), Some(Duration::from_secs(2)));
    assert_eq!(
        judge(&exit, &p, false, false, 3, None),
        Verdict {
            outcome: AttemptOutcome::Failed,
            retry_in: None
        },
        "the budget is spent"
    );
    assert_eq!(
        judge(&ErrorType::Timeout, &p, false, false, 3, None).outcome,
        AttemptOutcome::Timeout
    );
    assert_eq!(
        judge(&exit, &p, false, true, 1, None).outcome,
        AttemptOutcome::Failed,
        "stopped by the workflow's deadline: never retried"
    );
    assert_eq!(
        judge(&ErrorType::Expression, &p, false, false, 1, None).outcome,
        AttemptOutcome::Failed
    );
}

#[test]
fn a_server_retry_after_lengthens_the_backoff() {
    let p = policy("{ max_attempts: 3, interval: 1s }");
    let v = judge(
        &ErrorType::Http(503),
        &p,
        true,
        false,
        1,
        Some(Duration::from_secs(7)),
    );
    assert_eq!(v.retry_in, Some(Duration::from_secs(7)));
}

#[test]
fn http_steps_retry_429_5xx_and_what_retryable_lists() {
    let p = policy("{ max_attempts: 3, retryable: [http.409] }");
    let retried = |e: ErrorType| judge(&e, &p, true, false, 1, None).retry_in.is_some();
    assert!(retried(ErrorType::Http(503)));
    assert!(retried(ErrorType::Http(429)));
    assert!(retried(ErrorType::HttpConnect));
    assert!(retried(ErrorType::Http(409)), "listed");
    assert!(!retried(ErrorType::Http(404)));
    assert!(!retried(ErrorType::HttpRequest));
}

#[test]
fn non_retryable_patterns_and_crash_only_policies() {
    let p = policy("{ max_attempts: 5, non_retryable: [user.*] }");
    assert!(
        judge(
            &ErrorType::User("declined".into()),
            &p,
            false,
            false,
            1,
            None
        )
        .retry_in
        .is_none()
    );
    assert!(
        judge(&ErrorType::Exit(2), &p, false, false, 1, None)
            .retry_in
            .is_some()
    );
    let crash_only = RetryPolicy::crash_recovery();
    assert!(
        judge(&ErrorType::Crashed, &crash_only, false, false, 1, None)
            .retry_in
            .is_some()
    );
    assert!(
        judge(&ErrorType::Exit(1), &crash_only, false, false, 1, None)
            .retry_in
            .is_none()
    );
}

fn open_attempt(key: &str, attempt: i64) -> crate::store::OpenAttempt {
    crate::store::OpenAttempt {
        key: key.into(),
        attempt,
        run: 1,
        span: None,
        process: None,
    }
}

/// `key`'s row after its attempt `attempts` crashed at `at(5)` (the
/// attempts in `uncounted` were interrupted), and the writes that say so.
fn crashed(wf: &Workflow, key: &str, attempts: i64, uncounted: &[i64]) -> (StepRow, Vec<Write>) {
    let step = UnitKey::parse(key).step.to_string();
    let mut row = StepRow::pending(key, &step);
    row.status = StepStatus::Running;
    row.attempts = attempts;
    let mut records = HashMap::from([(UnitKeyBuf::new(key), row)]);
    let uncounted = HashMap::from([(UnitKeyBuf::new(key), uncounted.to_vec())]);
    let writes = recovery::close_crashed(
        &InstanceId::from("i1"),
        wf,
        &[open_attempt(key, attempts)],
        &uncounted,
        &mut records,
        at(5),
    );
    (records.remove(key).unwrap(), writes)
}

const TWO_TRIES: &str = "name: c
steps:
  - id: a
    run: 'true'
    retry: { max_attempts: 2 }
";

#[test]
fn a_crashed_attempt_is_retried_while_its_budget_lasts() {
    let wf = workflow(TWO_TRIES);
    let (a, writes) = crashed(&wf, "a", 1, &[]);
    assert!(matches!(&writes[..], [
        Write::EndAttempt { key, attempt: 1, end },
        Write::Step(row),
    ] if key == "a" && end.outcome == AttemptOutcome::Crashed
        && end.error_type == Some(ErrorType::Crashed) && end.finished_at == at(5)
        && row.status == StepStatus::Retrying));
    assert_eq!(a.outcome, Some(AttemptOutcome::Crashed));

    // The second crash spends the budget: the step fails, saying how to go on.
    let (a, _) = crashed(&wf, "a", 2, &[]);
    assert_eq!(a.status, StepStatus::Failed);
    assert_eq!(a.finished_at, Some(at(5)));
    let message = a.error_message.as_deref().unwrap_or_default();
    assert!(
        message.contains("2 of 2 attempt(s) used")
            && message.contains("`wf resume i1 --retry-failed`"),
        "{message}"
    );
}

#[test]
fn an_interrupted_attempt_does_not_count_against_a_crash() {
    let (a, _) = crashed(&workflow(TWO_TRIES), "a", 2, &[1]);
    assert_eq!(a.status, StepStatus::Retrying);
}

#[test]
fn a_crashed_compensation_follows_its_own_retry_policy() {
    let wf = workflow(
        "name: c
steps:
  - id: a
    run: 'true'
    retry: { max_attempts: 5 }
    compensate: { run: 'true', retry: { max_attempts: 1 } }
",
    );
    assert_eq!(
        crashed(&wf, "a:compensate", 1, &[]).0.status,
        StepStatus::Failed
    );
    assert_eq!(crashed(&wf, "a", 1, &[]).0.status, StepStatus::Retrying);
}

#[test]
fn a_step_without_retry_is_run_again_after_a_crash_but_not_after_a_failure() {
    let wf = workflow("name: c\nsteps:\n  - id: a\n    run: 'true'\n");
    assert_eq!(crashed(&wf, "a", 1, &[]).0.status, StepStatus::Retrying);
    let p = &wf.steps[0].retry;
    assert!(
        judge(&ErrorType::Exit(1), p, false, false, 1, None)
            .retry_in
            .is_none()
    );
}

#[test]
fn a_failed_run_ends_its_retries_and_cancels_its_timers() {
    let mut s = History::of(CHAIN)
        .row("a", StepStatus::Retrying, |r| {
            r.retry_at = Some(at(60));
            r.error_message = Some("exited with code 1".into());
        })
        .row("b", StepStatus::Sleeping, |r| r.retry_at = Some(at(90)))
        .row("c", StepStatus::Completed, |_| {})
        .scheduler();
    s.abandon_retries(StepStatus::Failed, "the workflow failed", at(10));
    let a = &s.records["a"];
    assert_eq!(
        (a.status, a.retry_at, a.finished_at),
        (StepStatus::Failed, None, Some(at(10)))
    );
    assert_eq!(
        a.error_message.as_deref(),
        Some("exited with code 1 (not retried: the workflow failed)")
    );
    let b = &s.records["b"];
    assert_eq!((b.status, b.retry_at), (StepStatus::Canceled, None));
    assert_eq!(b.error_type, Some(ErrorType::Canceled));
    assert_eq!(s.records["c"].status, StepStatus::Completed, "untouched");
    assert_eq!(s.writes.len(), 2, "a and b written");
    assert_eq!(s.next_wake(), None, "no timer left");
}
