//! Workflow state and commit-on-success (docs/workflow-file.md `state`/`set_state`, docs/execution.md):
//! a step's `set_state` patch is applied only when the step succeeds, so a
//! retry sees the state from before the failed attempt and a step that fails
//! for good leaves state untouched; patches are JSON merge patches (RFC
//! 7386); a step with no action but `set_state` is a pure state step.

use crate::Test;
use serde_json::{Value, json};

#[test]
fn a_retry_sees_the_state_from_before_the_failed_attempt() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: commit-on-success
state: { flag: false, tries: 0 }
steps:
  - id: flip
    retry: { max_attempts: 2, interval: 10ms }
    run: |
      echo "attempt=$WF_ATTEMPT flag=${{ state.flag }} tries=${{ state.tries }} step=${{ step.attempt }}" >> seen.txt
      [ "$WF_ATTEMPT" -ge 2 ]
    set_state: { flag: true, tries: "${{ step.attempt }}" }
  - id: after
    run: echo "flag=${{ state.flag }}" > after.txt
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(
        t.read("seen.txt"),
        "attempt=1 flag=false tries=0 step=1\nattempt=2 flag=false tries=0 step=2\n"
    );
    assert_eq!(t.read("after.txt"), "flag=true\n");
    let i = t.inspect(&id);
    assert_eq!(i["state"], json!({"flag": true, "tries": 2}));
    let flip = Test::step(&i, "flip");
    assert_eq!(flip["status"], "completed");
    assert_eq!(flip["attempts"], 2);
    let outcomes: Vec<_> = flip["attempt_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["outcome"].clone())
        .collect();
    assert_eq!(outcomes, [json!("retry"), json!("ok")]);
}

#[test]
fn a_failed_attempts_output_never_reaches_state() {
    // Attempt 1 prints a value and fails; only attempt 2's value is committed.
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: output-commit
state: { v: initial }
steps:
  - id: produce
    retry: { max_attempts: 3, interval: 10ms }
    run: |
      echo "saw ${{ state.v }}" >> seen.txt
      echo "{\"v\": \"from-attempt-$WF_ATTEMPT\"}"
      [ "$WF_ATTEMPT" -ge 3 ]
    set_state: { v: "${{ output.json.v }}" }
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(
        t.read("seen.txt"),
        "saw initial\nsaw initial\nsaw initial\n"
    );
    let i = t.inspect(&id);
    assert_eq!(i["state"], json!({"v": "from-attempt-3"}));
    assert_eq!(
        Test::step(&i, "produce")["output"]["json"],
        json!({"v": "from-attempt-3"})
    );
}

#[test]
fn a_step_that_fails_for_good_leaves_state_untouched() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: fail-keeps-state
state: { a: 1, nested: { keep: true } }
steps:
  - id: pure
    needs: []
    set_state: { b: 2 }
  - id: ran
    needs: []
    run: "true"
    set_state: { nested: { added: x } }
  - id: bad
    needs: [pure, ran]
    retry: { max_attempts: 3, interval: 10ms }
    run: exit 1
    set_state: { a: 999, nested: null, c: 3 }
  - id: never
    set_state: { never: true }
"#,
        &[],
    );
    ran.code(1);
    let i = t.inspect(&id);
    assert_eq!(i["status"], "failed");
    assert_eq!(
        i["state"],
        json!({"a": 1, "b": 2, "nested": {"keep": true, "added": "x"}})
    );
    let bad = Test::step(&i, "bad");
    assert_eq!(bad["status"], "failed");
    assert_eq!(bad["attempts"], 3);
}

#[test]
fn a_timed_out_step_leaves_state_untouched() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: timeout-keeps-state
state: { done: false }
steps:
  - id: slow
    timeout: 200ms
    run: echo '{"x":1}'; sleep 5
    set_state: { done: true, x: "${{ output.json.x }}" }
"#,
        &[],
    );
    ran.code(1);
    let i = t.inspect(&id);
    assert_eq!(i["state"], json!({"done": false}));
    assert_eq!(Test::step(&i, "slow")["error_type"], "timeout");
}

#[test]
fn an_over_limit_output_leaves_state_untouched() {
    let t = Test::new().env("WF_OUTPUT_LIMIT", "1000");
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: limit-keeps-state
state: { done: false }
steps:
  - id: big
    run: head -c 5000 /dev/zero | tr '\0' x
    set_state: { done: true }
"#,
        &[],
    );
    ran.code(1);
    assert_eq!(t.inspect(&id)["state"], json!({"done": false}));
}

#[test]
fn set_state_is_a_json_merge_patch() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: merge
state:
  user: { name: ann, tags: [a], addr: { city: x, zip: "1" } }
  remove_me: 1
  list: [1, 2]
  scalar: 5
steps:
  - id: patch
    set_state:
      user: { tags: [b], addr: { zip: null, street: s } }
      remove_me: null
      list: [3]
      scalar: { now: object }
      fresh: { a: null, b: 1 }
      absent_null: null
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(
        t.inspect(&id)["state"],
        json!({
            "user": { "name": "ann", "tags": ["b"], "addr": { "city": "x", "street": "s" } },
            "list": [3],
            "scalar": { "now": "object" },
            "fresh": { "b": 1 }
        })
    );
}

#[test]
fn patches_accumulate_across_steps_in_order() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: accumulate
steps:
  - id: one
    set_state: { n: 1, log: { one: true } }
  - id: two
    set_state: { n: "${{ state.n }}", prev_plus: "${{ state.n }}+", log: { two: true } }
  - id: three
    run: echo '{"n":3}'
    set_state: { n: "${{ output.json.n }}", log: { one: null } }
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(
        t.inspect(&id)["state"],
        json!({"n": 3, "prev_plus": "1+", "log": {"two": true}})
    );
}

#[test]
fn no_initial_state_starts_empty() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: empty-state
steps:
  - id: a
    run: echo "[${{ state.missing }}]" > got.txt
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(t.read("got.txt"), "[]\n");
    assert_eq!(t.inspect(&id)["state"], json!({}));
}

#[test]
fn pure_set_state_steps_complete_with_one_attempt() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: pure
inputs:
  amount: { default: 10 }
state: { total: 0 }
steps:
  - id: init
    set_state: { total: "${{ inputs.amount }}", stage: init }
  - id: mark
    set_state: { stage: marked, seen_total: "${{ state.total }}", attempt: "${{ step.attempt }}" }
  - id: show
    run: echo "${{ state.stage }} ${{ state.seen_total }}" > got.txt
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(t.read("got.txt"), "marked 10\n");
    let i = t.inspect(&id);
    assert_eq!(
        i["state"],
        json!({"total": 10, "stage": "marked", "seen_total": 10, "attempt": 1})
    );
    for s in ["init", "mark"] {
        let step = Test::step(&i, s);
        assert_eq!(step["status"], "completed", "{step:#}");
        assert_eq!(step["attempts"], 1, "{step:#}");
        let list = step["attempt_list"].as_array().unwrap();
        assert_eq!(list.len(), 1, "{step:#}");
        assert_eq!(list[0]["outcome"], "ok");
    }
}

#[test]
fn state_is_visible_to_run_steps_only_after_the_writer_succeeds() {
    // `reader` depends on `writer`: it must see the committed value; a parallel
    // root step that started before the write sees the initial value.
    let t = Test::new();
    let (_, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: visibility
state: { phase: initial }
steps:
  - id: early
    needs: []
    run: echo "${{ state.phase }}" > early.txt
  - id: writer
    needs: [early]
    run: "true"
    set_state: { phase: written }
  - id: reader
    needs: [writer]
    run: echo "${{ state.phase }}" > reader.txt
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(t.read("early.txt"), "initial\n");
    assert_eq!(t.read("reader.txt"), "written\n");
}

#[test]
fn set_state_sees_the_state_committed_when_its_step_started() {
    // `slow` starts before `fast` commits `b`, and finishes after it: its
    // `set_state` must still see the state from its own start (docs/expressions.md).
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: start-state
state: { b: 0 }
steps:
  - id: slow
    needs: []
    run: |
      i=0; while [ ! -f fast.done ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
      [ -f fast.done ]
    set_state: { slow_saw_b: "${{ state.b }}" }
  - id: fast
    needs: []
    run: "true"
    set_state: { b: 1 }
  - id: mark
    needs: [fast]
    run: touch fast.done
"#,
        &[],
    );
    ran.code(0);
    let i = t.inspect(&id);
    assert_eq!(i["state"], json!({"b": 1, "slow_saw_b": 0}));
}

#[test]
fn outputs_are_the_result_of_a_completed_instance() {
    let t = Test::new();
    let yaml = r#"
name: result
inputs:
  order: { default: A-7 }
state: { charged: false }
outputs:
  order: "${{ inputs.order }}"
  charge_id: "${{ state.charge_id }}"
  summary: "order ${{ inputs.order }} charged ${{ state.charged }}"
  items: "${{ steps.pick.output.json }}"
steps:
  - id: pick
    run: echo '[1, 2]'
  - id: charge
    run: |
      echo '{"id": "ch_9"}'
    set_state: { charged: true, charge_id: "${{ output.json.id }}" }
  - id: gate
    wait_for_event: { name: go }
"#;
    let (id, ran) = t.run_yaml("r.yaml", yaml, &[]);
    ran.code(3);
    // Not ended: exit 3, no outputs yet.
    let r = t.wf(&["result", &id, "--json"]);
    r.code(3);
    assert_eq!(r.json()["outputs"], Value::Null);
    assert_eq!(r.json()["status"], "waiting");
    // --wait blocks until the instance ends.
    let waiter = t
        .cmd()
        .args(["result", &id, "--wait"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn wf result --wait");
    t.wf(&["signal", &id, "go"]).code(0);
    t.wf(&["resume", &id]).code(0);
    let out = waiter.wait_with_output().unwrap();
    assert!(out.status.success());
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let expected = json!({
        "order": "A-7", "charge_id": "ch_9", "summary": "order A-7 charged true", "items": [1, 2]
    });
    assert_eq!(printed, expected);
    let r = t.wf(&["result", &id, "--json"]).code(0).json();
    assert_eq!(
        r,
        json!({ "id": id, "status": "completed", "outputs": expected, "error": null })
    );

    // A failed instance: exit 1 with its error.
    let (id, ran) = t.run_yaml(
        "f.yaml",
        "name: f\noutputs: { x: 1 }\nsteps:\n  - id: boom\n    run: exit 5\n",
        &[],
    );
    ran.code(1);
    let r = t.wf(&["result", &id]);
    r.code(1);
    assert!(r.stderr.contains("exit.5"), "{}", r.stderr);
    // An output that names no step is a definition error.
    let bad = t.write("bad.yaml", "name: b\noutputs: { x: \"${{ steps.nope.output }}\" }\nsteps:\n  - id: a\n    run: 'true'\n");
    t.wf(&["validate", bad.to_str().unwrap()]).code(2);
}

#[test]
fn outputs_that_cannot_be_rendered_fail_the_instance_after_its_compensations() {
    let t = Test::new();
    let path = t.write(
        "o.yaml",
        r#"
name: unrenderable
outputs:
  x: "${{ fromJSON(steps.a.output.stdout) }}"
steps:
  - id: a
    run: echo not-json; echo a >> ledger.log
    compensate: { run: echo undo-a >> ledger.log }
  - id: b
    needs: [a]
    run: echo b >> ledger.log
    compensate: { run: echo undo-b >> ledger.log }
"#,
    );
    let ran = t.wf(&["run", path.to_str().unwrap(), "--id", "o"]);
    ran.code(1);
    // As after a failed step: the completed steps are compensated, newest first.
    assert_eq!(
        t.read("ledger.log").lines().collect::<Vec<_>>(),
        ["a", "b", "undo-b", "undo-a"]
    );
    let i = t.inspect("o");
    assert_eq!(i["status"], "failed");
    assert!(
        i["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("`outputs`: ")),
        "{i:#}"
    );
    assert_eq!(Test::step(&i, "b:compensate")["status"], "completed");
    // No step failed: a fresh attempt budget would change nothing.
    assert!(!ran.stdout.contains("--retry-failed"), "{}", ran.stdout);
    assert!(ran.stdout.contains("fix the workflow"), "{}", ran.stdout);
    let r = t.wf(&["result", "o", "--json"]);
    r.code(1);
    assert_eq!(r.json()["outputs"], Value::Null);
}
