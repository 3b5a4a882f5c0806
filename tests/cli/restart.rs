//! `wf restart ID --from STEP [--as NEWID]` (docs/execution.md "Restart from a step"):
//! STEP and every step downstream of it run again in a new run, the other
//! completed steps keep their results (their commands do not run again), the
//! state is the initial state with the kept steps' patches, attempt numbers
//! continue; `--as` restarts a copy and leaves the original untouched; an
//! instance that has not ended, or an unknown step, is refused (exit 2) with
//! nothing changed.

use crate::Test;
use serde_json::{Value, json};

/// A chain `a -> b -> c` (implicit needs), `side` needing `a`, `other`
/// needing nothing; each appends a line to its own counter file.
const CHAIN: &str = r#"
name: chain
state: { init: true }
steps:
  - id: a
    run: echo a >> a.count
    set_state: { a: 1 }
  - id: b
    run: echo b >> b.count
    set_state: { b: "${{ state.a }}" }
  - id: c
    run: echo c >> c.count
    set_state: { c: 3 }
  - id: side
    needs: [a]
    run: echo side >> side.count
    set_state: { side: 4 }
  - id: other
    needs: []
    run: echo other >> other.count
"#;

fn lines(t: &Test, name: &str) -> usize {
    t.read(name).lines().count()
}

/// How many times a, b, c, side and other ran.
fn counts(t: &Test) -> [usize; 5] {
    ["a", "b", "c", "side", "other"].map(|s| lines(t, &format!("{s}.count")))
}

/// (attempt, run, outcome) of each attempt of step `id`.
fn attempts(i: &Value, id: &str) -> Vec<(i64, i64, String)> {
    Test::step(i, id)["attempt_list"]
        .as_array()
        .expect("attempt_list")
        .iter()
        .map(|a| {
            (
                a["attempt"].as_i64().unwrap_or(-1),
                a["run"].as_i64().unwrap_or(-1),
                a["outcome"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// The dump without the rows of instance `id` (ids in these tests are
/// distinct words, so a line naming it is one of its rows).
fn dump_without(t: &Test, id: &str) -> String {
    t.dump()
        .lines()
        .filter(|l| !l.contains(id))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_restart_runs_the_step_and_its_downstream_again_and_nothing_else() {
    let t = Test::new();
    let (id, ran) = t.run_yaml("wf.yaml", CHAIN, &[]);
    ran.code(0);
    let ran = t.wf(&["restart", &id, "--from", "b", "--json"]);
    ran.code(0);
    assert_eq!(ran.json()["status"], "completed");
    // b and c (downstream of b through the implicit needs) ran once more;
    // a, side (needs a) and other (needs nothing) did not run again.
    assert_eq!(counts(&t), [1, 2, 2, 1, 1]);
    let i = t.inspect(&id);
    assert_eq!(i["status"], "completed");
    let runs = i["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "{i:#}");
    assert_eq!(runs[0]["restart_from"], Value::Null);
    assert_eq!(runs[1]["outcome"], "completed");
    assert_eq!(runs[1]["restart_from"], "b");
    // Attempt numbers continue; the rerun attempts belong to run 2.
    for step in ["b", "c"] {
        assert_eq!(
            attempts(&i, step),
            [(1, 1, "ok".into()), (2, 2, "ok".into())],
            "{step}"
        );
        assert_eq!(Test::step(&i, step)["attempts"], 2);
    }
    for step in ["a", "side", "other"] {
        assert_eq!(attempts(&i, step), [(1, 1, "ok".into())], "{step}");
    }
    assert_eq!(
        i["state"],
        json!({"init": true, "a": 1, "b": 1, "c": 3, "side": 4})
    );
    // The table shows the run as a restart.
    let text = t.wf(&["inspect", &id]);
    text.code(0);
    assert!(
        text.stdout.contains("#2 completed (restart from b)"),
        "{}",
        text.stdout
    );
}

#[test]
fn the_state_is_rebuilt_from_the_kept_steps_patches_only() {
    let t = Test::new();
    t.write("value.json", r#"{"x": 1}"#);
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: patches
state: { keep: initial }
steps:
  - id: first
    set_state: { first: done, keep: first }
  - id: read
    run: cat value.json
    set_state: { v: "${{ output.json }}", keep: read }
  - id: use
    run: echo "${{ state.v.x }}${{ state.v.y }} ${{ state.keep }}" >> use.seen
  - id: late
    needs: [first]
    set_state: { late: true }
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(
        t.inspect(&id)["state"],
        json!({"keep": "read", "first": "done", "v": {"x": 1}, "late": true})
    );
    // The rerun reads another value: the old patch of `read` must be gone
    // (a merge over it would leave `x`), then the new one applied.
    t.write("value.json", r#"{"y": 2}"#);
    t.wf(&["restart", &id, "--from", "read"]).code(0);
    assert_eq!(
        t.inspect(&id)["state"],
        json!({"keep": "read", "first": "done", "v": {"y": 2}, "late": true})
    );
    // `use` saw the state rebuilt, then patched by the rerun of `read`.
    assert_eq!(t.read("use.seen"), "1 read\n2 read\n");

    // From a step whose rerun changes nothing of the state: the kept
    // patches alone give the same state back, in commit order (`keep`
    // is `read`'s, committed after `first`'s).
    t.wf(&["restart", &id, "--from", "use"]).code(0);
    assert_eq!(
        t.inspect(&id)["state"],
        json!({"keep": "read", "first": "done", "v": {"y": 2}, "late": true})
    );
}

#[test]
fn a_rerun_step_gets_a_fresh_retry_budget_and_its_attempt_numbers_continue() {
    let t = Test::new();
    // Fails on its 1st and 3rd run of the command: with 2 attempts a run,
    // the restart completes only if the budget starts afresh.
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: budget
steps:
  - id: flaky
    retry: { max_attempts: 2, interval: 10ms, retryable: ["exit.*"] }
    run: |
      echo x >> flaky.count
      n=$(wc -l < flaky.count)
      [ "$n" -ne 1 ] && [ "$n" -ne 3 ]
"#,
        &[],
    );
    ran.code(0);
    t.wf(&["restart", &id, "--from", "flaky"]).code(0);
    let i = t.inspect(&id);
    assert_eq!(
        attempts(&i, "flaky"),
        [
            (1, 1, "retry".into()),
            (2, 1, "ok".into()),
            (3, 2, "retry".into()),
            (4, 2, "ok".into()),
        ]
    );
    assert_eq!(Test::step(&i, "flaky")["attempts"], 4);
}

#[test]
fn restart_as_a_new_instance_leaves_the_original_untouched() {
    let t = Test::new();
    let (_, ran) = t.run_yaml("wf.yaml", CHAIN, &["--id", "original"]);
    ran.code(0);
    let before = dump_without(&t, "replica");
    let inspected = t.inspect("original");
    let ran = t.wf(&[
        "restart", "original", "--from", "c", "--as", "replica", "--json",
    ]);
    ran.code(0);
    assert_eq!(ran.json()["id"], "replica");
    // Only c ran again.
    assert_eq!(counts(&t), [1, 1, 2, 1, 1]);
    // Every row of the original (and everything else) is as it was.
    assert_eq!(dump_without(&t, "replica"), before);
    assert_eq!(t.inspect("original"), inspected);
    // The new instance is complete: the kept history, then its restart run.
    let i = t.inspect("replica");
    assert_eq!(i["status"], "completed");
    assert_eq!(i["definition_hash"], inspected["definition_hash"]);
    assert_eq!(i["inputs"], inspected["inputs"]);
    assert_eq!(i["state"], inspected["state"]);
    let runs: Vec<_> = i["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| (r["number"].clone(), r["restart_from"].clone()))
        .collect();
    assert_eq!(runs, [(json!(1), Value::Null), (json!(2), json!("c"))]);
    for step in ["a", "b", "side", "other"] {
        assert_eq!(Test::step(&i, step)["status"], "completed");
        assert_eq!(attempts(&i, step), [(1, 1, "ok".into())], "{step}");
    }
    assert_eq!(
        attempts(&i, "c"),
        [(1, 1, "ok".into()), (2, 2, "ok".into())]
    );
    // The kept attempts' logs came along.
    let logs = t.wf(&["logs", "replica", "a"]);
    logs.code(0);
    // Taken: the copy is refused, nothing written.
    let before = t.dump();
    let ran = t.wf(&["restart", "original", "--from", "c", "--as", "replica"]);
    ran.code(2);
    assert!(ran.stderr.contains("already exists"), "{}", ran.stderr);
    assert_eq!(t.dump(), before);
}

#[test]
fn an_instance_that_has_not_ended_is_refused_and_left_as_it_was() {
    let t = Test::new();
    let (waiting, ran) = t.run_yaml(
        "wait.yaml",
        "name: gate\nsteps:\n  - id: first\n    run: echo 1 >> first.count\n  - id: wait\n    wait_for_event: { name: go }\n",
        &["--id", "waiter"],
    );
    ran.code(3);
    let (sleeping, ran) = t.run_yaml(
        "sleep.yaml",
        "name: nap\nsteps:\n  - id: first\n    run: echo 1 >> nap.count\n  - id: nap\n    sleep: 1h\n",
        &["--id", "sleeper"],
    );
    ran.code(3);
    let before = t.dump();
    for (id, status) in [(&waiting, "waiting"), (&sleeping, "sleeping")] {
        let ran = t.wf(&["restart", id, "--from", "first"]);
        ran.code(2);
        assert!(
            ran.stderr.contains(&format!("instance {id} is {status}")),
            "{}",
            ran.stderr
        );
        assert_eq!(ran.stderr.trim().lines().count(), 1, "{}", ran.stderr);
        let ran = t.wf(&["restart", id, "--from", "first", "--as", "copy"]);
        ran.code(2);
    }
    assert_eq!(t.dump(), before);
    assert_eq!(lines(&t, "first.count"), 1);
    assert_eq!(lines(&t, "nap.count"), 1);
}

#[test]
fn an_unknown_step_is_named_with_the_valid_ones() {
    let t = Test::new();
    let (id, ran) = t.run_yaml("wf.yaml", CHAIN, &[]);
    ran.code(0);
    let before = t.dump();
    let ran = t.wf(&["restart", &id, "--from", "nope"]);
    ran.code(2);
    assert!(ran.stderr.contains("no step `nope`"), "{}", ran.stderr);
    assert!(
        ran.stderr.contains("a, b, c, side, other"),
        "{}",
        ran.stderr
    );
    let ran = t.wf(&["restart", &id, "--from", "nope", "--as", "copy"]);
    ran.code(2);
    assert_eq!(t.dump(), before);
}

#[test]
fn a_failed_instance_restarted_from_its_failing_step_completes() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: fixable
steps:
  - id: prepare
    run: echo p >> prepare.count
    set_state: { prepared: true }
  - id: check
    run: cat ready.txt
    set_state: { ready: "${{ output.stdout }}" }
  - id: after
    run: echo a >> after.count
  - id: on_failure
    if: ${{ failure() }}
    run: echo f >> failure.count
"#,
        &[],
    );
    ran.code(1);
    assert_eq!(lines(&t, "failure.count"), 1);
    t.write("ready.txt", "yes");
    let ran = t.wf(&["restart", &id, "--from", "check", "--json"]);
    ran.code(0);
    assert_eq!(ran.json()["status"], "completed");
    let i = t.inspect(&id);
    assert_eq!(i["status"], "completed");
    assert_eq!(i["error"], Value::Null);
    assert_eq!(i["state"], json!({"prepared": true, "ready": "yes"}));
    assert_eq!(lines(&t, "prepare.count"), 1);
    assert_eq!(lines(&t, "after.count"), 1);
    // The failure handler downstream was reset: its `if` is false now.
    assert_eq!(lines(&t, "failure.count"), 1);
    assert_eq!(Test::step(&i, "on_failure")["status"], "skipped");
    assert_eq!(
        attempts(&i, "check"),
        [(1, 1, "failed".into()), (2, 2, "ok".into())]
    );
}

#[test]
fn the_items_of_a_restarted_for_each_step_run_again_with_its_new_list() {
    let t = Test::new();
    t.write("list.json", r#"["a", "b"]"#);
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: fan
steps:
  - id: list
    run: cat list.json
  - id: each
    for_each: "${{ steps.list.output.json }}"
    run: echo "${{ item }}" >> items.seen
"#,
        &[],
    );
    ran.code(0);
    t.write("list.json", r#"["x", "y", "z"]"#);
    t.wf(&["restart", &id, "--from", "list"]).code(0);
    let mut seen: Vec<String> = t.read("items.seen").lines().map(String::from).collect();
    seen.sort();
    assert_eq!(seen, ["a", "b", "x", "y", "z"]);
    let i = t.inspect(&id);
    assert_eq!(
        Test::step(&i, "each")["output"].as_array().map(Vec::len),
        Some(3)
    );
    for item in ["each[0]", "each[1]"] {
        assert_eq!(
            attempts(&i, item),
            [(1, 1, "ok".into()), (2, 2, "ok".into())],
            "{item}"
        );
    }
    assert_eq!(attempts(&i, "each[2]"), [(1, 2, "ok".into())]);
}

#[test]
fn a_canceled_instance_restarts_without_its_old_cancel_request() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: gate
steps:
  - id: first
    run: echo 1 >> first.count
  - id: wait
    wait_for_event: { name: go }
  - id: last
    run: echo 1 >> last.count
"#,
        &[],
    );
    ran.code(3);
    t.wf(&["cancel", &id]).code(0);
    assert_eq!(t.inspect(&id)["status"], "canceled");
    // The wait runs again and suspends (exit 3), not canceled at once (4).
    t.wf(&["restart", &id, "--from", "wait"]).code(3);
    assert_eq!(t.inspect(&id)["status"], "waiting");
    t.wf(&["signal", &id, "go"]).code(0);
    t.wf(&["resume", &id]).code(0);
    assert_eq!(lines(&t, "first.count"), 1);
    assert_eq!(lines(&t, "last.count"), 1);
}

/// The workflow's `timeout` counts from the restart, not from the
/// instance's creation: an instance that timed out restarts with the whole
/// budget again.
#[test]
fn a_restart_gives_the_workflow_timeout_a_fresh_start() {
    let t = Test::new();
    let yaml = "name: slow\ntimeout: 1s\nsteps:\n  - id: a\n    run: echo a >> a.count\n  \
                - id: b\n    run: if [ -f ok ]; then exit 0; fi; sleep 30\n";
    let (id, ran) = t.run_yaml("slow.yaml", yaml, &[]);
    ran.code(1);
    assert_eq!(t.inspect(&id)["status"], "failed");
    std::fs::write(t.path().join("ok"), "").unwrap();
    let ran = t.wf(&["restart", &id, "--from", "b"]);
    ran.code(0);
    let i = t.inspect(&id);
    assert_eq!(i["status"], "completed", "{}", ran.stderr);
    assert_eq!(lines(&t, "a.count"), 1);
}

/// A child that counts its runs in `<tag>.count` and fails for tag `2`
/// until a file `fixed` exists.
const KID: &str = r#"
name: kid
inputs: { tag: { required: true } }
steps:
  - id: work
    run: echo ${{ inputs.tag }} >> ${{ inputs.tag }}.count; test "${{ inputs.tag }}" != 2 || test -f fixed
outputs: { tag: "${{ inputs.tag }}" }
"#;

/// `wf inspect ID --json`'s children: (step, attempt, id, status).
fn children(t: &Test, id: &str) -> Vec<(String, i64, String, String)> {
    let i = t.wf(&["inspect", id, "--json"]).code(0).json();
    i["children"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|c| {
            (
                c["step"].as_str().unwrap_or_default().to_string(),
                c["attempt"].as_i64().unwrap_or(-1),
                c["id"].as_str().unwrap_or_default().to_string(),
                c["status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_restart_from_a_workflow_step_starts_new_children_and_keeps_the_others() {
    let t = Test::new();
    t.write("kid.yaml", KID);
    let flow = t.write(
        "family.yaml",
        "name: family\nsteps:\n  - id: first\n    workflow: ./kid.yaml\n    with: { tag: one }\n  \
         - id: second\n    workflow: ./kid.yaml\n    with: { tag: two }\n  - id: end\n    \
         run: echo ${{ steps.first.output.tag }} ${{ steps.second.output.tag }}\n",
    );
    t.wf(&["run", flow.to_str().unwrap(), "--id", "fam1"])
        .code(0);
    let before = children(&t, "fam1");
    assert_eq!(before.len(), 2, "{before:?}");
    t.wf(&["restart", "fam1", "--from", "second"]).code(0);
    let after = children(&t, "fam1");
    // The kept step keeps its child, which did not run again; the step run
    // again has a new child, of its new attempt.
    assert_eq!(after.len(), 3, "{after:?}");
    assert!(after.contains(&before[0]), "{after:?}");
    assert!(
        after.contains(&before[1]),
        "the old child stays in the history"
    );
    let new: Vec<_> = after.iter().filter(|c| !before.contains(c)).collect();
    assert_eq!(new.len(), 1);
    assert_eq!(
        (new[0].0.as_str(), new[0].1, new[0].3.as_str()),
        ("second", 2, "completed")
    );
    assert_eq!(lines(&t, "one.count"), 1);
    assert_eq!(lines(&t, "two.count"), 2);
    let i = t.wf(&["inspect", "fam1", "--json"]).code(0).json();
    assert_eq!(Test::step(&i, "end")["output"]["stdout"], "one two");
}

#[test]
fn retry_failed_retries_only_the_failed_children_of_a_for_each() {
    let t = Test::new();
    t.write("kid.yaml", KID);
    let flow = t.write(
        "fan.yaml",
        "name: fan\ninputs:\n  tags: { default: [1, 2, 3] }\nsteps:\n  - id: each\n    \
         workflow: ./kid.yaml\n    for_each: \"${{ inputs.tags }}\"\n    with: { tag: \"${{ item }}\" }\n  \
         - id: after\n    run: echo ${{ join(steps.each.output.*.tag, ',') }}\n",
    );
    t.wf(&["run", flow.to_str().unwrap(), "--id", "fan1"])
        .code(1);
    let failed = children(&t, "fan1");
    assert_eq!(failed.len(), 3, "{failed:?}");
    t.write("fixed", "");
    t.wf(&["resume", "fan1", "--retry-failed"]).code(0);
    let after = children(&t, "fan1");
    // Only item 2 got a new child; 1 and 3 kept theirs and their results.
    assert_eq!(after.len(), 4, "{after:?}");
    let new: Vec<_> = after.iter().filter(|c| !failed.contains(c)).collect();
    assert_eq!(new.len(), 1, "{after:?}");
    assert_eq!(
        (new[0].0.as_str(), new[0].1, new[0].3.as_str()),
        ("each[1]", 2, "completed")
    );
    assert_eq!(
        [
            lines(&t, "1.count"),
            lines(&t, "2.count"),
            lines(&t, "3.count")
        ],
        [1, 2, 1]
    );
    let i = t.wf(&["inspect", "fan1", "--json"]).code(0).json();
    assert_eq!(Test::step(&i, "after")["output"]["stdout"], "1,2,3");
}
