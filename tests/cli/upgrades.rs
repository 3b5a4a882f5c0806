//! `wf upgrade`: instances that are not running moved onto a new definition
//! of their workflow (SPEC §3 Upgrades), through the real binary.

use crate::Test;

const OLD: &str = "name: trial
steps:
  - id: a
    run: echo a >> ran.log
  - id: approve
    wait_for_event: { name: go }
  - id: b
    run: exit 7
";

const NEW: &str = "name: trial
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
    let fates: Vec<(&str, &str)> = plan["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| (s["step"].as_str().unwrap(), s["fate"].as_str().unwrap()))
        .collect();
    assert_eq!(
        fates,
        [
            ("a", "kept"),
            ("approve", "unchanged"),
            ("b", "changed"),
            ("c", "new")
        ]
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

    t.wf(&["signal", "t1", "go"]).code(0);
    t.wf(&["resume", "t1"]).code(0);
    let ran = std::fs::read_to_string(t.path().join("ran.log")).expect("ran.log");
    assert_eq!(
        ran, "a\nb\nc\n",
        "the done step ran once, the fixed and new ones after"
    );
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
