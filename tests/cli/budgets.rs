//! Fresh budgets and true records after `wf resume --retry-failed` and `wf
//! restart` (docs/execution.md Fresh budgets, Statuses stay true): a retry of an
//! instance whose compensations ran runs the undone steps again (and says
//! so), a fresh budget counts `n/max` and backs off from the first interval
//! again, a restart leaves no placeholder rows `pending` on a completed
//! instance, and `wf cancel --terminate` runs no handler.

use crate::Test;
use serde_json::Value;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.is_empty()).collect()
}

/// Step ids (keys) `wf inspect --json` lists, with their statuses.
fn listed(v: &Value) -> Vec<(String, String)> {
    v["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap_or_default().to_string(),
                s["status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

const SAGA: &str = r#"
name: order
steps:
  - id: reserve
    run: echo reserve >> ledger.log
    set_state: { reserved: true }
    compensate: { run: echo unreserve >> ledger.log }
  - id: charge
    needs: [reserve]
    run: echo charge >> ledger.log
    set_state: { charged: true }
    compensate: { run: echo refund >> ledger.log }
  - id: ship
    needs: [charge]
    run: "[ -f carrier.ok ] || exit 4; echo ship >> ledger.log"
"#;

#[test]
fn retry_failed_after_compensations_runs_the_undone_steps_again_and_says_so() {
    let t = Test::new();
    let (id, ran) = t.run_yaml("order.yaml", SAGA, &[]);
    ran.code(1);
    assert_eq!(
        lines(&t.read("ledger.log")),
        ["reserve", "charge", "refund", "unreserve"]
    );

    t.write("carrier.ok", "");
    let retried = t.wf(&["resume", &id, "--retry-failed"]);
    retried.code(0);
    assert!(
        retried.stderr.contains(
            "--retry-failed: running `reserve`, `charge`, `ship` again: the failure's compensations undid `reserve`, `charge`"
        ),
        "{}",
        retried.stderr
    );
    // Reserved and charged again: what the instance claims is what is so.
    assert_eq!(
        lines(&t.read("ledger.log")),
        [
            "reserve",
            "charge",
            "refund",
            "unreserve",
            "reserve",
            "charge",
            "ship"
        ]
    );
    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    assert_eq!(v["state"]["reserved"], true);
    assert_eq!(v["state"]["charged"], true);
    // No compensation is shown pending on the completed instance; their
    // attempts of the failed run stay in the history.
    assert_eq!(
        listed(&v),
        [
            ("reserve".to_string(), "completed".to_string()),
            ("charge".into(), "completed".into()),
            ("ship".into(), "completed".into()),
        ]
    );
    let text = t.wf(&["inspect", &id, "--attempts"]);
    assert!(text.stdout.contains("charge:compensate"), "{}", text.stdout);
}

#[test]
fn retry_failed_without_compensations_runs_only_the_failed_step() {
    let t = Test::new();
    let plain = SAGA
        .replace(
            "    compensate: { run: echo unreserve >> ledger.log }\n",
            "",
        )
        .replace("    compensate: { run: echo refund >> ledger.log }\n", "");
    let (id, ran) = t.run_yaml("order.yaml", &plain, &[]);
    ran.code(1);
    t.write("carrier.ok", "");
    let retried = t.wf(&["resume", &id, "--retry-failed"]);
    retried.code(0);
    assert!(!retried.stderr.contains("again:"), "{}", retried.stderr);
    assert_eq!(lines(&t.read("ledger.log")), ["reserve", "charge", "ship"]);
}

#[test]
fn restart_leaves_no_compensation_pending_on_a_completed_instance() {
    let t = Test::new();
    let (id, ran) = t.run_yaml("order.yaml", SAGA, &[]);
    ran.code(1);
    t.write("carrier.ok", "");
    t.wf(&["restart", &id, "--from", "ship"]).code(0);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    let pending: Vec<_> = listed(&v)
        .into_iter()
        .filter(|(_, status)| status != "completed")
        .collect();
    assert!(pending.is_empty(), "{v:#}");
    // The table says the same.
    let text = t.wf(&["inspect", &id]);
    assert!(!text.stdout.contains("pending"), "{}", text.stdout);

    // A later failure compensates them again: the placeholders still count
    // attempts, and the compensation's attempt numbers go on.
    std::fs::remove_file(t.path().join("carrier.ok")).expect("remove");
    t.wf(&["restart", &id, "--from", "ship"]).code(1);
    let v = t.inspect(&id);
    let refund = Test::step(&v, "charge:compensate");
    assert_eq!(refund["status"], "completed", "{v:#}");
    let numbers: Vec<i64> = refund["attempt_list"]
        .as_array()
        .expect("attempts")
        .iter()
        .filter_map(|a| a["attempt"].as_i64())
        .collect();
    assert_eq!(numbers, [1, 2], "{v:#}");
}

#[test]
fn a_restart_that_shrinks_a_for_each_leaves_no_dropped_item_pending() {
    let t = Test::new();
    t.write("list.json", r#"["a","b","c"]"#);
    let (id, ran) = t.run_yaml(
        "fan.yaml",
        r#"
name: fan
steps:
  - id: list
    run: cat list.json
  - id: each
    needs: [list]
    for_each: ${{ fromJSON(steps.list.output.stdout) }}
    run: echo "${{ item }}" >> items.log
  - id: last
    needs: [each]
    run: "[ -f last.ok ]"
"#,
        &[],
    );
    ran.code(1);
    t.write("list.json", r#"["z"]"#);
    t.write("last.ok", "");
    t.wf(&["restart", &id, "--from", "list"]).code(0);
    // (The first three items ran in parallel.)
    let log = t.read("items.log");
    let mut items = lines(&log);
    items[..3].sort_unstable();
    assert_eq!(items, ["a", "b", "c", "z"]);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    let keys: Vec<String> = listed(&v).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["list", "each", "each[0]", "last"], "{v:#}");
    assert!(listed(&v).iter().all(|(_, s)| s == "completed"), "{v:#}");
}

#[test]
fn a_fresh_budget_counts_from_one_and_backs_off_from_the_first_interval() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "flaky.yaml",
        r#"
name: flaky
steps:
  - id: call
    run: exit 5
    retry: { max_attempts: 2, interval: 200ms }
"#,
        &[],
    );
    ran.code(1);
    assert!(
        ran.stderr.contains("call: retrying in 200ms (attempt 2/2)"),
        "{}",
        ran.stderr
    );
    // Attempts 3 and 4 are the fresh budget's first and second: the backoff
    // is the first interval again (not 200 ms doubled twice), the counter 2/2.
    let again = t.wf(&["resume", &id, "--retry-failed"]);
    again.code(1);
    assert!(
        again
            .stderr
            .contains("call: retrying in 200ms (attempt 4, try 2/2)"),
        "{}",
        again.stderr
    );
    let v = t.inspect(&id);
    let numbers: Vec<i64> = Test::step(&v, "call")["attempt_list"]
        .as_array()
        .expect("attempts")
        .iter()
        .filter_map(|a| a["attempt"].as_i64())
        .collect();
    assert_eq!(numbers, [1, 2, 3, 4]);

    // A restart gives the same fresh start.
    let restarted = t.wf(&["restart", &id, "--from", "call"]);
    restarted.code(1);
    assert!(
        restarted
            .stderr
            .contains("call: retrying in 200ms (attempt 6, try 2/2)"),
        "{}",
        restarted.stderr
    );
}

#[test]
fn cancel_terminate_runs_no_cancelled_or_always_handler() {
    let t = Test::new();
    let file = t.write(
        "wf.yaml",
        r#"
name: handled
steps:
  - id: long
    run: touch long.started; sleep 30
  - id: on-cancel
    needs: [long]
    if: ${{ cancelled() }}
    run: echo on-cancel >> handlers.log
  - id: finally
    needs: [long]
    if: ${{ always() }}
    run: echo finally >> handlers.log
"#,
    );
    let run = |id: &str| {
        t.cmd()
            .args(["run", file.to_str().expect("utf-8"), "--id", id])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start wf run")
    };
    let await_start = || {
        let start = Instant::now();
        while !t.path().join("long.started").exists() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "long never started"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        std::fs::remove_file(t.path().join("long.started")).expect("remove");
    };

    let mut child = run("term");
    await_start();
    t.wf(&["cancel", "term", "--terminate"]).code(0);
    assert_eq!(child.wait().expect("wait").code(), Some(4));
    assert_eq!(t.read("handlers.log"), "", "terminate ran a handler");
    assert_eq!(t.inspect("term")["status"], "canceled");

    // A plain cancel runs them.
    let mut child = run("plain");
    await_start();
    t.wf(&["cancel", "plain"]).code(0);
    assert_eq!(child.wait().expect("wait").code(), Some(4));
    let mut ran = lines(&t.read("handlers.log"))
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    ran.sort();
    assert_eq!(ran, ["finally", "on-cancel"]);
}
