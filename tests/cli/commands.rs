//! docs/commands.md commands: `wf list`, `wf inspect`, `wf logs`, `wf run --json`, id
//! prefixes, where the database lives (`--db`, `$WF_DB`, XDG, `~/.local/share`)
//! and its 0600 mode, exit codes, and plain progress lines on a non-terminal.

use crate::{Ran, Test};
use assert_cmd::cargo::CommandCargoExt;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

/// Three steps: one writing to both streams, one that fails its first attempt
/// and succeeds on the second, and a pure `set_state` step.
const ORDERS: &str = r#"name: orders
inputs:
  who: { default: world }
state: { greeted: false }
steps:
  - id: hello
    run: 'echo "hello ${{ inputs.who }}"; echo "to stderr" >&2'
  - id: flaky
    retry: { max_attempts: 2, interval: 10ms }
    run: 'echo "attempt $WF_ATTEMPT"; echo "err $WF_ATTEMPT" >&2; test "$WF_ATTEMPT" -ge 2'
  - id: remember
    set_state: { greeted: true }
"#;

/// One step that exits 3.
const BROKEN: &str = r#"name: broken
steps:
  - id: boom
    run: 'echo going down; exit 3'
"#;

/// Runs `yaml` as `name` and expects `code`; returns the instance id.
#[track_caller]
fn run_ok(t: &Test, name: &str, yaml: &str, extra: &[&str], code: i32) -> String {
    let (id, ran) = t.run_yaml(name, yaml, extra);
    ran.code(code);
    assert!(
        !id.is_empty(),
        "no id in `wf run --json` output: {}",
        ran.stdout
    );
    id
}

/// Exit 2 with one `error: …` line on stderr mentioning every word.
#[track_caller]
fn usage_error(ran: &Ran, words: &[&str]) {
    ran.code(2);
    assert_eq!(
        ran.stderr.lines().count(),
        1,
        "expected a one-line error:\n{}",
        ran.stderr
    );
    assert!(ran.stderr.starts_with("error: "), "{}", ran.stderr);
    for w in words {
        assert!(
            ran.stderr.contains(w),
            "the error does not mention {w:?}: {}",
            ran.stderr
        );
    }
}

/// RFC 3339 in UTC as `wf` writes it: `YYYY-MM-DDTHH:MM:SS[.fraction]Z`.
#[track_caller]
fn assert_utc_time(v: &Value, what: &str) {
    let s = v
        .as_str()
        .unwrap_or_else(|| panic!("{what} is not a time string: {v}"));
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| s.get(r).and_then(|x| x.parse::<u32>().ok());
    let shape = b.len() >= 20
        && b.iter().take(19).enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            _ => c.is_ascii_digit(),
        })
        && s.ends_with('Z')
        && match &s[19..s.len() - 1] {
            "" => true,
            frac => {
                frac.len() > 1
                    && frac.starts_with('.')
                    && frac[1..].bytes().all(|c| c.is_ascii_digit())
            }
        };
    let ranges = num(5..7).is_some_and(|m| (1..=12).contains(&m))
        && num(8..10).is_some_and(|d| (1..=31).contains(&d))
        && num(11..13).is_some_and(|h| h < 24)
        && num(14..16).is_some_and(|m| m < 60)
        && num(17..19).is_some_and(|s| s < 61);
    assert!(
        shape && ranges,
        "{what} is not an RFC 3339 UTC time ending in Z: {s:?}"
    );
}

/// `start <= end` for two times in the same fixed format.
#[track_caller]
fn assert_ordered(start: &Value, end: &Value, what: &str) {
    assert_utc_time(start, &format!("{what} start"));
    assert_utc_time(end, &format!("{what} end"));
    assert!(
        start.as_str() <= end.as_str(),
        "{what} ends before it starts: {start} > {end}"
    );
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

#[track_caller]
fn assert_has_keys(v: &Value, expected: &[&str], what: &str) {
    let have = keys(v);
    for k in expected {
        assert!(have.contains(k), "{what} has no `{k}`: {v:#}");
    }
}

// ---------------------------------------------------------------- wf list

#[test]
fn list_prints_a_table_with_a_header_and_the_instance() {
    let t = Test::new();
    let id = run_ok(&t, "orders.yaml", ORDERS, &[], 0);
    let ran = t.wf(&["list"]);
    ran.code(0);
    let mut lines = ran.stdout.lines().filter(|l| !l.trim().is_empty());
    let header = lines.next().expect("a header line");
    for column in ["ID", "WORKFLOW", "STATUS"] {
        assert!(
            header.to_uppercase().contains(column),
            "no {column} column in the header: {header}"
        );
    }
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 1, "expected one instance row:\n{}", ran.stdout);
    // Tables show the first 12 characters of an id (a prefix any command takes).
    for cell in [&id[..12], "orders", "completed"] {
        assert!(rows[0].contains(cell), "row lacks {cell}: {}", rows[0]);
    }
    assert!(!rows[0].contains(&id[..13]), "the whole id: {}", rows[0]);
    assert!(rows[0].contains("s ago"), "relative times: {}", rows[0]);
    assert!(!ran.stdout.contains('\x1b'), "ANSI escapes in piped output");
    let iso = t.wf(&["list", "--time-format", "iso"]);
    assert!(
        iso.stdout.contains(" UPDATED") && iso.stdout.matches(':').count() >= 4,
        "{}",
        iso.stdout
    );
    // Colour when asked for, even piped; never with --color never.
    assert!(
        t.wf(&["list", "--color", "always"])
            .stdout
            .contains("\x1b[")
    );
    assert!(!t.wf(&["list", "--color", "never"]).stdout.contains('\x1b'));
}

#[test]
fn list_on_an_empty_database() {
    let t = Test::new();
    empty_database(&t);
    let ran = t.wf(&["list", "--json"]);
    ran.code(0);
    assert_eq!(ran.json(), json!([]));
    let ran = t.wf(&["list"]);
    ran.code(0);
    assert!(
        !ran.stdout.contains("orders") && ran.stdout.lines().count() <= 1,
        "an empty database lists something:\n{}",
        ran.stdout
    );
}

#[test]
fn list_json_is_newest_first() {
    let t = Test::new();
    let first = run_ok(&t, "orders.yaml", ORDERS, &[], 0);
    let second = run_ok(&t, "broken.yaml", BROKEN, &[], 1);
    let list = t.wf(&["list", "--json"]).code(0).json();
    let items = list.as_array().expect("an array");
    assert_eq!(items.len(), 2, "{list:#}");
    assert_eq!(items[0]["id"], second.as_str(), "newest first: {list:#}");
    assert_eq!(items[1]["id"], first.as_str());
    assert_eq!(items[0]["workflow"], "broken");
    assert_eq!(items[0]["status"], "failed");
    assert_eq!(items[1]["workflow"], "orders");
    assert_eq!(items[1]["status"], "completed");
    for item in items {
        assert_has_keys(
            item,
            &["id", "workflow", "status", "created_at", "updated_at"],
            "a list item",
        );
        assert_ordered(&item["created_at"], &item["updated_at"], "instance");
    }
    assert!(
        items[1]["created_at"].as_str() <= items[0]["created_at"].as_str(),
        "created_at is not newest first: {list:#}"
    );
}

#[test]
fn list_status_filter() {
    let t = Test::new();
    let good = run_ok(&t, "orders.yaml", ORDERS, &[], 0);
    let bad = run_ok(&t, "broken.yaml", BROKEN, &[], 1);
    let ids = |status: &str| -> Vec<String> {
        t.wf(&["list", "--status", status, "--json"])
            .code(0)
            .json()
            .as_array()
            .expect("an array")
            .iter()
            .map(|i| {
                assert_eq!(i["status"], status, "filter let through {i}");
                i["id"].as_str().unwrap_or_default().to_string()
            })
            .collect()
    };
    assert_eq!(ids("completed"), vec![good.clone()]);
    assert_eq!(ids("failed"), vec![bad]);
    assert!(ids("sleeping").is_empty());

    let table = t.wf(&["list", "--status", "completed"]);
    table.code(0);
    assert!(table.stdout.contains(&good[..12]), "{}", table.stdout);
    assert!(!table.stdout.contains("broken"), "{}", table.stdout);
}

/// docs/commands.md: `wf list` shows the newest 50 by default and says on stderr
/// how many more there are; `--limit N` shows N, `--limit 0` all.
#[test]
fn list_shows_50_by_default_and_says_how_many_more() {
    let t = Test::new();
    let path = t.write(
        "tiny.yaml",
        "name: tiny\nsteps:\n  - id: a\n    set_state: { x: 1 }\n",
    );
    let path = path.to_str().expect("utf-8");
    for n in 0..53 {
        t.wf(&["run", path, "-q", "--id", &format!("i{n:02}")])
            .code(0);
    }
    let listed = t.wf(&["list"]);
    listed.code(0);
    let rows: Vec<&str> = listed.stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), 50, "{}", listed.stdout);
    assert!(
        rows[0].contains("i52") && rows[49].contains("i03"),
        "{}",
        listed.stdout
    );
    assert_eq!(
        listed.stderr,
        "… and 3 more; --limit N shows N (--limit 0 shows all)\n"
    );
    let json = t.wf(&["list", "--json"]);
    json.code(0);
    assert_eq!(json.json().as_array().map(Vec::len), Some(50));
    assert!(json.stderr.contains("and 3 more"), "{}", json.stderr);
    let all = t.wf(&["list", "--json", "--limit", "0"]);
    assert_eq!(all.code(0).json().as_array().map(Vec::len), Some(53));
    assert_eq!(all.stderr, "");
    let two = t.wf(&["list", "--status", "completed", "--limit", "2"]);
    two.code(0);
    assert_eq!(two.stdout.lines().count(), 3, "{}", two.stdout);
    assert!(two.stderr.contains("and 51 more"), "{}", two.stderr);
    let enough = t.wf(&["list", "--limit", "53"]);
    assert_eq!(enough.code(0).stderr, "");
    assert_eq!(t.wf(&["list", "-q"]).code(0).stderr, "", "-q says nothing");
}

#[test]
fn list_rejects_an_unknown_status() {
    let t = Test::new();
    run_ok(&t, "orders.yaml", ORDERS, &[], 0);
    let ran = t.wf(&["list", "--status", "bogus"]);
    usage_error(&ran, &["bogus"]);
    assert_eq!(ran.stdout, "");
    usage_error(&t.wf(&["list", "--status", "bogus", "--json"]), &["bogus"]);
}

// ---------------------------------------------------------------- wf inspect

#[test]
fn inspect_json_has_every_field() {
    let t = Test::new();
    let id = run_ok(&t, "orders.yaml", ORDERS, &["--input", "who=ann"], 0);
    let v = t.wf(&["inspect", &id, "--json"]).code(0).json();
    assert_has_keys(
        &v,
        &[
            "id",
            "workflow",
            "status",
            "inputs",
            "state",
            "definition_hash",
            "runs",
            "steps",
        ],
        "inspect",
    );
    assert_eq!(v["id"], id.as_str());
    assert_eq!(v["workflow"], "orders");
    assert_eq!(v["status"], "completed");
    assert_eq!(v["inputs"]["who"], "ann");
    assert_eq!(v["state"], json!({ "greeted": true }));
    let file = std::fs::read(t.path().join("orders.yaml")).expect("read workflow");
    assert_eq!(v["definition_hash"], sha256_hex(&file).as_str());

    let runs = v["runs"].as_array().expect("runs is an array");
    assert_eq!(runs.len(), 1, "{v:#}");
    assert_has_keys(
        &runs[0],
        &["number", "outcome", "started_at", "finished_at"],
        "a run",
    );
    assert_eq!(runs[0]["number"], 1);
    assert_eq!(runs[0]["outcome"], "completed");
    assert_ordered(&runs[0]["started_at"], &runs[0]["finished_at"], "run 1");

    let steps = v["steps"].as_array().expect("steps is an array");
    let ids: Vec<&str> = steps.iter().filter_map(|s| s["id"].as_str()).collect();
    assert_eq!(ids, ["hello", "flaky", "remember"], "definition order");
    for (s, attempts) in steps.iter().zip([1, 2, 1]) {
        assert_has_keys(
            s,
            &[
                "id",
                "status",
                "attempts",
                "outcome",
                "error_type",
                "started_at",
                "finished_at",
                "output",
            ],
            "a step",
        );
        assert_eq!(s["status"], "completed", "{s:#}");
        assert_eq!(s["attempts"], attempts, "attempt count of {s:#}");
        assert_eq!(s["outcome"], "ok", "{s:#}");
        assert_eq!(s["error_type"], Value::Null, "{s:#}");
        assert_ordered(&s["started_at"], &s["finished_at"], "a step");
        assert!(
            s.get("attempt_list").is_none(),
            "attempt_list without --attempts"
        );
    }
    let hello = Test::step(&v, "hello");
    assert_eq!(
        hello["output"]["stdout"].as_str().map(str::trim_end),
        Some("hello ann"),
        "{hello:#}"
    );
    assert_eq!(hello["output"]["exit_code"], 0);
    assert_eq!(
        Test::step(&v, "flaky")["output"]["stdout"]
            .as_str()
            .map(str::trim_end),
        Some("attempt 2"),
        "the output is the successful attempt's"
    );
}

#[test]
fn inspect_json_attempt_list() {
    let t = Test::new();
    let id = run_ok(&t, "orders.yaml", ORDERS, &[], 0);
    let v = t.inspect(&id);
    for s in v["steps"].as_array().expect("steps") {
        let list = s["attempt_list"].as_array().expect("attempt_list");
        assert_eq!(
            Some(list.len() as u64),
            s["attempts"].as_u64(),
            "attempt_list disagrees with the count: {s:#}"
        );
        for a in list {
            assert_has_keys(
                a,
                &[
                    "attempt",
                    "run",
                    "outcome",
                    "error_type",
                    "exit_code",
                    "started_at",
                    "finished_at",
                ],
                "an attempt",
            );
            assert_eq!(a["run"], 1);
            assert_ordered(&a["started_at"], &a["finished_at"], "an attempt");
        }
    }
    let flaky = Test::step(&v, "flaky")["attempt_list"]
        .as_array()
        .expect("attempt_list");
    assert_eq!(flaky[0]["attempt"], 1);
    assert_ne!(flaky[0]["outcome"], "ok", "{flaky:#?}");
    assert_eq!(flaky[0]["error_type"], "exit.1");
    assert_eq!(flaky[0]["exit_code"], 1);
    assert_eq!(flaky[1]["attempt"], 2);
    assert_eq!(flaky[1]["outcome"], "ok");
    assert_eq!(flaky[1]["error_type"], Value::Null);
    assert_eq!(flaky[1]["exit_code"], 0);
    assert!(
        flaky[0]["finished_at"].as_str() <= flaky[1]["started_at"].as_str(),
        "attempt 2 started before attempt 1 finished: {flaky:#?}"
    );
}

#[test]
fn inspect_json_of_a_failed_instance() {
    let t = Test::new();
    let id = run_ok(&t, "broken.yaml", BROKEN, &[], 1);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "failed");
    assert_eq!(v["runs"][0]["outcome"], "failed");
    let boom = Test::step(&v, "boom");
    assert_eq!(boom["status"], "failed");
    assert_eq!(boom["attempts"], 1);
    assert_eq!(boom["error_type"], "exit.3");
    assert_eq!(boom["attempt_list"][0]["exit_code"], 3);
    assert_eq!(boom["attempt_list"][0]["error_type"], "exit.3");
}

/// Filters for what changes from one run to the next in human output.
fn human_filters() -> Vec<(&'static str, &'static str)> {
    vec![
        (r"\b[0-9a-f]{32}\b", "[ID]"),
        (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z", "[TIME]"),
        (r"\(([0-9a-f]{12})\)", "([HASH])"),
        (r"\b(\d+ms|\d+\.\ds|\d+m\d{2}s|\d+h\d{2}m)\b", "[DUR]"),
        (r"\b\d+[smhd] ago\b", "[AGO]"),
        // Column padding after a filtered duration.
        (r"(?m)[ \t]+$", ""),
    ]
}

#[test]
fn inspect_human_output() {
    let t = Test::new();
    let id = run_ok(&t, "orders.yaml", ORDERS, &["--input", "who=ann"], 0);
    let plain = t.wf(&["inspect", &id]);
    plain.code(0);
    assert!(plain.stdout.contains(&id), "{}", plain.stdout);
    let attempts = t.wf(&["inspect", &id, "--attempts"]);
    attempts.code(0);
    insta::with_settings!({ filters => human_filters() }, {
        insta::assert_snapshot!("inspect", plain.stdout);
        insta::assert_snapshot!("inspect_attempts", attempts.stdout);
    });
}

// ---------------------------------------------------------------- ids

#[test]
fn a_unique_prefix_works_for_inspect_and_logs() {
    let t = Test::new();
    let id = run_ok(&t, "orders.yaml", ORDERS, &[], 0);
    let other = run_ok(&t, "broken.yaml", BROKEN, &[], 1);
    // The shortest prefix that tells the two random ids apart, plus one.
    let common = id
        .chars()
        .zip(other.chars())
        .take_while(|(a, b)| a == b)
        .count();
    let prefix = &id[..common + 2];
    assert_eq!(t.inspect(prefix)["id"], id.as_str());
    let logs = t.wf(&["logs", prefix, "hello"]);
    logs.code(0);
    assert_eq!(logs.stdout, "hello world\n");
}

#[test]
fn an_exact_id_wins_over_a_longer_one_it_prefixes() {
    let t = Test::new();
    run_ok(&t, "orders.yaml", ORDERS, &["--id", "abc"], 0);
    run_ok(&t, "broken.yaml", BROKEN, &["--id", "abcd"], 1);
    assert_eq!(t.inspect("abc")["workflow"], "orders");
    assert_eq!(t.inspect("abcd")["workflow"], "broken");
}

#[test]
fn an_unknown_id_is_a_usage_error() {
    let t = Test::new();
    run_ok(&t, "orders.yaml", ORDERS, &[], 0);
    for args in [
        &["inspect", "nosuchid"][..],
        &["inspect", "nosuchid", "--json"],
        &["logs", "nosuchid"],
        &["logs", "nosuchid", "hello"],
    ] {
        let ran = t.wf(args);
        usage_error(&ran, &["nosuchid"]);
        assert_eq!(ran.stdout, "", "{args:?}");
    }
}

#[test]
fn an_ambiguous_prefix_names_every_match() {
    let t = Test::new();
    run_ok(&t, "orders.yaml", ORDERS, &["--id", "abc1"], 0);
    run_ok(&t, "broken.yaml", BROKEN, &["--id", "abc2"], 1);
    for args in [&["inspect", "abc"][..], &["logs", "abc", "hello"]] {
        let ran = t.wf(args);
        usage_error(&ran, &["abc1", "abc2"]);
        assert_eq!(ran.stdout, "", "{args:?}");
    }
    assert_eq!(t.inspect("abc1")["workflow"], "orders");
}

// ---------------------------------------------------------------- wf logs

#[test]
fn logs_split_stdout_and_stderr() {
    let t = Test::new();
    let id = run_ok(&t, "orders.yaml", ORDERS, &[], 0);
    let ran = t.wf(&["logs", &id, "hello"]);
    ran.code(0);
    assert_eq!(ran.stdout, "hello world\n");
    assert_eq!(ran.stderr, "to stderr\n");
}

#[test]
fn logs_attempt_picks_an_attempt() {
    let t = Test::new();
    let id = run_ok(&t, "orders.yaml", ORDERS, &[], 0);
    let one = t.wf(&["logs", &id, "flaky", "--attempt", "1"]);
    one.code(0);
    assert_eq!(
        (one.stdout.as_str(), one.stderr.as_str()),
        ("attempt 1\n", "err 1\n")
    );
    let two = t.wf(&["logs", &id, "flaky", "--attempt", "2"]);
    two.code(0);
    assert_eq!(
        (two.stdout.as_str(), two.stderr.as_str()),
        ("attempt 2\n", "err 2\n")
    );
    let last = t.wf(&["logs", &id, "flaky"]);
    last.code(0);
    assert_eq!(
        last.stdout, "attempt 2\n",
        "the default is the last attempt"
    );
    usage_error(&t.wf(&["logs", &id, "flaky", "--attempt", "3"]), &["3"]);
}

#[test]
fn logs_of_an_unknown_step() {
    let t = Test::new();
    let id = run_ok(&t, "orders.yaml", ORDERS, &[], 0);
    let ran = t.wf(&["logs", &id, "nosuchstep"]);
    usage_error(&ran, &["nosuchstep"]);
    assert_eq!(ran.stdout, "");
}

#[test]
fn logs_of_a_failed_step() {
    let t = Test::new();
    let id = run_ok(&t, "broken.yaml", BROKEN, &[], 1);
    let ran = t.wf(&["logs", &id, "boom"]);
    ran.code(0);
    assert_eq!(ran.stdout, "going down\n");
}

/// In the listing of every step, an output that does not end its line (an
/// HTTP body, a `printf`) still ends before the next header; one step's logs
/// stay byte for byte as captured.
#[test]
fn logs_end_each_shown_output_with_a_newline() {
    let t = Test::new();
    let yaml = r#"name: unterminated
steps:
  - id: a
    run: printf 'no newline'
  - id: b
    run: printf x; printf err >&2
"#;
    let id = run_ok(&t, "unterminated.yaml", yaml, &[], 0);
    let all = t.wf(&["logs", &id]);
    all.code(0);
    assert_eq!(
        all.stdout,
        "==> a (attempt 1, ok) <==\nno newline\n\
         ==> b (attempt 1, ok) <==\nx\n--- stderr ---\nerr\n"
    );
    let one = t.wf(&["logs", &id, "a"]);
    one.code(0);
    assert_eq!(one.stdout, "no newline");
}

/// An attempt whose runner was killed captured nothing: `wf logs` says so
/// on stderr rather than printing nothing at all.
#[test]
fn logs_of_a_crashed_attempt_say_it_crashed() {
    let t = Test::new();
    let yaml = r#"name: crashy
steps:
  - id: fragile
    run: 'test -e crashed.once || { touch crashed.once; kill -9 $PPID; sleep 5; }; echo fine'
"#;
    let path = t.write("crashy.yaml", yaml);
    let killed = t.wf(&["run", path.to_str().expect("utf-8"), "--id", "k"]);
    assert_eq!(killed.code, -1, "wf was not killed: {}", killed.stderr);
    t.wf(&["resume", "k"]).code(0);
    let first = t.wf(&["logs", "k", "fragile", "--attempt", "1"]);
    first.code(0);
    assert_eq!(first.stdout, "");
    assert!(
        first.stderr.contains("attempt 1 of step `fragile` crashed")
            && first.stderr.contains("captured nothing")
            && first.stderr.lines().count() == 1,
        "{}",
        first.stderr
    );
    let second = t.wf(&["logs", "k", "fragile"]);
    second.code(0);
    assert_eq!(
        (second.stdout.as_str(), second.stderr.as_str()),
        ("fine\n", "")
    );
}

/// The steps an unknown STEP is checked against are the workflow's, from
/// its pinned definition: those that never ran too.
#[test]
fn logs_of_an_unknown_step_name_every_step_of_the_workflow() {
    let t = Test::new();
    let yaml = r#"name: stops-early
steps:
  - id: first
    run: exit 3
  - id: never-ran
    run: echo no
  - id: handler
    if: ${{ failure() }}
    needs: [never-ran]
    run: echo no
"#;
    let id = run_ok(&t, "stops-early.yaml", yaml, &[], 1);
    let ran = t.wf(&["logs", &id, "nope"]);
    usage_error(&ran, &["`nope`", "first", "never-ran", "handler"]);
    // A step of the workflow that has not run: no attempts, not "no step".
    usage_error(
        &t.wf(&["logs", &id, "never-ran"]),
        &["`never-ran`", "no attempts"],
    );
}

// ---------------------------------------------------------------- database

/// A `wf` command with no `--db` and nothing of the caller's environment that
/// could pick a database: `HOME` points into the test dir, so a default path
/// never touches the real home.
fn bare_wf(t: &Test) -> Command {
    let mut cmd = Command::cargo_bin("wf").expect("wf binary");
    cmd.current_dir(t.path())
        .env_remove("WF_DB")
        .env_remove("XDG_DATA_HOME")
        .env_remove("TRACEPARENT")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("WF_DURABILITY")
        .env("NO_COLOR", "1")
        .env("HOME", t.path().join("home"));
    cmd
}

fn output(mut cmd: Command, args: &[&str]) -> Ran {
    Ran::from(cmd.args(args).output().expect("run wf"))
}

#[track_caller]
fn assert_private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o777,
        0o600,
        "{} has mode {:o}",
        path.display(),
        mode & 0o777
    );
}

/// Runs the small workflow through `cmd` and lists through `list`; checks
/// the instance is in the listed database.
#[track_caller]
fn run_and_list(t: &Test, run: Command, list: Command) {
    t.write("orders.yaml", ORDERS);
    let ran = output(run, &["run", "orders.yaml", "--json"]);
    ran.code(0);
    let id = ran.json()["id"].as_str().unwrap_or_default().to_string();
    let listed = output(list, &["list", "--json"]).code(0).json();
    assert_eq!(listed[0]["id"], id.as_str(), "{listed:#}");
}

#[test]
fn the_database_is_created_with_mode_0600() {
    let t = Test::new();
    if t.sqlite_only("the permissions of the database file") {
        return;
    }
    run_ok(&t, "orders.yaml", ORDERS, &[], 0);
    assert_private(&t.db);
    // Whatever side files SQLite leaves behind hold data too.
    for side in ["wf.db-wal", "wf.db-shm"] {
        let p = t.path().join(side);
        if p.exists() {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&p).expect("stat").permissions().mode();
            assert_eq!(mode & 0o077, 0, "{side} is readable by others: {mode:o}");
        }
    }
}

#[test]
fn once_wf_exited_the_database_file_alone_holds_the_whole_history() {
    let t = Test::new();
    if t.sqlite_only("the files of a SQLite database") {
        return;
    }
    let id = run_ok(&t, "orders.yaml", ORDERS, &[], 0);
    // The WAL file is kept for the next run, but was checkpointed at exit.
    assert!(t.path().join("wf.db-wal").exists(), "the WAL file is kept");
    let copy = t.path().join("copy").join("wf.db");
    std::fs::create_dir(copy.parent().expect("a folder")).expect("mkdir");
    std::fs::copy(&t.db, &copy).expect("copy the database file");
    let rows = crate::python_sqlite(
        &copy,
        "import sqlite3, sys\n\
         c = sqlite3.connect(sys.argv[1])\n\
         print(c.execute(\"SELECT status, count(*) FROM steps GROUP BY status\").fetchall(),\n\
               c.execute(\"SELECT status FROM instances\").fetchall(),\n\
               c.execute(\"SELECT count(*) FROM attempts\").fetchone())",
    );
    assert_eq!(
        rows.trim(),
        "[('completed', 3)] [('completed',)] (4,)",
        "the copy of {id}"
    );
}

/// `wf` exits without syncing its closing checkpoint (its commits synced
/// the WAL already): until the kernel writes the database file back, a power
/// cut may leave it without some or all of the pages that checkpoint wrote.
/// The WAL beside it still holds every one of them, and the next open reads
/// them from there.
#[test]
fn a_database_file_that_lost_the_closing_checkpoint_is_whole_with_its_wal() {
    let t = Test::new();
    if t.sqlite_only("the files of a SQLite database") {
        return;
    }
    let first = run_ok(&t, "orders.yaml", ORDERS, &[], 0);
    let before = std::fs::read(&t.db).expect("read wf.db");
    let second = run_ok(&t, "orders.yaml", ORDERS, &[], 0);
    let after = std::fs::read(&t.db).expect("read wf.db");
    let wal = std::fs::read(t.path().join("wf.db-wal")).expect("read wf.db-wal");
    assert_ne!(before, after, "the second run's checkpoint wrote wf.db");
    const PAGE: usize = 4096;
    let lost_all = before.clone();
    // Some pages written back, some not (every other one).
    let mut lost_some = after.clone();
    for (i, page) in before.chunks(PAGE).enumerate() {
        if i % 2 == 0 {
            lost_some[i * PAGE..i * PAGE + page.len()].copy_from_slice(page);
        }
    }
    for (name, file) in [("lost-all", lost_all), ("lost-some", lost_some)] {
        let dir = t.path().join(name);
        std::fs::create_dir(&dir).expect("mkdir");
        let db = dir.join("wf.db");
        std::fs::write(&db, file).expect("write wf.db");
        std::fs::write(dir.join("wf.db-wal"), &wal).expect("write wf.db-wal");
        let on = |args: &[&str]| {
            let out = bare_wf(&t).arg("--db").arg(&db).args(args).output();
            let ran = Ran::from(out.expect("run wf"));
            ran.code(0);
            ran.json()
        };
        let listed = on(&["list", "--json"]);
        let mut seen: Vec<(String, String)> = listed
            .as_array()
            .expect("a list")
            .iter()
            .map(|i| {
                (
                    i["id"].as_str().unwrap_or("").to_string(),
                    i["status"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        seen.sort();
        let mut want = vec![
            (first.clone(), "completed".to_string()),
            (second.clone(), "completed".to_string()),
        ];
        want.sort();
        assert_eq!(seen, want, "{name}");
        let shown = on(&["inspect", &second, "--json"]);
        let steps: Vec<&str> = shown["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .map(|s| s["status"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(steps, ["completed"; 3], "{name}: {shown}");
        assert_eq!(crate::integrity_check(&db).trim(), "ok", "{name}");
    }
}

#[test]
fn a_read_command_on_a_missing_database_says_so_and_creates_nothing() {
    // On PostgreSQL: a schema wf never made (the test's own).
    let t = Test::new();
    for args in [
        vec!["list"],
        vec!["list", "--json"],
        vec!["inspect", "x"],
        vec!["logs", "x"],
        vec!["trace"],
        vec!["result", "x"],
        vec!["queue", "list"],
        vec!["queue", "list", "--json"],
        vec!["schedule", "list"],
        vec!["schedule", "list", "--json"],
        vec!["workflow", "list"],
        vec!["workflow", "list", "--json"],
        // Those that act on something recorded find nothing to act on.
        vec!["resume", "x"],
        vec!["signal", "x", "go"],
        vec!["cancel", "x"],
        vec!["restart", "x", "--from", "a"],
        vec!["schedule", "rm", "x"],
        vec!["workflow", "rm", "x"],
    ] {
        let ran = t.wf(&args);
        ran.code(1);
        assert!(
            ran.stderr.contains("no database at") && ran.stderr.lines().count() == 1,
            "{args:?}: {}",
            ran.stderr
        );
        assert!(ran.stdout.is_empty(), "{args:?}: {}", ran.stdout);
        assert!(!t.db.exists(), "{args:?} created the database");
        if let Some((_, schema)) = &t.pg {
            let made = t.sql(&format!(
                "SELECT count(*) FROM pg_namespace WHERE nspname = '{schema}'"
            ));
            assert_eq!(made, "0", "{args:?} created the schema");
        }
    }
    if t.on_pg() {
        return;
    }
    // Nor the folders on the way to it.
    let typo = t.path().join("typo").join("x.db");
    let out = bare_wf(&t)
        .arg("--db")
        .arg(&typo)
        .arg("list")
        .output()
        .expect("run wf");
    assert_eq!(out.status.code(), Some(1));
    assert!(!t.path().join("typo").exists(), "a folder was created");
}

/// A write to a database on a read-only mount names the database file
/// (SQLite's own reason names none); reading it still works. The mount is
/// made read-only in a user and mount namespace of its own (`unshare`),
/// where the machine allows one.
#[test]
fn a_write_to_a_read_only_database_names_the_file() {
    let t = Test::new();
    if t.sqlite_only("a database file on a read-only mount") {
        return;
    }
    let dir = t.path().display().to_string();
    let probe = Command::new("unshare")
        .args([
            "-rm",
            "sh",
            "-c",
            "mount --bind \"$1\" \"$1\" && mount -o remount,bind,ro \"$1\"",
        ])
        .args(["sh", &dir])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("cannot make a read-only mount here (unshare -rm): the test is not run");
        return;
    }
    let id = run_ok(&t, "orders.yaml", ORDERS, &[], 0);
    // `wf ARGS` with the test dir mounted read-only.
    let read_only = |args: &[&str]| {
        let wf = t.cmd();
        let mut cmd = Command::new("unshare");
        cmd.args(["-rm", "sh", "-c"])
            .arg("mount --bind \"$1\" \"$1\" && mount -o remount,bind,ro \"$1\" && shift && exec \"$@\"")
            .args(["sh", &dir])
            .arg(wf.get_program())
            .args(wf.get_args())
            .args(args)
            .current_dir(t.path());
        for (k, v) in wf.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        Ran::from(cmd.output().expect("run wf"))
    };
    let ran = read_only(&["run", "orders.yaml"]);
    ran.code(1);
    assert!(
        ran.stderr.starts_with("error: ")
            && ran.stderr.contains(&t.db.display().to_string())
            && ran.stderr.contains("read-only")
            && ran.stderr.lines().count() == 1,
        "{}",
        ran.stderr
    );
    let cancel = read_only(&["prune", "--older-than", "0s"]);
    cancel.code(1);
    assert!(
        cancel.stderr.contains(&t.db.display().to_string()),
        "{}",
        cancel.stderr
    );
    let listed = read_only(&["list", "--json"]);
    listed.code(0);
    assert_eq!(listed.json()[0]["id"], id.as_str());
}

/// Creates the test's database, with no instance in it, the way a user
/// would: a command that writes (here a worker's sweep over nothing).
pub fn empty_database(t: &Test) {
    t.wf(&["worker", "--once"]).code(0);
    assert!(t.on_pg() || t.db.exists());
}

#[test]
fn wf_db_is_used_without_db_flag() {
    let t = Test::new();
    let env_db = t.path().join("from-env.db");
    let with_env = || {
        let mut c = bare_wf(&t);
        c.env("WF_DB", &env_db)
            .env("XDG_DATA_HOME", t.path().join("xdg"));
        c
    };
    run_and_list(&t, with_env(), with_env());
    assert_private(&env_db);
    assert!(
        !t.path().join("xdg").exists(),
        "the XDG default was used too"
    );
    assert!(
        !t.path().join("home").exists(),
        "the HOME default was used too"
    );
}

#[test]
fn db_flag_wins_over_wf_db() {
    let t = Test::new();
    let env_db = t.path().join("from-env.db");
    let flag_db = t.path().join("from-flag.db");
    let with_both = || {
        let mut c = bare_wf(&t);
        c.env("WF_DB", &env_db).arg("--db").arg(&flag_db);
        c
    };
    run_and_list(&t, with_both(), with_both());
    assert!(flag_db.exists());
    assert!(!env_db.exists(), "WF_DB was used although --db was given");
}

#[test]
fn xdg_data_home_is_the_default() {
    let t = Test::new();
    let with_xdg = || {
        let mut c = bare_wf(&t);
        c.env("XDG_DATA_HOME", t.path().join("xdg"));
        c
    };
    run_and_list(&t, with_xdg(), with_xdg());
    assert_private(&t.path().join("xdg/wf/wf.db"));
    assert!(
        !t.path().join("home").exists(),
        "HOME was used although XDG_DATA_HOME is set"
    );
    assert!(!t.db.exists());
}

#[test]
fn home_local_share_is_the_fallback() {
    let t = Test::new();
    run_and_list(&t, bare_wf(&t), bare_wf(&t));
    assert_private(&t.path().join("home/.local/share/wf/wf.db"));
}

#[test]
fn an_empty_xdg_data_home_is_ignored() {
    let t = Test::new();
    let with_empty = || {
        let mut c = bare_wf(&t);
        c.env("XDG_DATA_HOME", "");
        c
    };
    run_and_list(&t, with_empty(), with_empty());
    assert_private(&t.path().join("home/.local/share/wf/wf.db"));
}

/// docs/commands.md: an empty variable (as CI leaves an unset one) counts as unset,
/// with `--db` given or not, and so does an empty `WF_LEASE_TTL`.
#[test]
fn empty_environment_variables_count_as_unset() {
    let t = Test::new();
    let empty = || {
        let mut c = t.cmd();
        c.env("WF_DB", "").env("WF_LEASE_TTL", "");
        c
    };
    run_and_list(&t, empty(), empty());
    if t.on_pg() {
        return;
    }
    // Without --db: the default location, as if WF_DB were not there.
    let with_empty = || {
        let mut c = bare_wf(&t);
        c.env("WF_DB", "");
        c
    };
    run_and_list(&t, with_empty(), with_empty());
    assert_private(&t.path().join("home/.local/share/wf/wf.db"));
}

/// A quoted `~/x.db` (in `WF_DB`, or `--db '~/x.db'`) is in `$HOME`, as a
/// shell would have expanded it; no folder named `~` appears.
#[test]
fn a_leading_tilde_in_the_database_path_is_home() {
    let t = Test::new();
    if t.sqlite_only("a database file path") {
        return;
    }
    let home = t.path().join("home");
    std::fs::create_dir(&home).expect("mkdir");
    let from_env = || {
        let mut c = bare_wf(&t);
        c.env("WF_DB", "~/env.db");
        c
    };
    run_and_list(&t, from_env(), from_env());
    assert_private(&home.join("env.db"));
    let from_flag = || {
        let mut c = bare_wf(&t);
        c.args(["--db", "~/flag.db"]);
        c
    };
    run_and_list(&t, from_flag(), from_flag());
    assert_private(&home.join("flag.db"));
    assert!(
        !t.path().join("~").exists(),
        "a folder named `~` was created"
    );
}

// ---------------------------------------------------------------- wf run

#[test]
fn run_json_of_a_completed_instance() {
    let t = Test::new();
    let (id, ran) = t.run_yaml("orders.yaml", ORDERS, &[]);
    ran.code(0);
    let v = ran.json();
    assert_has_keys(&v, &["id", "status", "exit_code"], "wf run --json");
    assert_eq!(v["status"], "completed");
    assert_eq!(v["exit_code"], 0);
    let listed = t.wf(&["list", "--json"]).code(0).json();
    assert_eq!(listed[0]["id"], id.as_str());
}

#[test]
fn run_json_of_a_failed_instance() {
    let t = Test::new();
    let (id, ran) = t.run_yaml("broken.yaml", BROKEN, &[]);
    ran.code(1);
    let v = ran.json();
    assert_eq!(v["id"], id.as_str());
    assert_eq!(v["status"], "failed");
    assert_eq!(v["exit_code"], 1);
    assert_eq!(t.inspect(&id)["status"], "failed");
}

#[test]
fn run_exit_codes_without_json() {
    let t = Test::new();
    t.write("orders.yaml", ORDERS);
    t.write("broken.yaml", BROKEN);
    t.write("invalid.yaml", "name: invalid\nsteps: []\n");
    assert_eq!(t.wf(&["run", "orders.yaml"]).code, 0);
    assert_eq!(t.wf(&["run", "broken.yaml"]).code, 1);
    assert_eq!(t.wf(&["run", "invalid.yaml"]).code, 2);
}

#[test]
fn run_json_of_a_definition_error() {
    let t = Test::new();
    let (_, ran) = t.run_yaml("invalid.yaml", "name: invalid\nsteps: []\n", &[]);
    ran.code(2);
    assert_eq!(ran.stdout, "", "no instance, so no JSON");
    assert!(ran.stderr.starts_with("error: "), "{}", ran.stderr);
    assert!(!t.database_written());
}

#[test]
fn run_id_sets_the_instance_id() {
    let t = Test::new();
    let (id, ran) = t.run_yaml("orders.yaml", ORDERS, &["--id", "order-42"]);
    ran.code(0);
    assert_eq!(id, "order-42");
    assert_eq!(t.inspect("order-42")["id"], "order-42");
    let listed = t.wf(&["list", "--json"]).code(0).json();
    assert_eq!(listed[0]["id"], "order-42");
}

#[test]
fn run_with_an_existing_id_is_refused() {
    let t = Test::new();
    run_ok(&t, "orders.yaml", ORDERS, &["--id", "order-1"], 0);
    let before = t.inspect("order-1");
    let list_before = t.wf(&["list", "--json"]).code(0).json();

    let other = r#"name: other
steps:
  - id: mark
    run: touch other-ran.txt
"#;
    let (_, ran) = t.run_yaml("other.yaml", other, &["--id", "order-1"]);
    usage_error(&ran, &["order-1"]);
    assert!(
        !t.path().join("other-ran.txt").exists(),
        "the second workflow ran"
    );
    assert_eq!(
        t.inspect("order-1"),
        before,
        "the existing instance changed"
    );
    assert_eq!(t.wf(&["list", "--json"]).code(0).json(), list_before);
}

#[test]
fn run_with_an_invalid_id_is_refused() {
    let t = Test::new();
    t.write("orders.yaml", ORDERS);
    for bad in ["has space", "../escape", ""] {
        let ran = t.wf(&["run", "orders.yaml", "--id", bad]);
        ran.code(2);
        assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
    }
    // Refused before the database is opened: none is made.
    assert!(!t.database_written());
    assert!(!t.db.exists());
}

// ---------------------------------------------------------------- progress

/// Progress on a non-terminal: plain lines, one per step start and finish.
#[track_caller]
fn assert_plain_progress(stderr: &str, finished: &[(&str, &str)]) {
    assert!(
        !stderr.contains('\x1b'),
        "ANSI escapes in progress:\n{stderr:?}"
    );
    assert!(
        !stderr.contains('\r'),
        "carriage returns in progress:\n{stderr:?}"
    );
    for (step, outcome) in finished {
        let lines: Vec<&str> = stderr.lines().filter(|l| l.contains(step)).collect();
        let started = lines.iter().position(|l| l.contains("start"));
        let ended = lines.iter().rposition(|l| l.contains(outcome));
        assert!(
            matches!((started, ended), (Some(s), Some(e)) if s < e),
            "no start line followed by a `{outcome}` line for {step}:\n{stderr}"
        );
    }
}

#[test]
fn progress_is_plain_lines_on_a_non_terminal() {
    let t = Test::new();
    t.write("orders.yaml", ORDERS);
    let ran = t.wf(&["run", "orders.yaml"]);
    ran.code(0);
    assert_plain_progress(
        &ran.stderr,
        &[("hello", "ok"), ("flaky", "ok"), ("remember", "ok")],
    );
    // The retried attempt shows as its own start and finish.
    let flaky_starts = ran
        .stderr
        .lines()
        .filter(|l| l.contains("flaky") && l.contains("start"))
        .count();
    assert_eq!(flaky_starts, 2, "{}", ran.stderr);
}

#[test]
fn progress_has_no_colour_even_without_no_color_when_piped() {
    let t = Test::new();
    t.write("broken.yaml", BROKEN);
    let ran = Ran::from(
        t.cmd()
            .env_remove("NO_COLOR")
            .args(["run", "broken.yaml"])
            .output()
            .expect("run wf"),
    );
    ran.code(1);
    assert_plain_progress(&ran.stderr, &[("boom", "fail")]);
}

#[test]
fn run_json_keeps_progress_off_stdout() {
    let t = Test::new();
    let (_, ran) = t.run_yaml("orders.yaml", ORDERS, &[]);
    ran.code(0);
    // `json()` panics if anything but the JSON document is on stdout.
    assert_eq!(ran.json()["status"], "completed");
    assert_plain_progress(&ran.stderr, &[("hello", "ok")]);
}

#[test]
fn a_postgres_url_is_never_taken_for_a_file_path() {
    let t = Test::new();
    t.write(
        "ok.yaml",
        "name: ok\nsteps:\n  - id: a\n    run: echo ran >> ran.log\n",
    );
    // Nothing listens on port 1: the connection is refused at once.
    for url in [
        "postgres://ana:hunter2@127.0.0.1:1/wf",
        "postgresql://ana:hunter2@127.0.0.1:1/wf?sslmode=disable",
    ] {
        for args in [vec!["list"], vec!["run", "ok.yaml"]] {
            let out = bare_wf(&t)
                .arg("--db")
                .arg(url)
                .args(&args)
                .output()
                .expect("run wf");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(
                stderr.contains("postgres://ana@127.0.0.1:1/wf: cannot connect"),
                "the error names the server and database: {stderr}"
            );
            assert!(
                !stderr.contains("hunter2"),
                "the password is printed: {stderr}"
            );
        }
    }
    assert!(!t.path().join("ran.log").exists(), "a step ran");
    let created: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .filter_map(std::result::Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert!(
        !created
            .iter()
            .any(|n| n.to_string_lossy().starts_with("postgres")),
        "{created:?}"
    );
}

#[test]
fn list_filters_by_workflow_age_and_count() {
    let t = Test::new();
    let ids: Vec<String> = (0..3)
        .map(|_| {
            run_ok(
                &t,
                "a.yaml",
                "name: alpha\nsteps:\n  - id: s\n    run: 'true'\n",
                &[],
                0,
            )
        })
        .collect();
    let beta = run_ok(
        &t,
        "b.yaml",
        "name: beta\nsteps:\n  - id: s\n    run: 'true'\n",
        &[],
        0,
    );
    let listed = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["list", "--json"];
        all.extend_from_slice(args);
        t.wf(&all)
            .code(0)
            .json()
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(listed(&["--workflow", "beta"]), vec![beta.clone()]);
    let alpha: Vec<String> = ids.iter().rev().cloned().collect();
    assert_eq!(listed(&["--workflow", "alpha"]), alpha);
    assert_eq!(listed(&["--limit", "2"]), [beta.clone(), ids[2].clone()]);
    assert_eq!(
        listed(&["--workflow", "alpha", "--limit", "1"]),
        [ids[2].clone()]
    );
    assert_eq!(listed(&["--since", "1h"]).len(), 4);
    assert_eq!(listed(&["--status", "completed", "--limit", "3"]).len(), 3);
    usage_error(&t.wf(&["list", "--since", "soon"]), &["--since"]);
}

#[test]
fn completions_and_the_man_page_come_from_the_command_definitions() {
    let t = Test::new();
    for shell in ["bash", "zsh", "fish"] {
        let ran = t.wf(&["completions", shell]);
        ran.code(0);
        for sub in ["run", "resume", "inspect", "trace", "worker"] {
            assert!(ran.stdout.contains(sub), "{shell} completions lack {sub}");
        }
    }
    // bash accepts what it generated.
    let path = t.write("wf.bash", &t.wf(&["completions", "bash"]).stdout);
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && complete -p wf", path.display()))
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let man = t.wf(&["man"]);
    man.code(0);
    assert!(
        man.stdout.starts_with(".ie") && man.stdout.contains(".TH wf 1"),
        "{}",
        &man.stdout[..200.min(man.stdout.len())]
    );
    assert!(man.stdout.contains("resume"));
    usage_error(&t.wf(&["completions", "tcsh"]), &["tcsh"]);
    // --help carries the exit codes.
    assert!(
        t.wf(&["--help"])
            .code(0)
            .stdout
            .contains("5 held by another process")
    );
}

#[test]
fn processes_that_open_a_new_database_at_once_all_succeed() {
    // Switching a new file to WAL needs it alone for a moment: four runs
    // (and readers) starting on the same new database must not fail busy.
    for round in 0..12 {
        let t = Test::new();
        let path = t.write("ok.yaml", "name: ok\nsteps:\n  - id: a\n    run: 'true'\n");
        let children: Vec<_> = (0..4)
            .map(|_| {
                t.cmd()
                    .args(["run", path.to_str().unwrap(), "-q"])
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("spawn wf")
            })
            .collect();
        for _ in 0..4 {
            let _ = t.wf(&["list"]);
        }
        for child in children {
            let out = child.wait_with_output().expect("wait");
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert_eq!(
            t.wf(&["list", "--json"]).json().as_array().map(Vec::len),
            Some(4)
        );
    }
}

#[test]
fn json_on_every_command_that_prints_data() {
    let t = Test::new();
    // validate
    let good = t.write("good.yaml", "name: gate\nsteps:\n  - id: say\n    run: echo hi; echo oops >&2\n  - id: wait\n    wait_for_event: { name: go }\n");
    let v = t
        .wf(&["validate", "--json", good.to_str().unwrap()])
        .code(0)
        .json();
    assert_eq!(v["valid"], true);
    assert_eq!(v["steps"], 2);
    let bad = t.write("bad.yaml", "name: x\nstepz: []\n");
    let ran = t.wf(&["validate", "--json", bad.to_str().unwrap()]);
    ran.code(2);
    let v = ran.json();
    assert_eq!(
        (v["valid"].clone(), v["error"]["line"].clone()),
        (json!(false), json!(2))
    );
    // signal, worker, logs
    let id = run_ok(
        &t,
        "good.yaml",
        &std::fs::read_to_string(&good).unwrap(),
        &[],
        3,
    );
    let v = t.wf(&["signal", &id, "go", "--json"]).code(0).json();
    assert_eq!(v, json!({ "id": id, "event": "go", "delivered": true }));
    let ran = t.wf(&["worker", "--once", "--json"]);
    ran.code(0);
    let lines: Vec<Value> = ran
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect();
    assert_eq!(
        lines,
        vec![json!({ "id": id, "outcome": "completed", "reason": null })]
    );
    let v = t.wf(&["logs", &id, "say", "--json"]).code(0).json();
    assert_eq!(v["logs"][0]["stdout"], "hi\n");
    assert_eq!(v["logs"][0]["stderr"], "oops\n");
    assert_eq!(v["logs"][0]["outcome"], "ok");
    let v = t.wf(&["logs", &id, "--json"]).code(0).json();
    assert_eq!(v["logs"].as_array().map(Vec::len), Some(2));
}

#[test]
fn tables_fit_80_columns_without_breaking_names_ids_or_times() {
    let t = Test::new();
    let long_error =
        "this step failed with a message long enough to need cutting on a narrow terminal";
    let (id, ran) = t.run_yaml(
        "wide.yaml",
        &format!(
            "name: a-workflow-with-a-long-name\nsteps:\n  - id: reserve-stock\n    run: 'true'\n    compensate: {{ run: 'true' }}\n  - id: charge-customer-card\n    run: echo '{long_error}' >&2; exit 9\n"
        ),
        &[],
    );
    ran.code(1);
    for args in [
        vec!["list"],
        vec!["inspect", &id],
        vec!["inspect", &id, "--attempts"],
    ] {
        let out = t.on_terminal(80, &args).stdout;
        for line in out.lines() {
            assert!(
                line.chars().count() <= 80,
                "{args:?}: a line of {} columns:\n{out}",
                line.chars().count()
            );
        }
        assert!(out.contains(&id[..12]), "{args:?} lacks the id:\n{out}");
        if args.len() != 2 {
            assert!(out.contains(" ago "), "{args:?} lacks the times:\n{out}");
        }
        if args[0] == "inspect" {
            for name in ["reserve-stock:compensate", "charge-customer-card"] {
                assert!(out.contains(name), "{args:?} broke {name}:\n{out}");
            }
        }
    }
}

#[test]
fn logs_follow_streams_a_running_attempt_masked_and_ends_with_it() {
    let t = Test::new().env("WF_TEST_FOLLOW_SECRET", "f0ll0w-s3cret");
    let path = t.write(
        "follow.yaml",
        "name: follow\nsecrets: [WF_TEST_FOLLOW_SECRET]\nsteps:\n  - id: talk\n    run: |\n      echo \"first ${{ secrets.WF_TEST_FOLLOW_SECRET }}\"\n      echo oops >&2\n      i=0; while [ ! -f go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done\n      echo second\n",
    );
    let mut run = t
        .cmd()
        .args(["run", path.to_str().unwrap(), "--id", "fol1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn wf run");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while t.wf(&["inspect", "fol1", "--json"]).code != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the run never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out_path = t.path().join("follow.out");
    let mut follow = t
        .cmd()
        .args(["logs", "fol1", "talk", "--follow"])
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(t.path().join("follow.err")).unwrap())
        .spawn()
        .expect("spawn wf logs --follow");
    // The first line arrives while the step is still running.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !t.read("follow.out").contains("first") {
        assert!(std::time::Instant::now() < deadline, "nothing streamed");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        follow.try_wait().unwrap().is_none(),
        "--follow ended before the attempt"
    );
    t.write("go", "");
    assert!(follow.wait().unwrap().success());
    assert!(run.wait().unwrap().success());
    assert_eq!(t.read("follow.out"), "first ***\nsecond\n");
    assert_eq!(t.read("follow.err"), "oops\n");
    // Nothing is left beside the database.
    assert!(!t.path().join("wf.db.live").exists());
}

/// A terminal of 80 columns (tmux), for what only shows on one: the live
/// progress display. None (the test says so and passes) where tmux is not
/// installed; `.ci/run` installs it.
struct Tmux {
    session: String,
}

impl Tmux {
    fn start(t: &Test, command: &str) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            eprintln!(
                "tmux is not installed: the terminal test is not run (.ci/run installs tmux)"
            );
            return None;
        }
        let session = format!("wf-test-{}", std::process::id());
        let ok = Command::new("tmux")
            .args(["new-session", "-d", "-x", "80", "-y", "30", "-s", &session])
            .arg(format!(
                "cd {} && {command}; echo EXITED $?; sleep 600",
                t.path().display()
            ))
            .status()
            .expect("tmux")
            .success();
        assert!(ok, "tmux could not start");
        Some(Tmux { session })
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.session])
            .output()
            .expect("tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &str) {
        Command::new("tmux")
            .args(["send-keys", "-t", &self.session, keys])
            .status()
            .expect("tmux");
    }

    #[track_caller]
    fn wait_for(&self, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let screen = self.screen();
            if cond(&screen) {
                return screen;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no {what} on the screen:\n{screen}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.session])
            .status();
    }
}

#[test]
fn ctrl_c_on_a_terminal_leaves_no_progress_display_behind() {
    let t = Test::new();
    t.write(
        "long.yaml",
        "name: long\nsteps:\n  - id: first\n    run: 'true'\n  - id: slow-step\n    run: touch started; sleep 30\n",
    );
    let wf = assert_cmd::cargo::cargo_bin("wf");
    let Some(term) = Tmux::start(&t, &format!("{} run long.yaml", t.shell_wf(&wf))) else {
        return;
    };
    // The live display: a counter of done steps, a line for the running one.
    term.wait_for("progress display", |s| {
        s.contains("steps done") && t.path().join("started").exists()
    });
    term.keys("C-c");
    let screen = term.wait_for("exit", |s| s.contains("EXITED 130"));
    assert!(
        !screen.contains("steps done"),
        "the counter stayed:\n{screen}"
    );
    assert!(
        !screen
            .lines()
            .any(|l| l.contains("slow-step") && !l.contains(':')),
        "a spinner line stayed:\n{screen}"
    );
    assert!(
        screen.contains("interrupted; continue with `wf resume"),
        "{screen}"
    );
}
