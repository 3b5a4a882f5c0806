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
            "ID", "WORKFLOW", "STATUS", "CREATED", "UPDATED", "PARENT"
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
