//! `workflow:` steps (docs/workflow-file.md, sub-workflows), as far as they
//! are built: the calling file and every file it calls are read and checked
//! before anything runs, each error named with its own file, line and
//! column, exit 2, nothing written. Running children is not built yet:
//! `wf run` and `wf schedule add` refuse such a workflow before writing
//! anything.

use crate::{Ran, Test};

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
fn running_children_is_refused_before_anything_is_written() {
    let t = with_child(CHILD);
    t.write("release.yaml", &parent("with: { region: \"${{ item }}\" }"));
    t.wf(&["validate", "release.yaml"]).code(0);
    let ran = t.wf(&["run", "release.yaml"]);
    ran.code(2);
    assert!(
        ran.stderr
            .contains("step `deploy`: `workflow:` steps (here `./children/deploy.yaml`) cannot run in this version of wf"),
        "{}",
        ran.stderr
    );
    assert!(!t.database_written(), "a refused run wrote the database");
    let ran = t.wf(&["schedule", "add", "release.yaml"]);
    ran.code(2);
    assert!(
        ran.stderr.contains("cannot run in this version of wf"),
        "{}",
        ran.stderr
    );
}
