//! Labels (docs/workflow-file.md `labels`, docs/commands.md): the file's
//! `labels:`, rendered from the inputs when an instance starts, and `wf run
//! --label`, which wins; shown by `wf inspect` and `wf list --json`, filtered
//! by `wf list --label` (all of them), on each run's root span as
//! `workflow.label.<name>`; kept by `wf restart --as` and `--detach`, given
//! to children and scheduled instances from their own files; a label that
//! reads anything but `inputs`, or is badly named, is a definition error.

use crate::Test;
use serde_json::{Value, json};

const FLOW: &str = r#"name: deploy
inputs:
  env: { default: staging }
labels: { team: payments, env: "${{ inputs.env }}" }
steps:
  - id: go
    run: echo go
"#;

/// The ids `wf list --json ARGS…` lists, newest first.
fn listed(t: &Test, args: &[&str]) -> Vec<String> {
    let mut all = vec!["list", "--json"];
    all.extend_from_slice(args);
    t.wf(&all)
        .code(0)
        .json()
        .as_array()
        .expect("a list")
        .iter()
        .map(|i| i["id"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn labels_are_rendered_at_start_shown_and_filtered() {
    let t = Test::new();
    let path = t.write("deploy.yaml", FLOW);
    let file = path.to_str().unwrap();
    t.wf(&["run", file, "--id", "s1"]).code(0);
    t.wf(&["run", file, "--id", "p1", "--input", "env=prod"])
        .code(0);
    t.wf(&[
        "run",
        file,
        "--id",
        "p2",
        "--input",
        "env=prod",
        "--label",
        "team=core",
        "--label",
        "ticket=OPS-7",
    ])
    .code(0);
    // Rendered from the inputs; `--label` wins over the file and adds.
    assert_eq!(
        t.inspect("s1")["labels"],
        json!({"env": "staging", "team": "payments"})
    );
    assert_eq!(
        t.inspect("p2")["labels"],
        json!({"env": "prod", "team": "core", "ticket": "OPS-7"})
    );
    let shown = t.wf(&["inspect", "p2"]).code(0).stdout.clone();
    assert!(
        shown.contains("Labels:") && shown.contains("env=prod, team=core, ticket=OPS-7"),
        "{shown}"
    );
    let list = t.wf(&["list", "--json"]).code(0).json();
    assert_eq!(list[0]["id"], "p2");
    assert_eq!(list[0]["labels"]["ticket"], "OPS-7");
    // Filters: every label given must match.
    assert_eq!(listed(&t, &["--label", "env=prod"]), ["p2", "p1"]);
    assert_eq!(
        listed(&t, &["--label", "env=prod", "--label", "team=payments"]),
        ["p1"]
    );
    assert_eq!(listed(&t, &["--label", "team=payments"]), ["p1", "s1"]);
    assert!(
        listed(&t, &["--label", "env=Prod"]).is_empty(),
        "exact values"
    );
    assert!(listed(&t, &["--label", "nothing=here"]).is_empty());
    // With the other filters, and the count of the rest.
    let ran = t.wf(&[
        "list",
        "--label",
        "env=prod",
        "--status",
        "completed",
        "--limit",
        "1",
    ]);
    ran.code(0);
    assert!(ran.stderr.contains("and 1 more"), "{}", ran.stderr);
    // On the root span of each run.
    let runs = t.wf(&["trace", "p2", "--format", "json"]).code(0).json();
    let root = runs[0]["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "deploy/workflow")
        .expect("the root");
    assert_eq!(root["attributes"]["workflow.label.env"], "prod");
    assert_eq!(root["attributes"]["workflow.label.ticket"], "OPS-7");
    // Kept by a restart into a new instance, and by --detach.
    t.wf(&["restart", "p2", "--from", "go", "--as", "p3"])
        .code(0);
    assert_eq!(t.inspect("p3")["labels"], t.inspect("p2")["labels"]);
    t.wf(&[
        "run",
        "--detach",
        file,
        "--id",
        "d1",
        "--label",
        "queue=later",
    ])
    .code(0);
    assert_eq!(
        t.inspect("d1")["labels"],
        json!({"env": "staging", "queue": "later", "team": "payments"})
    );
    // None: an empty object.
    let bare = t.write(
        "bare.yaml",
        "name: bare\nsteps:\n  - id: a\n    run: echo\n",
    );
    t.wf(&["run", bare.to_str().unwrap(), "--id", "b1"]).code(0);
    assert_eq!(t.inspect("b1")["labels"], json!({}));
    assert!(!t.wf(&["inspect", "b1"]).code(0).stdout.contains("Labels:"));
}

#[test]
fn a_label_reads_only_inputs_and_is_named_plainly() {
    let t = Test::new();
    for (yaml, at, says) in [
        (
            "name: x\nsecrets: [T]\nlabels: { a: \"${{ secrets.T }}\" }\nsteps:\n  - id: a\n    run: echo\n",
            "x.yaml:3:15: ",
            "label `a` reads `secrets`",
        ),
        (
            "name: x\nlabels: { a: \"${{ steps.a.output }}\" }\nsteps:\n  - id: a\n    run: echo\n",
            "x.yaml:2:15: ",
            "label `a` reads `steps`",
        ),
        (
            "name: x\nlabels: { \"a b\": c }\nsteps:\n  - id: a\n    run: echo\n",
            "x.yaml:2:12: ",
            "label `a b`: use letters, digits",
        ),
    ] {
        t.write("x.yaml", yaml);
        for args in [&["validate", "x.yaml"][..], &["run", "x.yaml"][..]] {
            let ran = t.wf(args);
            ran.code(2);
            assert!(
                ran.stderr.starts_with(&format!("error: {at}")) && ran.stderr.contains(says),
                "{}",
                ran.stderr
            );
        }
    }
    t.write("ok.yaml", "name: ok\nsteps:\n  - id: a\n    run: echo\n");
    for bad in ["nothing", "=v", "a b=c"] {
        let ran = t.wf(&["run", "ok.yaml", "--label", bad]);
        ran.code(2);
        assert!(ran.stderr.contains("--label"), "{}", ran.stderr);
    }
    assert!(!t.database_written(), "a refused run wrote the database");
}

#[test]
fn children_and_scheduled_instances_get_their_own_files_labels() {
    let t = Test::new();
    t.write(
        "kid.yaml",
        "name: kid\ninputs:\n  region: { required: true }\nlabels: { region: \"${{ inputs.region }}\" }\n\
         steps:\n  - id: a\n    run: echo\n",
    );
    t.write(
        "parent.yaml",
        "name: parent\nlabels: { kind: release }\non:\n  schedule:\n    - every: 1s\nsteps:\n  \
         - id: each\n    workflow: ./kid.yaml\n    for_each: [eu, us]\n    with: { region: \"${{ item }}\" }\n",
    );
    t.wf(&["run", "parent.yaml", "--id", "r1"]).code(0);
    let kids = t.inspect("r1")["children"].clone();
    let regions: Vec<Value> = kids
        .as_array()
        .unwrap()
        .iter()
        .map(|c| t.inspect(c["id"].as_str().unwrap())["labels"].clone())
        .collect();
    assert_eq!(regions, [json!({"region": "eu"}), json!({"region": "us"})]);
    assert_eq!(listed(&t, &["--label", "region=us"]).len(), 1);
    // A schedule's instances: the labels of the file it pinned.
    t.wf(&["schedule", "add", "parent.yaml"]).code(0);
    crate::schedules::until_due(&t);
    t.wf(&["worker", "--once"]).code(0);
    let fired = listed(&t, &["--label", "kind=release", "--roots"]);
    assert_eq!(fired.len(), 2, "r1 and the fired one: {fired:?}");
}

#[test]
fn a_label_made_of_an_input_holding_a_secret_is_masked() {
    let t = Test::new();
    t.write(
        "s.yaml",
        "name: s\nsecrets: [WF_TEST_LABEL_SECRET]\ninputs:\n  who: { default: x }\n\
         labels: { who: \"id-${{ inputs.who }}\" }\nsteps:\n  - id: a\n    run: echo\n",
    );
    let out = t
        .cmd()
        .env("WF_TEST_LABEL_SECRET", "hunter2hunter2")
        .args([
            "run",
            "s.yaml",
            "--id",
            "m1",
            "--input",
            "who=hunter2hunter2",
        ])
        .output()
        .expect("run wf");
    assert_eq!(out.status.code(), Some(0));
    let label = t.inspect("m1")["labels"]["who"].clone();
    assert!(
        label
            .as_str()
            .is_some_and(|l| l.starts_with("id-") && !l.contains("hunter2")),
        "{label}"
    );
    assert!(
        !t.dump().contains("hunter2hunter2"),
        "the secret reached the database"
    );
}
