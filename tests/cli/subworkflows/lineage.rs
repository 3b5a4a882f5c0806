//! Lineage: listings by parent and roots, workers on other hosts running children and waking their parents, instance.parent, and children's compensations in their parent's saga.

use super::*;

/// `wf list --json ARGS…`: the ids listed, sorted.
fn listed(t: &Test, args: &[&str]) -> Vec<String> {
    let mut all = vec!["list", "--json"];
    all.extend_from_slice(args);
    let mut ids: Vec<String> = t
        .wf(&all)
        .code(0)
        .json()
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|i| i["id"].as_str().unwrap_or_default().to_string())
        .collect();
    ids.sort();
    ids
}

fn sorted(ids: &[&str]) -> Vec<String> {
    let mut ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
    ids.sort();
    ids
}

/// A release (a random id, 32 digits) whose child for `us` fails after the
/// one for `eu` completed, and a root of the child's workflow run on its
/// own: (release, eu child, us child, solo).
fn a_family(t: &Test) -> (String, String, String, String) {
    t.write(
        "release.yaml",
        &parent("with: { region: \"${{ item }}\" }").replace("max_parallel: 2", "max_parallel: 1"),
    );
    let ran = t.wf(&["run", "release.yaml", "--json"]);
    ran.code(1);
    let release = ran.json()["id"].as_str().unwrap_or_default().to_string();
    assert_eq!(release.len(), 32, "{}", ran.stdout);
    let children = t.inspect(&release)["children"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let id = |i: usize| children[i]["id"].as_str().unwrap_or_default().to_string();
    assert_eq!(children.len(), 2, "{children:?}");
    assert_eq!(
        (&children[0]["status"], &children[1]["status"]),
        (&"completed".into(), &"failed".into())
    );
    t.wf(&[
        "run",
        "children/deploy.yaml",
        "--id",
        "solo",
        "--input",
        "region=ap",
    ])
    .code(0);
    (release, id(0), id(1), "solo".into())
}

/// `deploy` fails for region `us`.
const FAILS_FOR_US: &str = "name: deploy-region
inputs:
  region: { required: true }
steps:
  - id: deploy
    run: test ${{ inputs.region }} != us
";

#[test]
fn list_shows_each_instances_parent() {
    let t = with_child(FAILS_FOR_US);
    let (release, eu, us, solo) = a_family(&t);
    let text = t.wf(&["list"]).code(0).stdout.clone();
    let mut lines = text.lines();
    assert_eq!(
        lines
            .next()
            .map(|l| l.split_whitespace().collect::<Vec<_>>()),
        Some(vec![
            "ID", "WORKFLOW", "STATUS", "CREATED", "DURATION", "UPDATED", "PARENT"
        ]),
        "{text}"
    );
    // The last word of an instance's line.
    let last = |id: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(&id[..id.len().min(12)]))
            .and_then(|l| l.split_whitespace().last())
            .unwrap_or_else(|| panic!("no line for {id}:\n{text}"))
            .to_string()
    };
    // A child ends with its parent's short id; a root with its UPDATED time.
    for child in [&eu, &us] {
        assert_eq!(last(child), release[..12], "{text}");
    }
    for root in [&release, &solo] {
        assert_eq!(last(root), "ago", "{text}");
    }
    let json = t.wf(&["list", "--json"]).code(0).json();
    let parents: Vec<(String, Value)> = json
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|i| {
            (
                i["id"].as_str().unwrap_or_default().to_string(),
                i["parent"].clone(),
            )
        })
        .collect();
    let mut parents = parents;
    parents.sort_by(|a, b| a.0.cmp(&b.0));
    let mut want = vec![
        (release.clone(), Value::Null),
        (eu.clone(), Value::from(release.as_str())),
        (us.clone(), Value::from(release.as_str())),
        (solo.clone(), Value::Null),
    ];
    want.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(parents, want);
    // On a terminal of 80 columns the table fits, PARENT included; with
    // ISO times too (UPDATED is left out).
    for args in [&["list"][..], &["--time-format", "iso", "list"]] {
        let shown = t.on_terminal(80, args);
        shown.code(0);
        for l in shown.stdout.lines() {
            assert!(
                l.chars().count() <= 80,
                "{args:?}: wider than 80:\n{}",
                shown.stdout
            );
        }
        assert!(
            shown.stdout.contains("PARENT"),
            "{args:?}:\n{}",
            shown.stdout
        );
        assert_eq!(
            shown.stdout.matches(&release[..12]).count(),
            3,
            "{args:?}: the release's row and its children's:\n{}",
            shown.stdout
        );
    }
}

#[test]
fn list_filters_by_parent_and_roots() {
    let t = with_child(FAILS_FOR_US);
    let (release, eu, us, solo) = a_family(&t);
    let prefix = &release[..6];
    assert_eq!(listed(&t, &["--parent", prefix]), sorted(&[&eu, &us]));
    assert_eq!(listed(&t, &["--parent", &release]), sorted(&[&eu, &us]));
    assert_eq!(listed(&t, &["--parent", "solo"]), sorted(&[]));
    assert_eq!(listed(&t, &["--roots"]), sorted(&[&release, &solo]));
    // With the other filters.
    assert_eq!(
        listed(&t, &["--parent", prefix, "--status", "failed"]),
        sorted(&[&us])
    );
    assert_eq!(
        listed(&t, &["--parent", prefix, "--status", "completed"]),
        sorted(&[&eu])
    );
    assert_eq!(
        listed(&t, &["--roots", "--status", "failed"]),
        sorted(&[&release])
    );
    assert_eq!(
        listed(&t, &["--roots", "--workflow", "deploy-region"]),
        sorted(&[&solo])
    );
    assert_eq!(
        listed(
            &t,
            &[
                "--parent",
                prefix,
                "--since",
                "1h",
                "--workflow",
                "deploy-region"
            ]
        ),
        sorted(&[&eu, &us])
    );
    // The count of the rest is of the filtered instances.
    let ran = t.wf(&["list", "--parent", prefix, "--limit", "1"]);
    ran.code(0);
    assert_eq!(
        ran.stdout.lines().count(),
        2,
        "a header and a row:\n{}",
        ran.stdout
    );
    assert!(ran.stderr.contains("… and 1 more;"), "{}", ran.stderr);
    let ran = t.wf(&["list", "--roots", "--limit", "1", "--json"]);
    ran.code(0);
    assert_eq!(ran.json().as_array().map_or(0, Vec::len), 1);
    assert!(ran.stderr.contains("… and 1 more;"), "{}", ran.stderr);
    // Only direct children: a grandchild is its own parent's.
    chain(&t, 3);
    t.wf(&["run", "f0.yaml", "--id", "root"]).code(0);
    let f1 = ids_of(&t, "f1");
    let f2 = ids_of(&t, "f2");
    assert_eq!(listed(&t, &["--parent", "root"]), f1);
    assert_eq!(listed(&t, &["--parent", &f1[0]]), f2);
    assert_eq!(listed(&t, &["--roots"]), sorted(&[&release, &solo, "root"]));
}

#[test]
fn list_parent_must_name_one_instance_and_not_come_with_roots() {
    let t = with_child(FAILS_FOR_US);
    let (release, ..) = a_family(&t);
    // An unknown id: what every command says of one.
    let ran = t.wf(&["list", "--parent", "nosuch"]);
    ran.code(2);
    assert_eq!(ran.stderr, "error: no instance matches `nosuch`\n");
    assert_eq!(ran.stderr, t.wf(&["inspect", "nosuch"]).code(2).stderr);
    assert_eq!(ran.stdout, "");
    let ran = t.wf(&["list", "--parent", &release[..8], "--roots"]);
    ran.code(2);
    assert!(ran.stderr.contains("cannot be used with"), "{}", ran.stderr);
    assert_eq!(ran.stdout, "");
}

/// A child that waits for `go`, then says which host ran its work.
const WAITING_KID: &str = "name: kid
defaults: { retry: { max_attempts: 5, interval: 10ms } }
steps:
  - id: go
    wait_for_event: { name: go }
  - id: work
    run: echo \"$WF_INSTANCE_ID work\" >> side.log; sleep 0.3; hostname
outputs: { host: \"${{ steps.work.output.stdout }}\" }
";

#[test]
fn workers_on_other_hosts_run_the_children_and_wake_their_parents_through_a_kill_and_a_stall() {
    use crate::durable::{eventually, lines};
    use crate::pg::{can_unshare, pg_test, stop_workers, worker_on_host};
    let Some(t) = pg_test() else { return };
    let t = t.env("WF_LEASE_TTL", "2s");
    let uts = can_unshare();
    t.write("kid.yaml", WAITING_KID);
    let path = t.write(
        "fleet.yaml",
        "name: fleet\nsteps:\n  - id: fan\n    workflow: ./kid.yaml\n    for_each: [0, 1, 2]\n    \
         max_parallel: 3\n  - id: after\n    run: echo \"${{ join(steps.fan.output.*.host, ',') }}\"\n",
    );
    // The parents run here, until their children wait for `go`.
    let parents: Vec<String> = (1..=6).map(|i| format!("p{i}")).collect();
    for id in &parents {
        t.wf(&[
            "run",
            path.to_str().unwrap(),
            "--id",
            id,
            "--inline-wait",
            "100ms",
        ])
        .code(3);
    }
    let kids: Vec<String> = instances(&t)
        .iter()
        .filter(|i| i["workflow"] == "kid")
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kids.len(), 18);
    for kid in &kids {
        t.wf(&["signal", kid, "go"]).code(0);
    }
    // Workers on three other hosts take the children (now due) and, as
    // each child's end makes its parent due, the parents. One dies and one
    // stalls once the children are at work; the third finishes everything.
    let mut b = worker_on_host(&t, "wf-host-b", uts);
    let c = worker_on_host(&t, "wf-host-c", uts);
    let d = worker_on_host(&t, "wf-host-d", uts);
    eventually("some children at work", || lines(&t, "side.log").len() >= 4);
    b.kill9();
    c.signal("STOP");
    eventually("every instance to complete", || {
        let all = instances(&t);
        all.len() == 24 && all.iter().all(|i| i["status"] == "completed")
    });
    drop(b);
    stop_workers(&t, c, d);

    let log = lines(&t, "side.log");
    for id in &parents {
        let v = t.inspect(id);
        let children = v["children"].as_array().expect("children");
        assert_eq!(children.len(), 3, "{id}: one child per item: {children:#?}");
        let hosts = Test::step(&v, "after")["output"]["stdout"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert_eq!(hosts.split(',').count(), 3, "{id}: {hosts}");
        if uts {
            // Run here, finished on the workers' hosts.
            assert!(
                hosts
                    .split(',')
                    .all(|h| ["wf-host-b", "wf-host-c", "wf-host-d"].contains(&h)),
                "{id}: {hosts}"
            );
        }
        for n in 0..3 {
            let item = Test::step(&v, &format!("fan[{n}]"));
            assert_eq!(
                item["attempt_list"].as_array().unwrap().len(),
                1,
                "{id}: {item:#}"
            );
        }
        for c in children {
            let kid = c["id"].as_str().unwrap();
            let k = t.inspect(kid);
            let attempts = Test::step(&k, "work")["attempt_list"]
                .as_array()
                .unwrap()
                .len();
            let ran = log.iter().filter(|l| **l == format!("{kid} work")).count();
            assert!(
                ran >= 1 && ran <= attempts,
                "{kid}: {ran} side effects for {attempts} recorded attempts"
            );
        }
    }
}

#[test]
fn instance_parent_is_the_parents_id_in_a_child_and_null_at_the_top() {
    let t = Test::new();
    t.write(
        "child.yaml",
        "name: child
steps:
  - id: who
    run: echo \"parent=${{ instance.parent }}\"
    set_state: { parent: \"${{ instance.parent }}\" }
outputs: { parent: \"${{ instance.parent }}\", missing: \"${{ instance.parent == null }}\" }
",
    );
    let (id, ran) = t.run_yaml(
        "top.yaml",
        "name: top
steps:
  - id: call
    workflow: ./child.yaml
  - id: mine
    run: echo \"parent=${{ instance.parent }}\"
outputs: { child: \"${{ steps.call.output }}\", parent: \"${{ instance.parent }}\" }
",
        &[],
    );
    ran.code(0);
    let child_id = ids_of(&t, "child").pop().expect("a child");
    let child = t.wf(&["result", &child_id, "--json"]).code(0).json();
    assert_eq!(child["outputs"]["parent"], id.as_str(), "{child}");
    assert_eq!(child["outputs"]["missing"], false, "{child}");
    assert_eq!(t.inspect(&child_id)["state"]["parent"], id.as_str());
    let logs = t.wf(&["logs", &child_id, "who"]).code(0).stdout.clone();
    assert_eq!(logs.trim(), format!("parent={id}"));
    let top = t.wf(&["result", &id, "--json"]).code(0).json();
    assert_eq!(top["outputs"]["parent"], Value::Null, "{top}");
    assert_eq!(top["outputs"]["child"]["parent"], id.as_str(), "{top}");
    assert_eq!(
        t.wf(&["logs", &id, "mine"]).code(0).stdout.trim(),
        "parent="
    );
}

/// A completed child is undone with its parent (issue 53, item 10): when
/// the parent's saga compensates, a `workflow:` step without a
/// `compensate:` of its own runs its child's compensations, newest first
/// (the grandchild's among them, in their place), and the child ends
/// `canceled`; one with its own `compensate:` runs that instead.
#[test]
fn a_completed_child_runs_its_compensations_when_its_parents_saga_compensates() {
    let t = Test::new();
    t.write(
        "grandchild.yaml",
        "name: grandchild\nsteps:\n  - id: g\n    run: echo do-g >> log\n    \
         compensate: { run: echo undo-g >> log }\n",
    );
    t.write(
        "child.yaml",
        "name: child\nsteps:\n  - id: a\n    run: echo do-a >> log\n    \
         compensate: { run: echo undo-a >> log }\n  - id: nest\n    workflow: ./grandchild.yaml\n  \
         - id: b\n    run: echo do-b >> log\n    compensate: { run: echo undo-b >> log }\n",
    );
    t.write(
        "own.yaml",
        "name: own\nsteps:\n  - id: o\n    run: echo do-o >> log\n    \
         compensate: { run: echo undo-o-by-itself >> log }\n",
    );
    let (id, ran) = t.run_yaml(
        "saga.yaml",
        "name: saga\nsteps:\n  - id: first\n    run: echo do-first >> log\n    \
         compensate: { run: echo undo-first >> log }\n  - id: call\n    workflow: ./child.yaml\n  \
         - id: other\n    workflow: ./own.yaml\n    compensate: { run: echo undo-other-by-parent >> log }\n  \
         - id: boom\n    retry: { max_attempts: 1 }\n    run: exit 1\n",
        &[],
    );
    ran.code(1);
    assert_eq!(
        t.read("log"),
        "do-first\ndo-a\ndo-g\ndo-b\ndo-o\n\
         undo-other-by-parent\nundo-b\nundo-g\nundo-a\nundo-first\n",
        "newest first, the children's in their step's place"
    );
    let parent = t.inspect(&id);
    assert_eq!(parent["status"], "failed");
    let comp = Test::step(&parent, "call:compensate");
    assert_eq!(comp["status"], "completed", "{parent}");
    let child_id = ids_of(&t, "child").pop().expect("the child");
    let child = t.inspect(&child_id);
    assert_eq!(child["status"], "canceled", "{child}");
    for key in ["a:compensate", "b:compensate", "nest:compensate"] {
        assert_eq!(
            Test::step(&child, key)["status"],
            "completed",
            "{key}: {child}"
        );
    }
    let grandchild_id = ids_of(&t, "grandchild").pop().expect("the grandchild");
    assert_eq!(t.inspect(&grandchild_id)["status"], "canceled");
    // The child with a parent-side `compensate:` was left as it was.
    let own_id = ids_of(&t, "own").pop().expect("own");
    assert_eq!(t.inspect(&own_id)["status"], "completed");
    // The inspector shows the child's compensation too (both interfaces).
    let shown = t.wf(&["inspect", &child_id]).code(0).stdout.clone();
    assert!(
        shown.contains("a:compensate") && shown.contains("canceled"),
        "{shown}"
    );
}

/// The parent killed while its child runs its compensations: `wf resume`
/// of the parent runs the child on (its compensation's attempt crashed,
/// and is retried), and both end as if nothing happened.
#[test]
fn a_child_compensating_when_its_parent_is_killed_is_finished_by_resume() {
    let t = Test::new();
    t.write(
        "child.yaml",
        "name: child\nsteps:\n  - id: a\n    run: echo do-a >> log\n    \
         compensate:\n      run: |\n        echo undo-a >> log\n        \
         while [ ! -e go ]; do sleep 0.02; done\n",
    );
    let saga = t.write(
        "saga.yaml",
        "name: saga\nsteps:\n  - id: call\n    workflow: ./child.yaml\n  \
         - id: boom\n    retry: { max_attempts: 1 }\n    run: exit 1\n",
    );
    let mut parent =
        crate::durable::spawn(&t, &["run", saga.to_str().unwrap(), "--id", "killed-saga"]);
    crate::durable::eventually("the child's compensation to run", || {
        t.read("log").contains("undo-a")
    });
    parent.kill9();
    crate::durable::eventually("the parent to be gone", || parent.exited());
    t.write("go", "");
    t.wf(&["resume", "killed-saga"]).code(1);
    assert_eq!(
        t.read("log"),
        "do-a\nundo-a\nundo-a\n",
        "undone again after the crash"
    );
    let v = t.inspect("killed-saga");
    assert_eq!(v["status"], "failed");
    assert_eq!(
        Test::step(&v, "call:compensate")["status"],
        "completed",
        "{v}"
    );
    let child = ids_of(&t, "child").pop().expect("the child");
    let c = t.inspect(&child);
    assert_eq!(c["status"], "canceled", "{c}");
    let attempts = Test::step(&c, "a:compensate")["attempt_list"].clone();
    let outcomes: Vec<&str> = attempts
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["crashed", "ok"], "{c}");
}
