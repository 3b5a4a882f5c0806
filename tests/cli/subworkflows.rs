//! `workflow:` steps (docs/workflow-file.md, sub-workflows), as far as they
//! are built: the calling file and every file it calls are read and checked
//! before anything runs, each error named with its own file, line and
//! column, exit 2, nothing written; children run in the parent's process,
//! one per attempt (and item), their outputs the step's output, their
//! failure the step's `child.failed`; a child that suspends suspends its
//! parent until whoever ends it; a parent killed while its child runs is
//! finished by `wf resume`, with one child; a schedule pins the children's
//! definitions with its own. Every child error of a file in one pass:
//! [`one_pass`].
//!
//! Its tests by topic, beside the ones here: `lineage.rs` (in `subworkflows/`).

mod lineage;

use crate::{Ran, Test};
use serde_json::Value;

mod one_pass;

const CHILD: &str = "name: deploy-region
inputs:
  region: { required: true }
  version: { default: latest }
steps:
  - id: deploy
    run: echo deploying ${{ inputs.version }} to ${{ inputs.region }}
outputs: { region: \"${{ inputs.region }}\" }
";

fn parent(with: &str) -> String {
    format!(
        "name: release
inputs:
  regions: {{ default: [eu, us] }}
steps:
  - id: build
    run: echo build
  - id: deploy
    workflow: ./children/deploy.yaml
    for_each: \"${{{{ inputs.regions }}}}\"
    {with}
    max_parallel: 2
    on_parent_end: terminate
"
    )
}

/// A test dir with `children/deploy.yaml` written.
fn with_child(child: &str) -> Test {
    let t = Test::new();
    std::fs::create_dir_all(t.path().join("children")).expect("mkdir children");
    t.write("children/deploy.yaml", child);
    t
}

/// Exit 2 and one stderr line starting `error: {location}`; the message.
#[track_caller]
fn one_error(ran: &Ran, location: &str) -> String {
    ran.code(2);
    assert_eq!(ran.stderr.lines().count(), 1, "one line:\n{}", ran.stderr);
    ran.stderr
        .trim_end()
        .strip_prefix(&format!("error: {location}"))
        .unwrap_or_else(|| panic!("expected `error: {location}…`, got:\n{}", ran.stderr))
        .to_string()
}

/// `wf validate` and `wf run` both reject `file` at `location` and write nothing.
#[track_caller]
fn rejected(t: &Test, file: &str, location: &str) -> String {
    let message = one_error(&t.wf(&["validate", file]), location);
    one_error(&t.wf(&["run", file]), location);
    assert!(
        !t.database_written(),
        "a rejected workflow wrote the database"
    );
    message
}

#[test]
fn a_parent_and_its_child_validate_together() {
    let t = with_child(CHILD);
    t.write(
        "release.yaml",
        &parent("with: { region: \"${{ item }}\", version: \"1.2\" }"),
    );
    let ran = t.wf(&["validate", "release.yaml", "--json"]);
    ran.code(0);
    assert_eq!(ran.json()["valid"], true);
    assert_eq!(ran.stderr, "");
}

#[test]
fn a_child_that_cannot_be_read_is_named_where_the_parent_calls_it() {
    let t = Test::new();
    t.write("release.yaml", &parent("with: { region: eu }"));
    let m = rejected(&t, "release.yaml", "release.yaml:8:15: ");
    assert_eq!(
        m,
        "step `deploy`: cannot read workflow file `./children/deploy.yaml`: no such file"
    );
}

#[test]
fn an_invalid_child_is_reported_at_its_own_line_and_column() {
    let t =
        with_child("name: deploy-region\nsteps:\n  - id: deploy\n    run: echo\n    retries: 3\n");
    t.write("release.yaml", &parent("with: {}"));
    let m = rejected(&t, "release.yaml", "children/deploy.yaml:5:5: ");
    assert!(m.contains("retries"), "{m}");
    assert!(
        m.ends_with(
            "(in `./children/deploy.yaml`, which step `deploy` calls at release.yaml:8:15)"
        ),
        "{m}"
    );
    let json = t.wf(&["validate", "release.yaml", "--json"]).json();
    assert_eq!(json["error"]["file"], "children/deploy.yaml");
    assert_eq!(json["error"]["line"], 5);
}

#[test]
fn with_must_name_the_inputs_the_child_declares() {
    let t = with_child(CHILD);
    t.write(
        "release.yaml",
        &parent("with: { region: \"${{ item }}\", colour: blue }"),
    );
    let m = rejected(&t, "release.yaml", "release.yaml:10:36: ");
    assert_eq!(
        m,
        "step `deploy`: `with.colour` is not an input of workflow `deploy-region` (it declares: region, version)"
    );
}

#[test]
fn with_must_give_every_required_input() {
    let t = with_child(CHILD);
    t.write("release.yaml", &parent("with: { version: \"2\" }"));
    let m = rejected(&t, "release.yaml", "release.yaml:8:15: ");
    assert_eq!(
        m,
        "step `deploy`: workflow `deploy-region` requires input `region`, which `with` does not give"
    );
}

#[test]
fn with_may_not_pass_secrets() {
    let t = with_child(CHILD);
    t.write(
        "release.yaml",
        &parent("with: { region: \"${{ secrets.TOKEN }}\" }")
            .replace("steps:", "secrets: [TOKEN]\nsteps:"),
    );
    let m = rejected(&t, "release.yaml", "release.yaml:11:");
    assert!(
        m.contains("`with.region` refers to `secrets.TOKEN`")
            && m.contains("declares its own `secrets:`"),
        "{m}"
    );
}

#[test]
fn a_cycle_of_files_is_a_definition_error() {
    let t = Test::new();
    t.write(
        "a.yaml",
        "name: a\nsteps:\n  - id: call-b\n    workflow: b.yaml\n",
    );
    t.write(
        "b.yaml",
        "name: b\nsteps:\n  - id: call-a\n    workflow: ./a.yaml\n",
    );
    let m = rejected(&t, "a.yaml", "b.yaml:4:15: ");
    assert!(
        m.starts_with("step `call-a`: a cycle of workflow files: a.yaml -> b.yaml -> a.yaml"),
        "{m}"
    );
    // A file that calls itself.
    t.write(
        "self.yaml",
        "name: s\nsteps:\n  - id: again\n    workflow: self.yaml\n",
    );
    let m = rejected(&t, "self.yaml", "self.yaml:4:15: ");
    assert_eq!(
        m,
        "step `again`: a cycle of workflow files: self.yaml -> self.yaml"
    );
}

#[test]
fn the_step_keys_are_checked_where_they_stand() {
    let t = with_child(CHILD);
    t.write(
        "bad-end.yaml",
        &parent("with: { region: eu }").replace("terminate", "linger"),
    );
    let m = rejected(&t, "bad-end.yaml", "bad-end.yaml:12:20: ");
    assert_eq!(
        m,
        "step `deploy`: `on_parent_end` is `linger`; expected cancel, terminate or abandon"
    );
    t.write(
        "stray-with.yaml",
        "name: x\nsteps:\n  - id: a\n    run: 'true'\n    with: { a: 1 }\n",
    );
    let m = rejected(&t, "stray-with.yaml", "stray-with.yaml:5:11: ");
    assert_eq!(
        m,
        "step `a`: `with` only applies to `workflow` steps (the child's inputs)"
    );
    t.write(
        "two.yaml",
        "name: x\nsteps:\n  - id: a\n    run: 'true'\n    workflow: children/deploy.yaml\n",
    );
    let m = rejected(&t, "two.yaml", "two.yaml:3:5: ");
    assert!(m.contains("more than one action (run, workflow)"), "{m}");
}

#[test]
fn a_scheduled_workflow_runs_the_children_pinned_when_it_was_added() {
    let t = with_child(CHILD);
    t.write(
        "release.yaml",
        "name: release\non:\n  schedule:\n    - every: 1s\nsteps:\n  - id: deploy\n    \
         workflow: ./children/deploy.yaml\n    with: { region: eu }\n",
    );
    t.wf(&["schedule", "add", "release.yaml"]).code(0);
    // The child's file changes after the schedule was added: the fires run
    // the definition pinned then.
    t.write(
        "children/deploy.yaml",
        "name: deploy-region\ninputs:\n  region: {}\nsteps:\n  - id: deploy\n    run: exit 9\n",
    );
    crate::schedules::until_due(&t);
    t.wf(&["worker", "--once"]).code(0);
    let all = instances(&t);
    assert_eq!(all.len(), 2, "the fired instance and its child: {all:#?}");
    assert!(all.iter().all(|i| i["status"] == "completed"), "{all:#?}");
    let child = ids_of(&t, "deploy-region");
    let i = t.wf(&["inspect", &child[0], "--json"]).code(0).json();
    assert_eq!(
        Test::step(&i, "deploy")["output"]["stdout"],
        "deploying latest to eu"
    );
}

/// The instances of `t`, as `wf list --json` shows them.
fn instances(t: &Test) -> Vec<Value> {
    t.wf(&["list", "--json", "--limit", "1000"])
        .code(0)
        .json()
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The ids of the instances of workflow `name`.
fn ids_of(t: &Test, name: &str) -> Vec<String> {
    instances(t)
        .iter()
        .filter(|i| i["workflow"] == name)
        .map(|i| i["id"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn children_run_in_the_parents_process_and_their_outputs_are_the_steps_output() {
    let t = with_child(CHILD);
    t.write(
        "release.yaml",
        &format!(
            "{}  - id: after\n    run: echo '${{{{ toJSON(steps.deploy.output) }}}}'\n",
            parent("with: { region: \"${{ item }}\", version: \"1.2\" }")
        )
        .replace("[eu, us]", "[eu, us, ap]"),
    );
    let ran = t.wf(&["run", "release.yaml", "--id", "rel", "--json"]);
    ran.code(0);
    assert_eq!(ran.json()["status"], "completed");
    let children = ids_of(&t, "deploy-region");
    assert_eq!(children.len(), 3, "one child per item: {children:?}");
    let inspect = t.inspect("rel");
    let deploy = Test::step(&inspect, "deploy");
    assert_eq!(deploy["status"], "completed");
    let out: Value = serde_json::from_str(
        t.wf(&["logs", "rel", "after"])
            .code(0)
            .stdout
            .clone()
            .trim(),
    )
    .expect("the output as JSON");
    let regions: Vec<&str> = out
        .as_array()
        .expect("a list")
        .iter()
        .map(|o| o["region"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(regions, ["eu", "us", "ap"], "in item order");
    // Each child ran its own step, with the inputs it was given.
    for child in &children {
        let logs = t.wf(&["logs", child, "deploy"]).code(0).stdout.clone();
        assert!(logs.starts_with("deploying 1.2 to "), "{logs}");
    }
    // The parent lists its children by step; each child names its parent.
    let listed = inspect["children"].as_array().cloned().unwrap_or_default();
    let steps: Vec<&str> = listed
        .iter()
        .map(|c| c["step"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(steps, ["deploy[0]", "deploy[1]", "deploy[2]"]);
    assert!(
        listed
            .iter()
            .all(|c| c["status"] == "completed" && c["attempt"] == 1)
    );
    let first = listed[0]["id"].as_str().unwrap_or_default();
    let child = t.inspect(first);
    assert_eq!(
        child["parent"],
        serde_json::json!({ "id": "rel", "step": "deploy[0]", "attempt": 1 })
    );
    assert!(inspect.get("parent").is_none(), "a root has no parent");
    let text = t.wf(&["inspect", "rel"]).code(0).stdout.clone();
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == [
                    &first[..12],
                    "deploy[0]",
                    "deploy-region",
                    "completed",
                    l.split_whitespace().last().unwrap_or("")
                ]),
        "{text}"
    );
    let text = t.wf(&["inspect", first]).code(0).stdout.clone();
    assert!(
        text.contains("Parent:       rel (step `deploy[0]`, attempt 1)"),
        "{text}"
    );
}

#[test]
fn a_failed_child_fails_its_step_with_the_childs_error() {
    let t = with_child(
        "name: deploy-region\ninputs: { region: { required: true } }\nsteps:\n  - id: deploy\n    run: echo refused >&2; exit 3\n",
    );
    t.write(
        "release.yaml",
        "name: release\nsteps:\n  - id: deploy\n    workflow: children/deploy.yaml\n    with: { region: eu }\n",
    );
    let ran = t.wf(&["run", "release.yaml", "--id", "rel"]);
    ran.code(1);
    let inspect = t.inspect("rel");
    let step = Test::step(&inspect, "deploy");
    assert_eq!(step["status"], "failed");
    assert_eq!(step["error_type"], "child.failed");
    let message = step["error_message"].as_str().unwrap_or_default();
    let child = &ids_of(&t, "deploy-region")[0];
    assert!(
        message.starts_with(&format!(
            "child {child} failed: step `deploy` failed (exit.3"
        )) && message.contains("refused"),
        "{message}"
    );
}

#[test]
fn a_child_that_waits_suspends_its_parent_until_whoever_ends_it() {
    let t = with_child(
        "name: deploy-region\nsteps:\n  - id: gate\n    wait_for_event: { name: go }\noutputs: { v: \"${{ steps.gate.output.json.v }}\" }\n",
    );
    t.write(
        "release.yaml",
        "name: release\nsteps:\n  - id: deploy\n    workflow: children/deploy.yaml\n  - id: show\n    run: echo \"got ${{ steps.deploy.output.v }}\"\n",
    );
    let ran = t.wf(&["run", "release.yaml", "--id", "rel"]);
    ran.code(3);
    let child = ids_of(&t, "deploy-region").remove(0);
    assert!(
        ran.stdout.contains(&format!(
            "instance rel waiting for child instance {child}; continue it with `wf resume {}`",
            &child[..12]
        )),
        "{}",
        ran.stdout
    );
    let waiting = |id: &str| {
        instances(&t)
            .iter()
            .find(|i| i["id"] == id)
            .map(|i| i["status"].clone())
    };
    assert_eq!(waiting("rel"), Some("waiting".into()));
    assert_eq!(waiting(&child), Some("waiting".into()));
    // The child is an instance like any other: signaled and resumed on its own.
    t.wf(&["signal", &child, "go", "--data", "{\"v\": 7}"])
        .code(0);
    t.wf(&["resume", &child]).code(0);
    // Its end made the parent due: one worker sweep finishes it.
    t.wf(&["worker", "--once"]).code(0);
    assert_eq!(waiting("rel"), Some("completed".into()));
    assert_eq!(
        t.wf(&["logs", "rel", "show"]).code(0).stdout.clone(),
        "got 7\n"
    );
}

#[test]
fn a_parent_killed_while_its_child_runs_is_finished_by_resume_with_one_child() {
    let t = with_child(
        "name: deploy-region\nsteps:\n  - id: deploy\n    run: echo ran >> ../side.txt; while [ ! -e ../go ]; do sleep 0.01; done\n",
    );
    t.write(
        "release.yaml",
        "name: release\nsteps:\n  - id: deploy\n    workflow: children/deploy.yaml\n  - id: after\n    run: echo after\n",
    );
    let mut bg = crate::durable::spawn(&t, &["run", "release.yaml", "--id", "rel"]);
    let side = t.path().join("side.txt");
    crate::durable::eventually("the child's step to start", || side.exists());
    bg.kill9();
    let _ = bg.exited();
    std::fs::write(t.path().join("go"), "").expect("go");
    let ran = t.wf(&["resume", "rel"]);
    ran.code(0);
    let children = ids_of(&t, "deploy-region");
    assert_eq!(children.len(), 1, "exactly one child: {children:?}");
    let child = t.inspect(&children[0]);
    let attempts = Test::step(&child, "deploy")["attempts"]
        .as_i64()
        .unwrap_or(0);
    let ran_lines = std::fs::read_to_string(&side)
        .expect("side")
        .lines()
        .count();
    assert_eq!(
        ran_lines as i64, attempts,
        "the child's step ran once per recorded attempt"
    );
    assert_eq!(attempts, 2, "the killed attempt crashed and ran again");
    assert_eq!(
        Test::step(&t.inspect("rel"), "after")["status"],
        "completed"
    );
    assert_eq!(
        Test::step(&t.inspect("rel"), "deploy")["attempts"],
        1,
        "one attempt: the child's"
    );
}

/// A child run in its parent's process hands its end to the parent's
/// run, whose next commit records it with the end of the step. A child
/// taken over meanwhile (here by hand: its lease's epoch raised for
/// another holder, as a worker that found it expired would raise it; its
/// heartbeat's first renewal, 20 s away, would have said so) refuses that
/// whole commit: the parent's run stops, exit 5, naming the child, and
/// nothing of the end is recorded. Once that holder is gone, `wf resume`
/// finishes both, the child's step once per recorded attempt.
#[test]
fn a_child_taken_over_as_its_end_is_recorded_stops_its_parent_until_resumed() {
    let t = with_child(
        "name: deploy-region\nsteps:\n  - id: deploy\n    run: echo ran >> ../side.txt; while [ ! -e ../go ]; do sleep 0.01; done\n",
    )
    .env("WF_LEASE_TTL", "60s");
    t.write(
        "release.yaml",
        "name: release\nsteps:\n  - id: deploy\n    workflow: children/deploy.yaml\n  - id: after\n    run: echo after >> side.txt\n",
    );
    let bg = crate::durable::spawn(&t, &["run", "release.yaml", "--id", "rel"]);
    let side = t.path().join("side.txt");
    crate::durable::eventually("the child's step to start", || side.exists());
    let child = ids_of(&t, "deploy-region").remove(0);
    // Its step's process group recorded first (a commit of the child's own,
    // `RECORD_AFTER` into the attempt): the end is the commit refused.
    crate::durable::eventually("the child's process group to be recorded", || {
        t.sql(&format!(
            "SELECT count(*) FROM attempts WHERE instance_id = '{child}' AND proc_pgid IS NOT NULL"
        )) == "1"
    });
    t.sql(&format!(
        "UPDATE instances SET lease_epoch = lease_epoch + 1, lease_owner = 'intruder' WHERE id = '{child}'"
    ));
    std::fs::write(t.path().join("go"), "").expect("go");
    let ran = bg.finish();
    ran.code(5);
    assert!(
        ran.stderr.contains(&format!(
            "child instance {child} was taken over by intruder"
        )),
        "{}",
        ran.stderr
    );
    // Nothing of the child's end: its attempt is open, its parent's step
    // waits on it, and the parent's run is closed, its lease given up.
    let c = t.inspect(&child);
    assert_eq!(c["status"], "running");
    assert_eq!(Test::step(&c, "deploy")["status"], "running");
    let rel = t.inspect("rel");
    assert_eq!(Test::step(&rel, "deploy")["status"], "waiting");
    assert_eq!(status_of(&t, "rel"), "interrupted");

    // The other holder is gone: its lease expired.
    t.sql(&format!(
        "UPDATE instances SET lease_expires_ms = 1 WHERE id = '{child}'"
    ));
    t.wf(&["resume", "rel"]).code(0);
    let c = t.inspect(&child);
    assert_eq!(c["status"], "completed");
    let attempts = Test::step(&c, "deploy")["attempts"].as_i64().unwrap_or(0);
    assert_eq!(attempts, 2, "its open attempt crashed and ran again");
    let lines: Vec<String> = std::fs::read_to_string(&side)
        .expect("side")
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(lines, ["ran", "ran", "after"], "once per recorded attempt");
    let rel = t.inspect("rel");
    assert_eq!(rel["status"], "completed");
    assert_eq!(Test::step(&rel, "deploy")["attempts"], 1, "one child");
    assert_eq!(ids_of(&t, "deploy-region"), [child]);
}

/// A child that compensates its first step into `../order.txt`, says so
/// with `../prepped` once that step's result is committed (the next step
/// starts after that commit), and waits.
const WAITING_CHILD: &str = "name: deploy-region
steps:
  - id: prep
    run: echo prep
    compensate: { run: echo child-undo >> ../order.txt }
  - id: mark
    run: touch ../prepped
  - id: gate
    wait_for_event: { name: go }
";

/// A parent whose first step compensates into `order.txt`, then calls the
/// waiting child (`on_parent_end` as given), and then, unless `fail` is
/// empty, a step that fails once the child waits.
fn waiting_parent(on_parent_end: &str, fail: &str) -> String {
    format!(
        "name: release
steps:
  - id: setup
    run: echo setup
    compensate: {{ run: echo parent-undo >> order.txt }}
  - id: deploy
    workflow: children/deploy.yaml
    on_parent_end: {on_parent_end}
{fail}"
    )
}

fn status_of(t: &Test, id: &str) -> String {
    instances(t)
        .iter()
        .find(|i| i["id"] == id)
        .and_then(|i| i["status"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[test]
fn canceling_a_parent_cancels_its_children_first() {
    let t = with_child(WAITING_CHILD);
    t.write("release.yaml", &waiting_parent("cancel", ""));
    t.wf(&["run", "release.yaml", "--id", "rel"]).code(3);
    let child = ids_of(&t, "deploy-region").remove(0);
    assert_eq!(status_of(&t, &child), "waiting");
    t.wf(&["cancel", "rel"]).code(0);
    assert_eq!(status_of(&t, &child), "canceled");
    assert_eq!(status_of(&t, "rel"), "canceled");
    assert_eq!(
        t.read("order.txt"),
        "child-undo\nparent-undo\n",
        "the child's compensations before the parent's"
    );
    let step = Test::step(&t.inspect("rel"), "deploy").clone();
    assert_eq!(step["status"], "canceled");
}

#[test]
fn terminating_a_parent_terminates_its_children() {
    let t = with_child(WAITING_CHILD);
    t.write("release.yaml", &waiting_parent("cancel", ""));
    t.wf(&["run", "release.yaml", "--id", "rel"]).code(3);
    let child = ids_of(&t, "deploy-region").remove(0);
    t.wf(&["cancel", "rel", "--terminate"]).code(0);
    assert_eq!(status_of(&t, &child), "canceled");
    assert_eq!(status_of(&t, "rel"), "canceled");
    assert_eq!(t.read("order.txt"), "", "nothing compensated");
}

#[test]
fn a_parent_that_fails_cancels_its_open_children_unless_it_abandons_them() {
    // Fails once the child has something to compensate.
    let fail = "  - id: boom\n    needs: [setup]\n    run: while [ ! -e prepped ]; do sleep 0.01; done; exit 5\n";
    for (mode, child_after, order) in [
        ("cancel", "canceled", "child-undo\nparent-undo\n"),
        ("terminate", "canceled", "parent-undo\n"),
        ("abandon", "waiting", "parent-undo\n"),
    ] {
        let t = with_child(WAITING_CHILD);
        t.write("release.yaml", &waiting_parent(mode, fail));
        t.wf(&["run", "release.yaml", "--id", "rel"]).code(1);
        let child = ids_of(&t, "deploy-region").remove(0);
        assert_eq!(status_of(&t, "rel"), "failed", "{mode}");
        assert_eq!(status_of(&t, &child), child_after, "{mode}");
        assert_eq!(t.read("order.txt"), order, "{mode}");
    }
}

/// `n` files, each calling the next; the last runs a step.
fn chain(t: &Test, n: usize) {
    for i in 0..n {
        let body = if i + 1 < n {
            format!("  - id: call\n    workflow: f{}.yaml\n", i + 1)
        } else {
            "  - id: leaf\n    run: echo leaf\n".to_string()
        };
        t.write(
            &format!("f{i}.yaml"),
            &format!("name: f{i}\nsteps:\n{body}"),
        );
    }
}

#[test]
fn workflows_nest_sixteen_deep_and_no_deeper() {
    // The root and 16 levels of children below it: runs.
    let t = Test::new();
    chain(&t, 17);
    t.wf(&["run", "f0.yaml", "--id", "root"]).code(0);
    assert_eq!(instances(&t).len(), 17);
    // One more: the 16th child's step fails, and so does every parent.
    let t = Test::new();
    chain(&t, 18);
    t.wf(&["run", "f0.yaml", "--id", "root"]).code(1);
    assert_eq!(instances(&t).len(), 17, "no 17th child");
    let error = t.inspect("root")["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        error.contains("workflows nest deeper than 16 levels: `f17.yaml` is not started"),
        "{error}"
    );
}

#[test]
fn a_childs_end_cannot_be_sent_or_awaited_by_hand() {
    let t =
        with_child("name: deploy-region\nsteps:\n  - id: gate\n    wait_for_event: { name: go }\n");
    t.write(
        "release.yaml",
        "name: release\nsteps:\n  - id: deploy\n    workflow: children/deploy.yaml\n",
    );
    t.wf(&["run", "release.yaml", "--id", "rel"]).code(3);
    let child = ids_of(&t, "deploy-region").remove(0);
    let ran = t.wf(&["signal", "rel", &format!("child:{child}")]);
    ran.code(2);
    assert!(
        ran.stderr.contains("which wf delivers itself"),
        "{}",
        ran.stderr
    );
    assert_eq!(status_of(&t, &child), "waiting");
    assert_eq!(status_of(&t, "rel"), "waiting", "the parent took nothing");
    t.write(
        "steal.yaml",
        "name: steal\nsteps:\n  - id: w\n    wait_for_event: { name: \"child:x\" }\n",
    );
    let ran = t.wf(&["validate", "steal.yaml"]);
    ran.code(2);
    assert!(
        ran.stderr.contains("starts with `child:`"),
        "{}",
        ran.stderr
    );
}

#[test]
fn a_child_that_cannot_run_here_is_said_and_waited_for() {
    let t = with_child(
        "name: deploy-region\nsecrets: [WF_TEST_CHILD_TOKEN]\nsteps:\n  - id: deploy\n    run: echo deployed\n",
    );
    t.write(
        "release.yaml",
        "name: release\nsteps:\n  - id: deploy\n    workflow: children/deploy.yaml\n",
    );
    let ran = t.wf(&["run", "release.yaml", "--id", "rel"]);
    ran.code(3);
    let child = ids_of(&t, "deploy-region").remove(0);
    assert!(
        ran.stderr
            .contains(&format!("child instance {child} could not run here"))
            && ran.stderr.contains("WF_TEST_CHILD_TOKEN"),
        "{}",
        ran.stderr
    );
    assert_eq!(status_of(&t, "rel"), "waiting");
    // Where the secret is set, the child runs, and its end wakes the parent.
    let out = t
        .cmd()
        .env("WF_TEST_CHILD_TOKEN", "s3cret")
        .args(["resume", &child])
        .output()
        .expect("run wf");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    t.wf(&["worker", "--once"]).code(0);
    assert_eq!(status_of(&t, "rel"), "completed");
}

/// A hundred children ending together: every end is taken. (On PostgreSQL
/// an event can become visible after one with a higher id; a parent that
/// read events after the highest id it had seen left one behind and
/// waited for it forever.)
#[test]
fn a_hundred_children_ending_together_are_all_taken() {
    let t = with_child("name: deploy-region\nsteps:\n  - id: nap\n    run: [sleep, '0.1']\n");
    let items: Vec<String> = (0..100).map(|i| i.to_string()).collect();
    t.write(
        "release.yaml",
        &format!(
            "name: release\nconcurrency: 100\nsteps:\n  - id: deploy\n    for_each: [{}]\n    max_parallel: 100\n    workflow: children/deploy.yaml\n",
            items.join(", ")
        ),
    );
    let ran = t.wf(&["run", "release.yaml", "--id", "rel"]);
    ran.code(0);
    let inspect = t.inspect("rel");
    assert_eq!(inspect["children"].as_array().map_or(0, Vec::len), 100);
    assert_eq!(Test::step(&inspect, "deploy")["status"], "completed");
}
