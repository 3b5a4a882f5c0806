//! The bad-input corpus (docs/secrets.md, issue 7): bad input of any kind gets a
//! clear one-line error (exactly one stderr line, starting `error: `), the
//! exit code of docs/commands.md (2 for usage and definition errors, 1 for database
//! errors), never a panic, and never changes what the database already holds.
//!
//! - Workflow files: every file in `tests/corpus/` (its README describes the
//!   `# expect: LINE:COL SUBSTRING` line), plus files made here (10 MB, an
//!   endless device, a directory, a missing file).
//! - Flags, instance ids and event payloads, each run against a database
//!   holding completed and waiting instances, compared before and after with
//!   `wf list --json` and `wf inspect ID --json --attempts`.
//! - Broken databases: truncated, overwritten header, garbage pages, a newer
//!   schema (compared byte for byte), a pinned definition that no longer
//!   parses, a database locked by another process, and paths that cannot hold
//!   a database.
//!
//! Failures are collected and reported together, so one run shows every case
//! that regressed.
//!
//! Its tests by topic, beside the ones here: `databases.rs` (in `corpus/`).

mod databases;

use crate::{Ran, Test};
use serde_json::Value;
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus");

/// A fine workflow: `first` leaves a line in `ran.log`, `second` sets state.
const GOOD: &str = r#"name: good
steps:
  - id: first
    run: echo first >> ran.log
  - id: second
    run: echo '{"n":1}'
    set_state: { n: "${{ output.json.n }}" }
"#;

/// Typed and required inputs.
const TYPED: &str = r#"name: typed
inputs:
  who: { required: true }
  count: { default: 1 }
  flag: { default: false }
steps:
  - id: greet
    run: echo "${{ inputs.who }}" >> ran.log
"#;

/// Waits for the event `go`.
const WAITER: &str = r#"name: waiter
steps:
  - id: approval
    wait_for_event: { name: go }
  - id: after
    run: echo after >> ran.log
"#;

/// Short, so that the locked-database cases fail fast (the default is 10 s).
const BUSY_TIMEOUT_MS: &str = "300";

// ---------------------------------------------------------------- helpers

fn ran(out: Output) -> Ran {
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

/// Checks the shape every rejection shares: exit `code`, exactly one stderr
/// line `error: …`, nothing on stdout, no panic. Returns the message after
/// `error: `, or what is wrong.
fn rejection(ran: &Ran, code: i32) -> Result<String, String> {
    let shown = || format!("\n--- stdout\n{}--- stderr\n{}", ran.stdout, ran.stderr);
    if ran.code == 101 || ran.stderr.contains("panicked") {
        return Err(format!("panicked (exit {}){}", ran.code, shown()));
    }
    if ran.code != code {
        return Err(format!("exit {} instead of {code}{}", ran.code, shown()));
    }
    if !ran.stderr.ends_with('\n') || ran.stderr.lines().count() != 1 {
        return Err(format!("not exactly one stderr line{}", shown()));
    }
    if !ran.stdout.is_empty() {
        return Err(format!("printed on stdout{}", shown()));
    }
    match ran.stderr.trim_end_matches('\n').strip_prefix("error: ") {
        Some(msg) if !msg.trim().is_empty() => Ok(msg.to_string()),
        _ => Err(format!("stderr is not `error: <message>`{}", shown())),
    }
}

/// [`rejection`], plus: the message contains `needle`.
fn rejected_with(ran: &Ran, code: i32, needle: &str) -> Result<String, String> {
    let msg = rejection(ran, code)?;
    if msg.contains(needle) {
        Ok(msg)
    } else {
        Err(format!("message does not contain {needle:?}: {msg}"))
    }
}

/// Panics listing every failure, if there are any.
#[track_caller]
fn assert_no_failures(failures: &[String], checked: usize) {
    assert!(
        failures.is_empty(),
        "{} of {checked} cases failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// What the database holds, as the commands show it, and what the steps did.
#[derive(Debug, PartialEq)]
struct Snapshot {
    list: Value,
    instances: Vec<Value>,
    ran_log: String,
}

/// A test dir whose database holds two completed instances (`done-1`,
/// `done-2`, so `done-` is ambiguous) and one waiting for the event `go`
/// (`wait-1`), plus the files the bad commands name.
struct Fixture {
    t: Test,
    before: Snapshot,
}

const IDS: [&str; 3] = ["done-1", "done-2", "wait-1"];

impl Fixture {
    fn new() -> Fixture {
        let t = Test::new().env("WF_BUSY_TIMEOUT_MS", BUSY_TIMEOUT_MS);
        write_inputs(&t);
        t.wf(&["run", "good.yaml", "--id", "done-1"]).code(0);
        t.wf(&["run", "good.yaml", "--id", "done-2"]).code(0);
        t.wf(&["run", "waiter.yaml", "--id", "wait-1"]).code(3);
        let before = snapshot(&t);
        assert_eq!(before.list.as_array().map(Vec::len), Some(3));
        assert_eq!(before.ran_log, "first\nfirst\n");
        Fixture { t, before }
    }

    /// The database (and `ran.log`) are as they were; else a failure.
    fn unchanged(&self, what: &str) -> Result<(), String> {
        let now = snapshot(&self.t);
        if now == self.before {
            Ok(())
        } else {
            Err(format!(
                "{what}: changed what was recorded\n--- before\n{:#?}\n--- after\n{now:#?}",
                self.before
            ))
        }
    }

    /// Runs `case` and checks it, and that nothing changed.
    fn check(&self, case: &Case) -> Result<(), String> {
        let ran = ran(self.t.cmd().args(&case.args).output().expect("run wf"));
        rejected_with(&ran, case.code, &case.needle).map_err(|e| format!("{}: {e}", case.what))?;
        self.unchanged(&case.what)
    }
}

/// The workflow and inputs files the cases refer to, by relative path.
fn write_inputs(t: &Test) {
    t.write("good.yaml", GOOD);
    t.write("typed.yaml", TYPED);
    t.write("waiter.yaml", WAITER);
    t.write("inputs-not-json.json", r#"{"who": "#);
    t.write("inputs-array.json", r#"["who", "x"]"#);
    std::fs::write(
        t.path().join("inputs-not-utf8.json"),
        b"{\"who\": \"\xff\"}",
    )
    .unwrap();
}

fn snapshot(t: &Test) -> Snapshot {
    let list = t.wf(&["list", "--json"]).code(0).json();
    let instances = IDS
        .iter()
        .filter(|id| {
            list.as_array()
                .is_some_and(|l| l.iter().any(|i| i["id"] == **id))
        })
        .map(|id| t.inspect(id))
        .collect();
    Snapshot {
        list,
        instances,
        ran_log: t.read("ran.log"),
    }
}

/// One bad command line: what it is, its arguments, the exit code it must
/// give and a piece of its message.
struct Case {
    what: String,
    args: Vec<OsString>,
    code: i32,
    needle: String,
}

fn case(what: &str, args: &[&str], code: i32, needle: &str) -> Case {
    Case {
        what: what.to_string(),
        args: os(args),
        code,
        needle: needle.to_string(),
    }
}

// ------------------------------------------------------- workflow files

/// Where a corpus file must be rejected and a piece of the message.
struct Expectation {
    line: u32,
    col: u32,
    needle: String,
}

/// Reads the `# expect: LINE:COL SUBSTRING` line of `file` (or of its
/// `.expect` sidecar).
fn expectation(file: &Path) -> Result<Expectation, String> {
    let sidecar = PathBuf::from(format!("{}.expect", file.display()));
    let bytes = std::fs::read(if sidecar.exists() { &sidecar } else { file })
        .map_err(|e| format!("cannot read: {e}"))?;
    let first = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    let first = std::str::from_utf8(first).map_err(|_| "first line is not UTF-8".to_string())?;
    let bad = || format!("first line is not `# expect: LINE:COL SUBSTRING`: {first:?}");
    let rest = first.strip_prefix("# expect: ").ok_or_else(bad)?;
    let (loc, needle) = rest.split_once(' ').ok_or_else(bad)?;
    let (line, col) = loc.split_once(':').ok_or_else(bad)?;
    let (line, col) = (
        line.parse().map_err(|_| bad())?,
        col.parse().map_err(|_| bad())?,
    );
    if needle.trim().is_empty() {
        return Err(bad());
    }
    Ok(Expectation {
        line,
        col,
        needle: needle.to_string(),
    })
}

/// `file` is rejected by `wf validate`, `wf run` and `wf run --json` with
/// exit 2 and the one line `error: FILE:LINE:COL: …` that `expect` records.
fn check_file(fx: &Fixture, file: &str, expect: &Expectation) -> Result<(), String> {
    let location = format!("{file}:{}:{}: ", expect.line, expect.col);
    let mut lines = Vec::new();
    for args in [
        &["validate", file][..],
        &["run", file],
        &["run", file, "--json"],
    ] {
        let ran = fx.t.wf(args);
        let msg = rejection(&ran, 2).map_err(|e| format!("{args:?}: {e}"))?;
        let msg = msg.strip_prefix(&location).ok_or_else(|| {
            format!("{args:?}: the error is not at {location:?}:\n  error: {msg}")
        })?;
        if !msg.contains(&expect.needle) {
            return Err(format!(
                "{args:?}: message does not contain {:?}: {msg}",
                expect.needle
            ));
        }
        lines.push(ran.stderr);
    }
    if lines.iter().any(|l| *l != lines[0]) {
        return Err(format!("validate and run report differently: {lines:#?}"));
    }
    fx.unchanged(file)
}

#[test]
fn every_corpus_file_is_rejected_where_its_expectation_says() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(CORPUS)
        .expect("tests/corpus")
        .filter_map(std::result::Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 30,
        "only {} files in tests/corpus",
        files.len()
    );

    let fx = Fixture::new();
    let mut failures = Vec::new();
    for file in &files {
        let name = file.to_str().expect("utf-8 path");
        let result = expectation(file).and_then(|expect| check_file(&fx, name, &expect));
        if let Err(e) = result {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert_no_failures(&failures, files.len());
}

#[test]
fn files_too_big_endless_or_not_files_are_rejected() {
    let fx = Fixture::new();
    // 10 MB: a fine workflow followed by a long comment.
    let mut big = String::from(GOOD);
    big.reserve(10 << 20);
    let line = format!("# {}\n", "x".repeat(1021));
    while big.len() < 10 << 20 {
        big.push_str(&line);
    }
    fx.t.write("big.yaml", &big);
    std::fs::create_dir(fx.t.path().join("folder.yaml")).unwrap();

    let cases = [
        ("big.yaml", "limited to"),
        // No length to check up front, and no end: the read must be bounded.
        ("/dev/zero", "limited to"),
        ("folder.yaml", "directory"),
        ("missing.yaml", "no such file"),
    ];
    let mut failures = Vec::new();
    for (file, needle) in cases {
        let expect = Expectation {
            line: 1,
            col: 1,
            needle: needle.to_string(),
        };
        if let Err(e) = check_file(&fx, file, &expect) {
            failures.push(format!("{file}: {e}"));
        }
    }
    assert_no_failures(&failures, cases.len());
}

// ------------------------------------------------ flags, ids, payloads

#[test]
fn bad_flags_are_rejected_with_one_line_and_change_nothing() {
    let fx = Fixture::new();
    let not_utf8 = |prefix: &str| {
        let mut bytes = prefix.as_bytes().to_vec();
        bytes.extend_from_slice(b"\xff\xfe");
        OsString::from_vec(bytes)
    };
    let mut cases = vec![
        // --input / --inputs
        case(
            "--input without `=`",
            &["run", "good.yaml", "--input", "novalue"],
            2,
            "KEY=VALUE",
        ),
        case(
            "--input with an empty key",
            &["run", "good.yaml", "--input", "=v"],
            2,
            "KEY=VALUE",
        ),
        case(
            "--input not declared",
            &["run", "good.yaml", "--input", "nope=1"],
            2,
            "unknown input `nope`",
        ),
        case("required input missing", &["run", "typed.yaml"], 2, "who"),
        case(
            "--input not a number",
            &[
                "run",
                "typed.yaml",
                "--input",
                "who=x",
                "--input",
                "count=many",
            ],
            2,
            "must be a number",
        ),
        case(
            "--input not a boolean",
            &[
                "run",
                "typed.yaml",
                "--input",
                "who=x",
                "--input",
                "flag=yes",
            ],
            2,
            "true or false",
        ),
        case(
            "--inputs missing",
            &["run", "typed.yaml", "--inputs", "missing.json"],
            2,
            "no such file",
        ),
        case(
            "--inputs not JSON",
            &["run", "typed.yaml", "--inputs", "inputs-not-json.json"],
            2,
            "invalid JSON",
        ),
        case(
            "--inputs not an object",
            &["run", "typed.yaml", "--inputs", "inputs-array.json"],
            2,
            "JSON object",
        ),
        case(
            "--inputs not UTF-8",
            &["run", "typed.yaml", "--inputs", "inputs-not-utf8.json"],
            2,
            "--inputs",
        ),
        case(
            "--inputs a directory",
            &["run", "typed.yaml", "--inputs", "."],
            2,
            "--inputs",
        ),
        case(
            "--inputs endless",
            &["run", "typed.yaml", "--inputs", "/dev/zero"],
            2,
            "--inputs",
        ),
        // --inline-wait
        case(
            "--inline-wait unknown unit",
            &["run", "good.yaml", "--inline-wait", "5x"],
            2,
            "5x",
        ),
        case(
            "--inline-wait empty",
            &["run", "good.yaml", "--inline-wait", ""],
            2,
            "--inline-wait",
        ),
        case(
            "--inline-wait without unit",
            &["run", "good.yaml", "--inline-wait", "5"],
            2,
            "unit",
        ),
        case(
            "--inline-wait fraction",
            &["run", "good.yaml", "--inline-wait", "1.5s"],
            2,
            "1.5s",
        ),
        case(
            "--inline-wait negative",
            &["run", "good.yaml", "--inline-wait=-1s"],
            2,
            "-1s",
        ),
        case(
            "--inline-wait absurd",
            &["run", "good.yaml", "--inline-wait", "99999999999999999999d"],
            2,
            "99999999999999999999d",
        ),
        case(
            "--inline-wait missing value",
            &["run", "good.yaml", "--inline-wait"],
            2,
            "--inline-wait",
        ),
        case(
            "resume --inline-wait",
            &["resume", "wait-1", "--inline-wait", "soon"],
            2,
            "soon",
        ),
        case(
            "worker --poll",
            &["worker", "--once", "--poll", "often"],
            2,
            "often",
        ),
        // --id
        case(
            "--id taken",
            &["run", "waiter.yaml", "--id", "done-1"],
            2,
            "already exists",
        ),
        case(
            "--id invalid",
            &["run", "good.yaml", "--id", "bad id!"],
            2,
            "bad id!",
        ),
        case(
            "--id empty",
            &["run", "good.yaml", "--id", ""],
            2,
            "instance id",
        ),
        // other flags and arguments
        case(
            "unknown flag",
            &["run", "good.yaml", "--bogus"],
            2,
            "--bogus",
        ),
        case("unknown subcommand", &["frobnicate"], 2, "frobnicate"),
        case("missing argument", &["run"], 2, "FILE"),
        case("extra argument", &["list", "extra"], 2, "extra"),
        case(
            "trace --format",
            &["trace", "done-1", "--format", "yaml"],
            2,
            "yaml",
        ),
        case("list --status", &["list", "--status", "happy"], 2, "happy"),
        case(
            "worker --concurrency 0",
            &["worker", "--once", "--concurrency", "0"],
            2,
            "concurrency",
        ),
        case(
            "worker --concurrency -1",
            &["worker", "--once", "--concurrency", "-1"],
            2,
            "-1",
        ),
        case("logs unknown step", &["logs", "done-1", "nope"], 2, "nope"),
        case(
            "logs --attempt 0",
            &["logs", "done-1", "first", "--attempt", "0"],
            2,
            "attempt 0",
        ),
        case(
            "logs --attempt 99",
            &["logs", "done-1", "first", "--attempt", "99"],
            2,
            "attempt 99",
        ),
        case(
            "logs --attempt x",
            &["logs", "done-1", "first", "--attempt", "x"],
            2,
            "--attempt",
        ),
        // events
        case(
            "--data not JSON",
            &["signal", "wait-1", "go", "--data", "{not json"],
            2,
            "--data",
        ),
        case(
            "--data empty",
            &["signal", "wait-1", "go", "--data", ""],
            2,
            "--data",
        ),
        case(
            "--data truncated",
            &["signal", "wait-1", "go", "--data", r#"{"ok": [1, 2"#],
            2,
            "--data",
        ),
        case(
            "--data with trailing text",
            &["signal", "wait-1", "go", "--data", "{} {}"],
            2,
            "--data",
        ),
        case("empty event name", &["signal", "wait-1", ""], 2, "event"),
        case(
            "event for a completed instance",
            &["signal", "done-1", "go"],
            2,
            "completed",
        ),
        case(
            "cancel a completed instance",
            &["cancel", "done-1"],
            2,
            "completed",
        ),
    ];
    for (what, args) in [
        ("--input not UTF-8", vec!["run", "typed.yaml", "--input"]),
        ("--id not UTF-8", vec!["run", "good.yaml", "--id"]),
        ("--data not UTF-8", vec!["signal", "wait-1", "go", "--data"]),
    ] {
        let mut args = os(&args);
        args.push(not_utf8("who="));
        cases.push(Case {
            what: what.into(),
            args,
            code: 2,
            needle: "UTF-8".into(),
        });
    }

    let failures: Vec<String> = cases.iter().filter_map(|c| fx.check(c).err()).collect();
    assert_no_failures(&failures, cases.len());
}

#[test]
fn unknown_ambiguous_and_empty_instance_ids_are_rejected_by_every_command() {
    let fx = Fixture::new();
    let ids = [
        ("nope", "no instance matches `nope`"),
        // Both done-1 and done-2 start with it.
        ("done-", "ambiguous"),
        ("", "no instance matches"),
        // LIKE wildcards are only characters of a prefix.
        ("%", "no instance matches"),
        ("d_ne", "no instance matches"),
        ("done-1x", "no instance matches"),
    ];
    let mut cases = Vec::new();
    for (id, needle) in ids {
        for command in [
            vec!["inspect", id],
            vec!["inspect", id, "--json", "--attempts"],
            vec!["resume", id],
            vec!["logs", id],
            vec!["trace", id],
            vec!["signal", id, "go"],
            vec!["cancel", id],
        ] {
            cases.push(case(&format!("{command:?}"), &command, 2, needle));
        }
    }
    let failures: Vec<String> = cases.iter().filter_map(|c| fx.check(c).err()).collect();
    assert_no_failures(&failures, cases.len());
}

// ---------------------------------------------------- broken databases

/// Every command that opens the database, run against a broken one.
const DB_COMMANDS: &[&[&str]] = &[
    &["list"],
    &["list", "--json"],
    &["inspect", "done-1"],
    &["inspect", "done-1", "--json", "--attempts"],
    &["run", "good.yaml"],
    &["run", "good.yaml", "--id", "fresh", "--json"],
    &["resume", "wait-1"],
    &["signal", "wait-1", "go", "--data", "{}"],
    &["cancel", "wait-1"],
    &["trace"],
    &["trace", "done-1", "--format", "otlp"],
    &["logs", "done-1", "first"],
    &["worker", "--once"],
];
