//! One action over many instances (issue 59, item 5): `wf cancel` and
//! `wf resume [--retry-failed]` given several ids or the list's filters
//! print each instance's plan, ask once (`--yes`; refused without a
//! terminal, changing nothing), take each instance's turn through the
//! action of one (compensations run, failed steps retried) and report
//! each; the API's `POST /api/v1/bulk/{action}` does the same. On each
//! backend.

use crate::Test;
use crate::serve::{Server, until};
use serde_json::{Value, json};

const GATED: &str = "name: gated
steps:
  - id: prep
    run: echo prep
    compensate:
      run: echo \"undo ${{ instance.id }}\" >> undone.log
  - id: gate
    needs: [prep]
    wait_for_event: { name: go }
";

/// Three waiting instances of `gated`, two failed of `flaky` (fixed by
/// writing the file `fixed`), one completed: their ids.
pub fn history(t: &Test) -> (Vec<String>, Vec<String>, String) {
    let gated = t.write("gated.yaml", GATED);
    let mut waiting = Vec::new();
    for id in ["g1", "g2", "g3"] {
        t.wf(&["run", gated.to_str().unwrap(), "--id", id]).code(3);
        waiting.push(id.to_string());
    }
    let (f1, _) = t.failed_until_fixed();
    let (f2, _) = t.failed_until_fixed();
    let (done, r) = t.run_yaml(
        "ok.yaml",
        "name: ok\nsteps:\n  - id: go\n    run: 'true'\n",
        &[],
    );
    r.code(0);
    (waiting, vec![f1, f2], done)
}

fn by_id(lines: &Value) -> std::collections::BTreeMap<String, Value> {
    lines
        .as_array()
        .expect("lines")
        .iter()
        .map(|l| (l["id"].as_str().unwrap().to_string(), l.clone()))
        .collect()
}

pub fn status(t: &Test, id: &str) -> String {
    t.inspect(id)["status"].as_str().unwrap().to_string()
}

#[test]
fn cancel_and_retry_many_with_one_plan_and_one_answer() {
    let t = Test::new();
    let (waiting, failed, done) = history(&t);
    // The plan alone: what a cancel would do to each of the workflow's.
    let plan = t
        .wf(&["cancel", "--workflow", "gated", "--dry-run", "--json"])
        .code(0)
        .json();
    let plan = by_id(&plan);
    assert_eq!(plan.len(), 3);
    for id in &waiting {
        assert_eq!(plan[id]["outcome"], "planned");
        assert_eq!(
            plan[id]["plan"], "canceled; compensates `prep`",
            "{}",
            plan[id]
        );
    }
    // Without a terminal and without --yes: refused, nothing changed.
    let refused = t.wf(&["cancel", "--workflow", "gated"]);
    refused.code(2);
    assert!(refused.stderr.contains("--yes"), "{}", refused.stderr);
    for id in &waiting {
        assert_eq!(status(&t, id), "waiting");
    }
    // Two of them, and the completed one (left as it is).
    let out = t
        .wf(&[
            "cancel",
            "g1",
            "g2",
            &done,
            "--yes",
            "--json",
            "--reason",
            "bad deploy",
        ])
        .code(0)
        .json();
    let out = by_id(&out);
    for id in ["g1", "g2"] {
        assert_eq!(out[id]["outcome"], "canceled", "{}", out[id]);
        assert_eq!(out[id]["status"], "canceled");
        assert_eq!(status(&t, id), "canceled");
    }
    assert_eq!(out[&done]["outcome"], "skipped");
    assert!(
        out[&done]["detail"]
            .as_str()
            .unwrap()
            .contains("nothing to cancel")
    );
    assert_eq!(status(&t, "g3"), "waiting", "only those named");
    // Each compensation ran once, and each cancel was recorded with why.
    let undone = t.read("undone.log");
    let mut lines: Vec<&str> = undone.lines().collect();
    lines.sort();
    assert_eq!(lines, ["undo g1", "undo g2"]);
    let actions = t.inspect("g1")["actions"].clone();
    assert!(
        actions
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["action"] == "cancel" && a["detail"] == "bad deploy"),
        "{actions}"
    );
    // Retry the failed ones, chosen by status, once fixed.
    let plan = t
        .wf(&[
            "resume",
            "--retry-failed",
            "--status",
            "failed",
            "--dry-run",
            "--json",
        ])
        .code(0)
        .json();
    let plan = by_id(&plan);
    assert_eq!(plan.len(), 2);
    for id in &failed {
        assert_eq!(plan[id]["plan"], "retries `once`");
    }
    t.write("fixed", "");
    let out = t
        .wf(&[
            "resume",
            "--retry-failed",
            "--status",
            "failed",
            "--yes",
            "--json",
        ])
        .code(0)
        .json();
    for (id, line) in by_id(&out) {
        assert_eq!(line["outcome"], "resumed", "{line}");
        assert_eq!(status(&t, &id), "completed");
    }
    // A plain resume of a failed instance is left as it is, saying why.
    let plan = t
        .wf(&["resume", "g3", &failed[0], "--dry-run", "--json"])
        .code(0)
        .json();
    let plan = by_id(&plan);
    assert_eq!(plan["g3"]["plan"], "goes on from where it stands");
    assert!(
        plan[&failed[0]]["plan"]
            .as_str()
            .unwrap()
            .starts_with("left as it is")
    );
    // A filter that matches nothing does nothing.
    let none = t.wf(&["cancel", "--workflow", "nothing-of-that-name", "--yes"]);
    none.code(0);
    assert!(
        none.stderr.contains("no instances match"),
        "{}",
        none.stderr
    );
    // Ids and filters together are refused.
    t.wf(&["cancel", "g3", "--workflow", "gated", "--yes"])
        .code(2);
}

#[test]
fn the_api_plans_and_acts_on_many() {
    let t = Test::new();
    let (waiting, _failed, done) = history(&t);
    let s = Server::start(&t, &[], &[]);
    let plan = s.post(
        "/api/v1/bulk/cancel",
        json!({"filter": {"workflow": "gated"}, "dry_run": true}),
    );
    assert_eq!(plan.status, 200, "{}", plan.text());
    let body = plan.json();
    assert_eq!(body["action"], "cancel");
    let lines = by_id(&body["instances"]);
    assert_eq!(lines.len(), 3);
    assert!(lines.values().all(|l| l["outcome"] == "planned"));
    for id in &waiting {
        assert_eq!(status(&t, id), "waiting", "a dry run changes nothing");
    }
    let acted = s.post(
        "/api/v1/bulk/cancel",
        json!({"ids": ["g1", done.clone()], "reason": "api"}),
    );
    assert_eq!(acted.status, 200, "{}", acted.text());
    let lines = by_id(&acted.json()["instances"]);
    assert_eq!(lines["g1"]["outcome"], "canceling");
    assert_eq!(lines[&done]["outcome"], "skipped");
    until("g1 canceled in the background", || {
        status(&t, "g1") == "canceled"
    });
    assert_eq!(t.read("undone.log").trim(), "undo g1");
    // Refusals: neither or both selections, an unknown action.
    for body in [
        json!({}),
        json!({"ids": []}),
        json!({"ids": ["g2"], "filter": {}}),
    ] {
        let r = s.post("/api/v1/bulk/cancel", body.clone());
        assert_eq!(r.status, 400, "{body}: {}", r.text());
    }
    assert_eq!(
        s.post("/api/v1/bulk/explode", json!({"ids": ["g2"]}))
            .status,
        404
    );
}
