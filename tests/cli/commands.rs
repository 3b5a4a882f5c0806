//! docs/commands.md commands: `wf list`, `wf inspect`, `wf logs`, `wf run --json`, id
//! prefixes, where the database lives (`--db`, `$WF_DB`, XDG, `~/.local/share`)
//! and its 0600 mode, exit codes, and plain progress lines on a non-terminal.
//!
//! Its tests by topic, beside the ones here: `database.rs`, `output.rs` (in `commands/`).

mod database;
mod output;

pub(crate) use database::{bare_wf, empty_database};

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
        // Who did it: this machine's user and host, padded to their width.
        (r"(?m)^ ACTION +BY .*$", "[ACTIONS]"),
        (r"(?m)^.*\bcli:\S+.*$", "[BY cli:USER@HOST]"),
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
