//! How a registered workflow has been doing (issue 59, item 3): `wf workflow
//! list` and the API give its last instance and, over the last 7 days, its
//! success rate and p50/p95 duration (of what completed or failed), per day
//! too; the inspector draws them (`inspector/workflows.rs`).

use super::*;

/// Registers `flaky`, then runs it three times to completion and once to
/// failure (`--input fail=1`), the failure last.
pub(crate) fn flaky_history(t: &Test) {
    let path = t.write(
        "flaky.yaml",
        "name: flaky\ninputs:\n  fail: { default: '0' }\nsteps:\n  - id: s\n    run: sleep 0.05; test ${{ inputs.fail }} = 0\n",
    );
    let path = path.to_str().unwrap();
    t.wf(&["workflow", "add", path]).code(0);
    for i in 0..3 {
        t.wf(&["run", path, "--id", &format!("ok{i}")]).code(0);
    }
    t.wf(&["run", path, "--id", "bad", "--input", "fail=1"])
        .code(1);
}

#[test]
fn the_registry_says_how_each_workflow_has_been_doing() {
    let t = Test::new();
    flaky_history(&t);
    let list = t.wf(&["workflow", "list", "--json"]).code(0).json();
    let st = &list[0]["stats"];
    assert_eq!(st["last_instance"]["id"], "bad", "{st:#}");
    assert_eq!(st["last_instance"]["status"], "failed");
    assert_eq!(
        (
            &st["started"],
            &st["completed"],
            &st["failed"],
            &st["success_rate"]
        ),
        (&json!(4), &json!(3), &json!(1), &json!(0.75))
    );
    let p50 = st["p50_ms"].as_i64().expect("p50");
    let p95 = st["p95_ms"].as_i64().expect("p95");
    assert!(p50 >= 50 && p95 >= p50, "{st:#}");
    let days = st["days"].as_array().expect("days");
    assert_eq!(days.len(), 7);
    assert_eq!(
        (&days[6]["completed"], &days[6]["failed"]),
        (&json!(3), &json!(1))
    );
    assert_eq!(days[0]["completed"], 0);
    let table = t.wf(&["workflow", "list"]).code(0).stdout.clone();
    assert!(table.contains("failed") && table.contains("3/4"), "{table}");

    let s = Server::start(&t, &[], &[]);
    let one = s.get("/api/v1/workflows/flaky").json();
    assert_eq!(one["stats"]["success_rate"], 0.75, "{one:#}");
    let all = s.get("/api/v1/workflows").json();
    assert_eq!(all[0]["stats"]["started"], 4);
}
