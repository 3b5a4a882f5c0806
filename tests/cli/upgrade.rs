//! Upgrading `wf` under a history (issue 53, item 12): instances left
//! sleeping, waiting, crashed and completed by the previous
//! release's binary are continued by this one, on both backends, with the
//! database it made (migrated on first use). A crash it left is taken over
//! at once, as that wf would have: its holder is named the old way
//! (`host:pid:nonce`) and judged by its pid on this host.
//!
//! The previous release's binary is `WF_PREV_BIN`, which `scripts/test`
//! builds from its commit (`scripts/prev-wf`); the test fails without it.

use crate::Test;
use crate::durable::{Bg, eventually};
use std::process::{Command, Stdio};

/// The previous release's `wf`.
fn prev_bin() -> String {
    std::env::var("WF_PREV_BIN")
        .ok()
        .filter(|b| !b.is_empty())
        .expect("WF_PREV_BIN is not set: scripts/test builds the previous release's wf (scripts/prev-wf)")
}

/// `wf ARGS…` of the previous release, to completion.
fn prev(t: &Test, args: &[&str]) -> crate::Ran {
    crate::Ran::from(
        t.cmd_of(Command::new(prev_bin()))
            .args(args)
            .output()
            .expect("run the previous wf"),
    )
}

const FLOW: &str = "name: flow
inputs:
  tag: { required: true }
steps:
  - id: first
    run: echo first-${{ inputs.tag }} >> log
  - id: nap
    sleep: 1h
  - id: gate
    wait_for_event: { name: go }
  - id: last
    run: echo last-${{ inputs.tag }} >> log
";

const GATED: &str = "name: gated
steps:
  - id: first
    run: echo gated-first >> log
  - id: block
    run: |
      echo gated-block >> log
      while [ ! -e open ]; do sleep 0.02; done
  - id: after
    run: echo gated-after >> log
";

#[test]
fn instances_the_previous_release_left_are_continued_by_this_one() {
    let t = Test::new().env("WF_LEASE_TTL", "1h");
    t.write("flow.yaml", FLOW);
    t.write("gated.yaml", GATED);
    let old = |args: &[&str], code: i32| {
        let ran = prev(&t, args);
        assert_eq!(ran.code, code, "previous wf {args:?}: {}", ran.stderr);
    };
    // Left by the previous release: completed, sleeping, waiting, and a run
    // killed in the middle of a step.
    old(
        &[
            "run",
            "flow.yaml",
            "--id",
            "sleeps",
            "--input",
            "tag=s",
            "--inline-wait",
            "0s",
        ],
        3,
    );
    old(
        &[
            "run",
            "flow.yaml",
            "--id",
            "waits",
            "--input",
            "tag=w",
            "--inline-wait",
            "0s",
        ],
        3,
    );
    old(&["resume", "waits", "--now"], 3);
    old(
        &[
            "run",
            "flow.yaml",
            "--id",
            "done",
            "--input",
            "tag=d",
            "--inline-wait",
            "0s",
        ],
        3,
    );
    old(&["resume", "done", "--now"], 3);
    old(&["signal", "done", "go"], 0);
    old(&["resume", "done"], 0);
    let child = t
        .cmd_of(Command::new(prev_bin()))
        .args(["run", "gated.yaml", "--id", "crashed"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the previous wf");
    let mut crashed = Bg::from_child(child);
    eventually("the previous wf to run the blocking step", || {
        t.read("log").contains("gated-block")
    });
    crashed.kill9();
    eventually("the previous wf to be gone", || crashed.exited());

    // This wf reads them all, as they were.
    let listed = t.wf(&["list", "--json"]).code(0).json();
    let status = |id: &str| {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["id"] == id)
            .map(|i| i["status"].as_str().unwrap().to_string())
            .unwrap_or_default()
    };
    assert_eq!(status("done"), "completed", "{listed}");
    assert_eq!(status("sleeps"), "sleeping", "{listed}");
    assert_eq!(status("waits"), "waiting", "{listed}");
    assert_eq!(status("crashed"), "interrupted", "{listed}");
    assert_eq!(
        t.wf(&["result", "done", "--json"]).code(0).json()["status"],
        "completed"
    );

    // The crash is taken over at once (its holder, named the old way, is
    // dead on this host; the lease has an hour left), its step run again.
    t.write("open", "");
    let ran = t.wf(&["resume", "crashed"]);
    ran.code(0);
    let v = t.inspect("crashed");
    let outcomes: Vec<&str> = Test::step(&v, "block")["attempt_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["crashed", "ok"], "{v}");
    // The suspended ones go on where they stopped.
    t.wf(&["resume", "sleeps", "--now"]).code(3);
    t.wf(&["signal", "sleeps", "go"]).code(0);
    t.wf(&["resume", "sleeps"]).code(0);
    t.wf(&["signal", "waits", "go"]).code(0);
    t.wf(&["resume", "waits"]).code(0);
    for id in ["done", "sleeps", "waits", "crashed"] {
        assert_eq!(t.inspect(id)["status"], "completed", "{id}");
    }
    // Each step ran once (the crashed one's again after its crash).
    let log = t.read("log");
    for line in [
        "first-s",
        "last-s",
        "first-w",
        "last-w",
        "first-d",
        "last-d",
        "gated-first",
        "gated-after",
    ] {
        assert_eq!(
            log.lines().filter(|l| *l == line).count(),
            1,
            "{line}: {log}"
        );
    }
    assert_eq!(
        log.lines().filter(|l| *l == "gated-block").count(),
        2,
        "{log}"
    );
}
