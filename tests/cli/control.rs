//! Control flow (docs/workflow-file.md `if`, `for_each`, `max_parallel`, `continue_on_error`,
//! `compensate`, `timeout`; docs/execution.md; docs/commands.md `wf cancel`), each through the real binary:
//! conditions that skip steps, fan-outs with stable item keys, a throttle that
//! is never exceeded, a crash in the middle of a fan-out, sagas whose
//! compensations run in reverse completion order (durably, across a crash),
//! cancellation of suspended and running instances, and workflow deadlines.
//!
//! Its tests by topic, beside the ones here: `cancel.rs`, `compensation.rs` (in `control/`).

mod cancel;
mod compensation;

use crate::{Ran, Test};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Polls `cond` every 50 ms for up to 20 s.
#[track_caller]
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out after 20 s waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `wf run FILE --id ID` in the background, its output going to files in the test dir.
fn spawn_run(t: &Test, file: &Path, id: &str) -> Child {
    let out = std::fs::File::create(t.path().join(format!("{id}.stdout"))).expect("stdout file");
    let err = std::fs::File::create(t.path().join(format!("{id}.stderr"))).expect("stderr file");
    t.cmd()
        .args(["run", file.to_str().expect("utf-8 path"), "--id", id])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("spawn wf run")
}

/// Waits (up to 30 s) for a background `wf` to exit on its own.
#[track_caller]
fn finish(t: &Test, mut child: Child, id: &str) -> Ran {
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "background wf did not exit within 30 s\n--- stderr\n{}",
                t.read(&format!("{id}.stderr"))
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Ran {
        code: status.code().unwrap_or(-1),
        stdout: t.read(&format!("{id}.stdout")),
        stderr: t.read(&format!("{id}.stderr")),
    }
}

/// SIGKILLs a background `wf` and reaps it.
fn kill9(mut child: Child) {
    child.kill().expect("SIGKILL wf");
    child.wait().expect("reap wf");
}

/// The step's attempt outcomes, in order.
fn outcomes(step: &Value) -> Vec<String> {
    step["attempt_list"]
        .as_array()
        .unwrap_or_else(|| panic!("no attempt_list in {step:#}"))
        .iter()
        .map(|a| a["outcome"].as_str().unwrap_or("<none>").to_string())
        .collect()
}

/// Whether the inspect JSON has a step `id`.
fn has_step(inspect: &Value, id: &str) -> bool {
    inspect["steps"]
        .as_array()
        .is_some_and(|s| s.iter().any(|s| s["id"] == id))
}

/// The status of step `key` as `wf inspect` sees it now ("" if unknown yet).
fn step_status(t: &Test, id: &str, key: &str) -> String {
    let ran = t.wf(&["inspect", id, "--json"]);
    if ran.code != 0 {
        return String::new();
    }
    let Ok(v) = serde_json::from_str::<Value>(&ran.stdout) else {
        return String::new();
    };
    v["steps"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["id"] == key))
        .and_then(|s| s["status"].as_str())
        .unwrap_or_default()
        .to_string()
}

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

fn count(text: &str, line: &str) -> usize {
    text.lines().filter(|l| *l == line).count()
}

/// Every span of every run of instance `id` (`wf trace ID --format json`).
fn spans(t: &Test, id: &str) -> Vec<Value> {
    let runs = t.wf(&["trace", id, "--format", "json"]).code(0).json();
    runs.as_array()
        .expect("runs array")
        .iter()
        .flat_map(|r| r["spans"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// A shell loop that waits (at most ~20 s) for `file` to exist.
fn await_file(file: &str) -> String {
    format!("n=0; while [ ! -f {file} ] && [ $n -lt 200 ]; do sleep 0.1; n=$((n+1)); done")
}

// ---------------------------------------------------------------- if

#[test]
fn a_false_condition_skips_the_step_and_its_dependents_still_run() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: conditions
inputs:
  mode: { default: "fast" }
steps:
  - id: tmpl_false
    needs: []
    if: "${{ inputs.mode == 'slow' }}"
    run: echo tmpl_false >> ran.log
  - id: tmpl_true
    needs: []
    if: "${{ inputs.mode == 'fast' }}"
    run: echo tmpl_true >> ran.log
  - id: bare_false
    needs: []
    if: "inputs.mode == 'slow' || !true"
    run: echo bare_false >> ran.log
  - id: bare_true
    needs: []
    if: "inputs.mode != 'slow' && true"
    run: echo bare_true >> ran.log
  - id: lit_false
    needs: []
    if: false
    run: echo lit_false >> ran.log
  - id: lit_true
    needs: []
    if: true
    run: echo lit_true >> ran.log
  - id: after
    needs: [tmpl_false, tmpl_true, bare_false, bare_true, lit_false, lit_true]
    run: >-
      echo "${{ steps.tmpl_false.status }} ${{ steps.tmpl_true.status }}
      ${{ steps.bare_false.status }} ${{ steps.bare_true.status }}
      ${{ steps.lit_false.status }} ${{ steps.lit_true.status }}" > after.txt
  - id: because_skipped
    needs: [lit_false]
    if: "steps.lit_false.status == 'skipped'"
    run: echo because_skipped >> ran.log
  - id: chained
    if: "${{ steps.because_skipped.status == 'completed' }}"
    run: echo chained >> ran.log
"#,
        &[],
    );
    ran.code(0);
    let ran_log = t.read("ran.log");
    let mut ran_steps = lines(&ran_log);
    ran_steps.sort();
    assert_eq!(
        ran_steps,
        [
            "bare_true",
            "because_skipped",
            "chained",
            "lit_true",
            "tmpl_true"
        ]
    );
    assert_eq!(
        t.read("after.txt"),
        "skipped completed skipped completed skipped completed\n"
    );
    let i = t.inspect(&id);
    assert_eq!(i["status"], "completed");
    for skipped in ["tmpl_false", "bare_false", "lit_false"] {
        let s = Test::step(&i, skipped);
        assert_eq!(s["status"], "skipped", "{s:#}");
        assert_eq!(s["attempts"], 0, "{s:#}");
    }
    for done in ["tmpl_true", "bare_true", "lit_true", "after", "chained"] {
        assert_eq!(Test::step(&i, done)["status"], "completed", "{done}");
    }
    // A skipped step is traced with outcome `skipped`.
    let skipped_spans = spans(&t, &id)
        .into_iter()
        .filter(|s| s["attributes"]["workflow.step.outcome"] == "skipped")
        .map(|s| s["name"].as_str().unwrap_or_default().to_string())
        .collect::<Vec<_>>();
    for skipped in ["tmpl_false", "bare_false", "lit_false"] {
        assert!(
            skipped_spans.contains(&format!("conditions/{skipped}")),
            "{skipped} has no skipped span: {skipped_spans:?}"
        );
    }
}

#[test]
fn a_condition_on_a_failed_steps_status_runs_after_continue_on_error() {
    let t = Test::new();
    let (_, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: on-failure
steps:
  - id: try
    run: exit 3
    continue_on_error: true
  - id: fallback
    if: "steps.try.status == 'failed'"
    run: echo fallback >> ran.log
  - id: happy
    needs: [try]
    if: "${{ steps.try.status == 'completed' }}"
    run: echo happy >> ran.log
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(t.read("ran.log"), "fallback\n");
}

// ---------------------------------------------------------------- for_each

#[test]
fn for_each_runs_one_instance_per_item_and_collects_their_outputs() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: fanout
steps:
  - id: list
    run: |
      echo '{"items": [{"sku": "book"}, {"sku": "lamp"}, {"sku": "mug"}]}'
  - id: ship
    for_each: "${{ steps.list.output.json.items }}"
    run: echo "${{ index }}:${{ item.sku }}"
  - id: colors
    needs: []
    for_each: [red, green]
    run: ["sh", "-c", "echo \"$1 at $2\"", "colors", "${{ item }}", "${{ index }}"]
  - id: after
    needs: [ship, colors]
    run: >-
      echo "${{ steps.ship.output[1].stdout }} ${{ steps.colors.output[0].stdout }}
      ${{ steps.ship.status }}" > after.txt
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(t.read("after.txt"), "1:lamp red at 0 completed\n");
    let i = t.inspect(&id);
    for (n, sku) in ["book", "lamp", "mug"].iter().enumerate() {
        let item = Test::step(&i, &format!("ship[{n}]"));
        assert_eq!(item["status"], "completed", "{item:#}");
        assert_eq!(item["attempts"], 1);
        assert_eq!(item["output"]["stdout"], format!("{n}:{sku}"));
    }
    assert!(!has_step(&i, "ship[3]"), "{i:#}");
    let ship = Test::step(&i, "ship");
    assert_eq!(ship["status"], "completed");
    let stdouts: Vec<_> = ship["output"]
        .as_array()
        .expect("the for_each output is a list")
        .iter()
        .map(|o| o["stdout"].clone())
        .collect();
    assert_eq!(stdouts, [json!("0:book"), json!("1:lamp"), json!("2:mug")]);
    assert_eq!(
        Test::step(&i, "colors[1]")["output"]["stdout"],
        "green at 1"
    );
}

#[test]
fn max_parallel_is_never_exceeded() {
    let t = Test::new();
    // Items 0 and 1 meet (each waits to see the other start): the limit allows
    // two at once, so the log must show two overlapping, and never three.
    t.write(
        "item.sh",
        r#"#!/bin/sh
echo "start $1" >> par.log
if [ "$1" -lt 2 ]; then
  other=$((1 - $1))
  n=0
  while ! grep -qx "start $other" par.log && [ $n -lt 200 ]; do sleep 0.1; n=$((n+1)); done
fi
sleep 0.2
echo "end $1" >> par.log
"#,
    );
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: throttle
steps:
  - id: work
    for_each: [a, b, c, d, e, f, g]
    max_parallel: 2
    run: ["./item.sh", "${{ index }}"]
"#,
        &[],
    );
    ran.code(0);
    let log = t.read("par.log");
    let (mut now, mut max) = (0i32, 0i32);
    for line in log.lines() {
        if line.starts_with("start ") {
            now += 1;
            max = max.max(now);
        } else if line.starts_with("end ") {
            now -= 1;
        }
    }
    assert_eq!(max, 2, "max overlap should be exactly 2:\n{log}");
    for n in 0..7 {
        assert_eq!(count(&log, &format!("start {n}")), 1, "{log}");
        assert_eq!(count(&log, &format!("end {n}")), 1, "{log}");
    }
    let i = t.inspect(&id);
    assert_eq!(
        Test::step(&i, "work")["output"].as_array().map(Vec::len),
        Some(7)
    );
}

#[test]
fn an_empty_list_completes_the_step_with_an_empty_output() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: empty
inputs:
  items: { default: [] }
steps:
  - id: from_input
    for_each: "${{ inputs.items }}"
    run: echo from_input >> never.log
  - id: literal
    for_each: []
    run: echo literal >> never.log
  - id: after
    run: echo "${{ steps.from_input.status }} ${{ steps.literal.status }}" > after.txt
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(t.read("never.log"), "");
    assert_eq!(t.read("after.txt"), "completed completed\n");
    let i = t.inspect(&id);
    for step in ["from_input", "literal"] {
        let s = Test::step(&i, step);
        assert_eq!(s["status"], "completed", "{s:#}");
        assert_eq!(s["output"], json!([]), "{s:#}");
        assert!(!has_step(&i, &format!("{step}[0]")));
    }
}

#[test]
fn a_workflow_env_that_cannot_be_evaluated_fails_the_instance_and_closes_its_run() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: bad-env
inputs:
  n: { default: 5 }
env: { X: "${{ fromJSON('not json') }}" }
steps:
  - id: a
    run: echo ran >> never.log
"#,
        &[],
    );
    ran.code(1);
    assert_eq!(t.read("never.log"), "");
    let i = t.inspect(&id);
    assert_eq!(i["status"], "failed", "{i:#}");
    assert!(
        i["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("workflow env `X`: Error parsing JSON")),
        "{i:#}"
    );
    assert_eq!(i["runs"][0]["outcome"], "failed", "{i:#}");
    // Nothing is left running or held: a resume says it failed, once.
    let resumed = t.wf(&["resume", &id]);
    resumed.code(1);
    assert!(resumed.stderr.contains("failed"), "{}", resumed.stderr);
    assert_eq!(t.inspect(&id)["runs"].as_array().map(Vec::len), Some(1));
}

#[test]
fn a_for_each_that_is_not_a_list_fails_with_an_expression_error() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: not-a-list
inputs:
  n: { default: 3 }
steps:
  - id: fan
    for_each: "${{ inputs.n }}"
    run: echo item >> never.log
  - id: after
    run: echo after >> never.log
"#,
        &[],
    );
    ran.code(1);
    assert_eq!(t.read("never.log"), "");
    let i = t.inspect(&id);
    assert_eq!(i["status"], "failed");
    let fan = Test::step(&i, "fan");
    assert_eq!(fan["status"], "failed", "{fan:#}");
    assert_eq!(fan["error_type"], "expression", "{fan:#}");
    assert!(
        fan["error_message"]
            .as_str()
            .is_some_and(|m| m.contains("list")),
        "{fan:#}"
    );
    assert_ne!(Test::step(&i, "after")["status"], "completed");
}

#[test]
fn a_resumed_fan_out_reruns_only_the_unfinished_items() {
    let t = Test::new();
    t.write(
        "ship.sh",
        &format!(
            r#"#!/bin/sh
if [ "$2" -ge 2 ]; then
  echo "started $1" >> started.log
  {}
fi
echo "shipped $1" >> effects.log
echo "item=$1 index=$2"
"#,
            await_file("go")
        ),
    );
    let file = t.write(
        "wf.yaml",
        r#"
name: crashy-fanout
steps:
  - id: ship
    for_each: [a, b, c, d]
    retry: { max_attempts: 2, interval: 10ms }
    run: ["./ship.sh", "${{ item }}", "${{ index }}"]
  - id: after
    run: echo "${{ steps.ship.output[3].stdout }} ${{ steps.ship.output[0].stdout }}" > after.txt
"#,
    );
    let id = "fanoutcrash01";
    let child = spawn_run(&t, &file, id);
    wait_until("items c and d to start", || {
        let s = t.read("started.log");
        count(&s, "started c") == 1 && count(&s, "started d") == 1
    });
    wait_until("items a and b to commit", || {
        step_status(&t, id, "ship[0]") == "completed"
            && step_status(&t, id, "ship[1]") == "completed"
    });
    kill9(child);
    // Let the orphaned attempts of c and d finish, then resume.
    t.write("go", "");
    t.wf(&["resume", id]).code(0);

    let effects = t.read("effects.log");
    assert_eq!(count(&effects, "shipped a"), 1, "{effects}");
    assert_eq!(count(&effects, "shipped b"), 1, "{effects}");
    assert!(count(&effects, "shipped c") >= 1, "{effects}");
    assert!(count(&effects, "shipped d") >= 1, "{effects}");
    assert_eq!(t.read("after.txt"), "item=d index=3 item=a index=0\n");

    let i = t.inspect(id);
    assert_eq!(i["status"], "completed");
    for (n, item) in ["a", "b", "c", "d"].iter().enumerate() {
        let s = Test::step(&i, &format!("ship[{n}]"));
        assert_eq!(s["status"], "completed", "{s:#}");
        assert_eq!(s["output"]["stdout"], format!("item={item} index={n}"));
        let expected: &[&str] = if n < 2 { &["ok"] } else { &["crashed", "ok"] };
        assert_eq!(outcomes(s), expected, "{s:#}");
    }
    assert_eq!(Test::step(&i, "ship")["status"], "completed");
    assert!(!has_step(&i, "ship[4]"));
}

// ---------------------------------------------------------------- continue_on_error

#[test]
fn continue_on_error_lets_the_workflow_go_on() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: tolerant
steps:
  - id: book
    run: echo book >> ledger.log
    compensate: { run: echo unbook >> ledger.log }
  - id: flaky
    run: exit 3
    continue_on_error: true
    compensate: { run: echo unflaky >> ledger.log }
  - id: after
    run: echo "flaky=${{ steps.flaky.status }} book=${{ steps.book.status }}" > after.txt
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(t.read("after.txt"), "flaky=failed book=completed\n");
    // The workflow did not fail: nothing is compensated.
    assert_eq!(t.read("ledger.log"), "book\n");
    let i = t.inspect(&id);
    assert_eq!(i["status"], "completed");
    let flaky = Test::step(&i, "flaky");
    assert_eq!(flaky["status"], "failed", "{flaky:#}");
    assert_eq!(flaky["error_type"], "exit.3", "{flaky:#}");
    assert_eq!(Test::step(&i, "after")["status"], "completed");
    assert!(!has_step(&i, "book:compensate"));

    let table = t.wf(&["inspect", &id]).code(0).stdout.clone();
    assert!(
        table
            .lines()
            .any(|l| l.contains("flaky") && l.contains("failed")),
        "{table}"
    );
}

#[test]
fn continue_on_error_on_a_fan_out_keeps_the_other_items_outputs() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: tolerant-fanout
steps:
  - id: ship
    for_each: [1, 2, 3]
    max_parallel: 1
    continue_on_error: true
    run: ["sh", "-c", "[ \"$1\" != 2 ] && echo \"shipped $1\"", "ship", "${{ item }}"]
  - id: after
    run: echo "${{ steps.ship.status }} ${{ steps.ship.output[2].stdout }}" > after.txt
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(t.read("after.txt"), "failed shipped 3\n");
    let i = t.inspect(&id);
    assert_eq!(i["status"], "completed");
    assert_eq!(Test::step(&i, "ship[1]")["status"], "failed");
    assert_eq!(Test::step(&i, "ship[2]")["status"], "completed");
    assert_eq!(Test::step(&i, "ship")["status"], "failed");
}

// ---------------------------------------------------------------- compensate
