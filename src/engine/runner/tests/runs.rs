//! Runs on the in-memory store: what each commits, and how, when steps
//! end, are killed, or lose their instance, and when other processes
//! cancel, deliver an event or hold a lock.

use super::memory::How;
use super::*;
use crate::store::StoreError;
use crate::vocab::CancelRequest;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const CHAIN: &str = "name: chain
steps:
  - id: a
    run: echo a >> {dir}/ran
  - id: b
    run: echo b >> {dir}/ran
";

/// A step that leaves its pid in `{dir}/pid` and sleeps.
const SLEEPER: &str = "name: sleeper
steps:
  - id: a
    run: echo $$ > {dir}/pid; exec sleep 30
  - id: b
    run: touch {dir}/b-ran
";

/// The commits made, each as how it was made and its writes described.
fn commits(h: &Harness) -> Vec<(How, Vec<String>)> {
    h.store
        .commits()
        .iter()
        .map(|c| (c.how, c.said()))
        .collect()
}

fn said(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_string()).collect()
}

fn sigkill(pid: &str) {
    let pid = Pid::from_raw(pid.parse().expect("a pid"));
    kill(pid, Signal::SIGKILL).expect("the step's process is alive");
}

#[tokio::test]
async fn a_chain_records_each_attempt_before_it_runs_and_completes() {
    let mut h = Harness::of(CHAIN);
    let outcome = h.run(async {}).await;
    assert_eq!(outcome.expect("a run"), RunOutcome::Completed);
    assert_eq!(
        std::fs::read_to_string(h.path("ran")).expect("the steps ran"),
        "a\nb\n"
    );
    // Each start is begun with the process it records (held at its exec
    // until the commit is durable), in the commit of the result before it.
    assert_eq!(
        commits(&h),
        [
            (How::Begun, said(&["start a#1", "a running"])),
            (
                How::Begun,
                said(&["end a#1 ok", "a completed", "start b#1", "b running"])
            ),
            (How::Synced, said(&["end b#1 ok", "b completed"])),
        ]
    );
    // The close: the instance's end, the run's, the lease, in one commit.
    let closed = h.close(Ok(RunOutcome::Completed)).await;
    assert_eq!(closed.expect("closed"), RunOutcome::Completed);
    assert_eq!(
        commits(&h).last(),
        Some(&(
            How::Synced,
            said(&["instance completed", "run 1 completed", "Release"])
        ))
    );
}

#[tokio::test]
async fn a_refused_commit_never_lets_the_process_it_records_run() {
    let mut h = Harness::of(CHAIN);
    h.store.taken_over_at(1);
    let outcome = h.run_letting_steps_end(async {}).await;
    assert!(
        matches!(
            &outcome,
            Err(EngineError::Store(StoreError::Fenced { holder: Some(h), .. })) if h == "host-b"
        ),
        "{outcome:?}"
    );
    assert!(h.store.commits().is_empty());
    // Every process ended on its own: had a's started, its line would be in.
    assert!(
        !h.path("ran").exists(),
        "a ran though its attempt was never recorded"
    );
}

#[tokio::test]
async fn a_commit_refused_mid_run_starts_nothing_it_decided() {
    let mut h = Harness::of(CHAIN);
    h.store.taken_over_at(2);
    let outcome = h.run_letting_steps_end(async {}).await;
    assert!(
        matches!(&outcome, Err(EngineError::Store(StoreError::Fenced { .. }))),
        "{outcome:?}"
    );
    assert_eq!(
        commits(&h),
        [(How::Begun, said(&["start a#1", "a running"]))]
    );
    assert_eq!(
        std::fs::read_to_string(h.path("ran")).expect("a ran"),
        "a\n",
        "b ran though its attempt was never recorded"
    );
    // The close writes nothing either: the instance is another's.
    let closed = h.close(outcome).await;
    assert!(matches!(
        closed,
        Err(EngineError::Store(StoreError::Fenced { .. }))
    ));
    assert_eq!(h.store.commits().len(), 1);
}

#[tokio::test]
async fn a_lost_lease_stops_the_running_step_and_commits_nothing_more() {
    let mut h = Harness::of(SLEEPER);
    let pid_file = h.path("pid");
    let lease = h.lease.clone();
    let store = h.store.clone();
    let mut pid = String::new();
    let outcome = h
        .run(async {
            pid = written(&pid_file).await;
            // The heartbeat finds the lease taken; so will the store.
            store.take_over("host-b");
            lease.taken("host-b".into());
        })
        .await;
    assert!(
        matches!(&outcome, Err(EngineError::LeaseLost { holder, .. }) if holder == "host-b"),
        "{outcome:?}"
    );
    assert!(gone(&pid), "the step's process outlived the lease");
    assert_eq!(
        commits(&h),
        [(How::Begun, said(&["start a#1", "a running"]))]
    );
    assert!(!h.path("b-ran").exists());
}

#[tokio::test]
async fn a_lease_not_renewed_stops_the_running_step_as_an_interrupt() {
    let mut h = Harness::with_ttl(SLEEPER, Duration::from_millis(900));
    let pid_file = h.path("pid");
    let mut pid = String::new();
    let outcome = h
        .run(async {
            pid = written(&pid_file).await;
        })
        .await;
    assert_eq!(outcome.expect("a run"), RunOutcome::Interrupted);
    let unrenewed = h.runner.lapsed.expect("the lease lapsed");
    assert!(unrenewed >= Duration::from_millis(600), "{unrenewed:?}");
    assert!(gone(&pid), "the step's process outlived the lease");
    let said = h.store.said();
    assert!(
        said.contains(&"end a#1 interrupted".to_string()),
        "{said:?}"
    );
    assert!(!h.path("b-ran").exists());
}

#[tokio::test]
async fn a_killed_step_fails_its_attempt_and_its_retry_runs() {
    let mut h = Harness::of(
        "name: killed
steps:
  - id: a
    retry: { max_attempts: 2, interval: 1ms }
    run: |
      if [ -e {dir}/pid ]; then exit 0; fi
      echo $$ > {dir}/pid
      exec sleep 30
",
    );
    let pid_file = h.path("pid");
    let outcome = h.run(async { sigkill(&written(&pid_file).await) }).await;
    assert_eq!(outcome.expect("a run"), RunOutcome::Completed);
    let said = h.store.said();
    let ended: Vec<_> = said.iter().filter(|w| w.starts_with("end a#")).collect();
    assert_eq!(ended, ["end a#1 retry", "end a#2 ok"], "{said:?}");
    assert!(said.contains(&"start a#2".to_string()));
}

#[tokio::test]
async fn a_signal_interrupts_the_running_step() {
    let mut h = Harness::of(SLEEPER);
    let pid_file = h.path("pid");
    let signal = h.signal.clone();
    let mut pid = String::new();
    let outcome = h
        .run(async {
            pid = written(&pid_file).await;
            signal.send(()).expect("the run listens");
        })
        .await;
    assert_eq!(outcome.expect("a run"), RunOutcome::Interrupted);
    assert!(gone(&pid), "the step's process outlived the run");
    let said = h.store.said();
    assert!(
        said.contains(&"end a#1 interrupted".to_string()),
        "{said:?}"
    );
    assert!(!h.path("b-ran").exists(), "b started after the signal");
}

#[tokio::test]
async fn a_cancel_asked_by_another_process_is_seen_by_the_poll() {
    let mut h = Harness::of(SLEEPER);
    let pid_file = h.path("pid");
    let store = h.store.clone();
    let mut pid = String::new();
    let outcome = h
        .run(async {
            pid = written(&pid_file).await;
            store.ask(CancelRequest::Cancel);
        })
        .await;
    assert_eq!(outcome.expect("a run"), RunOutcome::Canceled);
    assert!(gone(&pid), "the canceled step's process still runs");
    let said = h.store.said();
    assert!(said.contains(&"a canceled".to_string()), "{said:?}");
    assert!(!h.path("b-ran").exists(), "b started after the cancel");
}

#[tokio::test]
async fn an_event_delivered_before_the_wait_is_taken_at_once() {
    let mut h = Harness::of(
        "name: approval
steps:
  - id: approve
    wait_for_event: { name: approved, timeout: 1h }
  - id: after
    run: touch {dir}/after-ran
",
    );
    h.store.deliver("approved", "{\"by\": \"ann\"}");
    let outcome = h.run(async {}).await;
    assert_eq!(outcome.expect("a run"), RunOutcome::Completed);
    let said = h.store.said();
    assert!(
        said.contains(&"approve takes event 1".to_string()),
        "{said:?}"
    );
    assert!(h.path("after-ran").exists());
}

#[tokio::test]
async fn a_wait_for_an_event_not_delivered_suspends_the_run() {
    let mut h = Harness::of(
        "name: approval
steps:
  - id: approve
    wait_for_event: { name: approved, timeout: 1h }
",
    );
    let outcome = h.run(async {}).await;
    assert_eq!(
        outcome.expect("a run"),
        RunOutcome::Waiting("approved".into())
    );
}

#[tokio::test]
async fn a_step_lock_held_elsewhere_is_waited_for_until_given_back() {
    let mut h = Harness::of(
        "name: locked
steps:
  - id: a
    lock: { key: deploy, limit: 1 }
    run: touch {dir}/a-ran
",
    );
    h.store.hold_lock("deploy", "other");
    let store = h.store.clone();
    let mark = h.path("a-ran");
    let outcome = h
        .run(async {
            // Asked for, refused, asked again at the next poll.
            while store.lock_tries() < 2 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            assert!(!mark.exists(), "a ran without its lock");
            store.give_back("deploy", "other");
        })
        .await;
    assert_eq!(outcome.expect("a run"), RunOutcome::Completed);
    assert!(h.path("a-ran").exists());
    // Given back in the commit that records its attempt's end.
    assert!(h.store.holders("deploy").is_empty());
    let said = h.store.said();
    let end = said.iter().position(|w| w == "end a#1 ok");
    let release = said.iter().position(|w| w == "a releases its lock");
    assert!(end.is_some() && release.is_some(), "{said:?}");
}
