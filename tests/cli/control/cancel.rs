//! Cancel and terminate: of a killed run, while compensating, during an inline sleep, never cutting a running compensation short; handler steps after a failure.

use super::*;

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
    let yaml = include_str!("../../../workflows/handlers.yaml");
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
