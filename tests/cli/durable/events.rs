//! Events: a wait suspends the run until the event arrives (early ones kept, names matched exactly), and times out when none does.

use super::*;

#[test]
fn wait_for_event_suspends_until_signalled_and_the_payload_is_the_output() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: approve
state: { approved: false }
steps:
  - id: approval
    wait_for_event: { name: approved }
    set_state: { approved: "${{ output.json.ok }}", by: "${{ output.json.by }}" }
  - id: apply
    run: echo "by ${{ steps.approval.output.json.by }}" >> side.log
"#,
        &[],
    );
    ran.code(3);
    assert_eq!(ran.json()["status"], "waiting");
    let v = t.inspect(&id);
    assert_eq!(v["status"], "waiting");
    assert_eq!(v["waiting_event"], "approved");
    assert_eq!(Test::step(&v, "approval")["status"], "waiting");
    let line = header_line(&t, &id, "Waiting for:").expect("`Waiting for:` in wf inspect");
    assert!(line.contains("approved"), "{line}");
    assert_eq!(listed_status(&t, &id), "waiting");

    // A bad payload is refused and changes nothing.
    let bad = t.wf(&["signal", &id, "approved", "--data", "{not json"]);
    bad.code(2);
    assert!(bad.stderr.contains("--data"), "{}", bad.stderr);

    // Another name does not satisfy the step.
    t.wf(&["signal", &id, "rejected", "--data", r#"{"ok": false}"#])
        .code(0);
    t.wf(&["resume", &id]).code(3);
    assert_eq!(t.inspect(&id)["status"], "waiting");

    let payload = json!({ "ok": true, "by": "ana", "n": [1, 2] });
    t.wf(&["signal", &id, "approved", "--data", &payload.to_string()])
        .code(0);
    t.wf(&["resume", &id]).code(0);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    assert_eq!(Test::step(&v, "approval")["output"]["json"], payload);
    assert_eq!(v["state"], json!({ "approved": true, "by": "ana" }));
    assert_eq!(lines(&t, "side.log"), ["by ana"]);
    assert!(v["waiting_event"].is_null());
}

#[test]
fn only_an_events_exact_name_makes_a_waiting_instance_due() {
    let t = Test::new();
    // Two waits at once: the instance waits for `approved` and `x`.
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: exact
steps:
  - id: approval
    wait_for_event: { name: approved }
  - id: other
    needs: []
    wait_for_event: { name: x }
  - id: apply
    needs: [approval]
    run: echo applied >> side.log
"#,
        &[],
    );
    ran.code(3);
    assert_eq!(t.inspect(&id)["waiting_event"], "approved,x");

    // Names a pattern would take for `approved` (or `approved,x`), a name in
    // another case, and names holding a comma: none is awaited, so none
    // makes the instance due, and a worker finds nothing to run.
    for name in [
        "approve_",
        "%",
        "APPROVED",
        "approved_x",
        "_pproved",
        "appr%",
        "approved,x",
        "x,approved",
    ] {
        t.wf(&["signal", &id, name]).code(0);
        let worker = t.wf(&["worker", "--once", "--json"]);
        worker.code(0);
        assert_eq!(
            worker.stdout.trim(),
            "",
            "the event `{name}` made the instance due\n{}",
            worker.stderr
        );
        let v = t.inspect(&id);
        assert_eq!(v["status"], "waiting", "after `{name}`");
        assert_eq!(run_outcomes(&v), ["waiting"], "after `{name}`: a new run");
        assert_eq!(listed_status(&t, &id), "waiting");
    }
    assert_eq!(t.read("side.log"), "");

    // The exact name does, once.
    t.wf(&["signal", &id, "approved"]).code(0);
    let worker = t.wf(&["worker", "--once", "--json"]);
    worker.code(0);
    let outcomes: Vec<Value> = worker
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line")["outcome"].clone())
        .collect();
    assert_eq!(outcomes, [json!("waiting")], "{}", worker.stderr);
    let v = t.inspect(&id);
    assert_eq!(run_outcomes(&v), ["waiting", "waiting"]);
    assert_eq!(Test::step(&v, "approval")["status"], "completed");
    assert_eq!(v["waiting_event"], "x");
    assert_eq!(lines(&t, "side.log"), ["applied"]);
    t.wf(&["worker", "--once", "--json"]).code(0);
    assert_eq!(t.inspect(&id)["status"], "waiting", "nothing new for it");
    assert_eq!(run_outcomes(&t.inspect(&id)).len(), 2);

    t.wf(&["signal", &id, "x"]).code(0);
    t.wf(&["worker", "--once", "--json"]).code(0);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    assert_eq!(run_outcomes(&v), ["waiting", "waiting", "completed"]);
}

#[test]
fn a_wait_for_an_event_name_holding_a_comma_or_a_nul_is_a_definition_error() {
    let t = Test::new();
    // (`\0` is YAML's escape: the name holds a NUL, which no `wf signal`
    // can send.)
    for name in [r#""a,b""#, r#"",""#, r#""ev\0""#, r#""a\tb""#] {
        let file = t.write(
            "wf.yaml",
            &format!(
                "name: odd\nsteps:\n  - id: approval\n    wait_for_event: {{ name: {name} }}\n"
            ),
        );
        let ran = t.wf(&["run", file.to_str().unwrap()]);
        ran.code(2);
        assert!(
            ran.stderr.contains("wf.yaml:4:")
                && ran.stderr.contains("comma or a control character")
                && ran.stderr.lines().count() == 1,
            "{name}: {}",
            ran.stderr
        );
        assert!(!t.database_written(), "{name}");
    }
}

#[test]
fn an_event_sent_before_the_step_is_reached_is_kept_and_used() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: early
steps:
  - id: nap
    sleep: 1h
  - id: go
    wait_for_event: { name: go, timeout: 1h }
  - id: after
    run: echo "n=${{ steps.go.output.json.n }}" >> side.log
"#,
        &[],
    );
    ran.code(3);
    assert_eq!(t.inspect(&id)["status"], "sleeping");

    // Delivered (durably, by another process) while the instance sleeps.
    t.wf(&["signal", &id, "go", "--data", r#"{"n": 7}"#])
        .code(0);
    assert_eq!(t.inspect(&id)["status"], "sleeping");

    // The one resume that fires the timer finds the event waiting for it.
    t.wf(&["resume", &id, "--now"]).code(0);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    assert_eq!(run_outcomes(&v), ["sleeping", "completed"]);
    assert_eq!(Test::step(&v, "go")["output"]["json"], json!({ "n": 7 }));
    assert_eq!(lines(&t, "side.log"), ["n=7"]);
}

/// An event signalled while an earlier step still runs is taken when the
/// run reaches its `wait_for_event`, in the same run (docs/execution.md Events).
#[test]
fn an_event_signalled_while_an_earlier_step_runs_is_taken_in_the_same_run() {
    let t = Test::new();
    let path = t.write(
        "wf.yaml",
        &format!(
            "name: during\nsteps:\n  - id: work\n    run: '{}'\n  - id: approval\n    \
             wait_for_event: {{ name: approved }}\n  - id: after\n    \
             run: echo \"by=${{{{ steps.approval.output.json.by }}}}\" >> side.log\n",
            blocking_step("started")
        ),
    );
    let run = spawn(&t, &["run", path.to_str().unwrap(), "--id", "ev"]);
    eventually("the first step to start", || {
        t.path().join("started").exists()
    });
    t.wf(&["signal", "ev", "approved", "--data", r#"{"by": "ana"}"#])
        .code(0);
    std::fs::write(t.path().join("release"), "").unwrap();
    run.finish().code(0);
    let v = t.inspect("ev");
    assert_eq!(v["status"], "completed", "{v:#}");
    assert_eq!(run_outcomes(&v), ["completed"]);
    assert_eq!(lines(&t, "side.log"), ["by=ana"]);
}

/// Ctrl-C of a `wf resume` that only waits for a timer: nothing ran, so the
/// instance stays sleeping until the same time (docs/execution.md Statuses stay
/// true); the process still says it was interrupted (exit 130).
#[test]
fn interrupting_a_resume_that_only_waits_for_a_timer_leaves_it_sleeping() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        "name: nap\nsteps:\n  - id: nap\n    sleep: 2h\n  - id: after\n    run: echo after >> side.log\n",
        &[],
    );
    ran.code(3);
    let wake_sql = format!(
        "SELECT i.wake_at || ' ' || s.retry_at FROM instances i JOIN steps s ON s.instance_id = i.id \
         WHERE i.id = '{id}' AND s.key = 'nap'"
    );
    let wake = t.sql(&wake_sql);
    assert!(wake.len() > 20, "a wake-up time is stored: {wake}");
    let resume = spawn(&t, &["resume", &id]);
    eventually("the resume to hold the instance", || {
        listed_status(&t, &id) == "running"
    });
    resume.signal("INT");
    resume.finish().code(130);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "sleeping", "{v:#}");
    assert_eq!(listed_status(&t, &id), "sleeping");
    assert_eq!(t.sql(&wake_sql), wake, "the same wake-up time");
    assert_eq!(run_outcomes(&v), ["sleeping", "interrupted"]);
    assert!(lines(&t, "side.log").is_empty());
}

#[test]
fn a_wait_times_out_when_no_event_arrives() {
    let t = Test::new();
    let yaml = r#"
name: timeout
steps:
  - id: approval
    wait_for_event: { name: approved, timeout: 1s }
  - id: after
    run: echo after >> side.log
"#;
    // A run does not wait for events, however short the timeout: it ends at
    // once with the deadline stored.
    let before = now_ms();
    let (id, ran) = t.run_yaml("wf.yaml", yaml, &[]);
    ran.code(3);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "waiting");
    assert_eq!(v["waiting_event"], "approved");
    let deadline = epoch_ms(v["wake_at"].as_str().expect("the timeout is stored"));
    assert!(deadline >= before + 1000 && deadline <= now_ms() + 1000);
    assert!(header_line(&t, &id, "Waiting for:").is_some());

    // Before the deadline a resume suspends again; after it, the step fails.
    if now_ms() < deadline {
        t.wf(&["resume", &id]).code(3);
    }
    while now_ms() <= deadline {
        std::thread::sleep(std::time::Duration::from_millis(
            (deadline + 1 - now_ms()).max(1) as u64,
        ));
    }
    t.wf(&["resume", &id]).code(1);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "failed");
    assert_eq!(Test::step(&v, "approval")["error_type"], "timeout");
    assert_eq!(t.read("side.log"), "");
}

// ------------------------------------------------------------ 3. resume
