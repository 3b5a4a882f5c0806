//! `wf upgrade`: instances that are not running moved onto a new definition
//! of their workflow (SPEC §3 Upgrades), through the real binary.

use crate::Test;
use serde_json::{Value, json};

mod api;
mod races;

pub(crate) const OLD: &str = "name: trial
steps:
  - id: a
    run: echo a >> ran.log
  - id: approve
    wait_for_event: { name: go }
  - id: b
    run: exit 7
";

pub(crate) const NEW: &str = "name: trial
steps:
  - id: a
    run: echo a >> ran.log
  - id: approve
    wait_for_event: { name: go }
  - id: b
    run: echo b >> ran.log
  - id: c
    run: echo c >> ran.log
";

/// Each step of a plan with its fate: `(step, fate)`.
pub(crate) fn fates(plan: &Value) -> Vec<(String, String)> {
    plan["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| {
            (
                s["step"].as_str().unwrap().to_string(),
                s["fate"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// `fates`' expected value, written as pairs of words.
pub(crate) fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

fn hash_of(t: &Test, id: &str) -> String {
    t.wf(&["inspect", id, "--json"]).code(0).json()["definition_hash"]
        .as_str()
        .expect("a hash")
        .to_string()
}

#[test]
fn a_waiting_instance_upgraded_runs_the_fixed_and_new_steps_and_not_the_done_one() {
    let t = Test::new();
    let old = t.write("trial.yaml", OLD);
    let new = t.write("trial-v2.yaml", NEW);
    let (old, new) = (old.to_str().expect("utf-8"), new.to_str().expect("utf-8"));
    t.wf(&["run", old, "--id", "t1"]).code(3);
    let before = hash_of(&t, "t1");

    let dry = t
        .wf(&["upgrade", "t1", "--to", new, "--dry-run", "--json"])
        .code(0)
        .json();
    let plan = &dry[0]["plan"];
    assert_eq!(dry[0]["outcome"], "planned", "{dry:#}");
    assert_eq!(
        fates(plan),
        pairs(&[
            ("a", "kept"),
            ("approve", "unchanged"),
            ("b", "changed"),
            ("c", "new")
        ])
    );
    assert_eq!(hash_of(&t, "t1"), before, "a dry run writes nothing");

    let done = t
        .wf(&["upgrade", "t1", "--to", new, "--json"])
        .code(0)
        .json();
    assert_eq!(done[0]["outcome"], "upgraded", "{done:#}");
    let after = hash_of(&t, "t1");
    assert_ne!(after, before);
    assert_eq!(done[0]["plan"]["to"], after.as_str());
    let inspect = t.wf(&["inspect", "t1", "--json"]).code(0).json();
    let actions = inspect["actions"].as_array().expect("actions");
    assert!(
        actions.iter().any(|a| a["action"] == "upgrade"),
        "{actions:#?}"
    );

    let uses = |v: &Value| v["definitions"].clone();
    assert_eq!(
        uses(&inspect),
        json!([{"hash": before, "from_run": 1}, {"hash": after, "from_run": 2}]),
        "the next run is the first on the new definition"
    );

    t.wf(&["signal", "t1", "go"]).code(0);
    t.wf(&["resume", "t1"]).code(0);
    let ran = std::fs::read_to_string(t.path().join("ran.log")).expect("ran.log");
    assert_eq!(
        ran, "a\nb\nc\n",
        "the done step ran once, the fixed and new ones after"
    );
    let inspect = t.wf(&["inspect", "t1", "--json"]).code(0).json();
    assert_eq!(
        uses(&inspect),
        json!([{"hash": before, "from_run": 1}, {"hash": after, "from_run": 2}])
    );
    let run_hashes: Vec<&Value> = inspect["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| &r["definition_hash"])
        .collect();
    assert_eq!(run_hashes, [&json!(before), &json!(after)]);
    let text = t.wf(&["inspect", "t1"]).code(0).stdout.clone();
    assert!(
        text.contains(&format!(
            "{} from run 1, {} from run 2",
            &before[..12],
            &after[..12]
        )),
        "{text}"
    );

    // The second run's root links to the first's and says what moved it.
    let roots = t.run_roots("t1");
    assert_eq!(roots.len(), 2, "{roots:#?}");
    let second = &roots[1];
    assert_eq!(second["attributes"]["wf.upgrade.from"], before.as_str());
    assert_eq!(second["attributes"]["wf.upgrade.to"], after.as_str());
    let linked: Vec<&Value> = second["links"]
        .as_array()
        .expect("links")
        .iter()
        .map(|l| &l["span_id"])
        .collect();
    assert!(
        linked.contains(&&roots[0]["span_id"]),
        "{second:#}\nfirst: {:#}",
        roots[0]
    );
    let tree = t.wf(&["trace", "t1"]).code(0).stdout.clone();
    assert!(
        tree.contains(&format!(
            "run 2  link -> run 1  upgraded {} -> {}",
            &before[..12],
            &after[..12]
        )),
        "{tree}"
    );
    assert!(
        roots[0]["attributes"].get("wf.upgrade.from").is_none(),
        "{:#}",
        roots[0]
    );
}

#[test]
fn a_sleeping_instance_keeps_its_wake_time_and_its_removed_step_stays_in_history() {
    let t = Test::new();
    let old = t.write(
        "nap.yaml",
        "name: nap
steps:
  - id: a
    run: echo a >> ran.log
  - id: gone
    run: echo gone >> ran.log
  - id: nap
    needs: [a, gone]
    sleep: 1h
  - id: b
    needs: nap
    run: exit 7
",
    );
    let new = t.write(
        "nap-v2.yaml",
        "name: nap
steps:
  - id: a
    run: echo a >> ran.log
  - id: nap
    needs: a
    sleep: 1h
  - id: b
    needs: nap
    run: echo b >> ran.log
  - id: c
    needs: b
    run: echo c >> ran.log
",
    );
    let (old, new) = (old.to_str().expect("utf-8"), new.to_str().expect("utf-8"));
    t.wf(&["run", old, "--id", "n1"]).code(3);
    let before = t.wf(&["inspect", "n1", "--json"]).code(0).json();
    assert_eq!(before["status"], "sleeping");
    let wake = before["wake_at"].clone();
    assert!(wake.is_string(), "{before:#}");

    let done = t
        .wf(&["upgrade", "n1", "--to", new, "--json"])
        .code(0)
        .json();
    assert_eq!(
        fates(&done[0]["plan"]),
        pairs(&[
            ("a", "kept"),
            ("gone", "removed"),
            ("nap", "changed"),
            ("b", "changed"),
            ("c", "new")
        ]),
        "{done:#}"
    );
    let after = t.wf(&["inspect", "n1", "--json"]).code(0).json();
    assert_eq!(after["status"], "sleeping");
    assert_eq!(after["wake_at"], wake, "the sleep keeps its wake time");
    let nap = after["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|s| s["id"] == "nap")
        .expect("nap");
    assert_eq!(nap["wake_at"], wake, "{nap:#}");
    let gone = after["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|s| s["id"] == "gone")
        .expect("the removed step's history stays");
    assert_eq!(
        (&gone["status"], &gone["removed"]),
        (&json!("completed"), &json!(true))
    );
    let text = t.wf(&["inspect", "n1"]).code(0).stdout.clone();
    assert!(text.contains("completed (removed)"), "{text}");

    t.wf(&["resume", "n1", "--now"]).code(0);
    let ran = std::fs::read_to_string(t.path().join("ran.log")).expect("ran.log");
    assert_eq!(ran, "a\ngone\nb\nc\n");
}

#[test]
fn a_refused_plan_writes_nothing_and_says_why() {
    let t = Test::new();
    let old = t.write("trial.yaml", OLD);
    let gap = t.write(
        "gap.yaml",
        "name: trial
steps:
  - id: first
    run: echo first >> ran.log
  - id: a
    needs: first
    run: echo a >> ran.log
  - id: approve
    wait_for_event: { name: go }
  - id: b
    run: echo b >> ran.log
",
    );
    let (old, gap) = (old.to_str().expect("utf-8"), gap.to_str().expect("utf-8"));
    t.wf(&["run", old, "--id", "t2"]).code(3);
    let before = hash_of(&t, "t2");
    let refused = t.wf(&["upgrade", "t2", "--to", gap]);
    refused.code(1);
    assert!(
        refused.stderr.contains("new step `first` comes before `a`"),
        "{}",
        refused.stderr
    );
    assert_eq!(hash_of(&t, "t2"), before);
    t.wf(&["upgrade", "t2", "--to", gap, "--allow-gaps"])
        .code(0);
    assert_ne!(hash_of(&t, "t2"), before);
}

#[test]
fn a_renamed_done_step_keeps_its_result_under_its_new_name() {
    let t = Test::new();
    let old = t.write(
        "trial.yaml",
        "name: trial
steps:
  - id: a
    run: echo a >> ran.log; echo n=7 >> $WF_OUTPUT
  - id: approve
    wait_for_event: { name: go }
  - id: b
    run: exit 7
",
    );
    let renamed = t.write(
        "renamed.yaml",
        "name: trial
steps:
  - id: fetch
    run: echo a >> ran.log; echo n=7 >> $WF_OUTPUT
  - id: approve
    wait_for_event: { name: go }
  - id: b
    run: echo b${{ steps.fetch.output.n }} >> ran.log
",
    );
    let (old, renamed) = (
        old.to_str().expect("utf-8"),
        renamed.to_str().expect("utf-8"),
    );
    t.wf(&["run", old, "--id", "r1"]).code(3);
    // Without the map, `a` would be removed and `fetch` run as new.
    let unmapped = t
        .wf(&["upgrade", "r1", "--to", renamed, "--dry-run", "--json"])
        .code(0)
        .json();
    assert_eq!(unmapped[0]["plan"]["steps"][0]["fate"], "removed");
    let done = t
        .wf(&[
            "upgrade", "r1", "--to", renamed, "--map", "a=fetch", "--json",
        ])
        .code(0)
        .json();
    assert_eq!(
        done[0]["plan"]["steps"][0],
        json!({"step": "fetch", "from": "a", "fate": "kept", "status": "completed"}),
        "{done:#}"
    );
    let inspect = t
        .wf(&["inspect", "r1", "--json", "--attempts"])
        .code(0)
        .json();
    let fetch = &inspect["steps"][0];
    assert_eq!(
        (&fetch["id"], &fetch["status"], &fetch["attempts"]),
        (&json!("fetch"), &json!("completed"), &json!(1)),
        "{inspect:#}"
    );
    assert_eq!(fetch["attempt_list"][0]["attempt"], 1);

    t.wf(&["signal", "r1", "go"]).code(0);
    t.wf(&["resume", "r1"]).code(0);
    let ran = std::fs::read_to_string(t.path().join("ran.log")).expect("ran.log");
    assert_eq!(
        ran, "a\nb7\n",
        "the renamed step ran once; the new `b` read its output by the new name"
    );
}

#[test]
fn a_queued_instance_whose_queue_changes_is_admitted_under_the_new_key() {
    let t = Test::new();
    let old = t.write(
        "q.yaml",
        "name: q
queue: { key: old, concurrency: 1, hold_while_suspended: true }
steps:
  - id: gate
    wait_for_event: { name: go }
",
    );
    let new = t.write(
        "q-v2.yaml",
        "name: q
queue: { key: new, concurrency: 1, hold_while_suspended: true }
steps:
  - id: gate
    wait_for_event: { name: go }
",
    );
    let (old, new) = (old.to_str().unwrap(), new.to_str().unwrap());
    // q1 holds `old`'s one slot while it waits; q2 queues behind it.
    t.wf(&["run", old, "--id", "q1"]).code(3);
    t.wf(&["run", old, "--id", "q2", "--detach"]).code(0);
    assert_eq!(t.inspect("q2")["status"], "queued");
    let keys = |t: &Test| -> Vec<(String, i64, i64)> {
        let list = t.wf(&["queue", "list", "--json"]).code(0).json();
        list.as_array()
            .unwrap()
            .iter()
            .map(|k| {
                (
                    k["key"].as_str().unwrap().to_string(),
                    k["admitted"].as_i64().unwrap(),
                    k["queued"].as_i64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(keys(&t), [("old".to_string(), 1, 1)]);

    let done = t
        .wf(&["upgrade", "q2", "--to", new, "--json"])
        .code(0)
        .json();
    assert_eq!(
        done[0]["plan"]["queue"],
        json!({"from": "old", "to": "new"}),
        "{done:#}"
    );
    assert_eq!(t.inspect("q2")["status"], "queued");
    let mut now = keys(&t);
    now.sort();
    assert_eq!(now, [("new".to_string(), 0, 1), ("old".to_string(), 1, 0)]);

    // The new key has room: q2 is admitted there, beside q1 on the old.
    t.wf(&["resume", "q2"]).code(3);
    assert_eq!(t.inspect("q2")["status"], "waiting");
    let mut now = keys(&t);
    now.sort();
    assert_eq!(now, [("new".to_string(), 1, 0), ("old".to_string(), 1, 0)]);
}

const PARENT: &str = "name: parent
steps:
  - id: call
    workflow: child.yaml
  - id: after
    needs: [call]
    run: echo after >> ../ran.log
";

const CHILD: &str = "name: child
steps:
  - id: gate
    wait_for_event: { name: go }
  - id: work
    needs: [gate]
    run: exit 7
";

#[test]
fn children_keep_their_definitions_unless_asked_to_move_too() {
    let t = Test::new();
    t.write("v1/parent.yaml", PARENT);
    t.write("v1/child.yaml", CHILD);
    let new = t.write("v2/parent.yaml", PARENT);
    t.write(
        "v2/child.yaml",
        &CHILD.replace("exit 7", "echo fixed >> ../ran.log"),
    );
    let new = new.to_str().unwrap();
    let old = t.path().join("v1/parent.yaml");
    let old = old.to_str().unwrap();
    let child_of = |t: &Test, id: &str| -> String {
        t.inspect(id)["children"][0]["id"]
            .as_str()
            .expect("a child")
            .to_string()
    };

    // Without --children the parent moves (its pinned tree with it) and
    // its child stays on its own definition.
    t.wf(&["run", old, "--id", "p1"]).code(3);
    let c1 = child_of(&t, "p1");
    let c1_before = t.inspect(&c1)["definition_hash"].clone();
    let done = t
        .wf(&["upgrade", "p1", "--to", new, "--json"])
        .code(0)
        .json();
    assert_eq!(done.as_array().unwrap().len(), 1, "{done:#}");
    assert_eq!(t.inspect(&c1)["definition_hash"], c1_before);

    // With it, the child moves onto the definition the new parent calls.
    t.wf(&["run", old, "--id", "p2"]).code(3);
    let c2 = child_of(&t, "p2");
    let c2_before = t.inspect(&c2)["definition_hash"].clone();
    let dry = t
        .wf(&[
            "upgrade",
            "p2",
            "--to",
            new,
            "--children",
            "--dry-run",
            "--json",
        ])
        .code(0)
        .json();
    assert_eq!(
        (&dry[1]["id"], &dry[1]["parent"], &dry[1]["outcome"]),
        (&json!(c2), &json!("p2"), &json!("planned")),
        "{dry:#}"
    );
    assert_eq!(t.inspect(&c2)["definition_hash"], c2_before, "a dry run");
    let done = t
        .wf(&["upgrade", "p2", "--to", new, "--children", "--json"])
        .code(0)
        .json();
    let outcomes: Vec<(&str, &str)> = done
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["id"].as_str().unwrap(), d["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(outcomes, [("p2", "upgraded"), (c2.as_str(), "upgraded")]);
    assert_ne!(t.inspect(&c2)["definition_hash"], c2_before);

    // It runs the fixed step, and its parent goes on.
    t.wf(&["signal", &c2, "go"]).code(0);
    t.wf(&["resume", &c2]).code(0);
    t.wf(&["resume", "p2"]).code(0);
    let ran = std::fs::read_to_string(t.path().join("ran.log")).expect("ran.log");
    assert_eq!(ran, "fixed\nafter\n");
}

/// The walk-through of docs/upgrades.md and the README, on the example
/// files themselves.
#[test]
fn the_trial_example_upgrades_as_the_docs_say() {
    let t = Test::new();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("workflows");
    let (v1, v2) = (dir.join("trial.yaml"), dir.join("trial-v2.yaml"));
    let (v1, v2) = (v1.to_str().unwrap(), v2.to_str().unwrap());
    t.wf(&["run", v1, "--id", "acme"]).code(3);
    let dry = t.wf(&["upgrade", "acme", "--to", v2, "--dry-run"]);
    dry.code(0);
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/upgrades.md"),
    )
    .expect("docs/upgrades.md");
    for line in dry.stdout.lines() {
        let line = line.trim_end();
        assert!(
            docs.contains(line),
            "docs/upgrades.md does not show the plan's line {line:?}"
        );
    }
    t.wf(&["upgrade", "acme", "--to", v2]).code(0);

    // The definitions it ran, with what changed (issue 59, item 2).
    let shown = t
        .wf(&["inspect", "acme", "--definitions"])
        .code(0)
        .stdout
        .clone();
    let v1_text = std::fs::read_to_string(v1).unwrap();
    assert!(shown.contains(v1_text.trim_end()), "{shown}");
    for line in [
        "# upgraded to ",
        "-  - id: welcome",
        "+  plan: { default: standard }",
        "+  - id: thank",
    ] {
        assert!(shown.contains(line), "{line:?} in {shown}");
    }
    let json = t
        .wf(&["inspect", "acme", "--definitions", "--json"])
        .code(0)
        .json();
    let defs = json["definitions"].as_array().expect("definitions");
    assert_eq!(defs.len(), 2);
    assert_eq!(defs[0]["source"], v1_text.as_str());
    assert!(defs[0].get("diff").is_none());
    assert_eq!(
        defs[1]["source"],
        std::fs::read_to_string(v2).unwrap().as_str()
    );
    assert!(
        defs[1]["diff"].as_str().unwrap().contains("+  - id: thank"),
        "{defs:#?}"
    );
    t.wf(&["signal", "acme", "converted"]).code(0);
    t.wf(&["resume", "acme"]).code(0);
    let logs = t.wf(&["logs", "acme", "bill"]).code(0).stdout.clone();
    assert_eq!(logs.trim(), "billing acme on the standard plan");
}

#[test]
fn a_failed_instance_moved_onto_a_fix_goes_on_with_retry_failed() {
    let t = Test::new();
    let old = t.write(
        "f.yaml",
        "name: f\nsteps:\n  - id: a\n    run: echo a >> ran.log\n  - id: b\n    run: exit 3\n  - id: c\n    run: echo c >> ran.log\n",
    );
    let new = t.write(
        "f2.yaml",
        "name: f\nsteps:\n  - id: a\n    run: echo a >> ran.log\n  - id: b\n    run: echo b >> ran.log\n  - id: c\n    run: echo c >> ran.log\n",
    );
    t.wf(&["run", old.to_str().unwrap(), "--id", "f1"]).code(1);
    let done = t
        .wf(&["upgrade", "f1", "--to", new.to_str().unwrap(), "--json"])
        .code(0)
        .json();
    assert_eq!(done[0]["outcome"], "upgraded");
    // A plain resume says how it goes on, now that it is on a fix.
    let refused = t.wf(&["resume", "f1"]);
    refused.code(1);
    assert!(
        refused.stderr.contains(
            "it was upgraded since it failed; `wf resume f1 --retry-failed` continues it"
        ),
        "{}",
        refused.stderr
    );
    t.wf(&["resume", "f1", "--retry-failed"]).code(0);
    let ran = std::fs::read_to_string(t.path().join("ran.log")).expect("ran.log");
    assert_eq!(ran, "a\nb\nc\n");
}
