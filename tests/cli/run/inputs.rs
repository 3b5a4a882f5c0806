//! Inputs (flags, files, defaults, types), the run's summary, an existing id, the workflow from stdin, and wf run's checks.

use super::*;

#[test]
fn inputs_from_flags_with_defaults() {
    let t = Test::new();
    let (id, ran) = t.run_yaml("wf.yaml", INPUTS_WF, &["--input", "order_id=A-1 x=y"]);
    ran.code(0);
    assert_eq!(t.read("inputs.txt"), "A-1 x=y|100|none\n");
    let i = t.inspect(&id);
    assert_eq!(i["inputs"]["order_id"], "A-1 x=y");
    assert_eq!(i["inputs"]["amount"], 100);
    assert_eq!(i["inputs"]["note"], "none");
}

#[test]
fn repeated_input_flags_override_defaults() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        INPUTS_WF,
        &[
            "--input",
            "order_id=7",
            "--input",
            "amount=250",
            "--input",
            "note=rush",
        ],
    );
    ran.code(0);
    assert_eq!(t.read("inputs.txt"), "7|250|rush\n");
    // A number-typed default makes `--input amount=250` a number.
    assert_eq!(t.inspect(&id)["inputs"]["amount"], 250);
}

#[test]
fn inputs_from_a_json_file() {
    let t = Test::new();
    let file = t.write(
        "in.json",
        r#"{"order_id": "J-9", "amount": 12.5, "note": "from file"}"#,
    );
    let (id, ran) = t.run_yaml("wf.yaml", INPUTS_WF, &["--inputs", file.to_str().unwrap()]);
    ran.code(0);
    assert_eq!(t.read("inputs.txt"), "J-9|12.5|from file\n");
    assert_eq!(
        t.inspect(&id)["inputs"],
        json!({"order_id": "J-9", "amount": 12.5, "note": "from file"})
    );
}

#[test]
fn input_flag_wins_over_inputs_file() {
    let t = Test::new();
    let file = t.write("in.json", r#"{"order_id": "file", "note": "file"}"#);
    let (_, ran) = t.run_yaml(
        "wf.yaml",
        INPUTS_WF,
        &[
            "--inputs",
            file.to_str().unwrap(),
            "--input",
            "order_id=flag",
        ],
    );
    ran.code(0);
    assert_eq!(t.read("inputs.txt"), "flag|100|file\n");
}

#[test]
fn missing_required_input_is_exit_2_and_writes_nothing() {
    let t = Test::new();
    let (_, ran) = t.run_yaml("wf.yaml", INPUTS_WF, &["--input", "amount=5"]);
    ran.code(2);
    assert!(
        ran.stderr.contains("order_id"),
        "error does not name the input: {}",
        ran.stderr
    );
    assert!(!t.database_written(), "the database was written");
    assert_eq!(t.read("inputs.txt"), "");
}

#[test]
fn unknown_input_is_exit_2_and_writes_nothing() {
    let t = Test::new();
    let (_, ran) = t.run_yaml(
        "wf.yaml",
        INPUTS_WF,
        &["--input", "order_id=1", "--input", "bogus=1"],
    );
    ran.code(2);
    assert!(
        ran.stderr.contains("bogus"),
        "error does not name the input: {}",
        ran.stderr
    );
    assert!(!t.database_written(), "the database was written");
    assert_eq!(t.read("inputs.txt"), "");
}

#[test]
fn malformed_input_flag_and_bad_inputs_file_are_exit_2() {
    let t = Test::new();
    let (_, ran) = t.run_yaml("wf.yaml", INPUTS_WF, &["--input", "no-equals-sign"]);
    ran.code(2);
    let bad = t.write("bad.json", "[1, 2]");
    let (_, ran) = t.run_yaml("wf.yaml", INPUTS_WF, &["--inputs", bad.to_str().unwrap()]);
    ran.code(2);
    let (_, ran) = t.run_yaml("wf.yaml", INPUTS_WF, &["--inputs", "missing.json"]);
    ran.code(2);
    assert!(!t.database_written(), "the database was written");
}

#[test]
fn a_wrongly_typed_input_is_exit_2() {
    let t = Test::new();
    let (_, ran) = t.run_yaml(
        "wf.yaml",
        INPUTS_WF,
        &["--input", "order_id=1", "--input", "amount=lots"],
    );
    ran.code(2);
    assert!(!t.database_written(), "the database was written");
}

#[test]
fn a_run_ends_with_a_summary_and_shows_each_retry_wait() {
    let t = Test::new();
    let (_, ran) = t.run_yaml(
        "summary.yaml",
        r#"
name: summary
steps:
  - id: flaky
    retry: { max_attempts: 3, interval: 100ms, backoff: fixed }
    run: test "$WF_ATTEMPT" = 2 || exit 1
  - id: skipped
    if: false
    run: echo never
  - id: last
    run: echo done
"#,
        &[],
    );
    ran.code(0);
    assert!(
        ran.stderr
            .contains("flaky: retrying in 100ms (attempt 2/3)"),
        "{}",
        ran.stderr
    );
    let summary = ran
        .stderr
        .lines()
        .find(|l| l.starts_with("run took "))
        .unwrap_or_else(|| panic!("no summary line:\n{}", ran.stderr));
    assert!(
        summary.ends_with(": 2 step(s) ok, 0 failed, 0 canceled, 1 skipped, 0 not run"),
        "{summary}"
    );
}

/// The summary line of a run's stderr.
fn summary_line(stderr: &str) -> &str {
    stderr
        .lines()
        .find(|l| l.starts_with("run took "))
        .unwrap_or_else(|| panic!("no summary line:\n{stderr}"))
}

#[test]
fn the_summary_counts_a_canceled_step_apart_from_failed_ones() {
    let t = Test::new();
    // The workflow's timeout ends the sleeping step `canceled`; none failed.
    let (id, ran) = t.run_yaml(
        "cut.yaml",
        "name: cut\ntimeout: 1s\nsteps:\n  - id: first\n    run: 'true'\n  \
         - id: nap\n    needs: [first]\n    sleep: 1h\n  \
         - id: after\n    needs: [nap]\n    run: 'true'\n",
        &[],
    );
    ran.code(1);
    assert_eq!(Test::step(&t.inspect(&id), "nap")["status"], "canceled");
    let summary = summary_line(&ran.stderr);
    assert!(
        summary.ends_with(": 1 step(s) ok, 0 failed, 1 canceled, 0 skipped, 1 not run"),
        "{summary}"
    );
}

/// `wf run --id ID` of an instance that exists (docs/commands.md): with the same
/// definition and inputs nothing runs again and it says what became of the
/// instance, with the exit code of its status; anything else is refused.
#[test]
fn run_with_an_existing_id_is_a_no_op_for_the_same_definition_and_inputs() {
    let t = Test::new();
    let yaml = "name: once\ninputs:\n  who: { default: ana }\nsteps:\n  - id: a\n    run: echo ${{ inputs.who }} >> side.log\n  - id: b\n    run: exit 3\n";
    let path = t.write("once.yaml", yaml);
    let file = path.to_str().expect("utf-8");
    t.wf(&["run", file, "--id", "x"]).code(1);
    // Again: the same definition and inputs. Nothing runs; it failed.
    let again = t.wf(&["run", file, "--id", "x"]);
    again.code(1);
    assert!(
        again.stdout.contains("instance x exists already") && again.stdout.contains("failed"),
        "{}",
        again.stdout
    );
    let json = t.wf(&["run", file, "--id", "x", "--json"]);
    json.code(1);
    assert_eq!(
        json.json(),
        json!({ "id": "x", "status": "failed", "exit_code": 1 })
    );
    assert_eq!(t.read("side.log"), "ana\n", "nothing ran again");
    assert_eq!(t.inspect("x")["runs"].as_array().map(Vec::len), Some(1));
    // Other inputs, or another definition: refused, nothing written.
    let other = t.wf(&["run", file, "--id", "x", "--input", "who=bo"]);
    other.code(2);
    assert!(other.stderr.contains("already exists"), "{}", other.stderr);
    t.write("once.yaml", &yaml.replace("exit 3", "exit 0"));
    t.wf(&["run", file, "--id", "x"]).code(2);
    assert_eq!(t.read("side.log"), "ana\n");
    // A completed one says so, exit 0.
    t.wf(&["run", file, "--id", "y"]).code(0);
    let done = t.wf(&["run", file, "--id", "y"]);
    done.code(0);
    assert!(done.stdout.contains("completed"), "{}", done.stdout);
    assert_eq!(t.read("side.log"), "ana\nana\n");
}

/// docs/commands.md: `wf run -` reads the workflow from stdin. Its relative `dir:`
/// and commands resolve against the current directory (there is no file
/// folder), the instance records `<stdin>` as its workflow path, and a
/// definition error names `<stdin>` with the line and column.
#[test]
fn run_dash_reads_the_workflow_from_stdin() {
    use std::io::Write as _;
    use std::process::Stdio;
    let t = Test::new();
    t.write(
        "tools/hello.sh",
        "#!/bin/sh\necho \"hello from $(basename \"$PWD\")\"\n",
    );
    let from_stdin = |yaml: &str| {
        let mut child = t
            .cmd()
            .args(["run", "-", "--json"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run wf");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(yaml.as_bytes()).expect("write stdin");
        drop(stdin);
        crate::Ran::from(child.wait_with_output().expect("wait for wf"))
    };
    let ran = from_stdin(
        r#"name: piped
steps:
  - id: here
    run: ./tools/hello.sh
  - id: there
    dir: tools
    run: ./hello.sh
"#,
    );
    ran.code(0);
    let id = ran.json()["id"].as_str().expect("an id").to_string();
    let logs = t.wf(&["logs", &id]);
    let dir = t
        .path()
        .file_name()
        .and_then(|n| n.to_str())
        .expect("a name");
    assert!(
        logs.stdout.contains(&format!("hello from {dir}\n"))
            && logs.stdout.contains("hello from tools\n"),
        "{}",
        logs.stdout
    );
    let base = std::fs::canonicalize(t.path()).expect("canonical test dir");
    let recorded = t.sql(&format!(
        "SELECT workflow_path, base_dir FROM instances WHERE id = '{id}'"
    ));
    let (path, base_dir) = recorded.split_once('|').expect("two columns");
    assert_eq!(path, "<stdin>");
    assert_eq!(
        std::fs::canonicalize(base_dir).expect("base dir exists"),
        base
    );
    // A mistake is named at `<stdin>:line:col`, and nothing is written.
    let bad = from_stdin("name: piped\nsteps:\n  - id: x\n    rnu: echo\n");
    bad.code(2);
    assert!(
        bad.stderr.starts_with("error: <stdin>:4:5: ") && bad.stderr.contains("`rnu`"),
        "{}",
        bad.stderr
    );
}

#[test]
fn every_check_of_wf_run_comes_before_the_database_is_made() {
    // On PostgreSQL: the schema is not made either.
    let t = Test::new();
    t.write(
        "hello.yaml",
        "name: hello\nsteps:\n  - id: a\n    run: 'true'\n",
    );
    t.write(
        "queued.yaml",
        "name: queued
inputs:
  k: { default: a }
  p: { default: 5 }
queue: { key: \"${{ inputs.k }}\", priority: \"${{ inputs.p }}\", concurrency: 1 }
steps:
  - id: a
    run: 'true'
",
    );
    let long_key = "k".repeat(300);
    let long_key_input = format!("k={long_key}");
    for (args, says) in [
        (
            vec!["run", "hello.yaml", "--id", "bad id!"],
            "invalid instance id",
        ),
        (
            vec!["run", "hello.yaml", "--id", ".."],
            "invalid instance id `..`",
        ),
        (
            vec!["run", "hello.yaml", "--id", "."],
            "invalid instance id `.`",
        ),
        (
            vec!["run", "hello.yaml", "--id", "a/b"],
            "invalid instance id",
        ),
        (
            vec!["run", "hello.yaml", "--detach", "--id", ".."],
            "invalid instance id `..`",
        ),
        (vec!["run", "hello.yaml", "--input", "nope=1"], "nope"),
        (vec!["run", "hello.yaml", "--label", "bad label=x"], "label"),
        (vec!["run", "queued.yaml", "--input", "k="], "queue.key"),
        (
            vec!["run", "queued.yaml", "--input", &long_key_input],
            "queue.key",
        ),
        (
            vec!["run", "queued.yaml", "--input", "p=12"],
            "queue.priority",
        ),
        (
            vec!["run", "queued.yaml", "--detach", "--input", "p=-1"],
            "queue.priority",
        ),
    ] {
        let ran = t.wf(&args);
        ran.code(2);
        assert!(
            ran.stderr.contains(says) && ran.stderr.lines().count() == 1,
            "{args:?}: {}",
            ran.stderr
        );
        assert!(!t.db.exists(), "{args:?} created the database");
        if let Some((_, schema)) = &t.pg {
            let made = t.sql(&format!(
                "SELECT count(*) FROM pg_namespace WHERE nspname = '{schema}'"
            ));
            assert_eq!(made, "0", "{args:?} created the schema");
        }
    }
    // Ids with dots that are not a folder's name are ids.
    t.wf(&["run", "hello.yaml", "--id", "..."]).code(0);
    t.wf(&["run", "hello.yaml", "--id", "v1.2"]).code(0);
}
