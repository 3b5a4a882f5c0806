//! Compensations: in reverse completion order, with their own attempts, resumed after a crash; the saga example; timeouts that fail and compensate.

use super::*;

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
