//! The file as a whole: its name, empty or unparseable files, wrong types, missing files; nothing runs or is written before an error; every example validates; typos get the nearest name; every error in one pass.

use super::*;

#[test]
fn invalid_workflow_name() {
    let msg = rejected(
        "\
name: Order Flow
steps:
  - id: a
    run: \"true\"
",
        1,
        7,
    );
    assert_mentions(&msg, &["Order Flow"]);
}

#[test]
fn missing_workflow_name() {
    let msg = rejected(
        "\
steps:
  - id: a
    run: \"true\"
",
        1,
        1,
    );
    assert_mentions(&msg, &["name"]);
}

#[test]
fn empty_file() {
    let msg = rejected("", 1, 1);
    assert_mentions(&msg, &["empty"]);
}

#[test]
fn blank_file_with_only_a_comment() {
    let msg = rejected("# nothing here\n\n", 1, 1);
    assert_mentions(&msg, &["empty"]);
}

#[test]
fn yaml_syntax_error() {
    // The quoted scalar opened at column 10 never closes.
    let msg = rejected(
        "\
name: demo
steps:
  - id: a
    run: \"true
",
        4,
        10,
    );
    assert_mentions(&msg, &["quote"]);
}

#[test]
fn wrong_type_for_steps() {
    let msg = rejected(
        "\
name: demo
steps: 5
",
        2,
        8,
    );
    assert_mentions(&msg, &["sequence"]);
}

#[test]
fn non_utf8_file() {
    let t = Test::new();
    // Line 4, after `    run: echo ` (14 characters), comes an invalid byte.
    std::fs::write(
        t.path().join("bad.yaml"),
        b"name: demo\nsteps:\n  - id: a\n    run: echo \xff\xfe\n",
    )
    .expect("write");
    let msg = rejected_file(&t, "bad.yaml", 4, 15);
    assert_mentions(&msg, &["UTF-8"]);
}

#[test]
fn missing_file() {
    let t = Test::new();
    for args in [
        &["validate", "missing.yaml"][..],
        &["run", "missing.yaml"],
        &["run", "missing.yaml", "--json"],
    ] {
        let ran = t.wf(args);
        ran.code(2);
        assert_eq!(ran.stdout, "", "{args:?} printed on stdout");
        assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
        assert!(
            ran.stderr.starts_with("error: missing.yaml:"),
            "the error does not name the file: {}",
            ran.stderr
        );
        assert!(
            ran.stderr.contains("no such file") || ran.stderr.contains("not found"),
            "the error does not say the file is missing: {}",
            ran.stderr
        );
    }
    assert_no_database(&t);
}

#[test]
fn max_parallel_without_for_each() {
    let msg = rejected(
        "\
name: demo
steps:
  - id: a
    run: \"true\"
    max_parallel: 2
",
        5,
        19,
    );
    assert_mentions(&msg, &["max_parallel", "for_each"]);
}

#[test]
fn nothing_runs_before_a_later_error_is_found() {
    // The first step is fine and would leave a file behind; the error is in
    // the last one, so nothing may run at all.
    let t = Test::new();
    t.write(
        "bad.yaml",
        "\
name: demo
steps:
  - id: first
    run: touch ran.txt
  - id: last
    run: \"true\"
    timeout: forever
",
    );
    let msg = rejected_file(&t, "bad.yaml", 7, 14);
    assert_mentions(&msg, &["forever"]);
    assert!(
        !t.path().join("ran.txt").exists(),
        "a step ran although the workflow is invalid"
    );
}

#[test]
fn bad_run_leaves_an_existing_database_unchanged() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "good.yaml",
        "\
name: good
steps:
  - id: a
    run: echo hi
",
        &[],
    );
    ran.code(0);
    let list_before = t.wf(&["list", "--json"]).code(0).json();
    let inspect_before = t.inspect(&id);
    assert_eq!(list_before.as_array().map(Vec::len), Some(1));

    t.write(
        "bad.yaml",
        "\
name: bad
steps:
  - id: a
    run: touch ran.txt
  - id: a
    run: \"true\"
",
    );
    for args in [
        &["run", "bad.yaml"][..],
        &["run", "bad.yaml", "--json"],
        &["run", "bad.yaml", "--id", "fresh"],
    ] {
        let ran = t.wf(args);
        one_line_error(&ran, "bad.yaml:5:9: ");
    }
    assert!(!t.path().join("ran.txt").exists(), "a step ran");
    assert_eq!(t.wf(&["list", "--json"]).code(0).json(), list_before);
    assert_eq!(t.inspect(&id), inspect_before);
    t.wf(&["inspect", "fresh"]).code(2);
}

#[test]
fn every_example_workflow_validates_silently() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("workflows");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("workflows/ dir")
        .filter_map(std::result::Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no example workflows in {}",
        dir.display()
    );
    let t = Test::new();
    for file in &files {
        let ran = t.wf(&["validate", file.to_str().expect("utf-8 path")]);
        assert_eq!(
            (ran.code, ran.stdout.as_str(), ran.stderr.as_str()),
            (0, "", ""),
            "{} is not silently valid",
            file.display()
        );
    }
    assert_no_database(&t);
}

#[test]
fn spec_example_validates() {
    // The annotated example of docs/workflow-file.md (steps reference scripts that do not
    // exist, which validation does not care about).
    let t = Test::new();
    t.write(
        "order.yaml",
        r#"name: order-flow
description: charge and ship
inputs:
  order_id: { required: true }
  amount: { default: 100 }
secrets: [API_TOKEN]
env: { API: "http://127.0.0.1:8080" }
state: { charged: false }
defaults: { timeout: 5m, retry: { max_attempts: 3 } }
concurrency: 8
timeout: 1h
steps:
  - id: reserve
    run: ./reserve.sh
    dir: scripts
    env: { ORDER: "${{ inputs.order_id }}" }
  - id: charge-card
    needs: [reserve]
    http:
      method: POST
      url: "${{ env.API }}/charge"
      headers: { Authorization: "Bearer ${{ secrets.API_TOKEN }}" }
      json: { order: "${{ inputs.order_id }}" }
      expect_status: [200, 201]
      idempotency_key: true
    timeout: 10s
    retry: { max_attempts: 5, backoff: exponential, interval: 1s, multiplier: 2, max_interval: 1m,
             non_retryable: [user.card_declined, http.402] }
    errors: { 3: card_declined }
    set_state: { charged: true, charge_id: "${{ output.json.id }}" }
    compensate: { run: ./refund.sh }
  - id: cool-down
    sleep: 1h
  - id: approval
    wait_for_event: { name: approved, timeout: 24h }
  - id: ship
    if: "${{ state.charged && steps.approval.output.json.ok }}"
    for_each: "${{ steps.reserve.output.json.items }}"
    max_parallel: 4
    run: ["./ship.sh", "${{ item.sku }}"]
    continue_on_error: false
"#,
    );
    let ran = t.wf(&["validate", "order.yaml"]);
    assert_eq!(
        (ran.code, ran.stdout.as_str(), ran.stderr.as_str()),
        (0, "", "")
    );
}

#[test]
fn typos_get_the_nearest_name_and_needs_takes_one_id() {
    let t = Test::new();
    let bad = |yaml: &str| {
        let path = t.write("typo.yaml", yaml);
        let ran = t.wf(&["validate", path.to_str().unwrap()]);
        ran.code(2);
        ran.stderr
    };
    let step = |key: &str| {
        format!("name: x\nsteps:\n  - id: a\n    run: echo\n  - id: b\n    {key}\n    run: echo\n")
    };
    assert!(bad(&step("need: [a]")).contains("unknown key `need`; did you mean `needs`?"));
    assert!(
        bad(&step("continue-on-error: true"))
            .contains("unknown key `continue-on-error`; did you mean `continue_on_error`?")
    );
    // Nothing near: the known keys are listed.
    assert!(bad(&step("zzzzzzzz: 1")).contains("(known keys: id, "));
    // `needs: a` is `needs: [a]`.
    let path = t.write("one.yaml", &step("needs: a"));
    t.wf(&["validate", path.to_str().unwrap()]).code(0);
    assert!(bad(&step("needs: c")).contains("typo.yaml:6:12: step `b` needs `c`"));
    // Subcommands and flags too.
    let ran = t.wf(&["rn", "x"]);
    ran.code(2);
    assert!(ran.stderr.contains("did you mean `run`?"), "{}", ran.stderr);
    let ran = t.wf(&["list", "--jsn"]);
    ran.code(2);
    assert!(
        ran.stderr.contains("did you mean `--json`?"),
        "{}",
        ran.stderr
    );
}

/// An unquoted expression inside a flow mapping breaks the YAML with a bare
/// `did not find expected ','`: the message says to quote the value.
#[test]
fn an_unquoted_expression_in_a_flow_mapping_says_to_quote_it() {
    let message = rejected(
        "name: demo\nsteps:\n  - id: a\n    run: \"true\"\n    compensate: { run: echo \"x ${{ inputs.dir }}\" }\n",
        5,
        33,
    );
    assert_mentions(
        &message,
        &["did not find expected ','", "quote", "expression"],
    );
}

/// Step ids are ASCII: the message says so, not just "letters".
#[test]
fn a_non_ascii_step_id_asks_for_ascii_letters() {
    let message = rejected(
        "name: demo\nsteps:\n  - id: café\n    run: \"true\"\n",
        3,
        9,
    );
    assert_mentions(&message, &["`café`", "ASCII letters, digits, `-` and `_`"]);
}

/// `wf validate` reports every error it finds in one pass, a line each
/// with its `file:line:col`, in file order (exit 2); `wf run` keeps to one
/// line, saying how many more there are, and writes nothing.
#[test]
fn validate_reports_every_error_in_one_pass() {
    let t = Test::new();
    t.write(
        "bad.yaml",
        "name: Bad Name\nsteps:\n  - id: a\n    timeout: 5 parsecs\n    run: \"true\"\n  - id: a\n    run: \"true\"\n  - id: c\n    needs: [nope]\n    run: \"true\"\n",
    );
    let ran = t.wf(&["validate", "bad.yaml"]);
    ran.code(2);
    let lines: Vec<&str> = ran.stderr.lines().collect();
    assert_eq!(lines.len(), 4, "{}", ran.stderr);
    for (line, (at, words)) in lines.iter().zip([
        ("bad.yaml:1:7: ", &["`Bad Name`"][..]),
        ("bad.yaml:4:14: ", &["`5 parsecs`"][..]),
        ("bad.yaml:6:9: ", &["duplicate step id `a`"][..]),
        ("bad.yaml:9:13: ", &["`nope`"][..]),
    ]) {
        let message = line
            .strip_prefix(&format!("error: {at}"))
            .unwrap_or_else(|| panic!("not at {at}: {line}"));
        assert_mentions(message, words);
    }
    let json = t.wf(&["validate", "bad.yaml", "--json"]);
    json.code(2);
    let v = json.json();
    assert_eq!(v["errors"].as_array().map(Vec::len), Some(4), "{v:#}");
    assert_eq!(v["error"], v["errors"][0]);
    let run = t.wf(&["run", "bad.yaml"]);
    let message = one_line_error(&run, "bad.yaml:1:7: ");
    assert_mentions(
        &message,
        &["`Bad Name`", "and 3 more errors", "wf validate"],
    );
    assert_no_database(&t);
}
