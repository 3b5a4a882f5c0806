//! Control flow (docs/workflow-file.md `if`, `for_each`, `max_parallel`, `continue_on_error`,
//! `compensate`, `timeout`; docs/execution.md; docs/commands.md `wf cancel`), each through the real binary:
//! conditions that skip steps, fan-outs with stable item keys, a throttle that
//! is never exceeded, a crash in the middle of a fan-out, sagas whose
//! compensations run in reverse completion order (durably, across a crash),
//! cancellation of suspended and running instances, and workflow deadlines.

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

#[test]
fn compensations_run_in_reverse_completion_order_with_their_own_attempts() {
    let t = Test::new();
    // `second` is declared first but completes after `first`: completion
    // order, not file order, decides. `boom` fails, `never` never starts:
    // neither is compensated.
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: undo
steps:
  - id: second
    needs: [first]
    run: echo second >> ledger.log
    compensate: { run: echo undo-second >> ledger.log }
  - id: first
    needs: []
    run: echo first >> ledger.log
    compensate:
      run: echo "undo-first-$WF_ATTEMPT" >> ledger.log; [ "$WF_ATTEMPT" -ge 2 ]
      retry: { max_attempts: 3, interval: 10ms }
  - id: plain
    needs: [second]
    run: echo plain >> ledger.log
  - id: boom
    needs: [plain]
    run: exit 7
    compensate: { run: echo undo-boom >> ledger.log }
  - id: never
    needs: [boom]
    run: echo never >> ledger.log
    compensate: { run: echo undo-never >> ledger.log }
"#,
        &[],
    );
    ran.code(1);
    assert_eq!(
        lines(&t.read("ledger.log")),
        [
            "first",
            "second",
            "plain",
            "undo-second",
            "undo-first-1",
            "undo-first-2"
        ]
    );
    let i = t.inspect(&id);
    assert_eq!(i["status"], "failed");
    assert!(
        i["error"].as_str().is_some_and(|e| e.contains("boom")),
        "{i:#}"
    );
    let second = Test::step(&i, "second:compensate");
    assert_eq!(second["status"], "completed", "{second:#}");
    assert_eq!(outcomes(second), ["ok"]);
    let first = Test::step(&i, "first:compensate");
    assert_eq!(first["status"], "completed", "{first:#}");
    assert_eq!(first["attempts"], 2);
    assert_eq!(outcomes(first), ["retry", "ok"]);
    assert!(!has_step(&i, "boom:compensate"), "{i:#}");
    assert!(!has_step(&i, "never:compensate"), "{i:#}");
    assert!(!has_step(&i, "plain:compensate"), "{i:#}");

    // Each compensation attempt has its own span.
    let spans = spans(&t, &id);
    let attempts_of = |name: &str| -> Vec<(Value, Value)> {
        spans
            .iter()
            .filter(|s| s["name"] == name)
            .map(|s| {
                (
                    s["attributes"]["workflow.step.attempt"].clone(),
                    s["attributes"]["workflow.step.outcome"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(
        attempts_of("undo/first:compensate"),
        [(json!(1), json!("retry")), (json!(2), json!("ok"))]
    );
    assert_eq!(
        attempts_of("undo/second:compensate"),
        [(json!(1), json!("ok"))]
    );
    assert!(attempts_of("undo/boom:compensate").is_empty());
}

#[test]
fn fan_out_items_are_compensated_in_reverse_completion_order() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: undo-items
steps:
  - id: ship
    for_each: [xa, yb, zc]
    max_parallel: 1
    run: echo "ship ${{ item }}" >> ledger.log
    compensate:
      run: echo "unship ${{ item }} at ${{ index }}" >> ledger.log
  - id: boom
    run: exit 1
"#,
        &[],
    );
    ran.code(1);
    assert_eq!(
        lines(&t.read("ledger.log")),
        [
            "ship xa",
            "ship yb",
            "ship zc",
            "unship zc at 2",
            "unship yb at 1",
            "unship xa at 0"
        ]
    );
    let i = t.inspect(&id);
    for n in 0..3 {
        assert_eq!(
            Test::step(&i, &format!("ship[{n}]:compensate"))["status"],
            "completed"
        );
    }
}

#[test]
fn a_crash_during_compensation_resumes_it() {
    let t = Test::new();
    let file = t.write(
        "wf.yaml",
        &format!(
            r#"
name: durable-undo
steps:
  - id: a
    run: echo a >> ledger.log
    compensate:
      run: |
        echo "undo-a attempt $WF_ATTEMPT" >> marks.log
        {}
        echo undo-a >> ledger.log
      retry: {{ max_attempts: 2 }}
  - id: b
    run: echo b >> ledger.log
    compensate: {{ run: echo undo-b >> ledger.log }}
  - id: boom
    run: exit 1
"#,
            await_file("release")
        ),
    );
    let id = "undocrash01";
    let child = spawn_run(&t, &file, id);
    wait_until("a's compensation to start", || {
        t.read("marks.log").contains("undo-a attempt 1")
    });
    kill9(child);
    // The attempt in flight died with wf (parent-death signal): it never
    // writes its undo. The resumed run does a's compensation again, once.
    t.write("release", "");
    let resumed = t.wf(&["resume", id]);
    resumed.code(1);
    let said = format!("{}{}", resumed.stdout, resumed.stderr);
    assert!(said.contains("boom"), "the failure is named: {said}");

    assert_eq!(lines(&t.read("ledger.log")), ["a", "b", "undo-b", "undo-a"]);
    assert_eq!(
        lines(&t.read("marks.log")),
        ["undo-a attempt 1", "undo-a attempt 2"]
    );

    let i = t.inspect(id);
    assert_eq!(i["status"], "failed");
    let b = Test::step(&i, "b:compensate");
    assert_eq!(b["status"], "completed", "{b:#}");
    assert_eq!(outcomes(b), ["ok"]);
    let a = Test::step(&i, "a:compensate");
    assert_eq!(a["status"], "completed", "{a:#}");
    assert_eq!(outcomes(a), ["crashed", "ok"]);
    assert_eq!(a["attempt_list"][0]["run"], 1);
    assert_eq!(a["attempt_list"][1]["run"], 2);
    assert!(!has_step(&i, "boom:compensate"));

    let spans = spans(&t, id);
    let outcome_of = |attempt: i64| {
        spans
            .iter()
            .find(|s| {
                s["name"] == "durable-undo/a:compensate"
                    && s["attributes"]["workflow.step.attempt"] == attempt
            })
            .map(|s| s["attributes"]["workflow.step.outcome"].clone())
    };
    assert_eq!(outcome_of(1), Some(json!("crashed")));
    assert_eq!(outcome_of(2), Some(json!("ok")));
}

// ---------------------------------------------------------------- cancel

const BOOK_THEN_SUSPEND: &str = r#"
name: cancel-suspended
inputs:
  how: { default: sleep }
steps:
  - id: book
    run: echo book >> ledger.log
    compensate: { run: echo unbook >> ledger.log }
  - id: nap
    if: "inputs.how == 'sleep'"
    sleep: 1h
  - id: approval
    needs: [nap]
    if: "inputs.how == 'wait'"
    wait_for_event: { name: approved }
  - id: after
    needs: [approval]
    run: echo after >> ledger.log
    compensate: { run: echo unafter >> ledger.log }
"#;

#[track_caller]
fn cancel_suspended(how: &str, status: &str) {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        BOOK_THEN_SUSPEND,
        &["--input", &format!("how={how}")],
    );
    ran.code(3);
    assert_eq!(t.inspect(&id)["status"], status);

    t.wf(&["cancel", &id]).code(0);
    assert_eq!(lines(&t.read("ledger.log")), ["book", "unbook"]);
    let i = t.inspect(&id);
    assert_eq!(i["status"], "canceled");
    let comp = Test::step(&i, "book:compensate");
    assert_eq!(comp["status"], "completed", "{comp:#}");
    assert_eq!(outcomes(comp), ["ok"]);
    assert!(!has_step(&i, "after:compensate"));
    assert_ne!(Test::step(&i, "after")["status"], "completed");
    // The timer or the wait is over: canceled, with no wake-up time left.
    let open = if how == "sleep" { "nap" } else { "approval" };
    assert_eq!(Test::step(&i, open)["status"], "canceled", "{i:#}");
    assert_eq!(
        t.sql(&format!(
            "SELECT count(*) FROM steps WHERE instance_id = '{id}' AND retry_at IS NOT NULL"
        )),
        "0"
    );
    assert_eq!(
        t.sql(&format!(
            "SELECT count(*) FROM instances WHERE id = '{id}' AND wake_at IS NOT NULL"
        )),
        "0"
    );

    let resumed = t.wf(&["resume", &id]);
    assert_ne!(resumed.code, 0, "resume of a canceled instance must fail");
    assert!(
        resumed.stderr.contains("canceled"),
        "unclear message: {}",
        resumed.stderr
    );
    assert_eq!(lines(&t.read("ledger.log")), ["book", "unbook"]);
    // Canceled once is enough.
    t.wf(&["cancel", &id]).code(2);
    assert_eq!(t.inspect(&id)["status"], "canceled");
}

#[test]
fn cancel_a_sleeping_instance() {
    cancel_suspended("sleep", "sleeping");
}

#[test]
fn cancel_a_waiting_instance() {
    cancel_suspended("wait", "waiting");
}

#[test]
fn cancel_a_run_in_progress_from_another_process() {
    let t = Test::new();
    let file = t.write(
        "wf.yaml",
        &format!(
            r#"
name: cancel-running
steps:
  - id: book
    run: echo book >> ledger.log
    compensate: {{ run: echo unbook >> ledger.log }}
  - id: long
    run: |
      echo started > long.started
      {}
      echo finished >> ledger.log
    compensate: {{ run: echo unlong >> ledger.log }}
  - id: after
    run: echo after >> ledger.log
"#,
            await_file("never-created")
        ),
    );
    let id = "cancelrun01";
    let child = spawn_run(&t, &file, id);
    wait_until("the long step to start", || {
        t.path().join("long.started").exists()
    });
    t.wf(&["cancel", id]).code(0);
    let ran = finish(&t, child, id);
    ran.code(4);

    assert_eq!(lines(&t.read("ledger.log")), ["book", "unbook"]);
    let i = t.inspect(id);
    assert_eq!(i["status"], "canceled");
    let long = Test::step(&i, "long");
    assert_eq!(outcomes(long), ["canceled"], "{long:#}");
    assert_ne!(long["status"], "completed");
    assert_eq!(outcomes(Test::step(&i, "book:compensate")), ["ok"]);
    assert!(!has_step(&i, "long:compensate"), "{i:#}");
    assert_ne!(Test::step(&i, "after")["status"], "completed");

    let resumed = t.wf(&["resume", id]);
    assert_ne!(resumed.code, 0);
    assert!(resumed.stderr.contains("canceled"), "{}", resumed.stderr);
}

#[test]
fn cancel_of_a_finished_instance_is_an_error() {
    let t = Test::new();
    let (done, ran) = t.run_yaml(
        "ok.yaml",
        "name: fine\nsteps:\n  - id: a\n    run: echo a >> ledger.log\n    compensate: { run: echo undo >> ledger.log }\n",
        &[],
    );
    ran.code(0);
    let c = t.wf(&["cancel", &done]);
    c.code(2);
    assert!(c.stderr.contains("completed"), "{}", c.stderr);
    assert_eq!(t.inspect(&done)["status"], "completed");

    let (failed, ran) = t.run_yaml(
        "bad.yaml",
        "name: broken\nsteps:\n  - id: a\n    run: exit 1\n",
        &[],
    );
    ran.code(1);
    t.wf(&["cancel", &failed]).code(2);
    assert_eq!(t.inspect(&failed)["status"], "failed");
    assert_eq!(t.read("ledger.log"), "a\n");
}

// ---------------------------------------------------------------- timeout

#[test]
fn a_workflow_timeout_fails_the_run_and_compensates() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        &format!(
            r#"
name: deadline
timeout: 1s
steps:
  - id: book
    run: echo book >> ledger.log
    compensate: {{ run: echo unbook >> ledger.log }}
  - id: slow
    run: |
      {}
      echo finished >> ledger.log
    compensate: {{ run: echo unslow >> ledger.log }}
  - id: after
    run: echo after >> ledger.log
"#,
            await_file("never-created")
        ),
        &[],
    );
    ran.code(1);
    assert_eq!(lines(&t.read("ledger.log")), ["book", "unbook"]);
    let i = t.inspect(&id);
    assert_eq!(i["status"], "failed");
    let error = i["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("timed out") || error.contains("timeout"),
        "error does not name the timeout: {i:#}"
    );
    let slow = Test::step(&i, "slow");
    assert_eq!(outcomes(slow), ["timeout"], "{slow:#}");
    assert_eq!(slow["attempt_list"][0]["error_type"], "timeout");
    assert_eq!(outcomes(Test::step(&i, "book:compensate")), ["ok"]);
    assert!(!has_step(&i, "slow:compensate"));
}

// ---------------------------------------------------------------- saga example

/// Copies `workflows/saga.yaml` and its scripts into the test dir, under
/// the same relative paths the README uses.
fn saga(t: &Test) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"));
    for name in [
        "workflows/saga.yaml",
        "workflows/saga/reserve.sh",
        "workflows/saga/ship.sh",
    ] {
        let text = std::fs::read_to_string(src.join(name)).expect("read the saga example");
        t.write(name, &text);
    }
}

#[test]
fn the_saga_example_completes() {
    let t = Test::new();
    saga(&t);
    let ran = t.wf(&["run", "workflows/saga.yaml", "--json"]);
    ran.code(0);
    let id = ran.json()["id"].as_str().expect("id").to_string();
    let ledger = t.read("workflows/saga/ledger.log");
    let mut l = lines(&ledger);
    assert_eq!(l.first(), Some(&"reserve A-1001"), "{ledger}");
    l.sort();
    assert_eq!(
        l,
        ["reserve A-1001", "ship book", "ship lamp", "ship mug"],
        "{ledger}"
    );
    let i = t.inspect(&id);
    assert_eq!(i["status"], "completed");
    assert_eq!(
        i["state"],
        json!({"reserved": true, "charged": true, "charge_id": "ch_42"})
    );
    assert_eq!(
        Test::step(&i, "notify")["output"]["stdout"],
        "order A-1001 shipped shipped book and more"
    );
    assert!(!has_step(&i, "reserve:compensate"));
}

#[test]
fn the_saga_example_refunds_then_releases_when_shipping_fails() {
    let t = Test::new();
    saga(&t);
    let ran = t.wf(&["run", "workflows/saga.yaml", "--input", "fail_ship=1"]);
    ran.code(1);
    let said = format!("{}{}", ran.stdout, ran.stderr);
    assert!(
        said.contains(
            "failed: step `ship[1]` failed (exit.4: exited with code 4: carrier rejected lamp)"
        ),
        "{said}"
    );
    let list = t.wf(&["list", "--json"]).code(0).json();
    let id = list[0]["id"].as_str().expect("id").to_string();
    let ledger = t.read("workflows/saga/ledger.log");
    let l = lines(&ledger);
    assert_eq!(l.first(), Some(&"reserve A-1001"), "{ledger}");
    assert_eq!(
        l[l.len().saturating_sub(2)..],
        ["refund ch_42", "release A-1001"],
        "{ledger}"
    );
    assert_eq!(count(&ledger, "ship lamp"), 0, "{ledger}");
    // The book shipped alongside the lamp (max_parallel: 2) and was let finish.
    assert_eq!(count(&ledger, "ship book"), 1, "{ledger}");
    assert_eq!(count(&ledger, "refund ch_42"), 1, "{ledger}");
    assert_eq!(count(&ledger, "release A-1001"), 1, "{ledger}");
    let i = t.inspect(&id);
    assert_eq!(i["status"], "failed");
    assert!(
        i["error"].as_str().is_some_and(|e| e.contains("ship[1]")),
        "{i:#}"
    );
    assert_eq!(Test::step(&i, "ship[1]")["error_type"], "exit.4");
    assert_eq!(Test::step(&i, "charge:compensate")["status"], "completed");
    assert_eq!(Test::step(&i, "reserve:compensate")["status"], "completed");
    assert_ne!(Test::step(&i, "notify")["status"], "completed");
}

// ---------------------------------------------------------------- more edges

#[test]
fn statuses_and_fan_out_outputs_survive_a_suspension() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: replayed-context
steps:
  - id: maybe
    if: false
    run: echo maybe >> ran.log
  - id: flaky
    run: exit 2
    continue_on_error: true
  - id: ship
    for_each: [pen, ink]
    run: echo "${{ item }}" >> ran.log; echo "shipped ${{ item }}"
  - id: nap
    sleep: 1h
  - id: after
    run: >-
      echo "${{ steps.maybe.status }} ${{ steps.flaky.status }} ${{ steps.ship.status }}
      ${{ steps.ship.output[1].stdout }}" > after.txt
"#,
        &[],
    );
    ran.code(3);
    t.wf(&["resume", &id, "--now"]).code(0);
    assert_eq!(
        t.read("after.txt"),
        "skipped failed completed shipped ink\n"
    );
    // The items ran once each (in parallel: in any order), not again on resume.
    let ran_log = t.read("ran.log");
    let mut items = lines(&ran_log);
    items.sort();
    assert_eq!(items, ["ink", "pen"]);
}

#[test]
fn a_workflow_timeout_while_sleeping_fails_and_compensates() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: deadline-sleep
timeout: 1s
steps:
  - id: book
    run: echo book >> ledger.log
    compensate: { run: echo unbook >> ledger.log }
  - id: nap
    sleep: 20s
  - id: after
    run: echo after >> ledger.log
"#,
        &[],
    );
    ran.code(1);
    assert_eq!(lines(&t.read("ledger.log")), ["book", "unbook"]);
    let i = t.inspect(&id);
    assert_eq!(i["status"], "failed");
    assert!(
        i["error"]
            .as_str()
            .is_some_and(|e| e.contains("timed out") || e.contains("timeout")),
        "{i:#}"
    );
    assert_ne!(Test::step(&i, "nap")["status"], "completed");
}

#[test]
fn a_workflow_timeout_does_not_cut_a_running_compensation_short() {
    // `boom` fails at once; `a`'s compensation is still running when the
    // workflow's deadline passes. It must be allowed to finish.
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: deadline-undo
timeout: 1s
steps:
  - id: a
    run: echo a >> ledger.log
    compensate:
      run: |
        n=0; while [ $n -lt 30 ]; do sleep 0.1; n=$((n+1)); done
        echo undo-a >> ledger.log
  - id: b
    run: echo b >> ledger.log
    compensate: { run: echo undo-b >> ledger.log }
  - id: boom
    run: exit 1
"#,
        &[],
    );
    ran.code(1);
    assert_eq!(lines(&t.read("ledger.log")), ["a", "b", "undo-b", "undo-a"]);
    let i = t.inspect(&id);
    assert_eq!(i["status"], "failed");
    let a = Test::step(&i, "a:compensate");
    assert_eq!(a["status"], "completed", "{a:#}");
    assert_eq!(outcomes(a), ["ok"]);
    assert!(
        i["error"].as_str().is_some_and(|e| e.contains("boom")),
        "the failure that came first is the reason: {i:#}"
    );
}

#[test]
fn cancel_an_instance_whose_process_was_killed() {
    let t = Test::new();
    let file = t.write(
        "wf.yaml",
        &format!(
            r#"
name: cancel-dead
steps:
  - id: book
    run: echo book >> ledger.log
    compensate: {{ run: echo unbook >> ledger.log }}
  - id: long
    run: |
      echo started > long.started
      {}
      echo finished >> ledger.log
    compensate: {{ run: echo unlong >> ledger.log }}
"#,
            await_file("release")
        ),
    );
    let id = "canceldead01";
    let child = spawn_run(&t, &file, id);
    wait_until("the long step to start", || {
        t.path().join("long.started").exists()
    });
    kill9(child);
    t.write("release", "");
    t.wf(&["cancel", id]).code(0);

    let ledger = t.read("ledger.log");
    assert_eq!(count(&ledger, "unbook"), 1, "{ledger}");
    assert_eq!(count(&ledger, "unlong"), 0, "{ledger}");
    let i = t.inspect(id);
    assert_eq!(i["status"], "canceled");
    assert_eq!(outcomes(Test::step(&i, "long")), ["crashed"]);
    assert_eq!(outcomes(Test::step(&i, "book:compensate")), ["ok"]);
    let roots: Vec<_> = spans(&t, id)
        .into_iter()
        .filter(|s| s["name"] == "cancel-dead/workflow")
        .map(|s| s["attributes"]["workflow.outcome"].clone())
        .collect();
    assert_eq!(roots.last(), Some(&json!("canceled")), "{roots:?}");
    t.wf(&["resume", id]).code(1);
}

#[test]
fn a_crash_while_compensating_a_cancel_resumes_as_a_cancel() {
    let t = Test::new();
    let file = t.write(
        "wf.yaml",
        &format!(
            r#"
name: cancel-crash
steps:
  - id: a
    run: echo a >> ledger.log
    compensate: {{ run: echo undo-a >> ledger.log }}
  - id: b
    run: echo b >> ledger.log
    compensate:
      run: |
        echo "undo-b attempt $WF_ATTEMPT" >> marks.log
        {}
        echo undo-b >> ledger.log
      retry: {{ max_attempts: 2 }}
  - id: long
    run: |
      echo started > long.started
      {}
"#,
            await_file("release"),
            await_file("never-created")
        ),
    );
    let id = "cancelcrash01";
    let child = spawn_run(&t, &file, id);
    wait_until("the long step to start", || {
        t.path().join("long.started").exists()
    });
    t.wf(&["cancel", id]).code(0);
    wait_until("b's compensation to start", || {
        t.read("marks.log").contains("undo-b attempt 1")
    });
    kill9(child);
    t.write("release", "");
    t.wf(&["resume", id]).code(4);

    // The compensation in flight died with wf: its undo happens once, in the
    // resumed run.
    assert_eq!(lines(&t.read("ledger.log")), ["a", "b", "undo-b", "undo-a"]);
    let i = t.inspect(id);
    assert_eq!(i["status"], "canceled");
    assert_eq!(outcomes(Test::step(&i, "long")), ["canceled"]);
    assert_eq!(outcomes(Test::step(&i, "b:compensate")), ["crashed", "ok"]);
    assert_eq!(outcomes(Test::step(&i, "a:compensate")), ["ok"]);
}

#[test]
fn cancel_a_run_waiting_out_an_inline_sleep() {
    let t = Test::new();
    let file = t.write(
        "wf.yaml",
        r#"
name: cancel-inline
steps:
  - id: book
    run: echo book >> ledger.log
    compensate: { run: echo unbook >> ledger.log }
  - id: nap
    sleep: 8s
  - id: after
    run: echo after >> ledger.log
"#,
    );
    let id = "cancelinline01";
    let child = spawn_run(&t, &file, id);
    wait_until("the inline sleep to start", || {
        step_status(&t, id, "nap") == "sleeping"
    });
    t.wf(&["cancel", id]).code(0);
    let ran = finish(&t, child, id);
    ran.code(4);
    // Canceled before `after` could start: it never runs.
    assert_eq!(lines(&t.read("ledger.log")), ["book", "unbook"]);
    let i = t.inspect(id);
    assert_eq!(i["status"], "canceled");
    assert_ne!(Test::step(&i, "nap")["status"], "completed");
    assert_eq!(Test::step(&i, "after")["attempts"], 0);
}

#[test]
fn a_cancel_does_not_cut_a_running_compensation_short() {
    // The workflow failed and is compensating when `wf cancel` arrives: the
    // compensation in flight finishes (once), and the rest still run.
    let t = Test::new();
    let file = t.write(
        "wf.yaml",
        &format!(
            r#"
name: cancel-undo
steps:
  - id: a
    run: echo a >> ledger.log
    compensate: {{ run: echo undo-a >> ledger.log }}
  - id: b
    run: echo b >> ledger.log
    compensate:
      run: |
        echo "undo-b started" >> marks.log
        {}
        echo undo-b >> ledger.log
  - id: boom
    run: exit 1
"#,
            await_file("release")
        ),
    );
    let id = "cancelundo01";
    let child = spawn_run(&t, &file, id);
    wait_until("b's compensation to start", || {
        t.read("marks.log").contains("undo-b started")
    });
    t.wf(&["cancel", id]).code(0);
    // Give the running process time to see the request before the release.
    std::thread::sleep(Duration::from_millis(1500));
    t.write("release", "");
    let ran = finish(&t, child, id);
    assert_eq!(lines(&t.read("ledger.log")), ["a", "b", "undo-b", "undo-a"]);
    let i = t.inspect(id);
    let expected_code = match i["status"].as_str() {
        Some("failed") => 1,
        Some("canceled") => 4,
        other => panic!("unexpected status {other:?}: {i:#}"),
    };
    ran.code(expected_code);
    assert_eq!(outcomes(Test::step(&i, "b:compensate")), ["ok"]);
    assert_eq!(outcomes(Test::step(&i, "a:compensate")), ["ok"]);
    assert_eq!(t.read("marks.log"), "undo-b started\n");
}

#[test]
fn a_compensation_that_fails_does_not_stop_the_others() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: undo-fails
steps:
  - id: a
    run: echo a >> ledger.log
    compensate: { run: echo undo-a >> ledger.log }
  - id: b
    run: echo b >> ledger.log
    compensate:
      run: echo "undo-b-$WF_ATTEMPT" >> ledger.log; exit 5
      retry: { max_attempts: 2, interval: 10ms }
  - id: boom
    run: exit 1
"#,
        &[],
    );
    ran.code(1);
    assert_eq!(
        lines(&t.read("ledger.log")),
        ["a", "b", "undo-b-1", "undo-b-2", "undo-a"]
    );
    let i = t.inspect(&id);
    assert_eq!(i["status"], "failed");
    let b = Test::step(&i, "b:compensate");
    assert_eq!(b["status"], "failed", "{b:#}");
    assert_eq!(b["error_type"], "exit.5");
    assert_eq!(outcomes(b), ["retry", "failed"]);
    assert_eq!(outcomes(Test::step(&i, "a:compensate")), ["ok"]);
}

#[test]
fn cancel_terminate_runs_no_compensation_suspended_or_running() {
    let t = Test::new();
    let file = t.write(
        "wf.yaml",
        r#"
name: terminate
steps:
  - id: book
    run: echo book >> ledger.log
    compensate: { run: echo unbook >> ledger.log }
  - id: long
    run: touch long.started; sleep 30
"#,
    );
    // Running in another process: it stops, compensates nothing, exits 4.
    let child = spawn_run(&t, &file, "term-run");
    wait_until("the long step to start", || {
        t.path().join("long.started").exists()
    });
    t.wf(&["cancel", "term-run", "--terminate"]).code(0);
    finish(&t, child, "term-run").code(4);
    assert_eq!(lines(&t.read("ledger.log")), ["book"]);
    let v = t.inspect("term-run");
    assert_eq!(v["status"], "canceled");
    assert!(
        !v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == "book:compensate"),
        "{v:#}"
    );

    // Suspended: canceled here and now, without compensations.
    let file = t.write(
        "nap.yaml",
        "name: nap\nsteps:\n  - id: book\n    run: echo book2 >> ledger.log\n    compensate: { run: echo unbook2 >> ledger.log }\n  - id: nap\n    sleep: 1h\n",
    );
    t.wf(&["run", file.to_str().unwrap(), "--id", "term-nap"])
        .code(3);
    t.wf(&["cancel", "term-nap", "--terminate"]).code(0);
    assert_eq!(t.inspect("term-nap")["status"], "canceled");
    assert_eq!(lines(&t.read("ledger.log")), ["book", "book2"]);
    // A plain cancel still compensates.
    t.wf(&["run", file.to_str().unwrap(), "--id", "plain-nap"])
        .code(3);
    t.wf(&["cancel", "plain-nap"]).code(0);
    assert_eq!(
        lines(&t.read("ledger.log")),
        ["book", "book2", "book2", "unbook2"]
    );
}

#[test]
fn handler_steps_run_after_a_failure_and_the_instance_still_fails() {
    let t = Test::new();
    let yaml = r#"
name: handlers
inputs:
  fail: { default: 1 }
steps:
  - id: build
    run: echo build >> log
    compensate: { run: echo undo-build >> log }
  - id: test
    run: test "${{ inputs.fail }}" = 0 || exit 3
  - id: deploy
    run: echo deploy >> log
  - id: page
    needs: [deploy]
    if: ${{ failure() }}
    run: echo page >> log
  - id: cleanup
    needs: [page]
    if: ${{ always() }}
    run: echo cleanup >> log
  - id: only-ok
    needs: [deploy]
    if: ${{ success() }}
    run: echo only-ok >> log
  - id: quiet
    needs: [build]
    if: ${{ failure() }}
    run: echo quiet >> log
"#;
    let (id, ran) = t.run_yaml("h.yaml", yaml, &[]);
    ran.code(1);
    // The failure() handler after the failed step, the always() one after
    // it, then the compensations; nothing else new started.
    assert_eq!(
        lines(&t.read("log")),
        ["build", "page", "cleanup", "undo-build"]
    );
    let v = t.inspect(&id);
    assert_eq!(v["status"], "failed");
    let status = |k: &str| {
        v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == k)
            .unwrap()["status"]
            .clone()
    };
    assert_eq!(status("page"), "completed");
    assert_eq!(status("cleanup"), "completed");
    assert_eq!(status("quiet"), "skipped", "no failure upstream of it");
    assert_eq!(status("deploy"), "pending");
    assert_eq!(status("only-ok"), "pending");

    // Without a failure: failure() handlers are skipped, always() runs.
    std::fs::remove_file(t.path().join("log")).unwrap();
    let (_, ran) = t.run_yaml("h.yaml", yaml, &["--input", "fail=0"]);
    ran.code(0);
    // (cleanup and only-ok are independent: either may go first.)
    let log = t.read("log");
    let mut ran_steps = lines(&log);
    ran_steps[2..].sort_unstable();
    assert_eq!(ran_steps, ["build", "deploy", "cleanup", "only-ok"]);
}

#[test]
fn the_handlers_example_pages_on_failure_and_always_cleans_up() {
    let t = Test::new();
    let yaml = include_str!("../../workflows/handlers.yaml");
    let status = |v: &serde_json::Value, id: &str| Test::step(v, id)["status"].clone();

    let (ok, ran) = t.run_yaml("handlers.yaml", yaml, &[]);
    ran.code(0);
    let v = t.inspect(&ok);
    assert_eq!(status(&v, "announce"), "completed");
    assert_eq!(status(&v, "page-oncall"), "skipped");
    assert_eq!(status(&v, "cleanup"), "completed");

    let (broken, ran) = t.run_yaml("handlers.yaml", yaml, &["--input", "break=true"]);
    ran.code(1);
    let v = t.inspect(&broken);
    assert_eq!(
        v["status"], "failed",
        "the handlers do not change the outcome"
    );
    assert_eq!(status(&v, "deploy"), "failed");
    assert_eq!(
        status(&v, "announce"),
        "pending",
        "nothing new but handlers starts"
    );
    assert_eq!(status(&v, "page-oncall"), "completed");
    assert_eq!(status(&v, "cleanup"), "completed");
    assert_eq!(
        t.wf(&["logs", &broken, "page-oncall"])
            .code(0)
            .stdout
            .trim(),
        "paging on-call, the deploy of artifact-42 failed"
    );
}

#[test]
fn a_for_each_handler_runs_its_items_after_a_failure() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: fe-handler
steps:
  - id: a
    retry: { max_attempts: 1 }
    run: exit 1
  - id: notify
    needs: [a]
    if: "${{ failure() }}"
    for_each: "${{ ['ops', 'dev', 'qa'] }}"
    max_parallel: 1
    run: echo "tell ${{ item }}" >> told.log
"#,
        &[],
    );
    ran.code(1);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "failed", "{v:#}");
    assert_eq!(Test::step(&v, "notify")["status"], "completed", "{v:#}");
    // Each item once, one at a time, in order.
    assert_eq!(t.read("told.log"), "tell ops\ntell dev\ntell qa\n");
}

/// The workflow's `timeout` while a step sleeps: the instance fails and the
/// sleep ends canceled, with no wake-up time left (docs/execution.md).
#[test]
fn a_workflow_timeout_ends_a_sleeping_step_canceled() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        "name: late\ntimeout: 1s\nsteps:\n  - id: nap\n    sleep: 1h\n  - id: after\n    run: echo after >> ledger.log\n",
        &["--inline-wait", "0s"],
    );
    ran.code(3);
    // The resume waits for the deadline, the instance's next wake-up.
    t.wf(&["resume", &id]).code(1);
    let i = t.inspect(&id);
    assert_eq!(i["status"], "failed", "{i:#}");
    assert_eq!(Test::step(&i, "nap")["status"], "canceled", "{i:#}");
    assert_eq!(
        t.sql(&format!(
            "SELECT count(*) FROM steps WHERE instance_id = '{id}' AND retry_at IS NOT NULL"
        )),
        "0"
    );
    assert_eq!(t.read("ledger.log"), "");
}
