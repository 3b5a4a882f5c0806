//! How a run closes ([`Scheduler::close`]), decided without I/O: the status
//! the instance is left in, the parent's event, the retries abandoned and
//! the locks released, as the writes the driver commits.

use super::*;
use crate::engine::runner::RunOutcome;
use crate::store::{ParentRef, Write};
use crate::vocab::InstanceStatus;

fn parent() -> ParentRef {
    ParentRef {
        id: InstanceId::from("p1"),
        key: "call".into(),
        attempt: 1,
    }
}

/// The status written, and whether the locks were released.
fn status_and_release(writes: &[Write]) -> (Option<InstanceStatus>, bool) {
    let status = writes.iter().find_map(|w| match w {
        Write::Status { status, .. } => Some(*status),
        _ => None,
    });
    (
        status,
        writes.iter().any(|w| matches!(w, Write::ReleaseLocks)),
    )
}

#[test]
fn a_child_that_completes_tells_its_parent_with_its_outputs_in_the_same_batch() {
    let mut s = History::of("name: c\nsteps:\n  - id: a\n    lock: { key: k }\n    run: 'true'\n")
        .done("a", 1)
        .scheduler();
    s.writes.push(Write::Outputs(json!({"n": 1})));
    let id = InstanceId::from("c1");
    let closed = s
        .close(&id, Some(&parent()), &RunOutcome::Completed, false, at(5))
        .expect("close");
    assert_eq!(closed.status, InstanceStatus::Completed);
    let (name, payload) = closed.parent_event.expect("the parent's event");
    assert_eq!(name, crate::vocab::child_event(&id));
    let end: ChildEndEvent = serde_json::from_str(&payload).expect("a child's end");
    assert_eq!(
        end,
        ChildEndEvent {
            status: InstanceStatus::Completed,
            outputs: Some(json!({"n": 1})),
            error: None,
        }
    );
    let notified = s.writes.iter().any(|w| {
        matches!(w, Write::NotifyParent { parent, name: n, .. } if parent.as_str() == "p1" && *n == name)
    });
    assert!(notified, "{:?}", s.writes);
    assert_eq!(
        status_and_release(&s.writes),
        (Some(InstanceStatus::Completed), true)
    );
}

#[test]
fn a_failed_run_abandons_its_retries_and_tells_no_one_without_a_parent() {
    let mut s = History::of("name: f\nsteps:\n  - id: a\n    run: 'false'\n")
        .row("a", StepStatus::Retrying, |r| r.retry_at = Some(at(60)))
        .scheduler();
    let closed = s
        .close(
            &InstanceId::from("f1"),
            None,
            &RunOutcome::Failed("step `b` failed".into()),
            false,
            at(5),
        )
        .expect("close");
    assert_eq!(closed.status, InstanceStatus::Failed);
    assert_eq!(closed.parent_event, None);
    assert_eq!(s.records["a"].status, StepStatus::Failed);
    assert!(
        !s.writes
            .iter()
            .any(|w| matches!(w, Write::NotifyParent { .. })),
        "{:?}",
        s.writes
    );
    // No step has a lock: none to release.
    assert_eq!(
        status_and_release(&s.writes),
        (Some(InstanceStatus::Failed), false)
    );
}

#[test]
fn a_run_stopped_while_it_only_waited_stays_waiting_and_a_child_left_running_tells_no_one() {
    let yaml = "name: w\nsteps:\n  - id: gate\n    wait_for_event: { name: go }\n";
    let mut s = History::of(yaml)
        .row("gate", StepStatus::Waiting, |_| {})
        .scheduler();
    let closed = s
        .close(
            &InstanceId::from("w1"),
            Some(&parent()),
            &RunOutcome::Interrupted,
            true,
            at(5),
        )
        .expect("close");
    assert_eq!(closed.status, InstanceStatus::Waiting);
    assert_eq!(closed.parent_event, None, "a child that has not ended");
    let mut s = History::of(yaml).scheduler();
    let closed = s
        .close(
            &InstanceId::from("w1"),
            None,
            &RunOutcome::Interrupted,
            false,
            at(5),
        )
        .expect("close");
    assert_eq!(closed.status, InstanceStatus::Running);
}

#[test]
fn a_run_that_stopped_on_an_error_keeps_only_its_opening_and_what_it_was_handed() {
    let mut s = History::of("name: e\nsteps:\n  - id: a\n    lock: { key: k }\n    run: 'true'\n")
        .scheduler();
    s.writes.push(Write::Outputs(json!({"kept": false})));
    s.close_on_error([Write::Outputs(json!({"kept": true}))]);
    let outputs: Vec<_> = s
        .writes
        .iter()
        .filter_map(|w| match w {
            Write::Outputs(v) => Some(v.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(outputs, vec![json!({"kept": true})]);
    assert_eq!(status_and_release(&s.writes), (None, true));
}
