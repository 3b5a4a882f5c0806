//! `wf inspect` and `wf signal` tell what happened (docs/execution.md Events, docs/commands.md): one
//! snapshot per read (a step's row never without the state its commit
//! patched), delivered events listed with the step that took them, a
//! misspelt event name warned about, compensations in the order they ran,
//! and tables that fit an 80-column terminal (checked in a real pseudo
//! terminal through `script`).

use crate::Test;
use serde_json::Value;
use std::process::Stdio;

#[test]
fn inspect_never_shows_a_completed_step_without_its_state_patch() {
    let t = Test::new();
    // A chain of steps, each committing its output and its patch together,
    // inspected over and over while it runs.
    let mut yaml = String::from("name: chain\nsteps:\n");
    let n = 150;
    for k in 1..=n {
        yaml.push_str(&format!("  - id: s{k}\n    run: echo {k}\n"));
        yaml.push_str(&format!("    set_state: {{ s{k}: {k} }}\n"));
        if k > 1 {
            yaml.push_str(&format!("    needs: [s{}]\n", k - 1));
        }
    }
    let file = t.write("chain.yaml", &yaml);
    let mut run = t
        .cmd()
        .args(["run", file.to_str().expect("utf-8"), "--id", "chain-1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start wf run");
    let mut snapshots = 0;
    let mut torn = Vec::new();
    loop {
        let ended = run.try_wait().expect("wait").is_some();
        let ran = t.wf(&["inspect", "chain-1", "--json"]);
        if ran.code == 0 {
            let v: Value = serde_json::from_str(&ran.stdout).expect("inspect json");
            snapshots += 1;
            for s in v["steps"].as_array().expect("steps") {
                let key = s["id"].as_str().unwrap_or_default();
                if s["status"] == "completed" && v["state"][key].is_null() {
                    torn.push(format!("{key} completed, state lacks it"));
                }
            }
        }
        if ended {
            break;
        }
    }
    assert!(run.wait().expect("wait").success());
    assert!(snapshots > 1, "only {snapshots} snapshot(s) read");
    assert!(torn.is_empty(), "torn snapshots: {torn:?}");
    let v = t.inspect("chain-1");
    assert_eq!(v["state"][format!("s{n}")], n);
}

#[test]
fn logs_never_show_a_running_attempt_with_the_output_of_its_end() {
    let t = Test::new();
    // `wf logs` lists the attempts, then reads each one's output: both of
    // one moment, or an attempt read as running comes with its output.
    let mut yaml = String::from("name: chain\nsteps:\n");
    for k in 1..=120 {
        yaml.push_str(&format!("  - id: s{k}\n    run: echo out-{k}\n"));
        if k > 1 {
            yaml.push_str(&format!("    needs: [s{}]\n", k - 1));
        }
    }
    let file = t.write("chain.yaml", &yaml);
    let mut run = t
        .cmd()
        .args(["run", file.to_str().expect("utf-8"), "--id", "chain-2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start wf run");
    let (mut reads, mut torn) = (0, Vec::new());
    loop {
        let ended = run.try_wait().expect("wait").is_some();
        let ran = t.wf(&["logs", "chain-2", "--json"]);
        if ran.code == 0 {
            let v: Value = serde_json::from_str(&ran.stdout).expect("logs json");
            reads += 1;
            for log in v["logs"].as_array().expect("logs") {
                if log["outcome"].is_null() && log["stdout"] != "" {
                    torn.push(log["step"].to_string());
                }
            }
        }
        if ended {
            break;
        }
    }
    assert!(run.wait().expect("wait").success());
    assert!(reads > 1, "only {reads} read(s)");
    assert!(
        torn.is_empty(),
        "running attempts with their end's output: {torn:?}"
    );
}

const WAITS: &str = r#"
name: gate
steps:
  - id: nap
    sleep: 1h
  - id: approval
    needs: [nap]
    wait_for_event: { name: approved, timeout: 1h }
  - id: ship
    needs: [approval]
    run: echo "shipped by ${{ steps.approval.output.by }}"
"#;

#[test]
fn a_signal_with_a_name_never_waited_for_warns_and_inspect_lists_every_event() {
    let t = Test::new();
    let (id, ran) = t.run_yaml("gate.yaml", WAITS, &[]);
    ran.code(3);

    // A misspelt name: stored, but said to be one no step waits for.
    let typo = t.wf(&["signal", &id, "approve", "--data", r#"{"by":"ann"}"#]);
    typo.code(0);
    assert!(
        typo.stderr
            .contains("warning: workflow gate never waits for `approve` (it waits for `approved`)"),
        "{}",
        typo.stderr
    );
    let right = t.wf(&["signal", &id, "approved", "--data", r#"{"by":"bob"}"#]);
    right.code(0);
    assert!(!right.stderr.contains("warning"), "{}", right.stderr);

    t.wf(&["resume", &id, "--now"]).code(0);
    let i = t.inspect(&id);
    let events = i["events"].as_array().expect("events");
    assert_eq!(events.len(), 2, "{i:#}");
    assert_eq!(events[0]["name"], "approve");
    assert_eq!(events[0]["consumed_by"], Value::Null);
    assert_eq!(events[0]["data"]["by"], "ann");
    assert_eq!(events[1]["name"], "approved");
    assert_eq!(events[1]["consumed_by"], "approval");
    assert!(
        events[1]["received_at"]
            .as_str()
            .is_some_and(|s| s.ends_with('Z'))
    );

    // The table lists them too: name, when, the step that took it.
    let text = t.wf(&["inspect", &id]);
    text.code(0);
    let rows: Vec<Vec<&str>> = text
        .stdout
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("EVENT"))
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2, "{}", text.stdout);
    assert_eq!(rows[0].first(), Some(&"approve"));
    assert_eq!(rows[0].last(), Some(&"-"));
    assert_eq!(rows[1].first(), Some(&"approved"));
    assert_eq!(rows[1].last(), Some(&"approval"));
}

#[test]
fn a_signal_to_a_workflow_that_waits_for_nothing_warns() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "nap.yaml",
        "name: nap\nsteps:\n  - id: nap\n    sleep: 1h\n",
        &[],
    );
    ran.code(3);
    let sent = t.wf(&["signal", &id, "go"]);
    sent.code(0);
    assert!(
        sent.stderr
            .contains("warning: workflow nap never waits for an event; `go` is stored"),
        "{}",
        sent.stderr
    );
}

#[test]
fn the_waiting_header_reads_times_out_at_with_its_space() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "gate.yaml",
        "name: gate\nsteps:\n  - id: approval\n    wait_for_event: { name: approved, timeout: 1h }\n",
        &[],
    );
    ran.code(3);
    let text = t.wf(&["inspect", &id]);
    text.code(0);
    let line = text
        .stdout
        .lines()
        .find(|l| l.starts_with("Times out at:"))
        .unwrap_or_else(|| panic!("no Times out at line: {}", text.stdout));
    assert!(line.starts_with("Times out at: 20"), "{line}");
    // Every label lines up with it.
    let waiting = text
        .stdout
        .lines()
        .find(|l| l.starts_with("Waiting for:"))
        .expect("Waiting for line");
    assert_eq!(
        waiting.find("event"),
        line.find("20"),
        "values line up: {}",
        text.stdout
    );
}

/// A failed step with a long name and a long error, two attempts.
const LONG: &str = r#"
name: release
steps:
  - id: publish_the_release_notes_to_every_mirror_we_have
    run: echo "the mirror at mirror-eu-west.example.org refused the upload with a 503" >&2; exit 3
    retry: { max_attempts: 2, interval: 10ms }
"#;

#[test]
fn the_attempts_table_fits_80_columns_with_a_long_step_name() {
    let t = Test::new();
    let (id, ran) = t.run_yaml("release.yaml", LONG, &[]);
    ran.code(1);
    let shown = t.on_terminal(80, &["inspect", &id, "--attempts"]);
    shown.code(0);
    for line in shown.stdout.lines() {
        assert!(
            line.chars().count() <= 80,
            "a line of {} columns:\n{line}\n{}",
            line.chars().count(),
            shown.stdout
        );
    }
    // Nothing is printed a letter per line: each attempt's error is there
    // in whole words (under the table when its column would be too narrow).
    let words = shown
        .stdout
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let error = "exit.3: exited with code 3: the mirror at mirror-eu-west.example.org \
                 refused the upload with a 503";
    assert_eq!(words.matches(error).count(), 2, "{}", shown.stdout);
    // Step names never break.
    assert!(
        shown
            .stdout
            .contains("publish_the_release_notes_to_every_mirror_we_have"),
        "{}",
        shown.stdout
    );
}

#[test]
fn the_error_header_is_whole_when_piped_and_one_line_on_a_terminal() {
    let t = Test::new();
    let (id, ran) = t.run_yaml("release.yaml", LONG, &[]);
    ran.code(1);
    let error = t.inspect(&id)["error"].as_str().expect("error").to_string();
    assert!(error.chars().count() > 80, "{error}");

    let piped = t.wf(&["inspect", &id]);
    let line = piped
        .stdout
        .lines()
        .find(|l| l.starts_with("Error:"))
        .expect("Error line");
    assert_eq!(
        line.trim_start_matches("Error:").trim(),
        error.split_whitespace().collect::<Vec<_>>().join(" ")
    );

    let shown = t.on_terminal(80, &["inspect", &id]);
    let line = shown
        .stdout
        .lines()
        .find(|l| l.starts_with("Error:"))
        .expect("Error line");
    assert!(line.chars().count() <= 80, "{line}");
    assert!(line.ends_with('…'), "{line}");
}

#[test]
fn compensations_are_listed_in_the_order_they_ran() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "saga.yaml",
        r#"
name: saga
steps:
  - id: a_reserve
    run: "true"
    compensate: { run: "true" }
  - id: b_charge
    needs: [a_reserve]
    run: "true"
    compensate: { run: "true" }
  - id: c_ship
    needs: [b_charge]
    run: exit 1
"#,
        &[],
    );
    ran.code(1);
    let text = t.wf(&["inspect", &id]);
    let order: Vec<&str> = text
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.ends_with(":compensate"))
        .collect();
    // b_charge was compensated first: its compensation is listed first.
    assert_eq!(
        order,
        ["b_charge:compensate", "a_reserve:compensate"],
        "{}",
        text.stdout
    );
}

/// A step that fails until the file `fixed` exists, then one after it:
/// run 1 fails at `flaky`, run 2 (`--retry-failed`) completes.
pub(crate) const TWO_RUNS: &str = "name: tworuns
steps:
  - id: first
    run: 'true'
  - id: flaky
    run: test -e fixed
  - id: after
    run: 'true'
";

/// Instance `r` of [`TWO_RUNS`], failed once and retried to completion.
pub(crate) fn two_runs(t: &Test) {
    let path = t.write("tworuns.yaml", TWO_RUNS);
    t.wf(&["run", path.to_str().unwrap(), "--id", "r"]).code(1);
    std::fs::write(t.path().join("fixed"), "").unwrap();
    t.wf(&["resume", "r", "--retry-failed"]).code(0);
}

#[test]
fn two_runs_side_by_side_say_what_each_did_of_each_step() {
    let t = Test::new();
    two_runs(&t);
    let c = t
        .wf(&["inspect", "r", "--compare", "1,2", "--json"])
        .code(0)
        .json();
    assert_eq!(
        (&c["a"]["outcome"], &c["b"]["outcome"]),
        (
            &serde_json::json!("failed"),
            &serde_json::json!("completed")
        )
    );
    let rows: Vec<(&str, &Value, &Value, bool)> = c["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["step"].as_str().unwrap(),
                &r["a"]["outcome"],
                &r["b"]["outcome"],
                r["differs"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("first", &serde_json::json!("ok"), &Value::Null, true),
            (
                "flaky",
                &serde_json::json!("failed"),
                &serde_json::json!("ok"),
                true
            ),
            ("after", &Value::Null, &serde_json::json!("ok"), true),
        ]
    );
    assert_eq!(c["steps"][1]["a"]["error_type"], "exit.1");
    let text = t
        .wf(&["inspect", "r", "--compare", "1,2"])
        .code(0)
        .stdout
        .clone();
    assert!(
        text.contains("run 1 failed") && text.contains("run 2 completed"),
        "{text}"
    );
    assert!(text.contains("failed ×1 exit.1"), "{text}");
    let bad = t.wf(&["inspect", "r", "--compare", "1,7"]);
    bad.code(2);
    assert!(bad.stderr.contains("has runs 1, 2"), "{}", bad.stderr);
    t.wf(&["inspect", "r", "--compare", "x"]).code(2);
}
