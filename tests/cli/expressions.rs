//! Expressions mean what they mean in GitHub Actions (docs/expressions.md), through the
//! real binary: conditions copied from GitHub workflows decide as they do
//! there, values reach steps as GitHub renders them, and `wf validate` warns
//! where a workflow written for the older rules may now mean something
//! else. (GitHub's own conformance data runs in `tests/expressions`.)

use crate::Test;

#[test]
fn conditions_copied_from_github_decide_as_there() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "deploy.yaml",
        r#"
name: deploy
inputs:
  env: { default: production }
  count: { default: "3" }
steps:
  - id: scan
    run: echo '{"ok":true}'
  # Case-insensitive: true for `production`.
  - id: prod
    needs: [scan]
    if: inputs.env == 'Production'
    run: echo prod >> ran.log
  # A missing number compares as null, 0: false, not an error.
  - id: findings
    needs: [scan]
    if: steps.scan.output.json.findings > 0
    run: echo findings >> ran.log
  # '3' == 3 coerces; NaN is falsy.
  - id: coerced
    needs: [scan]
    if: ${{ inputs.count == 3 && !NaN }}
    run: echo coerced >> ran.log
  - id: picked
    needs: [prod, findings, coerced]
    env:
      WHERE: ${{ case(inputs.env == 'staging', 's', inputs.ENV == 'PRODUCTION', 'p', 'none') }}
      PATH_TEXT: ${{ 'C:\temp\new' }}
      LIST: ${{ fromJSON('[1,2]') }}
      NUM: ${{ format('{0}', 1.2e2) }}
    run: printf '%s|%s|%s|%s' "$WHERE" "$PATH_TEXT" "$LIST" "$NUM" > picked.txt
"#,
        &[],
    );
    ran.code(0);
    let log = t.read("ran.log");
    let mut ran_steps: Vec<&str> = log.lines().collect();
    ran_steps.sort_unstable();
    assert_eq!(ran_steps, ["coerced", "prod"]);
    assert_eq!(t.read("picked.txt"), "p|C:\\temp\\new|Array|120");
    let v = t.inspect(&id);
    assert_eq!(Test::step(&v, "findings")["status"], "skipped", "{v:#}");
}

#[test]
fn validate_warns_where_the_older_rules_meant_something_else() {
    let t = Test::new();
    let path = t.write(
        "old.yaml",
        r#"name: old
inputs:
  env: { default: production }
steps:
  - id: a
    run: echo '{"k":1}'
  - id: b
    needs: [a]
    if: inputs.env == 'Production'
    run: echo ${{ steps.a.output.json }} ${{ 'C:\temp' }}
"#,
    );
    let ran = t.wf(&["validate", path.to_str().unwrap()]);
    ran.code(0);
    let warnings: Vec<&str> = ran.stderr.lines().collect();
    assert_eq!(warnings.len(), 3, "{}", ran.stderr);
    assert!(
        warnings[0].starts_with("warning: ")
            && warnings[0].contains("old.yaml:9:")
            && warnings[0].contains("`==` compares strings ignoring case now"),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains("renders as `Object` or `Array` now"),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr
            .contains("backslashes in strings are literal now"),
        "{}",
        ran.stderr
    );
    let json = t.wf(&["validate", path.to_str().unwrap(), "--json"]).json();
    assert_eq!(json["valid"], true);
    assert_eq!(json["warnings"].as_array().map(Vec::len), Some(3));

    // Double quotes are not strings (as in GitHub): refused, with a hint.
    let bad = t.write(
        "quotes.yaml",
        "name: q\nsteps:\n  - id: a\n    if: inputs.x == \"y\"\n    run: 'true'\n",
    );
    let ran = t.wf(&["validate", bad.to_str().unwrap()]);
    ran.code(2);
    assert!(
        ran.stderr
            .contains("Unexpected symbol: '\"y\"' (strings are in single quotes"),
        "{}",
        ran.stderr
    );
}

#[test]
fn names_are_looked_up_ignoring_case_and_may_not_differ_only_in_case() {
    let t = Test::new();
    let (_, ran) = t.run_yaml(
        "names.yaml",
        r#"
name: names
inputs:
  Who: { default: ann }
steps:
  - id: Build
    run: echo '{"Version":"1.2"}'
  - id: show
    needs: [Build]
    run: printf '%s %s' "${{ STEPS.build.OUTPUT.json.version }}" "${{ inputs.who }}" > shown.txt
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(t.read("shown.txt"), "1.2 ann");

    let path = t.write(
        "twice.yaml",
        "name: twice\nsteps:\n  - id: build\n    run: 'true'\n  - id: Build\n    run: 'true'\n",
    );
    let ran = t.wf(&["validate", path.to_str().unwrap()]);
    ran.code(2);
    assert!(
        ran.stderr
            .contains("step id `Build` differs from `build` only in case"),
        "{}",
        ran.stderr
    );
}
