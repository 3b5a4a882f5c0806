//! Finding instances in a long history (issue 59, item 1): `wf list --id
//! PREFIX`, `--error WORDS` (each a word of the instance's error, or the
//! start of one, any case) and `--counts` (how many of each status the
//! other filters match), and the same through the API
//! (`/api/v1/instances?id=&error=`, `/api/v1/instances/counts`); each
//! listed instance's `ended_at` and `duration_ms`. On each backend.

use crate::Test;
use crate::serve::Server;
use serde_json::{Value, json};

const FLAKY: &str = "name: flaky
inputs:
  why: { default: connection refused by upstream }
steps:
  - id: call
    run: echo \"${{ inputs.why }}\" >&2; exit 3
";

const FINE: &str = "name: fine\nsteps:\n  - id: go\n    run: echo ok\n";

const PARENT: &str = "name: fleet
steps:
  - id: regions
    for_each: [eu, us]
    workflow: ./fine.yaml
";

/// The ids `wf list --json ARGS…` lists, newest first.
fn listed(t: &Test, args: &[&str]) -> Vec<String> {
    let mut all = vec!["list", "--json"];
    all.extend_from_slice(args);
    ids(&t.wf(&all).code(0).json())
}

fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|i| i["id"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// `{status: count}` of the counts given, those above zero, and the total.
fn counts(v: &Value) -> (Value, u64) {
    let mut out = serde_json::Map::new();
    for s in v["statuses"].as_array().expect("statuses") {
        if s["count"].as_u64() > Some(0) {
            out.insert(
                s["status"].as_str().unwrap().to_string(),
                s["count"].clone(),
            );
        }
        assert_eq!(s["at_least"], json!(false));
    }
    (Value::Object(out), v["total"].as_u64().expect("total"))
}

/// A history: three that failed with different errors, two that completed,
/// a parent and its two children.
pub fn history() -> Test {
    let t = Test::new();
    let flaky = t.write("flaky.yaml", FLAKY);
    let fine = t.write("fine.yaml", FINE);
    let parent = t.write("fleet.yaml", PARENT);
    let run = |file: &std::path::Path, id: &str, extra: &[&str], code: i32| {
        let mut args = vec!["run", file.to_str().unwrap(), "--id", id];
        args.extend_from_slice(extra);
        t.wf(&args).code(code);
    };
    run(&flaky, "f1a2b3", &[], 1);
    run(&flaky, "f1a2c4", &["--input", "why=Disk FULL on /var"], 1);
    run(&fine, "ok0001", &[], 0);
    run(
        &flaky,
        "f9e8d7",
        &["--input", "why=TLS handshake: connection reset"],
        1,
    );
    run(&fine, "ok0002", &[], 0);
    run(&parent, "fleet1", &[], 0);
    t
}

#[test]
fn list_finds_by_id_prefix_and_error_words_and_counts_by_status() {
    let t = history();
    // An id prefix: those instances alone.
    assert_eq!(listed(&t, &["--id", "f1a2"]), ["f1a2c4", "f1a2b3"]);
    assert_eq!(listed(&t, &["--id", "f1a2c"]), ["f1a2c4"]);
    assert!(listed(&t, &["--id", "zzz"]).is_empty());
    // Words of the error: whole words or their starts, any case, all.
    assert_eq!(listed(&t, &["--error", "refused"]), ["f1a2b3"]);
    assert_eq!(listed(&t, &["--error", "CONNECT"]), ["f9e8d7", "f1a2b3"]);
    assert_eq!(listed(&t, &["--error", "connection reset"]), ["f9e8d7"]);
    assert_eq!(listed(&t, &["--error", "disk"]), ["f1a2c4"]);
    assert!(listed(&t, &["--error", "connection full"]).is_empty());
    assert_eq!(
        listed(&t, &["--error", "connect", "--id", "f1"]),
        ["f1a2b3"]
    );
    // The table says so too.
    let shown = t
        .wf(&["list", "--error", "handshake"])
        .code(0)
        .stdout
        .clone();
    assert!(
        shown.contains("f9e8d7") && !shown.contains("f1a2b3"),
        "{shown}"
    );

    // Ended instances carry their end and duration.
    let list = t.wf(&["list", "--json", "--id", "ok0001"]).code(0).json();
    let one = &list[0];
    assert_eq!(one["ended_at"], one["updated_at"]);
    let took = one["duration_ms"].as_i64().expect("a duration");
    assert!((0..60_000).contains(&took), "{one}");

    // Counts: of every instance, of those without a parent, and with the
    // other filters (counted, not kept).
    let all = t.wf(&["list", "--counts", "--json"]).code(0).json();
    assert_eq!(counts(&all), (json!({"completed": 5, "failed": 3}), 8));
    let roots = t
        .wf(&["list", "--counts", "--json", "--roots"])
        .code(0)
        .json();
    assert_eq!(counts(&roots), (json!({"completed": 3, "failed": 3}), 6));
    let fleet = t
        .wf(&["list", "--counts", "--json", "--workflow", "fine"])
        .code(0)
        .json();
    assert_eq!(counts(&fleet), (json!({"completed": 4}), 4));
    let erring = t
        .wf(&["list", "--counts", "--json", "--error", "connection"])
        .code(0)
        .json();
    assert_eq!(counts(&erring), (json!({"failed": 2}), 2));
    let children = t
        .wf(&["list", "--counts", "--json", "--parent", "fleet1"])
        .code(0)
        .json();
    assert_eq!(counts(&children), (json!({"completed": 2}), 2));
    let table = t
        .wf(&["list", "--counts", "--roots"])
        .code(0)
        .stdout
        .clone();
    for line in ["completed", "failed", "total"] {
        assert!(table.contains(line), "{table}");
    }
    assert!(
        table
            .lines()
            .any(|l| l.contains("total") && l.contains('6')),
        "{table}"
    );
    // `--counts` counts every status: a status filter is refused.
    t.wf(&["list", "--counts", "--status", "failed"]).code(2);

    // The same through the API.
    let s = Server::start(&t, &[], &[]);
    let got = s.get("/api/v1/instances?error=connect&id=f1");
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(ids(&got.json()), ["f1a2b3"]);
    let got = s.get("/api/v1/instances/counts?roots=true");
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(
        counts(&got.json()),
        (json!({"completed": 3, "failed": 3}), 6)
    );
    let got = s.get("/api/v1/instances/counts?error=disk");
    assert_eq!(counts(&got.json()), (json!({"failed": 1}), 1));
    // The counts take the filters, not a status or a page.
    let refused = s.get("/api/v1/instances/counts?status=failed");
    assert_eq!(refused.status, 400, "{}", refused.text());
}
