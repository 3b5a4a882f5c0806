//! A `matrix` step driven through [`Scheduler::step`] alone: its
//! combinations pinned in expansion order, each in its expressions and
//! shown by its values, and `fail_fast` stopping the running ones (each
//! then settles `canceled`) or, without it, the step failing once all ended.

use super::run::{Run, ended, exit, interrupted, ok, spawned};
use super::*;

const MATRIX: &str = "name: m
steps:
  - id: b
    matrix: { os: [linux, macos], n: [1, 2] }
    exclude_placeholder
    run: echo ${{ matrix.os }}-${{ matrix.n }}
";

fn matrix(extra: &str) -> Run {
    Run::of(History::of(
        &MATRIX.replace("    exclude_placeholder\n", extra),
    ))
}

#[test]
fn combinations_are_pinned_in_order_and_shown_by_their_values() {
    let mut r = matrix("    max_parallel: 3\n");
    let e = r.tick(at(0));
    assert_eq!(
        spawned(&e),
        [
            "b[os=linux,n=1]#1",
            "b[os=linux,n=2]#1",
            "b[os=macos,n=1]#1"
        ]
    );
    assert_eq!(
        *r.s.records["b"].items,
        json!({"matrix": [
            {"os": "linux", "n": 1}, {"os": "linux", "n": 2},
            {"os": "macos", "n": 1}, {"os": "macos", "n": 2}
        ]})
    );
    let Some(Effect::Spawn { job, .. }) = e.iter().find(|e| matches!(e, Effect::Spawn { .. }))
    else {
        unreachable!()
    };
    let Job::Shell(job) = &**job else {
        panic!("a shell job")
    };
    assert!(
        job.env
            .iter()
            .any(|(k, v)| k == "WF_STEP_ID" && v == "b[os=linux,n=1]"),
        "{:?}",
        job.env
    );
    assert!(job.env.iter().any(|(_, v)| v == "linux"), "{:?}", job.env);
    assert_eq!(r.s.shown_key("b[3]".into()).to_string(), "b[os=macos,n=2]");
    for (i, key) in ["b[0]", "b[1]", "b[2]"].into_iter().enumerate() {
        r.settle(at(1 + i as i64), key, ok(json!(i)));
    }
    r.settle(at(5), "b[3]", ok(json!(3)));
    assert_eq!(r.s.records["b"].output, json!([0, 1, 2, 3]));
    assert_eq!(
        ended(&r.step(at(5), Input::Idle)),
        Some(RunOutcome::Completed)
    );
}

#[test]
fn fail_fast_stops_the_running_combinations_which_end_canceled() {
    let mut r = matrix("    max_parallel: 3\n");
    r.tick(at(0));
    r.writes();
    let e = r.settle(at(1), "b[1]", exit(4));
    let stopped: Vec<&str> = e
        .iter()
        .filter_map(|e| match e {
            Effect::StopUnits { keys } => {
                Some(keys.iter().map(UnitKeyBuf::as_str).collect::<Vec<_>>())
            }
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(stopped, ["b[0]", "b[2]"]);
    assert_eq!(r.s.records["b"].status, StepStatus::Failed);
    // The one that never started is canceled at once; nothing new starts.
    assert_eq!(r.s.records["b[3]"].status, StepStatus::Canceled);
    assert!(spawned(&e).is_empty());
    r.settle(at(2), "b[0]", interrupted());
    let e = r.settle(at(2), "b[2]", interrupted());
    assert!(spawned(&e).is_empty());
    for key in ["b[0]", "b[2]"] {
        let rec = &r.s.records[key];
        assert_eq!(rec.status, StepStatus::Canceled, "{key}");
        assert_eq!(rec.outcome, Some(AttemptOutcome::Canceled), "{key}");
        assert!(
            rec.error_message
                .as_deref()
                .is_some_and(|m| m.contains("combination b[os=linux,n=2] failed")),
            "{rec:?}"
        );
    }
    assert!(matches!(
        ended(&r.step(at(3), Input::Idle)),
        Some(RunOutcome::Failed(why)) if why.contains("b[os=linux,n=2]")
    ));
}

#[test]
fn without_fail_fast_the_others_go_on_and_the_step_fails_at_the_end() {
    let mut r = matrix("    fail_fast: false\n    max_parallel: 2\n");
    r.tick(at(0));
    let e = r.settle(at(1), "b[0]", exit(4));
    assert!(!e.iter().any(|e| matches!(e, Effect::StopUnits { .. })));
    assert_eq!(spawned(&e), ["b[os=macos,n=1]#1"], "the next one starts");
    assert_eq!(r.s.records["b"].status, StepStatus::Running);
    let e = r.settle(at(2), "b[1]", ok(json!(1)));
    assert_eq!(spawned(&e), ["b[os=macos,n=2]#1"]);
    r.settle(at(3), "b[2]", ok(json!(2)));
    r.settle(at(4), "b[3]", ok(json!(3)));
    assert_eq!(r.s.records["b"].status, StepStatus::Failed);
    assert_eq!(r.s.records["b"].output, json!([null, 1, 2, 3]));
    assert!(matches!(
        ended(&r.step(at(5), Input::Idle)),
        Some(RunOutcome::Failed(why)) if why.contains("b[os=linux,n=1]")
    ));
}
