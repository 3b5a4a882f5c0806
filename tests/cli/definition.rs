//! docs/workflow-file.md rules and `wf validate`: every way a workflow file can be wrong is
//! found before anything runs. Each bad file gets exit 2, exactly one stderr
//! line `error: FILE:LINE:COL: message` pointing at the offending spot, and
//! nothing is written: `wf run` does not even create the database. Valid files
//! (every example in `workflows/`) validate silently.
//!
//! Its tests by topic, beside the ones here: `files.rs` (in `definition/`).

mod files;

use crate::{Ran, Test};

/// Checks `ran` is exit 2 with a single stderr line `error: <location>…` and
/// returns the message after the location.
#[track_caller]
fn one_line_error(ran: &Ran, location: &str) -> String {
    ran.code(2);
    assert!(
        ran.stderr.ends_with('\n') && ran.stderr.lines().count() == 1,
        "expected exactly one stderr line, got:\n{}",
        ran.stderr
    );
    let prefix = format!("error: {location}");
    let message = ran
        .stderr
        .trim_end_matches('\n')
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("stderr does not start with `{prefix}`:\n{}", ran.stderr));
    assert!(
        !message.trim().is_empty(),
        "empty message after the location: {}",
        ran.stderr
    );
    message.to_string()
}

/// No `wf.db` (nor its WAL or shm file) in the test dir.
#[track_caller]
fn assert_no_database(t: &Test) {
    let written: Vec<String> = std::fs::read_dir(t.path())
        .expect("read test dir")
        .filter_map(std::result::Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("wf.db"))
        .collect();
    assert!(
        written.is_empty() && !t.database_written(),
        "a rejected workflow wrote the database: {written:?}"
    );
}

/// `file` (relative to the test dir) is rejected the same way by `wf validate`
/// and `wf run`: exit 2, one line `error: FILE:LINE:COL: …`, nothing on stdout,
/// no database. Returns the message after the location.
#[track_caller]
fn rejected_file(t: &Test, file: &str, line: u32, col: u32) -> String {
    let location = format!("{file}:{line}:{col}: ");
    let validate = t.wf(&["validate", file]);
    let message = one_line_error(&validate, &location);
    assert_eq!(validate.stdout, "", "wf validate printed on stdout");

    let run = t.wf(&["run", file]);
    one_line_error(&run, &location);
    assert_eq!(
        run.stderr, validate.stderr,
        "wf run and wf validate report different errors"
    );
    assert_eq!(run.stdout, "", "wf run printed on stdout");

    let json = t.wf(&["run", file, "--json"]);
    one_line_error(&json, &location);
    assert_eq!(json.stdout, "", "wf run --json printed on stdout");

    assert_no_database(t);
    message
}

/// Writes `yaml` as `bad.yaml` in a fresh test dir and checks it is rejected
/// at `line:col`; returns the message.
#[track_caller]
fn rejected(yaml: &str, line: u32, col: u32) -> String {
    let t = Test::new();
    t.write("bad.yaml", yaml);
    rejected_file(&t, "bad.yaml", line, col)
}

/// The whole stderr line for `yaml`, for snapshots (the path is relative, so
/// no temp dir leaks into it).
#[track_caller]
fn error_line(yaml: &str) -> String {
    let t = Test::new();
    t.write("bad.yaml", yaml);
    let ran = t.wf(&["validate", "bad.yaml"]);
    ran.code(2);
    ran.stderr.trim_end().to_string()
}

#[track_caller]
fn assert_mentions(message: &str, words: &[&str]) {
    for w in words {
        assert!(
            message.contains(w),
            "message does not mention {w:?}: {message}"
        );
    }
}

const UNKNOWN_TOP_KEY: &str = "\
name: demo
stepz: []
steps:
  - id: a
    run: \"true\"
";

#[test]
fn unknown_top_level_key() {
    let msg = rejected(UNKNOWN_TOP_KEY, 2, 1);
    assert_mentions(&msg, &["stepz"]);
    insta::assert_snapshot!(error_line(UNKNOWN_TOP_KEY));
}

#[test]
fn unknown_step_key() {
    let msg = rejected(
        "\
name: demo
steps:
  - id: a
    run: \"true\"
    retries: 3
",
        5,
        5,
    );
    assert_mentions(&msg, &["retries"]);
}

#[test]
fn unknown_key_in_a_nested_mapping() {
    let msg = rejected(
        "\
name: demo
steps:
  - id: a
    run: \"true\"
    retry:
      max_attempts: 2
      tries: 3
",
        7,
        7,
    );
    assert_mentions(&msg, &["tries"]);
}

const DUPLICATE_IDS: &str = "\
name: demo
steps:
  - id: fetch
    run: \"true\"
  - id: fetch
    run: \"true\"
";

#[test]
fn duplicate_yaml_key() {
    let msg = rejected(
        "\
name: demo
steps:
  - id: a
    run: \"true\"
    run: \"false\"
",
        5,
        5,
    );
    assert_mentions(&msg, &["duplicate", "run"]);
    assert!(
        !msg.contains("Options"),
        "the message gives advice meant for the YAML library's caller: {msg}"
    );
}

#[test]
fn duplicate_step_ids() {
    let msg = rejected(DUPLICATE_IDS, 5, 9);
    assert_mentions(&msg, &["duplicate", "fetch"]);
    insta::assert_snapshot!(error_line(DUPLICATE_IDS));
}

#[test]
fn needs_naming_no_step() {
    let msg = rejected(
        "\
name: demo
steps:
  - id: a
    run: \"true\"
  - id: b
    needs: [a, nope]
    run: \"true\"
",
        6,
        16,
    );
    assert_mentions(&msg, &["nope"]);
}

#[test]
fn step_needing_itself() {
    let msg = rejected(
        "\
name: demo
steps:
  - id: lonely
    needs: [lonely]
    run: \"true\"
",
        4,
        13,
    );
    assert_mentions(&msg, &["lonely"]);
    assert!(
        msg.contains("itself") || msg.contains("cycle"),
        "message does not say the step depends on itself: {msg}"
    );
}

const TWO_STEP_CYCLE: &str = "\
name: demo
steps:
  - id: ping
    needs: [pong]
    run: \"true\"
  - id: pong
    needs: [ping]
    run: \"true\"
";

#[test]
fn two_step_cycle() {
    let msg = rejected(TWO_STEP_CYCLE, 3, 5);
    assert_mentions(&msg, &["cycle", "ping", "pong"]);
    insta::assert_snapshot!(error_line(TWO_STEP_CYCLE));
}

#[test]
fn three_step_cycle_behind_a_valid_step() {
    let msg = rejected(
        "\
name: demo
steps:
  - id: start
    run: \"true\"
  - id: alpha
    needs: [start, gamma]
    run: \"true\"
  - id: beta
    needs: [alpha]
    run: \"true\"
  - id: gamma
    needs: [beta]
    run: \"true\"
",
        5,
        5,
    );
    assert_mentions(&msg, &["cycle", "alpha", "beta", "gamma"]);
    assert!(
        !msg.contains("start"),
        "`start` is not on the cycle but the message names it: {msg}"
    );
}

const BAD_TIMEOUT: &str = "\
name: demo
steps:
  - id: a
    run: \"true\"
    timeout: 5x
";

#[test]
fn bad_step_timeout_duration() {
    let msg = rejected(BAD_TIMEOUT, 5, 14);
    assert_mentions(&msg, &["5x"]);
    insta::assert_snapshot!(error_line(BAD_TIMEOUT));
}

#[test]
fn bad_workflow_timeout_duration() {
    let msg = rejected(
        "\
name: demo
timeout: 1hour
steps:
  - id: a
    run: \"true\"
",
        2,
        10,
    );
    assert_mentions(&msg, &["1hour"]);
}

#[test]
fn bad_retry_interval() {
    let msg = rejected(
        "\
name: demo
steps:
  - id: a
    run: \"true\"
    retry: { max_attempts: 2, interval: soon }
",
        5,
        41,
    );
    assert_mentions(&msg, &["soon"]);
}

const BAD_SYNTAX: &str = "\
name: demo
inputs:
  x: { default: 1 }
steps:
  - id: a
    run: echo \"${{ inputs.x && }}\"
";

#[test]
fn bad_retry_interval_is_located_even_when_its_text_appears_earlier() {
    // `1` also starts `10s`; the error must point at the bad value.
    let msg = rejected(
        "\
name: demo
steps:
  - id: a
    run: \"true\"
    retry: { max_interval: 10s, interval: 1 }
",
        5,
        43,
    );
    assert_mentions(&msg, &["`1`"]);
}

#[test]
fn bad_expression_syntax() {
    // Points at the `&&` whose right operand is missing, as GitHub does.
    let msg = rejected(BAD_SYNTAX, 6, 29);
    assert_mentions(&msg, &["&&"]);
    insta::assert_snapshot!(error_line(BAD_SYNTAX));
}

#[test]
fn bad_expression_in_if() {
    let msg = rejected(
        "\
name: demo
steps:
  - id: a
    run: \"true\"
  - id: b
    if: \"${{ steps.a.status == }}\"
    run: \"true\"
",
        6,
        // The quoted scalar's text starts at column 10; the error is at `==`.
        29,
    );
    assert_mentions(&msg, &["=="]);
}

#[test]
fn expression_naming_an_unknown_step() {
    let msg = rejected(
        "\
name: demo
steps:
  - id: a
    run: echo \"${{ steps.ghost.output.stdout }}\"
",
        4,
        20,
    );
    assert_mentions(&msg, &["ghost"]);
}

#[test]
fn expression_naming_a_step_that_does_not_run_before() {
    // `b` runs in parallel with `a` (needs: []): its result is not there yet.
    let msg = rejected(
        "\
name: demo
steps:
  - id: a
    run: echo one
  - id: b
    needs: []
    run: echo \"${{ steps.a.output.stdout }}\"
",
        7,
        20,
    );
    assert_mentions(&msg, &["step `b`", "steps.a", "needs"]);
    // A later step, read by an earlier one.
    let msg = rejected(
        "\
name: demo
steps:
  - id: a
    if: \"${{ steps.c.output.stdout == 'x' }}\"
    run: echo one
  - id: c
    run: echo two
",
        4,
        14,
    );
    assert_mentions(&msg, &["step `a`", "steps.c"]);
    // Its own result, outside its compensation.
    let msg = rejected(
        "\
name: demo
steps:
  - id: a
    run: echo one
    set_state: { x: \"${{ steps.a.output.stdout }}\" }
",
        5,
        26,
    );
    assert_mentions(&msg, &["own result", "output"]);
}

#[test]
fn references_through_needs_chains_and_from_compensations_are_fine() {
    let t = Test::new();
    let path = t.write(
        "ok.yaml",
        "\
name: ok
steps:
  - id: a
    run: echo one
  - id: side
    needs: []
    run: echo side
  - id: b
    needs: [a]
    run: echo two
  - id: c
    needs: [b, side]
    run: echo \"${{ steps.a.output.stdout }} ${{ steps.side.output.stdout }}\"
    compensate: { run: \"echo undo ${{ steps.c.output.stdout }} ${{ steps.a.output.stdout }}\" }
outputs:
  any: \"${{ steps.side.output.stdout }}\"
",
    );
    let ran = t.wf(&["validate", path.to_str().unwrap()]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
}

#[test]
fn the_error_points_at_the_bad_reference_in_a_multi_line_script() {
    let msg = rejected(
        "\
name: demo
steps:
  - id: a
    run: |
      echo one
      echo two
      echo \"${{ steps.ghost.output }}\"
",
        7,
        17,
    );
    assert_mentions(&msg, &["ghost"]);
}

#[test]
fn the_error_points_at_the_bad_one_of_two_expressions() {
    let msg = rejected(
        "\
name: demo
inputs:
  x: {}
steps:
  - id: a
    run: echo \"${{ inputs.x }}\" \"${{ inputs.y }}\"
",
        6,
        38,
    );
    assert_mentions(&msg, &["inputs.y"]);
}

#[test]
fn expression_with_an_unknown_root() {
    let msg = rejected(
        "\
name: demo
steps:
  - id: a
    run: echo \"${{ bogus.thing }}\"
",
        4,
        20,
    );
    assert_mentions(&msg, &["bogus"]);
}

#[test]
fn expression_naming_an_undeclared_input() {
    let msg = rejected(
        "\
name: demo
inputs:
  who: { default: world }
steps:
  - id: a
    run: echo \"${{ inputs.whom }}\"
",
        6,
        20,
    );
    assert_mentions(&msg, &["whom"]);
}

#[test]
fn undeclared_input_when_there_is_no_inputs_section() {
    let msg = rejected(
        "\
name: demo
env: { WHO: \"${{ inputs.who }}\" }
steps:
  - id: a
    run: echo hi
",
        2,
        // `inputs.who` inside the quoted env value.
        18,
    );
    assert_mentions(&msg, &["who"]);
}

const UNLISTED_SECRET: &str = "\
name: demo
secrets: [API_TOKEN]
steps:
  - id: a
    run: echo \"${{ secrets.OTHER_TOKEN }}\"
";

#[test]
fn expression_naming_a_secret_not_listed() {
    let msg = rejected(UNLISTED_SECRET, 5, 20);
    assert_mentions(&msg, &["OTHER_TOKEN"]);
    insta::assert_snapshot!(error_line(UNLISTED_SECRET));
}

#[test]
fn output_outside_set_state() {
    let msg = rejected(
        "\
name: demo
steps:
  - id: a
    run: echo \"${{ output.stdout }}\"
",
        4,
        20,
    );
    assert_mentions(&msg, &["output", "set_state"]);
}

#[test]
fn output_inside_set_state_is_fine() {
    let t = Test::new();
    t.write(
        "ok.yaml",
        "\
name: demo
steps:
  - id: a
    run: echo hi
    set_state: { said: \"${{ output.stdout }}\" }
",
    );
    let ran = t.wf(&["validate", "ok.yaml"]);
    ran.code(0);
    assert_eq!((ran.stdout.as_str(), ran.stderr.as_str()), ("", ""));
}

#[test]
fn two_actions_in_one_step() {
    let msg = rejected(
        "\
name: demo
steps:
  - id: a
    run: \"true\"
    sleep: 1s
",
        3,
        5,
    );
    assert_mentions(&msg, &["run", "sleep"]);
}
