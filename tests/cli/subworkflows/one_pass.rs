//! `wf validate` of a parent whose `workflow:` steps are in error in
//! different ways: every step's error in one pass, children's included,
//! each at its own file, line and column; `wf run` refuses the file with
//! the first of them, writing nothing.

use super::{CHILD, with_child};

const PARENT: &str = r#"name: release
steps:
  - id: build
    run: echo build
  - id: deploy-eu
    workflow: ./children/deploy.yaml
    with: { version: "2" }
  - id: deploy-us
    workflow: ./children/deploy.yaml
    with: { region: us, colour: blue }
  - id: notify
    workflow: ./children/missing.yaml
  - id: audit
    workflow: ./children/broken.yaml
  - id: report
    run: echo done
    timeout: forever
"#;

const BROKEN: &str = "name: broken\nsteps:\n  - id: x\n    run: echo\n    retries: 3\n";

#[test]
fn validate_reports_every_steps_child_errors_in_one_pass() {
    let t = with_child(CHILD);
    t.write("children/broken.yaml", BROKEN);
    t.write("release.yaml", PARENT);
    let ran = t.wf(&["validate", "release.yaml"]);
    ran.code(2);
    let lines: Vec<&str> = ran.stderr.lines().collect();
    let expected = [
        "error: release.yaml:6:15: step `deploy-eu`: workflow `deploy-region` requires input \
         `region`, which `with` does not give",
        "error: release.yaml:10:25: step `deploy-us`: `with.colour` is not an input of workflow \
         `deploy-region` (it declares: region, version)",
        "error: release.yaml:12:15: step `notify`: cannot read workflow file \
         `./children/missing.yaml`: no such file",
    ];
    assert_eq!(lines.len(), 5, "{}", ran.stderr);
    assert_eq!(lines[..3], expected, "{}", ran.stderr);
    assert!(
        lines[3].starts_with("error: children/broken.yaml:5:5: ")
            && lines[3].contains("retries")
            && lines[3].ends_with(
                "(in `./children/broken.yaml`, which step `audit` calls at release.yaml:14:15)"
            ),
        "{}",
        ran.stderr
    );
    assert!(
        lines[4].starts_with("error: release.yaml:17:") && lines[4].contains("forever"),
        "{}",
        ran.stderr
    );

    // The same errors as JSON, each with its place.
    let json = t.wf(&["validate", "release.yaml", "--json"]).json();
    let errors = json["errors"].as_array().expect("errors");
    let places: Vec<(Option<&str>, i64)> = errors
        .iter()
        .map(|e| (e["file"].as_str(), e["line"].as_i64().unwrap_or(0)))
        .collect();
    assert_eq!(
        places,
        [
            (None, 6),
            (None, 10),
            (None, 12),
            (Some("children/broken.yaml"), 5),
            (None, 17)
        ],
        "{json:#}"
    );

    // `wf run` refuses it as it refuses several errors of plain steps: the
    // first, and how many more there are; nothing is written.
    let run = t.wf(&["run", "release.yaml"]);
    run.code(2);
    assert_eq!(
        run.stderr.trim_end(),
        format!(
            "{} (and 4 more errors; `wf validate` lists every one)",
            expected[0]
        ),
    );
    assert!(
        !t.database_written(),
        "a rejected workflow wrote the database"
    );
}
