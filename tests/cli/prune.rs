//! `wf prune` (issue 15): ended instances older than a duration go, with
//! everything they own (runs, steps, attempts and their logs, spans,
//! events); running, sleeping and waiting ones stay, history and all.

use crate::Test;
use crate::durable::listed_status;
use crate::http::{contains, database_bytes};
use serde_json::Value;

const HELLO: &str = "name: hello\nsteps:\n  - id: a\n    run: echo MARKER-$WF_INSTANCE_ID\n";
const BROKEN: &str = "name: broken\nsteps:\n  - id: a\n    retry: { max_attempts: 1 }\n    run: echo MARKER-$WF_INSTANCE_ID; exit 1\n";
const NAP: &str = "name: nap\nsteps:\n  - id: a\n    run: echo MARKER-$WF_INSTANCE_ID\n  - id: nap\n    needs: [a]\n    sleep: 1h\n";
const GATE: &str = "name: gate\nsteps:\n  - id: a\n    run: echo MARKER-$WF_INSTANCE_ID\n  - id: gate\n    needs: [a]\n    wait_for_event: { name: go }\n  - id: after\n    needs: [gate]\n    run: echo after >> after.log\n";

/// One instance of each status: completed, failed, canceled (with an event
/// delivered), sleeping, waiting.
fn five(t: &Test) {
    let run = |file: &str, yaml: &str, id: &str, code: i32| {
        let path = t.write(file, yaml);
        t.wf(&[
            "run",
            path.to_str().unwrap(),
            "--id",
            id,
            "--inline-wait",
            "0s",
        ])
        .code(code);
    };
    run("hello.yaml", HELLO, "old-completed", 0);
    run("broken.yaml", BROKEN, "old-failed", 1);
    run("gate.yaml", GATE, "old-canceled", 3);
    t.wf(&[
        "signal",
        "old-canceled",
        "unrelated",
        "--data",
        "{\"n\": 1}",
    ])
    .code(0);
    t.wf(&["cancel", "old-canceled"]).code(0);
    run("nap.yaml", NAP, "keep-sleeping", 3);
    run("gate.yaml", GATE, "keep-waiting", 3);
}

fn prune(t: &Test, args: &[&str]) -> Value {
    let mut all = vec!["prune", "--json"];
    all.extend_from_slice(args);
    t.wf(&all).code(0).json()
}

fn ids(t: &Test) -> Vec<String> {
    let mut ids: Vec<String> = t
        .wf(&["list", "--json"])
        .code(0)
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

#[test]
fn prune_deletes_ended_instances_with_all_they_own_and_nothing_else() {
    let t = Test::new();
    five(&t);
    let kept_before = (
        t.inspect("keep-sleeping"),
        t.wf(&["trace", "keep-sleeping", "--format", "json"])
            .code(0)
            .stdout
            .clone(),
        t.inspect("keep-waiting"),
    );

    // A dry run counts and deletes nothing.
    let before = t.dump();
    let v = prune(&t, &["--older-than", "0s", "--dry-run"]);
    assert_eq!(v["dry_run"], true);
    assert_eq!(v["instances"], 3, "{v}");
    assert!(v["attempts"].as_u64().unwrap() >= 3, "{v}");
    assert!(v["spans"].as_u64().unwrap() >= 3, "{v}");
    assert_eq!(v["events"], 1, "{v}");
    assert_eq!(t.dump(), before, "a dry run changed the database");

    // Nothing ended an hour ago.
    assert_eq!(prune(&t, &["--older-than", "1h"])["instances"], 0);
    // Only the statuses asked for.
    let v = prune(&t, &["--older-than", "0s", "--status", "failed"]);
    assert_eq!(v["instances"], 1, "{v}");
    assert_eq!(v["dry_run"], false);
    assert!(!ids(&t).contains(&"old-failed".to_string()));

    let ran = t.wf(&["prune", "--older-than", "0s"]);
    ran.code(0);
    assert!(
        ran.stdout.starts_with("deleted 2 instances (3 runs, "),
        "{}",
        ran.stdout
    );
    assert_eq!(ids(&t), ["keep-sleeping", "keep-waiting"]);
    for gone in ["old-completed", "old-failed", "old-canceled"] {
        t.wf(&["inspect", gone]).code(2);
    }
    // Not a row of theirs is left, in any table (their output included).
    let after = t.dump();
    for gone in ["old-completed", "old-failed", "old-canceled"] {
        assert!(!after.contains(gone), "a row of {gone} is left:\n{after}");
    }
    // The others are as they were, and go on.
    assert_eq!(t.inspect("keep-sleeping"), kept_before.0);
    assert_eq!(
        t.wf(&["trace", "keep-sleeping", "--format", "json"])
            .code(0)
            .stdout,
        kept_before.1
    );
    assert_eq!(t.inspect("keep-waiting"), kept_before.2);
    t.wf(&["signal", "keep-waiting", "go"]).code(0);
    t.wf(&["resume", "keep-waiting"]).code(0);
    assert_eq!(listed_status(&t, "keep-waiting"), "completed");
    assert_eq!(t.read("after.log"), "after\n");
    // A second prune finds nothing more than what just completed, if old enough.
    assert_eq!(prune(&t, &["--older-than", "1h"])["instances"], 0);
}

#[test]
fn prune_refuses_what_is_not_an_ended_status_or_a_duration() {
    let t = Test::new();
    for args in [
        vec!["prune", "--older-than", "0s", "--status", "sleeping"],
        vec!["prune", "--older-than", "soon"],
        vec!["prune"],
    ] {
        let ran = t.wf(&args);
        ran.code(2);
    }
}

#[test]
fn prune_with_vacuum_leaves_no_byte_of_what_it_deleted() {
    let t = Test::new();
    let path = t.write("hello.yaml", HELLO);
    t.wf(&["run", path.to_str().unwrap(), "--id", "secretive-0451"])
        .code(0);
    assert!(
        database_bytes(&t)
            .iter()
            .any(|(_, b)| contains(b, b"MARKER-secretive-0451")),
        "the output is stored"
    );
    let ran = t.wf(&["prune", "--older-than", "0s", "--vacuum"]);
    ran.code(0);
    for (file, bytes) in database_bytes(&t) {
        assert!(
            !contains(&bytes, b"secretive-0451"),
            "{file} still holds the pruned instance"
        );
    }
    if t.on_pg() {
        assert!(ran.stderr.contains("autovacuum"), "{}", ran.stderr);
    }
}

/// The definitions pinned (issue 53): `count(*)` of `definitions`.
fn definitions(t: &Test) -> u64 {
    t.sql("SELECT count(*) FROM definitions").parse().unwrap()
}

#[test]
fn prune_keeps_the_definitions_the_registry_and_schedules_pin() {
    let t = Test::new().env("REG_KEY", "hook-key");
    let registered = t.write(
        "registered.yaml",
        "name: registered\nsecrets: [REG_KEY]\non:\n  webhook: { name: reg, secret: REG_KEY }\nsteps:\n  - id: a\n    run: 'true'\n",
    );
    let scheduled = t.write(
        "scheduled.yaml",
        "name: scheduled\non:\n  schedule:\n    - every: 1h\nsteps:\n  - id: a\n    run: 'true'\n",
    );
    let removed = t.write(
        "removed.yaml",
        "name: removed\non:\n  schedule:\n    - every: 1h\nsteps:\n  - id: a\n    run: 'true'\n",
    );
    t.wf(&["workflow", "add", registered.to_str().unwrap()])
        .code(0);
    t.wf(&["schedule", "add", scheduled.to_str().unwrap()])
        .code(0);
    t.wf(&["schedule", "add", removed.to_str().unwrap()])
        .code(0);
    t.wf(&["schedule", "rm", "removed"]).code(0);
    // An ended instance of each, and of one nothing registered.
    for file in [&registered, &scheduled, &removed] {
        t.wf(&["run", file.to_str().unwrap()]).code(0);
    }
    let (_, ran) = t.run_yaml("plain.yaml", HELLO, &[]);
    ran.code(0);
    let pinned_before = definitions(&t);
    assert_eq!(pinned_before, 4, "one definition per workflow");

    let v = prune(&t, &["--older-than", "0s"]);
    assert_eq!(v["instances"], 4, "{v}");
    assert!(ids(&t).is_empty());
    // What the registry and the schedules pin stays; what nothing pins goes.
    let names: Vec<String> = t
        .wf(&["workflow", "list", "--json"])
        .code(0)
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.contains(&"registered".to_string()), "{names:?}");
    assert!(names.contains(&"scheduled".to_string()), "{names:?}");
    let left = definitions(&t);
    let schedules = t.wf(&["schedule", "list", "--json"]).code(0).json();
    assert_eq!(schedules.as_array().unwrap().len(), 1, "{schedules}");
    // The registered workflows (`removed` among them: `schedule rm` ends
    // its schedule, not its registration) keep their definitions, no other.
    assert_eq!(
        left,
        names.len() as u64,
        "a definition per registered workflow, none other: {names:?}"
    );
    // Pruning again, with every definition pinned or gone, is clean too.
    prune(&t, &["--older-than", "0s"]);
    prune(&t, &["--older-than", "0s"]);
}

#[test]
fn prune_keeps_the_definitions_of_children_an_open_parent_has_yet_to_make() {
    let t = Test::new();
    t.write(
        "grandchild.yaml",
        "name: grandchild\nsteps:\n  - id: g\n    run: echo grandchild >> made.log\n",
    );
    t.write(
        "child.yaml",
        "name: child\nsteps:\n  - id: c\n    workflow: ./grandchild.yaml\n",
    );
    let parent = t.write(
        "parent.yaml",
        "name: parent\nsteps:\n  - id: nap\n    sleep: 1h\n  - id: call\n    workflow: ./child.yaml\n",
    );
    t.wf(&[
        "run",
        parent.to_str().unwrap(),
        "--id",
        "napping-parent",
        "--inline-wait",
        "0s",
    ])
    .code(3);
    let (_, ran) = t.run_yaml("plain.yaml", HELLO, &[]);
    ran.code(0);
    assert_eq!(definitions(&t), 4);

    let v = prune(&t, &["--older-than", "0s"]);
    assert_eq!(v["instances"], 1, "{v}");
    assert_eq!(definitions(&t), 3, "the parent's tree stays whole");
    t.wf(&["resume", "napping-parent", "--now"]).code(0);
    assert_eq!(t.read("made.log"), "grandchild\n");

    // Once the whole tree has ended and is pruned, its definitions go too.
    let v = prune(&t, &["--older-than", "0s"]);
    assert_eq!(v["instances"], 3, "{v}");
    assert_eq!(definitions(&t), 0);
}
