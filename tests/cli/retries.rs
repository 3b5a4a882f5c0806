//! Retries, error types and timeouts (docs/execution.md): `max_attempts` (step and
//! `defaults`), fixed and exponential backoff, `errors:` mapping exit codes to
//! `user.<name>`, `non_retryable`, the `exit.<code>` and `spawn` error types,
//! and `timeout` killing the step's whole process group.

use crate::Test;
use serde_json::{Value, json};

/// The outcomes of a step's attempts, in order.
fn outcomes(step: &Value) -> Vec<String> {
    step["attempt_list"]
        .as_array()
        .unwrap_or_else(|| panic!("no attempt_list: {step:#}"))
        .iter()
        .map(|a| a["outcome"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// A field of every attempt of a step, in order.
fn attempt_field(step: &Value, field: &str) -> Vec<Value> {
    step["attempt_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a[field].clone())
        .collect()
}

/// Processes whose argv is exactly `argv` (read from /proc).
fn processes_with_argv(argv: &[&str]) -> Vec<String> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline"))
            && cmdline == want
        {
            found.push(pid.to_string());
        }
    }
    found
}

/// Kills what a failed test would otherwise leave running.
struct Reap(Vec<String>);

impl Drop for Reap {
    fn drop(&mut self) {
        let argv: Vec<&str> = self.0.iter().map(String::as_str).collect();
        for pid in processes_with_argv(&argv) {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid])
                .status();
        }
    }
}

#[test]
fn max_attempts_is_honoured() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: attempts
steps:
  - id: flaky
    retry: { max_attempts: 4, interval: 10ms }
    run: echo "$WF_ATTEMPT" >> attempts.txt; exit 1
"#,
        &[],
    );
    ran.code(1);
    assert_eq!(ran.json()["status"], "failed");
    assert_eq!(t.read("attempts.txt"), "1\n2\n3\n4\n");
    let i = t.inspect(&id);
    let s = Test::step(&i, "flaky");
    assert_eq!(s["status"], "failed");
    assert_eq!(s["attempts"], 4);
    assert_eq!(outcomes(s), ["retry", "retry", "retry", "failed"]);
    assert_eq!(
        attempt_field(s, "attempt"),
        [json!(1), json!(2), json!(3), json!(4)]
    );
    assert!(
        attempt_field(s, "error_type").iter().all(|e| e == "exit.1"),
        "{s:#}"
    );
    assert!(
        attempt_field(s, "exit_code").iter().all(|e| e == 1),
        "{s:#}"
    );
    assert!(attempt_field(s, "run").iter().all(|e| e == 1), "{s:#}");
    assert_eq!(s["outcome"], "failed");
    assert_eq!(s["error_type"], "exit.1");
}

#[test]
fn default_is_a_single_attempt() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: single
steps:
  - id: once
    run: echo x >> attempts.txt; exit 1
"#,
        &[],
    );
    ran.code(1);
    assert_eq!(t.read("attempts.txt"), "x\n");
    let i = t.inspect(&id);
    assert_eq!(outcomes(Test::step(&i, "once")), ["failed"]);
}

#[test]
fn a_step_that_recovers_stops_retrying() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: recovers
steps:
  - id: flaky
    retry: { max_attempts: 5, interval: 10ms }
    run: echo "$WF_ATTEMPT" >> attempts.txt; [ "$WF_ATTEMPT" -ge 3 ]
  - id: next
    run: echo next > next.txt
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(t.read("attempts.txt"), "1\n2\n3\n");
    assert_eq!(t.read("next.txt"), "next\n");
    let i = t.inspect(&id);
    let s = Test::step(&i, "flaky");
    assert_eq!(s["status"], "completed");
    assert_eq!(s["attempts"], 3);
    assert_eq!(outcomes(s), ["retry", "retry", "ok"]);
    assert_eq!(
        attempt_field(s, "exit_code"),
        [json!(1), json!(1), json!(0)]
    );
}

#[test]
fn defaults_retry_applies_and_a_step_retry_overrides_it() {
    let t = Test::new();
    // Sequential steps: the first recovers on its 3rd attempt (allowed by the
    // defaults), the second has its own, smaller budget.
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: defaults
defaults: { retry: { max_attempts: 3, interval: 10ms } }
steps:
  - id: inherits
    run: echo x >> inherits.txt; [ "$WF_ATTEMPT" -ge 3 ]
  - id: overrides
    retry: { max_attempts: 2, interval: 10ms }
    run: echo x >> overrides.txt; exit 1
"#,
        &[],
    );
    ran.code(1);
    let i = t.inspect(&id);
    assert_eq!(
        outcomes(Test::step(&i, "inherits")),
        ["retry", "retry", "ok"]
    );
    assert_eq!(outcomes(Test::step(&i, "overrides")), ["retry", "failed"]);
    assert_eq!(t.read("inherits.txt").lines().count(), 3);
    assert_eq!(t.read("overrides.txt").lines().count(), 2);

    // The defaults' budget is also a limit.
    let (id, ran) = t.run_yaml(
        "limit.yaml",
        r#"
name: defaults-limit
defaults: { retry: { max_attempts: 3, interval: 10ms } }
steps:
  - id: always-fails
    run: exit 1
"#,
        &[],
    );
    ran.code(1);
    let i = t.inspect(&id);
    assert_eq!(
        outcomes(Test::step(&i, "always-fails")),
        ["retry", "retry", "failed"]
    );
}

#[test]
fn fixed_and_exponential_backoff_both_retry_to_the_limit() {
    let t = Test::new();
    let cases = [
        (
            "fixed",
            3,
            "{ max_attempts: 3, backoff: fixed, interval: 10ms }",
        ),
        (
            "exponential",
            4,
            "{ max_attempts: 4, backoff: exponential, interval: 10ms, multiplier: 3, max_interval: 50ms }",
        ),
    ];
    for (name, n, retry) in cases {
        let yaml = format!(
            "name: backoff-{name}\nsteps:\n  - id: {name}\n    retry: {retry}\n    run: echo x >> {name}.txt; exit 1\n"
        );
        let (id, ran) = t.run_yaml(&format!("{name}.yaml"), &yaml, &[]);
        ran.code(1);
        assert_eq!(t.read(&format!("{name}.txt")).lines().count(), n, "{name}");
        let i = t.inspect(&id);
        let s = Test::step(&i, name);
        let mut want = vec!["retry"; n - 1];
        want.push("failed");
        assert_eq!(outcomes(s), want, "{name}");
        // Attempts are sequential: each starts after the previous one finished.
        let started = attempt_field(s, "started_at");
        let finished = attempt_field(s, "finished_at");
        for k in 1..n {
            let prev =
                chrono::DateTime::parse_from_rfc3339(finished[k - 1].as_str().unwrap()).unwrap();
            let next = chrono::DateTime::parse_from_rfc3339(started[k].as_str().unwrap()).unwrap();
            assert!(
                next >= prev,
                "{name}: attempt {} started before {k} ended",
                k + 1
            );
        }
    }
}

#[test]
fn errors_map_exit_codes_to_user_error_types() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: errors
steps:
  - id: charge
    retry: { max_attempts: 2, interval: 10ms }
    errors: { 3: card_declined, 4: out_of_stock }
    run: exit 3
"#,
        &[],
    );
    ran.code(1);
    let i = t.inspect(&id);
    let s = Test::step(&i, "charge");
    assert_eq!(s["error_type"], "user.card_declined");
    // Not in non_retryable: it is retried.
    assert_eq!(outcomes(s), ["retry", "failed"]);
    assert!(
        attempt_field(s, "error_type")
            .iter()
            .all(|e| e == "user.card_declined"),
        "{s:#}"
    );
    assert_eq!(attempt_field(s, "exit_code"), [json!(3), json!(3)]);
}

#[test]
fn non_retryable_fails_at_once() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: non-retryable
steps:
  - id: charge
    retry: { max_attempts: 5, interval: 10ms, non_retryable: [user.card_declined] }
    errors: { 3: card_declined }
    run: echo x >> attempts.txt; exit 3
  - id: ship
    run: echo shipped > shipped.txt
"#,
        &[],
    );
    ran.code(1);
    assert_eq!(t.read("attempts.txt"), "x\n");
    assert_eq!(t.read("shipped.txt"), "");
    let i = t.inspect(&id);
    let s = Test::step(&i, "charge");
    assert_eq!(s["status"], "failed");
    assert_eq!(s["attempts"], 1);
    assert_eq!(outcomes(s), ["failed"]);
    assert_eq!(s["error_type"], "user.card_declined");
}

#[test]
fn non_retryable_only_stops_the_listed_types() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: non-retryable-other
steps:
  - id: charge
    retry: { max_attempts: 3, interval: 10ms, non_retryable: [user.card_declined] }
    errors: { 3: card_declined }
    run: exit 5
"#,
        &[],
    );
    ran.code(1);
    let i = t.inspect(&id);
    let s = Test::step(&i, "charge");
    assert_eq!(outcomes(s), ["retry", "retry", "failed"]);
    assert_eq!(s["error_type"], "exit.5");
}

#[test]
fn non_retryable_accepts_a_prefix_pattern() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: non-retryable-prefix
steps:
  - id: charge
    retry: { max_attempts: 4, interval: 10ms, non_retryable: ["exit.*"] }
    run: exit 9
"#,
        &[],
    );
    ran.code(1);
    let i = t.inspect(&id);
    let s = Test::step(&i, "charge");
    assert_eq!(outcomes(s), ["failed"]);
    assert_eq!(s["error_type"], "exit.9");
}

#[test]
fn other_exit_codes_are_exit_n() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: exit-codes
steps:
  - id: a
    needs: []
    errors: { 3: card_declined }
    run: exit 42
  - id: b
    needs: []
    run: exit 2
  - id: c
    needs: []
    run: ["sh", "-c", "exit 200"]
"#,
        &[],
    );
    ran.code(1);
    let i = t.inspect(&id);
    for (name, code) in [("a", 42), ("b", 2), ("c", 200)] {
        let s = Test::step(&i, name);
        assert_eq!(s["status"], "failed", "{name}");
        assert_eq!(s["error_type"], format!("exit.{code}"), "{name}");
        assert_eq!(attempt_field(s, "exit_code"), [json!(code)], "{name}");
    }
}

#[test]
fn a_missing_command_in_a_shell_string_is_spawn() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: spawn-shell
steps:
  - id: missing
    run: nonexistent-cmd-xyz --flag
"#,
        &[],
    );
    ran.code(1);
    let i = t.inspect(&id);
    let s = Test::step(&i, "missing");
    assert_eq!(s["status"], "failed");
    assert_eq!(s["error_type"], "spawn");
    assert_eq!(attempt_field(s, "error_type"), [json!("spawn")]);
}

#[test]
fn a_missing_program_in_argv_form_is_spawn() {
    let t = Test::new();
    t.write("data.txt", "not a program\n");
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: spawn-argv
steps:
  - id: missing
    needs: []
    run: [nonexistent-cmd-xyz, arg]
  - id: missing-relative
    needs: []
    run: ["./no-such-script.sh"]
  - id: not-executable
    needs: []
    run: ["./data.txt"]
"#,
        &[],
    );
    ran.code(1);
    let i = t.inspect(&id);
    for name in ["missing", "missing-relative", "not-executable"] {
        let s = Test::step(&i, name);
        assert_eq!(s["status"], "failed", "{name}");
        assert_eq!(s["error_type"], "spawn", "{name}");
        let a = &s["attempt_list"][0];
        assert_eq!(a["error_type"], "spawn", "{name}");
        let msg = a["error_message"].as_str().unwrap_or_default();
        assert!(
            ["no-such-script.sh", "nonexistent-cmd-xyz", "data.txt"]
                .iter()
                .any(|p| msg.contains(p)),
            "{name}: message does not name the program: {msg:?}"
        );
    }
}

#[test]
fn timeout_kills_the_whole_process_group() {
    let t = Test::new();
    // The child's stdout is not the step's pipe, so only killing the whole
    // process group (not waiting for the pipe to close) can end it.
    let marker = ["sleep", "100.31337"];
    let _reap = Reap(
        marker
            .iter()
            .map(std::string::ToString::to_string)
            .collect(),
    );
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: timeout
steps:
  - id: slow
    timeout: 300ms
    run: sleep 100.31337 >/dev/null 2>&1 & echo started > started.txt; wait
"#,
        &[],
    );
    ran.code(1);
    assert_eq!(t.read("started.txt"), "started\n");
    let i = t.inspect(&id);
    let s = Test::step(&i, "slow");
    assert_eq!(s["status"], "failed");
    assert_eq!(s["error_type"], "timeout");
    assert_eq!(outcomes(s), ["timeout"]);
    assert_eq!(attempt_field(s, "error_type"), [json!("timeout")]);
    let left = processes_with_argv(&marker);
    assert!(
        left.is_empty(),
        "the step's background child survived: pids {left:?}"
    );
}

#[test]
fn timeout_escalates_to_kill_when_term_is_ignored() {
    let t = Test::new();
    let marker = ["sleep", "100.4242"];
    let _reap = Reap(
        marker
            .iter()
            .map(std::string::ToString::to_string)
            .collect(),
    );
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: timeout-kill
steps:
  - id: stubborn
    timeout: 300ms
    run: trap '' TERM; sleep 100.4242 >/dev/null 2>&1 & echo started > started.txt; wait; wait
"#,
        &[],
    );
    ran.code(1);
    assert_eq!(t.read("started.txt"), "started\n");
    let i = t.inspect(&id);
    let s = Test::step(&i, "stubborn");
    assert_eq!(s["error_type"], "timeout");
    assert_eq!(outcomes(s), ["timeout"]);
    let left = processes_with_argv(&marker);
    assert!(
        left.is_empty(),
        "a TERM-ignoring child survived: pids {left:?}"
    );
}

#[test]
fn a_timed_out_attempt_is_retried() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: timeout-retry
steps:
  - id: slow-then-fast
    timeout: 300ms
    retry: { max_attempts: 3, interval: 10ms }
    run: echo "$WF_ATTEMPT" >> attempts.txt; if [ "$WF_ATTEMPT" -lt 2 ]; then sleep 30; fi
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(t.read("attempts.txt"), "1\n2\n");
    let i = t.inspect(&id);
    let s = Test::step(&i, "slow-then-fast");
    assert_eq!(s["status"], "completed");
    assert_eq!(outcomes(s), ["retry", "ok"]);
    assert_eq!(
        attempt_field(s, "error_type"),
        [json!("timeout"), Value::Null]
    );
}

#[test]
fn defaults_timeout_applies_to_steps() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: default-timeout
defaults: { timeout: 300ms }
steps:
  - id: slow
    run: sleep 30
"#,
        &[],
    );
    ran.code(1);
    let i = t.inspect(&id);
    assert_eq!(outcomes(Test::step(&i, "slow")), ["timeout"]);
}

#[test]
fn a_step_that_exits_before_its_timeout_is_not_killed() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: in-time
steps:
  - id: quick
    timeout: 1m
    run: echo done > done.txt
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(t.read("done.txt"), "done\n");
    assert_eq!(outcomes(Test::step(&t.inspect(&id), "quick")), ["ok"]);
}

#[test]
fn timeout_kills_the_process_group_of_an_argv_step() {
    let t = Test::new();
    let marker = ["sleep", "100.777"];
    let _reap = Reap(
        marker
            .iter()
            .map(std::string::ToString::to_string)
            .collect(),
    );
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: timeout-argv
steps:
  - id: slow
    timeout: 300ms
    run: ["sh", "-c", "sleep 100.777 >/dev/null 2>&1 & echo started > started.txt; wait"]
"#,
        &[],
    );
    ran.code(1);
    assert_eq!(t.read("started.txt"), "started\n");
    let i = t.inspect(&id);
    assert_eq!(outcomes(Test::step(&i, "slow")), ["timeout"]);
    let left = processes_with_argv(&marker);
    assert!(
        left.is_empty(),
        "the step's background child survived: pids {left:?}"
    );
}

/// Two independent steps: `broken` fails for good a little after `flaky`
/// failed its first attempt and was scheduled to retry in an hour.
const FAIL_WHILE_RETRYING: &str = r#"
name: fail-while-retrying
steps:
  - id: broken
    needs: []
    run: sleep 0.3; exit 2
  - id: flaky
    needs: []
    retry: { max_attempts: 3, interval: 1h }
    run: echo "$WF_ATTEMPT" >> flaky.txt; exit 1
"#;

#[test]
fn a_step_waiting_to_retry_fails_with_its_workflow() {
    let t = Test::new();
    let (id, ran) = t.run_yaml("wf.yaml", FAIL_WHILE_RETRYING, &[]);
    ran.code(1);
    let i = t.inspect(&id);
    assert_eq!(i["status"], "failed");
    let flaky = Test::step(&i, "flaky");
    assert_eq!(flaky["status"], "failed", "{flaky:#}");
    assert_eq!(outcomes(flaky), ["retry"]);
    assert!(
        flaky["error_message"]
            .as_str()
            .is_some_and(|m| m.ends_with("(not retried: the workflow failed)")),
        "{flaky:#}"
    );

    // --retry-failed gives it a fresh budget like any failed step.
    t.wf(&["resume", &id, "--retry-failed"]).code(1);
    assert_eq!(t.read("flaky.txt"), "1\n2\n");
    let flaky = t.inspect(&id);
    assert_eq!(outcomes(Test::step(&flaky, "flaky")), ["retry", "retry"]);
}

#[test]
fn a_step_waiting_to_retry_is_canceled_with_its_instance() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: cancel-while-retrying
steps:
  - id: flaky
    retry: { max_attempts: 3, interval: 1h }
    run: exit 1
"#,
        &[],
    );
    ran.code(3);
    assert_eq!(Test::step(&t.inspect(&id), "flaky")["status"], "retrying");
    t.wf(&["cancel", &id]).code(0);
    let i = t.inspect(&id);
    assert_eq!(i["status"], "canceled");
    let flaky = Test::step(&i, "flaky");
    assert_eq!(flaky["status"], "canceled", "{flaky:#}");
    assert!(
        flaky["error_message"]
            .as_str()
            .is_some_and(|m| m.ends_with("(not retried: the instance was canceled)")),
        "{flaky:#}"
    );
}

// ------------------------------------------------- what a failure advises

/// `wf run FILE --id ID` without `--json`: the lines saying how it ended.
fn run_plain(t: &Test, yaml: &str, id: &str) -> crate::Ran {
    let path = t.write(&format!("{id}.yaml"), yaml);
    t.wf(&["run", path.to_str().unwrap(), "--id", id])
}

#[test]
fn a_failure_advises_retry_failed_only_when_a_retry_can_change_the_result() {
    let t = Test::new();
    // A step's exit code: a new attempt may not repeat it.
    let ran = run_plain(
        &t,
        "name: exits\nsteps:\n  - id: a\n    run: exit 3\n",
        "exits",
    );
    ran.code(1);
    assert!(
        ran.stdout.contains("`wf resume exits --retry-failed`"),
        "{}",
        ran.stdout
    );

    // An expression of the pinned definition: a resume evaluates it the same way.
    let ran = run_plain(
        &t,
        r#"
name: expr
steps:
  - id: a
    run: echo not-json
  - id: b
    run: echo "${{ fromJSON(steps.a.output.stdout).x }}"
"#,
        "expr",
    );
    ran.code(1);
    assert!(!ran.stdout.contains("--retry-failed"), "{}", ran.stdout);
    assert!(
        ran.stdout.contains("fix the workflow") && ran.stdout.contains("`wf run "),
        "{}",
        ran.stdout
    );
    let refused = t.wf(&["resume", "expr"]);
    refused.code(1);
    assert!(
        !refused.stderr.contains("--retry-failed") && refused.stderr.contains("fix the workflow"),
        "{}",
        refused.stderr
    );
}

#[test]
fn a_passed_workflow_timeout_advises_a_restart_and_retry_failed_refuses() {
    let t = Test::new();
    let ran = run_plain(
        &t,
        "name: late\ntimeout: 1s\nsteps:\n  - id: a\n    run: 'true'\n  \
         - id: slow\n    needs: [a]\n    run: sleep 30\n",
        "late",
    );
    ran.code(1);
    assert!(!ran.stdout.contains("--retry-failed"), "{}", ran.stdout);
    assert!(
        ran.stdout.contains("deadline") && ran.stdout.contains("`wf restart late --from slow`"),
        "{}",
        ran.stdout
    );
    // A resume would time out at once: refused, with nothing recorded.
    let before = t.inspect("late");
    let refused = t.wf(&["resume", "late", "--retry-failed"]);
    refused.code(1);
    assert!(
        refused.stderr.contains("deadline")
            && refused.stderr.contains("`wf restart late --from slow`"),
        "{}",
        refused.stderr
    );
    let after = t.inspect("late");
    assert_eq!(after["runs"], before["runs"], "no run was started");
    assert_eq!(after["steps"], before["steps"], "no step was reset");
    // The restart it names runs (under a fresh timeout, which `slow` outlasts again).
    let restarted = t.wf(&["restart", "late", "--from", "slow"]);
    assert_eq!(restarted.code, 1, "{}", restarted.stderr);
    assert_eq!(t.inspect("late")["runs"].as_array().unwrap().len(), 2);
}
