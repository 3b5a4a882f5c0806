//! `wf db` (issue 56): `copy` moves a history between databases (SQLite to
//! PostgreSQL and back on the PostgreSQL pass; SQLite to SQLite on the
//! SQLite pass) so that every read command prints the same on both and
//! the target's workers finish what was in flight; `backup` makes a
//! consistent copy of a live history (`db_backup.rs`: of a busy one);
//! `check` names what is wrong.

use crate::durable::eventually;
use crate::{Ran, Test};
use serde_json::Value;
use std::ffi::{OsStr, OsString};
use std::process::Command;
use std::time::Duration;

/// `wf --db DB ARGS…` with the test's environment (its PostgreSQL schema).
pub(crate) fn wf_on(t: &Test, db: &OsStr, args: &[&str]) -> Ran {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("wf"));
    cmd.current_dir(t.path())
        .env_remove("WF_DB")
        .env_remove("TRACEPARENT")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env("NO_COLOR", "1")
        .env("TMPDIR", t.tmp_path())
        .arg("--db")
        .arg(db)
        .args(args);
    if let Some((_, schema)) = &t.pg {
        cmd.env("WF_PG_SCHEMA", schema);
    }
    Ran::from(cmd.output().expect("run wf"))
}

/// Starts `cmd` (its output discarded) and SIGKILLs it `ms` later, if it
/// still runs then.
fn killed_after(mut cmd: Command, ms: u64) {
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("wf");
    std::thread::sleep(Duration::from_millis(ms));
    let _ = child.kill();
    let _ = child.wait();
}

/// A SQLite file of the test's folder, as `--db` takes it.
pub(crate) fn file(t: &Test, name: &str) -> OsString {
    t.path().join(name).into_os_string()
}

/// A history with something of everything: a chain with output, a failed
/// instance, a retried step, a sleeping and a waiting instance, one that
/// took an event, a parent with its child, a fan-out, labels, a
/// registered workflow and a schedule. Returns the ids of the sleeping and
/// the waiting instances.
fn varied_history(t: &Test, db: &OsStr) -> (String, String) {
    let run = |name: &str, yaml: &str, extra: &[&str]| -> (String, Ran) {
        let path = t.write(name, yaml);
        let mut args = vec!["run", path.to_str().expect("utf-8"), "--json"];
        args.extend_from_slice(extra);
        let ran = wf_on(t, db, &args);
        let id = serde_json::from_str::<Value>(&ran.stdout)
            .ok()
            .and_then(|v| v["id"].as_str().map(String::from))
            .unwrap_or_default();
        (id, ran)
    };
    run(
        "chain.yaml",
        "name: chain\nlabels: { team: ops }\nsteps:\n  - id: a\n    run: echo out-a; echo err-a >&2\n\
         \x20   set_state: { n: 1 }\n  - id: b\n    run: printf 'x\\0y'\n\
         \x20 - id: fan\n    for_each: '${{ [1, 2, 3] }}'\n    run: echo item ${{ item }}\n\
         outputs: { n: '${{ state.n }}' }\n",
        &["--label", "env=prod"],
    )
    .1
    .code(0);
    run(
        "fails.yaml",
        "name: fails\nsteps:\n  - id: f\n    run: echo no; exit 3\n    retry: { max_attempts: 2, interval: 10ms }\n",
        &[],
    )
    .1
    .code(1);
    t.write(
        "children/leaf.yaml",
        "name: leaf\nsteps:\n  - id: l\n    run: echo leaf\n",
    );
    run(
        "parent.yaml",
        "name: parent\nsteps:\n  - id: call\n    workflow: ./children/leaf.yaml\n",
        &[],
    )
    .1
    .code(0);
    let (sleeping, ran) = run(
        "nap.yaml",
        "name: nap\nsteps:\n  - id: first\n    run: echo before\n  - id: nap\n    sleep: 3s\n  - id: after\n    run: echo after\n",
        &["--inline-wait", "0s"],
    );
    ran.code(3);
    let (waiting, ran) = run(
        "wait.yaml",
        "name: wait\nsteps:\n  - id: w\n    wait_for_event: { name: go, timeout: 1h }\n  - id: after\n    run: echo got ${{ steps.w.output.json.who }}\n",
        &[],
    );
    ran.code(3);
    let (took, ran) = run(
        "took.yaml",
        "name: took\nsteps:\n  - id: w\n    wait_for_event: { name: go, timeout: 1h }\n",
        &[],
    );
    ran.code(3);
    wf_on(
        t,
        db,
        &["signal", &took, "go", "--data", "{\"who\": \"ann\"}"],
    )
    .code(0);
    wf_on(t, db, &["resume", &took]).code(0);
    let registered = t.write(
        "hourly.yaml",
        "name: hourly\non:\n  schedule:\n    - every: 1h\nsteps:\n  - id: h\n    run: echo hourly\n",
    );
    wf_on(
        t,
        db,
        &["workflow", "add", registered.to_str().expect("utf-8")],
    )
    .code(0);
    // A named token of `wf serve`: its hash moves with the history.
    wf_on(
        t,
        db,
        &["serve", "token", "add", "ci", "--scope", "operate"],
    )
    .code(0);
    (sleeping, waiting)
}

/// Every instance id of `db`, newest first.
pub(crate) fn ids(t: &Test, db: &OsStr) -> Vec<String> {
    wf_on(t, db, &["list", "--json", "--limit", "1000"])
        .code(0)
        .json()
        .as_array()
        .expect("a list")
        .iter()
        .map(|i| i["id"].as_str().expect("an id").to_string())
        .collect()
}

/// What the read commands print of every instance, and of the registry
/// and schedules: equal on two databases holding the same history.
fn reads(t: &Test, db: &OsStr) -> Vec<String> {
    let mut out = vec![
        wf_on(t, db, &["list", "--json", "--limit", "1000"])
            .code(0)
            .stdout
            .clone(),
        wf_on(t, db, &["workflow", "list", "--json"])
            .code(0)
            .stdout
            .clone(),
        wf_on(t, db, &["schedule", "list", "--json"])
            .code(0)
            .stdout
            .clone(),
        wf_on(t, db, &["serve", "token", "list", "--json"])
            .code(0)
            .stdout
            .clone(),
    ];
    for id in ids(t, db) {
        for args in [
            vec!["inspect", id.as_str(), "--json", "--attempts"],
            vec!["trace", id.as_str(), "--format", "json"],
            vec!["result", id.as_str(), "--json"],
        ] {
            let ran = wf_on(t, db, &args);
            out.push(format!("{args:?} exit {}\n{}", ran.code, ran.stdout));
        }
        let inspect = wf_on(t, db, &["inspect", &id, "--json", "--attempts"]).json();
        for step in inspect["steps"].as_array().expect("steps") {
            let key = step["id"].as_str().expect("a key");
            if step["attempts"].as_i64().unwrap_or(0) > 0 {
                let ran = wf_on(t, db, &["logs", &id, key]);
                out.push(format!("logs {id} {key} exit {}\n{}", ran.code, ran.stdout));
            }
        }
    }
    out
}

/// Asserts two databases print the same, read by read.
#[track_caller]
pub(crate) fn same_reads(t: &Test, a: &OsStr, b: &OsStr) {
    let (ra, rb) = (reads(t, a), reads(t, b));
    assert_eq!(ra.len(), rb.len(), "{ra:#?}\n---\n{rb:#?}");
    for (x, y) in ra.iter().zip(&rb) {
        assert_eq!(x, y);
    }
}

/// Where a copy goes: the test's PostgreSQL schema on the PostgreSQL pass,
/// another SQLite file on the SQLite pass.
pub(crate) fn second(t: &Test) -> OsString {
    match &t.pg {
        Some((url, _)) => url.into(),
        None => file(t, "second.db"),
    }
}

#[test]
fn a_copied_history_reads_the_same_and_its_workers_finish_what_was_in_flight() {
    let t = Test::new();
    let source = file(&t, "source.db");
    let (sleeping, waiting) = varied_history(&t, &source);
    let target = second(&t);
    let copied = wf_on(
        &t,
        &source,
        &[
            "db",
            "copy",
            "--to",
            target.to_str().expect("utf-8"),
            "--json",
        ],
    );
    copied.code(0);
    let n = ids(&t, &source).len() as u64;
    assert_eq!(
        copied.json(),
        serde_json::json!({"instances": n, "written": n, "skipped": 0})
    );
    same_reads(&t, &source, &target);
    // And back, into a third database: the same again.
    let back = file(&t, "back.db");
    wf_on(
        &t,
        &target,
        &["db", "copy", "--to", back.to_str().expect("utf-8")],
    )
    .code(0);
    same_reads(&t, &source, &back);
    // The target is a history its own workers go on with: the waiting
    // instance takes its event, the sleeping one wakes.
    wf_on(
        &t,
        &target,
        &["signal", &waiting, "go", "--data", "{\"who\": \"bo\"}"],
    )
    .code(0);
    eventually("the sleeping instance's timer", || {
        wf_on(&t, &target, &["worker", "--once"]).code(0);
        let status = |id: &str| {
            wf_on(&t, &target, &["result", id, "--json"]).json()["status"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        status(&sleeping) == "completed" && status(&waiting) == "completed"
    });
    let logs = wf_on(&t, &target, &["logs", &waiting, "after"]);
    assert_eq!(logs.code(0).stdout, "got bo\n");
    // Each step of the woken instances ran once there, after what the
    // source had recorded.
    let nap = t_inspect(&t, &target, &sleeping);
    for step in nap["steps"].as_array().expect("steps") {
        assert_eq!(step["attempts"].as_i64(), Some(1), "{step}");
    }
    // The source is as it was.
    assert_eq!(
        wf_on(&t, &source, &["result", &waiting, "--json"]).json()["status"],
        "waiting"
    );
}

pub(crate) fn t_inspect(t: &Test, db: &OsStr, id: &str) -> Value {
    wf_on(t, db, &["inspect", id, "--json", "--attempts"])
        .code(0)
        .json()
}

#[test]
fn a_target_holding_other_history_is_refused_and_resume_skips_what_is_there() {
    let t = Test::new();
    let source = file(&t, "source.db");
    let target = second(&t);
    let hello = t.write(
        "hello.yaml",
        "name: hello\nsteps:\n  - id: a\n    run: echo hi\n",
    );
    let hello = hello.to_str().expect("utf-8");
    for _ in 0..3 {
        wf_on(&t, &source, &["run", hello]).code(0);
    }
    let to = target.to_str().expect("utf-8");
    wf_on(&t, &source, &["db", "copy", "--to", to]).code(0);
    // Again: the target holds history now.
    let again = wf_on(&t, &source, &["db", "copy", "--to", to]);
    again.code(2);
    assert!(
        again.stderr.contains("already holds history"),
        "{}",
        again.stderr
    );
    assert_eq!(again.stderr.lines().count(), 1, "{}", again.stderr);
    // Continued: the three are there, the new one is written.
    wf_on(&t, &source, &["run", hello]).code(0);
    let resumed = wf_on(
        &t,
        &source,
        &["db", "copy", "--to", to, "--resume", "--json"],
    );
    assert_eq!(
        resumed.code(0).json(),
        serde_json::json!({"instances": 4, "written": 1, "skipped": 3})
    );
    same_reads(&t, &source, &target);
    // A target with an instance the source lacks is another history.
    let other = file(&t, "other.db");
    wf_on(&t, &other, &["run", hello]).code(0);
    let refused = wf_on(
        &t,
        &source,
        &[
            "db",
            "copy",
            "--to",
            other.to_str().expect("utf-8"),
            "--resume",
        ],
    );
    refused.code(2);
    assert!(
        refused.stderr.contains("not a copy of this history"),
        "{}",
        refused.stderr
    );
}

#[test]
fn a_copy_killed_at_any_moment_is_completed_by_resume_with_nothing_twice() {
    let t = Test::new();
    let source = file(&t, "source.db");
    let hello = t.write(
        "hello.yaml",
        "name: hello\nsteps:\n  - id: a\n    run: echo hi\n  - id: b\n    run: echo there\n",
    );
    let hello = hello.to_str().expect("utf-8");
    // Enough instances for three batches (500 a transaction).
    for _ in 0..1100 {
        wf_on(&t, &source, &["run", hello, "--detach"]).code(0);
    }
    let mut rng = crate::XorShift(0x9E37_79B9_7F4A_7C15 ^ u64::from(std::process::id()));
    for round in 0..3 {
        let target = file(&t, &format!("target-{round}.db"));
        let to = target.to_str().expect("utf-8");
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("wf"));
        cmd.current_dir(t.path())
            .env_remove("WF_DB")
            .arg("--db")
            .arg(&source)
            .args(["db", "copy", "--to", to]);
        killed_after(cmd, rng.below(300));
        let resumed = wf_on(
            &t,
            &source,
            &["db", "copy", "--to", to, "--resume", "--json"],
        );
        let v = resumed.code(0).json();
        assert_eq!(v["instances"], 1100);
        assert_eq!(
            v["written"].as_u64().unwrap_or(0) + v["skipped"].as_u64().unwrap_or(0),
            1100,
            "{v}"
        );
        assert_eq!(ids(&t, &target), ids(&t, &source));
        wf_on(&t, &target, &["db", "check"]).code(0);
    }
}

#[test]
fn check_names_each_broken_invariant_with_the_instance_it_hurts() {
    let t = Test::new();
    let chain = t.write(
        "chain.yaml",
        "name: chain\nsteps:\n  - id: a\n    run: echo a\n  - id: b\n    run: echo b\n",
    );
    let chain = chain.to_str().expect("utf-8");
    let mut made = Vec::new();
    for _ in 0..3 {
        let ran = t.wf(&["run", chain, "--json"]);
        made.push(ran.code(0).json()["id"].as_str().expect("id").to_string());
    }
    let sound = t.wf(&["db", "check", "--json"]);
    assert_eq!(
        sound.code(0).json(),
        serde_json::json!({"sound": true, "problems": []})
    );
    // Broken by hand, one invariant an instance.
    let bypass = if t.on_pg() {
        "SET session_replication_role = replica; "
    } else {
        ""
    };
    t.sql(&format!(
        "{bypass}DELETE FROM steps WHERE instance_id = '{}' AND key = 'a'",
        made[0]
    ));
    t.sql(&format!(
        "{bypass}UPDATE instances SET definition_hash = 'f00d' WHERE id = '{}'",
        made[1]
    ));
    // A lease running for an hour yet, held by a process of this host
    // that is gone (a pid no process has).
    let host = String::from_utf8(Command::new("hostname").output().expect("hostname").stdout)
        .expect("utf-8")
        .trim()
        .to_string();
    let later = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_millis()
        + 3_600_000;
    t.sql(&format!(
        "UPDATE instances SET lease_owner = '{host}:4194302:dead', lease_expires_ms = {later} WHERE id = '{}'",
        made[2]
    ));
    let broken = t.wf(&["db", "check", "--json"]);
    let v = broken.code(1).json();
    assert_eq!(v["sound"], false);
    let problems = v["problems"].as_array().expect("problems");
    let named = |check: &str, id: &str| {
        problems
            .iter()
            .any(|p| p["check"] == check && p["instance"] == id)
    };
    assert!(named("attempt without its step", &made[0]), "{v:#}");
    assert!(named("instance without its definition", &made[1]), "{v:#}");
    assert!(named("lease held by a dead holder", &made[2]), "{v:#}");
    // For people: a table naming each, and one line on stderr.
    let shown = t.wf(&["db", "check"]);
    shown.code(1);
    for id in &made {
        assert!(shown.stdout.contains(id.as_str()), "{}", shown.stdout);
    }
    assert!(shown.stderr.contains("problems"), "{}", shown.stderr);
}

/// The ids of the records an archive holds (a plain JSON lines file).
fn archived_ids(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("a JSON line");
            assert_eq!(v["wf_archive"], 1, "{v}");
            v["instance"]["id"].as_str().expect("an id").to_string()
        })
        .collect()
}

#[test]
fn pruned_instances_come_back_from_their_archive_the_same() {
    let t = Test::new();
    let db = t.db_arg();
    let (sleeping, waiting) = varied_history(&t, &db);
    let before = reads(&t, &db);
    let all = ids(&t, &db);
    let archive = t.path().join("pruned.jsonl.zst");
    let pruned = t.wf(&[
        "prune",
        "--older-than",
        "0s",
        "--archive",
        archive.to_str().expect("utf-8"),
    ]);
    pruned.code(0);
    assert!(pruned.stderr.contains("archived"), "{}", pruned.stderr);
    let left = ids(&t, &db);
    assert!(left.contains(&sleeping) && left.contains(&waiting));
    assert!(left.len() < all.len(), "nothing was pruned");
    let imported = t.wf(&["db", "import", archive.to_str().expect("utf-8"), "--json"]);
    let n = (all.len() - left.len()) as u64;
    assert_eq!(
        imported.code(0).json(),
        serde_json::json!({"records": n, "written": n, "skipped": 0})
    );
    assert_eq!(reads(&t, &db), before);
    // Again: each is there already.
    let again = t.wf(&["db", "import", archive.to_str().expect("utf-8"), "--json"]);
    assert_eq!(
        again.code(0).json(),
        serde_json::json!({"records": n, "written": 0, "skipped": n})
    );
    // Into another database, a record is self-contained: its definitions
    // come with it.
    let other = file(&t, "other.db");
    wf_on(
        &t,
        &other,
        &["db", "import", archive.to_str().expect("utf-8")],
    )
    .code(0);
    wf_on(&t, &other, &["db", "check"]).code(0);
    for id in ids(&t, &other) {
        assert_eq!(
            t_inspect(&t, &other, &id),
            t_inspect(&t, &db, &id),
            "{id} reads the same"
        );
    }
}

#[test]
fn a_prune_killed_at_any_moment_leaves_each_instance_in_the_database_or_the_archive() {
    let t = Test::new();
    let hello = t.write(
        "hello.yaml",
        "name: hello\nsteps:\n  - id: a\n    run: echo hi\n",
    );
    let hello = hello.to_str().expect("utf-8");
    let db = t.db_arg();
    for _ in 0..40 {
        t.wf(&["run", hello]).code(0);
    }
    let all = ids(&t, &db);
    let archive = t.path().join("pruned.jsonl");
    let mut rng = crate::XorShift(0xA076_1D64_78BD_642F ^ u64::from(std::process::id()));
    // Killed at random moments, then let finish.
    for round in 0..6 {
        let mut cmd = t.cmd();
        cmd.args([
            "prune",
            "--older-than",
            "0s",
            "--archive",
            archive.to_str().expect("utf-8"),
        ]);
        if round < 5 {
            killed_after(cmd, rng.below(60));
        } else {
            Ran::from(cmd.output().expect("wf prune")).code(0);
        }
        let left = ids(&t, &db);
        let kept = archived_ids(&archive);
        for id in &all {
            assert!(
                left.contains(id) || kept.contains(id),
                "{id} is neither in the database nor in the archive after round {round}"
            );
        }
    }
    // On PostgreSQL a killed prune's locks last until its server process
    // sees it gone, and a prune skips locked rows (`SKIP LOCKED`): a later
    // prune takes them.
    eventually("every instance pruned", || {
        t.wf(&[
            "prune",
            "--older-than",
            "0s",
            "--archive",
            archive.to_str().expect("utf-8"),
        ])
        .code(0);
        ids(&t, &db).is_empty()
    });
    // The batches archived by a killed prune are there twice at most; each
    // comes back once.
    let imported = t.wf(&["db", "import", archive.to_str().expect("utf-8"), "--json"]);
    let v = imported.code(0).json();
    assert_eq!(v["written"], all.len());
    assert_eq!(ids(&t, &db).len(), all.len());
}

/// The fire times of the scheduled instances of `db`, sorted (ms).
fn fire_times(t: &Test, db: &OsStr) -> Vec<String> {
    let mut fires: Vec<String> = ids(t, db)
        .iter()
        .filter_map(|id| {
            t_inspect(t, db, id)["schedule"]["fire_at"]
                .as_str()
                .map(String::from)
        })
        .collect();
    fires.sort();
    fires
}

#[test]
fn a_copied_schedule_fires_on_the_target_from_its_cursor_never_twice() {
    let t = Test::new();
    let source = file(&t, "source.db");
    let tick = t.write(
        "tick.yaml",
        "name: tick\non:\n  schedule:\n    - every: 2s\nsteps:\n  - id: t\n    run: echo tick\n",
    );
    wf_on(
        &t,
        &source,
        &["workflow", "add", tick.to_str().expect("utf-8")],
    )
    .code(0);
    // The source's worker fires it once.
    eventually("a first fire on the source", || {
        wf_on(&t, &source, &["worker", "--once"]).code(0);
        !fire_times(&t, &source).is_empty()
    });
    let fired = fire_times(&t, &source);
    let target = second(&t);
    wf_on(
        &t,
        &source,
        &["db", "copy", "--to", target.to_str().expect("utf-8")],
    )
    .code(0);
    assert_eq!(
        wf_on(&t, &target, &["schedule", "list", "--json"]).stdout,
        wf_on(&t, &source, &["schedule", "list", "--json"]).stdout,
        "the cursor moves with the schedule"
    );
    // The target's worker fires the next fire time, and never one the
    // source fired.
    eventually("a fire on the target", || {
        wf_on(&t, &target, &["worker", "--once"]).code(0);
        fire_times(&t, &target).len() > fired.len()
    });
    let there = fire_times(&t, &target);
    let mut unique = there.clone();
    unique.dedup();
    assert_eq!(
        unique, there,
        "a fire time started two instances: {there:?}"
    );
    for f in &there[fired.len()..] {
        assert!(
            f > fired.last().expect("a fire"),
            "{f} is not after the source's last fire {fired:?}"
        );
    }
    assert_eq!(&there[..fired.len()], fired.as_slice());
}

#[test]
fn wf_serve_checks_the_history_in_the_api_and_on_a_page() {
    let t = Test::new();
    let hello = t.write(
        "hello.yaml",
        "name: hello\nsteps:\n  - id: a\n    run: echo hi\n",
    );
    let ran = t.wf(&["run", hello.to_str().expect("utf-8"), "--json"]);
    let id = ran.code(0).json()["id"].as_str().expect("id").to_string();
    let s = crate::serve::Server::start(&t, &[], &[]);
    let sound = s.get("/api/v1/db/check");
    assert_eq!(sound.status, 200);
    assert_eq!(
        sound.json(),
        serde_json::json!({"sound": true, "problems": []})
    );
    let page = s.get("/database");
    assert_eq!(page.status, 200);
    assert!(page.text().contains("Sound"), "{}", page.text());
    t.sql(&format!(
        "DELETE FROM steps WHERE instance_id = '{id}' AND key = 'a'"
    ));
    let broken = s.get("/api/v1/db/check").json();
    assert_eq!(broken["sound"], false);
    assert_eq!(
        broken,
        t.wf(&["db", "check", "--json"]).code(1).json(),
        "the API answers what the CLI prints"
    );
    let page = s.get("/database").text();
    assert!(page.contains("attempt without its step"), "{page}");
    assert!(page.contains(&format!("/instances/{id}")), "{page}");
}
