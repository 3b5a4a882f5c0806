//! Runs driven through [`Scheduler::step`] alone, as the driver would drive
//! them but with no process, clock or database: each test feeds inputs
//! (ticks at given times, attempts that ended, stops, events) and reads the
//! writes and effects back, in restate's style. A job "runs" by the test
//! settling its attempt with the result it chooses.

use super::run::{Run, ended, exit, interrupted, notes, ok, spawned};
use super::*;
use crate::store::EventRow;
use crate::vocab::CancelRequest;

#[test]
fn a_chain_records_each_attempt_before_its_job_and_completes() {
    let mut r = Run::of(History::of(CHAIN));
    let e = r.tick(at(0));
    assert_eq!(spawned(&e), ["a#1"]);
    assert_eq!(r.writes(), ["start a#1", "a running"]);
    assert_eq!(
        notes(&e),
        [Note::StepStarted {
            key: "a".into(),
            attempt: 1
        }]
    );
    // The job is told who it is, and its trace context names the span
    // its attempt's row records.
    let Some(Effect::Spawn { job, .. }) = e.iter().find(|e| matches!(e, Effect::Spawn { .. }))
    else {
        unreachable!()
    };
    let Job::Shell(job) = &**job else {
        panic!("a shell job")
    };
    let env: HashMap<&str, &str> = job
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(env["WF_STEP_ID"], "a");
    assert_eq!(env["WF_ATTEMPT"], "1");
    assert_eq!(env["WF_INSTANCE_ID"], "i1");
    assert_eq!(
        env["TRACEPARENT"],
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000001-01"
    );

    // One transaction: a's result, then b's start.
    let e = r.settle(at(1), "a", ok(json!({ "stdout": "" })));
    assert_eq!(
        r.writes(),
        ["end a#1 ok", "a completed", "start b#1", "b running"]
    );
    assert_eq!(spawned(&e), ["b#1"]);
    assert!(e.iter().any(|e| matches!(
        e,
        Effect::AttemptEnded { key, outcome: AttemptOutcome::Ok, .. } if key == "a"
    )));
    r.settle(at(2), "b", ok(json!({})));
    let e = r.settle(at(3), "c", ok(json!({})));
    assert!(spawned(&e).is_empty());
    assert_eq!(
        ended(&r.step(at(3), Input::Idle)),
        Some(RunOutcome::Completed)
    );
}

#[test]
fn a_failed_attempt_backs_off_runs_again_and_then_fails_the_run() {
    let mut r = Run::of(History::of(
        "name: retry
steps:
  - id: a
    run: 'false'
    retry: { max_attempts: 2, interval: 10s }
",
    ));
    r.tick(at(0));
    r.writes();
    let e = r.settle(at(1), "a", exit(1));
    assert_eq!(r.writes(), ["end a#1 retry", "a retrying until 11"]);
    assert!(spawned(&e).is_empty(), "backing off");
    assert!(notes(&e).iter().any(|n| matches!(
        n,
        Note::StepRetrying { next_attempt: 2, try_n: 2, max_attempts: 2, delay, .. }
            if *delay == Duration::from_secs(10)
    )));
    assert!(spawned(&r.tick(at(5))).is_empty());
    assert_eq!(r.s.next_wake(), Some(at(11)));
    assert_eq!(spawned(&r.tick(at(11))), ["a#2"]);
    assert_eq!(r.writes(), ["start a#2", "a running"]);
    r.settle(at(12), "a", exit(1));
    assert_eq!(r.writes(), ["end a#2 failed", "a failed"]);
    assert_eq!(
        ended(&r.step(at(12), Input::Idle)),
        Some(RunOutcome::Failed(
            "step `a` failed (exit.1: exited with code 1)".into()
        ))
    );
}

#[test]
fn a_pure_step_patches_the_state_in_the_same_transaction() {
    let mut r = Run::of(History::of(
        "name: pure
steps:
  - id: a
    run: 'true'
    set_state: { n: \"${{ output.n }}\" }
  - id: b
    needs: [a]
    set_state: { done: true }
",
    ));
    r.tick(at(0));
    r.writes();
    r.settle(at(1), "a", ok(json!({ "n": 7 })));
    assert_eq!(
        r.writes(),
        [
            "end a#1 ok",
            "a completed",
            "start b#1",
            "end b#1 ok",
            "b completed",
            r#"state {"n":7,"done":true}"#
        ],
        "b needs no process: it settles in a's transaction, and the state is written once"
    );
}

#[test]
fn a_sleep_suspends_the_run_until_its_time() {
    let mut r = Run::of(History::of(
        "name: nap
steps:
  - id: a
    sleep: 60s
  - id: b
    needs: [a]
    run: 'true'
",
    ));
    assert!(spawned(&r.tick(at(0))).is_empty());
    assert_eq!(r.writes(), ["a sleeping until 60"]);
    assert_eq!(ended(&r.step(at(0), Input::Idle)), None, "not over");
    assert_eq!(
        r.s.suspend_outcome(r.s.next_wake(), at(0)),
        RunOutcome::Sleeping(at(60))
    );
    let e = r.tick(at(60));
    assert_eq!(
        r.writes(),
        [
            "start a#1",
            "end a#1 ok",
            "a completed",
            "start b#1",
            "b running"
        ]
    );
    assert_eq!(spawned(&e), ["b#1"]);
}

#[test]
fn an_event_wakes_its_waiting_step_and_links_the_sender_trace() {
    let mut r = Run::of(History::of(
        "name: wait
steps:
  - id: w
    wait_for_event: { name: go }
",
    ));
    r.tick(at(0));
    assert_eq!(r.writes(), ["w waiting"]);
    assert_eq!(r.s.awaited_events(), ["go"]);
    let sent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let e = r.step(
        at(1),
        Input::Events(vec![
            EventRow {
                id: 6,
                name: "other".into(),
                payload: "x".into(),
                traceparent: None,
            },
            EventRow {
                id: 7,
                name: "go".into(),
                payload: r#"{"ok":true}"#.into(),
                traceparent: Some(sent.into()),
            },
        ]),
    );
    assert!(matches!(&e[..], [Effect::Again]), "look again now");
    let e = r.tick(at(1));
    assert_eq!(
        r.writes(),
        ["w takes event 7", "start w#1", "end w#1 ok", "w completed"]
    );
    assert!(e.iter().any(|e| matches!(
        e,
        Effect::LinkEvent { name, traceparent } if name == "go" && traceparent == sent
    )));
    assert_eq!(
        r.s.records["w"].output["json"],
        json!({ "ok": true }),
        "the payload, parsed"
    );
}

#[test]
fn a_false_if_skips_its_step_with_a_skipped_span() {
    let mut r = Run::of(History::of(
        "name: skip
steps:
  - id: a
    if: ${{ false }}
    run: 'true'
  - id: b
    needs: [a]
    run: 'true'
",
    ));
    let e = r.tick(at(0));
    assert!(
        e.iter()
            .any(|e| matches!(e, Effect::Skipped { key } if key == "a"))
    );
    assert!(notes(&e).contains(&Note::StepSkipped { key: "a".into() }));
    assert_eq!(r.writes(), ["a skipped", "start b#1", "b running"]);
    assert_eq!(
        spawned(&e),
        ["b#1"],
        "a skipped step satisfies its dependents"
    );
}

#[test]
fn a_cancel_interrupts_what_runs_then_compensates() {
    let mut r = Run::of(History::of(SAGA).done("a", 1));
    r.tick(at(0));
    r.writes();
    let e = r.step(at(1), Input::CancelAsked(CancelRequest::Cancel));
    assert!(notes(&e).contains(&Note::Message("canceled: stopping running steps".into())));
    assert!(
        e.iter()
            .any(|e| matches!(e, Effect::Interrupt { fresh: true }))
    );
    let e = r.settle(at(2), "b", interrupted());
    assert_eq!(
        r.writes(),
        [
            "end b#1 canceled",
            "b canceled",
            "start a:compensate#1",
            "a:compensate running"
        ]
    );
    assert_eq!(spawned(&e), ["a:compensate#1"]);
    assert!(
        r.s.uncounted["b"].contains(&1),
        "a canceled attempt does not count"
    );
    // Asked again while compensating: nothing more happens.
    let e = r.step(at(3), Input::CancelAsked(CancelRequest::Cancel));
    assert!(e.is_empty());
    r.settle(at(4), "a:compensate", ok(json!({})));
    assert_eq!(
        ended(&r.step(at(4), Input::Idle)),
        Some(RunOutcome::Canceled)
    );
}

#[test]
fn a_signal_interrupts_and_starts_nothing_more() {
    let mut r = Run::of(History::of(CHAIN));
    r.tick(at(0));
    let e = r.step(at(1), Input::Stop(Stop::Signal));
    assert!(
        e.iter()
            .any(|e| matches!(e, Effect::Interrupt { fresh: false }))
    );
    r.writes();
    let e = r.settle(at(2), "a", interrupted());
    assert_eq!(r.writes(), ["end a#1 interrupted", "a pending"]);
    assert!(spawned(&e).is_empty());
    assert_eq!(
        ended(&r.step(at(2), Input::Idle)),
        Some(RunOutcome::Interrupted)
    );
}

#[test]
fn the_workflow_deadline_stops_the_run_and_fails_it() {
    let mut r = Run::of(History::of(
        "name: slow
timeout: 10s
steps:
  - id: a
    run: sleep 60
",
    ));
    r.s.deadline = Some(at(10));
    r.tick(at(0));
    assert!(
        r.tick(at(9)).is_empty(),
        "before the deadline nothing happens"
    );
    let e = r.tick(at(10));
    assert!(
        e.iter()
            .any(|e| matches!(e, Effect::Interrupt { fresh: true }))
    );
    assert_eq!(
        r.s.failed.as_deref(),
        Some("workflow timed out after 10.0s")
    );
    r.writes();
    r.settle(at(11), "a", interrupted());
    assert_eq!(r.writes(), ["end a#1 timeout", "a failed"]);
    assert_eq!(
        ended(&r.step(at(11), Input::Idle)),
        Some(RunOutcome::Failed("workflow timed out after 10.0s".into()))
    );
}

#[test]
fn for_each_pins_its_list_and_runs_items_within_max_parallel() {
    let mut r = Run::of(History::of(
        "name: fan
steps:
  - id: f
    for_each: [1, 2, 3]
    max_parallel: 2
    run: echo ${{ item }}
",
    ));
    let e = r.tick(at(0));
    assert_eq!(spawned(&e), ["f[0]#1", "f[1]#1"]);
    assert_eq!(
        r.writes(),
        [
            "f running",
            "start f[0]#1",
            "f[0] running",
            "start f[1]#1",
            "f[1] running"
        ]
    );
    assert_eq!(*r.s.records["f"].items, json!([1, 2, 3]));
    let e = r.settle(at(1), "f[0]", ok(json!("one")));
    assert_eq!(spawned(&e), ["f[2]#1"], "a slot freed");
    r.settle(at(2), "f[1]", ok(json!("two")));
    let e = r.settle(at(3), "f[2]", ok(json!("three")));
    assert!(notes(&e).contains(&Note::FanOutFinished {
        key: "f".into(),
        items: 3
    }));
    assert_eq!(r.s.records["f"].output, json!(["one", "two", "three"]));
    assert_eq!(
        ended(&r.step(at(3), Input::Idle)),
        Some(RunOutcome::Completed)
    );
}

#[test]
fn an_input_that_cannot_be_evaluated_fails_the_step_without_a_process() {
    let mut r = Run::of(History::of(
        "name: bad
steps:
  - id: f
    for_each: ${{ 3 }}
    run: 'true'
",
    ));
    let e = r.tick(at(0));
    assert!(spawned(&e).is_empty());
    assert_eq!(r.writes(), ["start f#1", "end f#1 failed", "f failed"]);
    assert!(
        r.s.records["f"]
            .error_message
            .as_deref()
            .is_some_and(|m| m.contains("not a list"))
    );
}

#[test]
fn a_crashed_attempt_runs_again_in_the_next_run() {
    let mut h = History::of(TWO_TRIES);
    let (row, _) = crashed(&h.wf, "a", 1, &[]);
    h.rows.push(row);
    let mut r = Run::of(h);
    let due = r.s.records["a"].retry_at.unwrap_or(at(0));
    assert_eq!(spawned(&r.tick(due)), ["a#2"]);
    assert_eq!(r.writes(), ["start a#2", "a running"]);
}

#[test]
fn outputs_that_cannot_be_rendered_fail_a_completed_run() {
    let mut r = Run::of(History::of(
        "name: out
steps:
  - id: a
    run: 'true'
outputs: { x: \"${{ fromJSON('nope') }}\" }
",
    ));
    r.tick(at(0));
    r.settle(at(1), "a", ok(json!({})));
    let e = r.step(at(1), Input::Idle);
    assert!(matches!(e.last(), Some(Effect::Again)), "{e:?}");
    assert!(
        r.s.failed
            .as_deref()
            .is_some_and(|f| f.starts_with("`outputs`:"))
    );
    assert!(matches!(
        ended(&r.step(at(1), Input::Idle)),
        Some(RunOutcome::Failed(_))
    ));
}

#[test]
fn a_failure_runs_its_handler_then_the_compensations_then_fails() {
    let mut r = Run::of(History::of(
        "name: h
steps:
  - id: a
    run: 'true'
    compensate: { run: 'true' }
  - id: b
    needs: [a]
    run: 'false'
  - id: cleanup
    needs: [b]
    if: ${{ always() }}
    run: 'true'
",
    ));
    r.tick(at(0));
    r.settle(at(1), "a", ok(json!({})));
    r.writes();
    let e = r.settle(at(2), "b", exit(1));
    assert_eq!(
        r.writes(),
        [
            "end b#1 failed",
            "b failed",
            "start cleanup#1",
            "cleanup running"
        ],
        "the handler first, nothing compensated while it runs"
    );
    assert_eq!(spawned(&e), ["cleanup#1"]);
    let e = r.settle(at(3), "cleanup", ok(json!({})));
    assert_eq!(spawned(&e), ["a:compensate#1"]);
    assert_eq!(ended(&r.step(at(3), Input::Idle)), None, "compensating");
    r.settle(at(4), "a:compensate", ok(json!({})));
    assert_eq!(
        ended(&r.step(at(4), Input::Idle)),
        Some(RunOutcome::Failed(
            "step `b` failed (exit.1: exited with code 1)".into()
        ))
    );
}

#[test]
fn set_state_sees_the_state_as_committed_when_its_step_started() {
    let mut r = Run::of(History::of(
        "name: par
steps:
  - id: a
    run: 'true'
    set_state: { n: 1 }
  - id: b
    needs: []
    run: 'true'
    set_state: { b_saw: \"${{ state.n || 'none' }}\" }
",
    ));
    assert_eq!(spawned(&r.tick(at(0))), ["a#1", "b#1"]);
    r.settle(at(1), "a", ok(json!({})));
    r.settle(at(2), "b", ok(json!({})));
    let states: Vec<String> = r
        .writes()
        .into_iter()
        .filter(|w| w.starts_with("state"))
        .collect();
    assert_eq!(
        states,
        [r#"state {"n":1}"#, r#"state {"n":1,"b_saw":"none"}"#],
        "b started before a's patch was committed"
    );
}

fn event(id: i64, name: &str) -> EventRow {
    EventRow {
        id,
        name: name.into(),
        payload: "{}".into(),
        traceparent: None,
    }
}

#[test]
fn an_event_seen_after_one_with_a_higher_id_is_still_taken_and_none_twice() {
    let mut r = Run::of(History::of(
        "name: two
steps:
  - id: a
    wait_for_event: { name: x }
  - id: b
    needs: []
    wait_for_event: { name: y }
",
    ));
    r.tick(at(0));
    r.writes();
    assert!(matches!(
        &r.step(at(1), Input::Events(vec![event(9, "y")]))[..],
        [Effect::Again]
    ));
    r.tick(at(1));
    assert_eq!(
        r.writes(),
        ["b takes event 9", "start b#1", "end b#1 ok", "b completed"]
    );
    // Read again before that commit: 9 is still there, not taken; 5, sent
    // before it but committed after, is new.
    let e = r.step(at(2), Input::Events(vec![event(5, "x"), event(9, "y")]));
    assert!(matches!(&e[..], [Effect::Again]), "x arrived");
    r.tick(at(2));
    assert_eq!(
        r.writes(),
        ["a takes event 5", "start a#1", "end a#1 ok", "a completed"]
    );
    assert!(
        r.step(at(3), Input::Events(vec![event(5, "x"), event(9, "y")]))
            .is_empty(),
        "nothing is new"
    );
}

/// A child run in the parent's process hands its end over
/// (`Input::ChildEnded`): the step waiting on it takes it by name, in the
/// commit that records the step's end and the next step's start; read
/// back from the database before that commit, it is not taken twice.
#[test]
fn a_child_end_handed_over_is_taken_by_name_once() {
    let mut wf = Workflow::from_pinned(
        "name: p
steps:
  - id: c
    workflow: child.yaml
  - id: d
    run: [/bin/true]
",
        "test.yaml",
    )
    .expect("a valid workflow");
    let child = Workflow::from_pinned(
        "name: child\nsteps:\n  - id: t\n    run: [/bin/true]\n",
        "child.yaml",
    )
    .expect("a valid workflow");
    wf.children.insert("child.yaml".into(), Arc::new(child));
    let mut r = Run::of(History {
        wf: Arc::new(wf),
        rows: Vec::new(),
        failed: None,
        secrets: serde_json::Map::new(),
    });
    let made = r.tick(at(0));
    let id = r.s.child_id("c", 1);
    assert!(
        made.iter()
            .any(|e| matches!(e, Effect::RunChild { id: i, .. } if *i == id)),
        "{made:?}"
    );
    r.writes();
    let name = crate::vocab::child_event(&id);
    let payload = json!({"status": "completed", "outputs": {"n": 1}}).to_string();
    // Another child's end: no step waits on it.
    assert!(
        r.step(
            at(1),
            Input::ChildEnded {
                name: "child:other".into(),
                payload: payload.clone()
            }
        )
        .is_empty()
    );
    assert!(matches!(
        &r.step(
            at(1),
            Input::ChildEnded {
                name: name.clone(),
                payload
            }
        )[..],
        [Effect::Again]
    ));
    // Read back before the commit that takes it: known already.
    let read = EventRow {
        id: 4,
        name: name.clone(),
        payload: "{}".into(),
        traceparent: None,
    };
    assert!(r.step(at(1), Input::Events(vec![read.clone()])).is_empty());
    let started = r.tick(at(1));
    assert_eq!(spawned(&started), ["d#1"]);
    assert_eq!(
        r.writes(),
        [
            format!("c takes event {name}"),
            "end c#1 ok".into(),
            "c completed".into(),
            "start d#1".into(),
            "d running".into(),
        ]
    );
    assert_eq!(r.s.records["c"].output, json!({"n": 1}));
    // Read back once more: taken, it is not taken again.
    assert!(r.step(at(2), Input::Events(vec![read])).is_empty());
    r.tick(at(2));
    assert!(
        r.writes().iter().all(|w| !w.contains("takes")),
        "taken twice"
    );
}
