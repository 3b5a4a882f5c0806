//! What only PostgreSQL has (docs/postgres.md, issue 13): its errors (wrong
//! credentials, a missing database, TLS the server does not offer, a schema
//! from a newer wf, a server restarted mid-run), migrations under concurrent
//! first starts, the schema of `WF_PG_SCHEMA` (keywords, the longest name,
//! the names refused), connection strings (passwords holding URL
//! characters, parameters passed as given, sslmode over a Unix socket, no
//! password in `--help`), and workers on several hosts sharing one
//! database. These run on the PostgreSQL pass of the suite (the
//! server `scripts/test` starts); on the SQLite pass there is nothing to test.
//!
//! Its tests by topic, beside the ones here: `urls.rs` (in `pg/`).

mod urls;

use crate::Test;
use crate::durable::{Bg, eventually, lines, listed_status, spawn};
use serde_json::Value;
use std::collections::HashMap;
use std::process::{Command, Stdio};

/// The PostgreSQL test, or None (and a note) on the SQLite pass.
pub(crate) fn pg_test() -> Option<Test> {
    let t = Test::new();
    if !t.on_pg() {
        eprintln!("PostgreSQL only: not run on SQLite");
        return None;
    }
    Some(t)
}

/// The server's URL with other credentials, database or parameters.
fn url_with(t: &Test, userinfo: &str, database: &str, query: &str) -> String {
    let (url, _) = t.pg.as_ref().expect("pg");
    let rest = url.split_once('@').map_or(url.as_str(), |(_, r)| r);
    let host = rest.split('/').next().unwrap_or_default();
    format!("postgres://{userinfo}@{host}/{database}?{query}")
}

fn schema(t: &Test) -> String {
    t.pg.as_ref().expect("pg").1.clone()
}

/// `wf` with the test's environment and folder, without `--db`.
fn bare(t: &Test) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("wf"));
    with_env_of(t, &mut cmd);
    cmd.current_dir(t.path());
    cmd
}

/// Gives `cmd` the environment `t.cmd()` has (its schema, its variables).
fn with_env_of(t: &Test, cmd: &mut Command) {
    for (k, v) in t.cmd().get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
}

/// The `host:port` of a `postgres://user@host:port/db` URL.
pub(crate) fn host_port(url: &str) -> &str {
    url.split_once('@')
        .and_then(|(_, rest)| rest.split('/').next())
        .expect("host:port in the URL")
}

/// `wf --db URL ARGS…` with the test's schema.
fn wf_at(t: &Test, url: &str, args: &[&str]) -> crate::Ran {
    crate::Ran::from(
        bare(t)
            .args(["--db", url])
            .args(args)
            .output()
            .expect("run wf"),
    )
}

/// One line on stderr, exit 1, naming `names`, never `secret`.
#[track_caller]
fn one_line_error(ran: &crate::Ran, names: &[&str], secret: &str) {
    ran.code(1);
    assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
    for n in names {
        assert!(ran.stderr.contains(n), "`{n}` is not named: {}", ran.stderr);
    }
    assert!(
        !ran.stderr.contains(secret) && !ran.stdout.contains(secret),
        "the password is printed: {}",
        ran.stderr
    );
}

const HELLO: &str = "name: hello\nsteps:\n  - id: a\n    run: echo ran >> ran.log\n";

#[test]
fn wrong_credentials_and_a_missing_database_are_one_line_naming_host_and_database() {
    let Some(t) = pg_test() else { return };
    t.write("hello.yaml", HELLO);
    let role = schema(&t);
    t.psql(&format!(
        "CREATE ROLE {role} LOGIN PASSWORD 'right-horse-battery'; GRANT CREATE ON DATABASE postgres TO {role}"
    ));
    let (url, _) = t.pg.as_ref().unwrap();
    let host = host_port(url);

    let wrong = url_with(
        &t,
        &format!("{role}:wrong-staple"),
        "postgres",
        "sslmode=disable",
    );
    for args in [&["list"][..], &["run", "hello.yaml"]] {
        let ran = wf_at(&t, &wrong, args);
        one_line_error(
            &ran,
            &[
                &format!("postgres://{role}@{host}/postgres"),
                "password authentication failed",
            ],
            "wrong-staple",
        );
    }

    let missing = url_with(
        &t,
        &format!("{role}:right-horse-battery"),
        "no_such_db",
        "sslmode=disable",
    );
    let ran = wf_at(&t, &missing, &["run", "hello.yaml"]);
    one_line_error(
        &ran,
        &[
            &format!("postgres://{role}@{host}/no_such_db"),
            "does not exist",
        ],
        "right-horse-battery",
    );

    // TLS the server does not offer, when it is required (servers of
    // scripts/pg offer it where openssl is installed: see `tls_modes_…`).
    if std::env::var_os("WF_TEST_PG_CA").is_none() {
        let tls = url_with(
            &t,
            &format!("{role}:right-horse-battery"),
            "postgres",
            "sslmode=require",
        );
        let ran = wf_at(&t, &tls, &["list"]);
        one_line_error(
            &ran,
            &[&format!("postgres://{role}@{host}/postgres")],
            "right-horse-battery",
        );
    }
    assert!(!t.path().join("ran.log").exists(), "a step ran");

    // The right password works, and creates the schema as that role.
    let right = url_with(
        &t,
        &format!("{role}:right-horse-battery"),
        "postgres",
        "sslmode=prefer",
    );
    wf_at(&t, &right, &["run", "hello.yaml"]).code(0);
    assert_eq!(t.read("ran.log"), "ran\n");
    assert_eq!(
        t.psql(&format!(
            "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = '{role}'"
        )),
        role
    );
}

#[test]
fn tls_modes_verify_what_they_say() {
    let Some(t) = pg_test() else { return };
    let Some(ca) = std::env::var_os("WF_TEST_PG_CA") else {
        eprintln!("the test server has no TLS (openssl is missing): not run");
        return;
    };
    let ca = std::path::PathBuf::from(ca);
    let other = ca.with_file_name("other-ca.pem");
    t.write("hello.yaml", HELLO);
    let (url, _) = t.pg.as_ref().unwrap();
    let port = host_port(url).split(':').nth(1).expect("a port in the URL");
    // The server's certificate names `localhost`, not 127.0.0.1.
    let at = |host: &str, query: String| format!("postgres://wf@{host}:{port}/postgres?{query}");
    let trusting = |mode: &str, root: &std::path::Path| {
        format!("sslmode={mode}&sslrootcert={}", root.display())
    };
    // The schema made first (a worker's sweep over nothing): `list` only
    // reads one that exists.
    t.wf(&["worker", "--once"]).code(0);
    for (host, query, ok) in [
        ("localhost", trusting("verify-full", &ca), true),
        ("127.0.0.1", trusting("verify-ca", &ca), true),
        ("127.0.0.1", "sslmode=require".to_string(), true),
        ("127.0.0.1", trusting("verify-full", &ca), false),
        ("localhost", trusting("verify-full", &other), false),
        ("localhost", trusting("verify-ca", &other), false),
        ("localhost", "sslmode=verify-ca".to_string(), false),
    ] {
        let ran = wf_at(&t, &at(host, query.clone()), &["list", "--json"]);
        if ok {
            assert_eq!(ran.code, 0, "{host} {query}: {}", ran.stderr);
        } else {
            one_line_error(
                &ran,
                &[&format!("postgres://wf@{host}:{port}/postgres")],
                "hunter2",
            );
        }
    }
    // And a whole run over verified TLS.
    wf_at(
        &t,
        &at("localhost", trusting("verify-full", &ca)),
        &["run", "hello.yaml"],
    )
    .code(0);
    assert_eq!(t.read("ran.log"), "ran\n");
}

#[test]
fn a_signal_wakes_an_idle_worker_at_once() {
    let Some(t) = pg_test() else { return };
    let schema = schema(&t);
    signal_wakes_an_idle_worker(&t, &schema);
}

/// An instance waiting for `go`, a worker LISTENing in `schema` that would
/// look for work by itself only in an hour, and `wf signal`: the worker
/// finishes the instance.
fn signal_wakes_an_idle_worker(t: &Test, schema: &str) {
    let (id, ran) = t.run_yaml(
        "wait.yaml",
        "name: wait\nsteps:\n  - id: gate\n    wait_for_event: { name: go }\n  \
         - id: after\n    run: echo after >> ran.log\n",
        &[],
    );
    ran.code(3);
    let worker = spawn(t, &["worker", "--poll", "1h"]);
    // It is idle (LISTENing) once it said where it works.
    crate::durable::eventually("the worker to start", || {
        t.psql(&format!(
            "SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN \"wf_{schema}\"'"
        )) != "0"
    });
    t.wf(&["signal", &id, "go"]).code(0);
    eventually("the notified worker to finish the instance", || {
        listed_status(t, &id) == "completed"
    });
    worker.signal("TERM");
    worker.finish();
    assert_eq!(t.read("ran.log"), "after\n");
}

#[test]
fn a_schema_from_a_newer_wf_is_refused_and_left_as_it_was() {
    let Some(t) = pg_test() else { return };
    let (id, ran) = t.run_yaml("hello.yaml", HELLO, &[]);
    ran.code(0);
    t.psql("INSERT INTO migrations (version) VALUES (999)");
    let before = t.dump();
    for args in [
        vec!["list"],
        vec!["inspect", &id],
        vec!["run", "hello.yaml"],
        vec!["resume", &id],
        vec!["signal", &id, "go"],
        vec!["worker", "--once"],
    ] {
        let ran = t.wf(&args);
        ran.code(1);
        assert_eq!(ran.stderr.lines().count(), 1, "{args:?}: {}", ran.stderr);
        assert!(
            ran.stderr.contains("newer than this wf understands")
                && ran.stderr.contains("upgrade wf")
                && ran.stderr.contains(&schema(&t)),
            "{args:?}: {}",
            ran.stderr
        );
    }
    assert_eq!(t.dump(), before, "the history changed");
    assert_eq!(t.read("ran.log"), "ran\n", "a step ran again");
}

#[test]
fn concurrent_first_starts_migrate_once() {
    let Some(t) = pg_test() else { return };
    let children: Vec<_> = (0..6)
        .map(|_| {
            t.cmd()
                .args(["worker", "--once"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn wf")
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(
        t.psql("SELECT string_agg(version::text, ',' ORDER BY version) FROM migrations"),
        "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18"
    );
}

/// Migration 6 moved spans to binary ids under their instance's `seq`.
/// A database whose spans are still in the layout before it (rebuilt here
/// from the new rows, as migration 1 made them, and the later migrations
/// undone) reads back the same trace once wf migrates it: ids, links,
/// statuses, kinds and attributes.
#[test]
fn spans_kept_before_migration_6_read_back_the_same_after_it() {
    let Some(t) = pg_test() else { return };
    t.write(
        "two.yaml",
        "name: two\nsteps:\n  - id: first\n    run: echo one\n  - id: gate\n    wait_for_event: { name: go }\n\
         \x20 - id: flaky\n    run: exit 3\n    retry: { max_attempts: 2, interval: 10ms }\n",
    );
    t.wf(&["run", "two.yaml", "--id", "m6"]).code(3);
    t.wf(&["signal", "m6", "go"]).code(0);
    t.wf(&["resume", "m6"]).code(1);
    let trace = || {
        t.wf(&["trace", "m6", "--format", "json"])
            .code(0)
            .stdout
            .clone()
    };
    let before = trace();
    let spans: usize = t.psql("SELECT count(*) FROM spans").parse().unwrap();
    assert!(spans >= 10, "{spans} spans");
    t.psql(
        "CREATE TABLE spans_v5 AS SELECT encode(s.trace_id, 'hex') AS trace_id, \
           lpad(to_hex(s.span_id), 16, '0') AS span_id, \
           lpad(to_hex(s.parent_span_id), 16, '0') AS parent_span_id, i.id AS instance_id, s.run, s.name, \
           COALESCE(s.kind, 'internal') AS kind, s.start_ns, s.end_ns, COALESCE(s.status, 'unset') AS status, \
           s.status_message, s.attributes, COALESCE(s.links, '[]') AS links, s.exported \
         FROM spans s JOIN instances i ON i.seq = s.instance_seq; \
         DROP TABLE spans; ALTER TABLE spans_v5 RENAME TO spans; \
         DROP FUNCTION wf_count_instance() CASCADE; DROP FUNCTION wf_count_end() CASCADE; \
         DROP FUNCTION wf_bucket(double precision); \
         DROP TABLE metric_counts; DROP TABLE metric_ends; DROP TABLE metric_deltas; \
         CREATE INDEX spans_by_instance ON spans(instance_id, run, start_ns); \
         ALTER TABLE instances DROP COLUMN last_commit; DROP FUNCTION check_commit; \
         ALTER TABLE definitions DROP COLUMN children; DROP INDEX instances_by_parent; \
         ALTER TABLE instances DROP COLUMN parent_id, DROP COLUMN parent_key, \
           DROP COLUMN parent_attempt, DROP COLUMN depth, DROP COLUMN labels, \
           DROP COLUMN queue_key, DROP COLUMN queue_priority, DROP COLUMN queue_limits, \
           DROP COLUMN queue_hold, DROP COLUMN admitted; DROP TABLE admissions; DROP TABLE locks; DROP TABLE workflows; DROP TABLE workers; \
         ALTER TABLE instances DROP COLUMN started_by; DROP TABLE actions; DROP TABLE tokens; DROP TABLE sessions; \
         ALTER TABLE runs DROP COLUMN definition_hash; DROP INDEX instances_by_error_words; \
         ALTER TABLE attempts DROP COLUMN cached_from; DROP TABLE step_cache; \
         DELETE FROM migrations WHERE version >= 6",
    );
    // Values other than the defaults the new layout leaves null are there.
    assert_ne!(
        t.psql("SELECT count(*) FROM spans WHERE status = 'error'"),
        "0"
    );
    assert_ne!(
        t.psql("SELECT count(*) FROM spans WHERE links <> '[]'"),
        "0"
    );
    let after = trace();
    assert_eq!(
        t.psql("SELECT string_agg(version::text, ',' ORDER BY version) FROM migrations"),
        "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18"
    );
    assert_eq!(
        t.psql("SELECT count(*) FROM spans")
            .parse::<usize>()
            .unwrap(),
        spans
    );
    assert_eq!(after, before);
}

#[test]
fn an_invalid_schema_name_is_refused_before_connecting() {
    let Some(t) = pg_test() else { return };
    let t = t.env("WF_PG_SCHEMA", "Robert'); DROP TABLE x;--");
    let ran = t.wf(&["list"]);
    ran.code(1);
    assert!(ran.stderr.contains("WF_PG_SCHEMA"), "{}", ran.stderr);
    assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
}

/// A private server of the test's own (this test restarts it).
pub(crate) struct Server {
    dir: String,
    bin: String,
    pub(crate) url: String,
}

impl Server {
    pub(crate) fn start() -> Server {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/pg");
        let out = Command::new(script)
            .arg("start")
            .env("WF_PG_FSYNC", "off")
            .output()
            .expect("scripts/pg");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let vars: HashMap<String, String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.strip_prefix("export "))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.trim_matches('\'').to_string()))
            .collect();
        Server {
            dir: vars["WF_TEST_PG_DIR"].clone(),
            bin: vars["WF_TEST_PG_BIN"].clone(),
            url: vars["WF_TEST_PG"].clone(),
        }
    }

    pub(crate) fn pg_ctl(&self, args: &[&str]) {
        let mut cmd = if nix_is_root() {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]);
            c.arg(format!("{}/pg_ctl", self.bin));
            c
        } else {
            Command::new(format!("{}/pg_ctl", self.bin))
        };
        let status = cmd
            .args(["-D", &format!("{}/data", self.dir)])
            .args(args)
            .stdout(Stdio::null())
            .status()
            .expect("pg_ctl");
        assert!(status.success(), "pg_ctl {args:?}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/pg");
        let _ = Command::new(script).args(["stop", &self.dir]).status();
    }
}

fn nix_is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A worker on a host of its own: a UTS namespace with its own host name
/// (`unshare --uts`, which needs root), so that its lease names that host
/// and no other worker can take it for a process of its own.
pub(crate) fn worker_on_host(t: &Test, host: &str, with_uts: bool) -> Bg {
    let wf = assert_cmd::cargo::cargo_bin("wf");
    let mut cmd = Command::new(if with_uts { "unshare" } else { "sh" });
    let script = format!(
        "{} exec \"$0\" worker --poll 200ms --concurrency 4 --inline-wait 0s",
        if with_uts {
            format!("hostname {host} &&")
        } else {
            String::new()
        }
    );
    if with_uts {
        cmd.args(["--uts", "sh", "-c", &script]);
    } else {
        cmd.args(["-c", &script]);
    }
    cmd.arg(&wf);
    with_env_of(t, &mut cmd);
    let (url, _) = t.pg.as_ref().unwrap();
    cmd.env("WF_DB", url)
        .current_dir(t.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Bg::from_child(cmd.spawn().expect("spawn a worker"))
}

/// Lets the `stalled` worker go on, once everything is done, and stops it
/// and the `live` one: each exits 0 or 130, and the stalled one, which
/// wakes to find its leases taken, writes nothing more. Their outputs.
pub(crate) fn stop_workers(t: &Test, stalled: Bg, live: Bg) -> (crate::Ran, crate::Ran) {
    let before = t.dump();
    stalled.signal("CONT");
    for w in [&stalled, &live] {
        w.signal("TERM");
    }
    let (rs, rl) = (stalled.finish(), live.finish());
    for r in [&rs, &rl] {
        assert!(
            r.code == 0 || r.code == 130,
            "worker exited {}: {}",
            r.code,
            r.stderr
        );
    }
    assert_eq!(
        t.dump(),
        before,
        "the stalled worker wrote after losing its leases"
    );
    (rs, rl)
}

pub(crate) fn can_unshare() -> bool {
    Command::new("unshare")
        .args(["--uts", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn workers_on_three_hosts_drain_due_instances_through_a_kill_and_a_stall() {
    let Some(t) = pg_test() else { return };
    let t = t.env("WF_LEASE_TTL", "2s");
    let uts = can_unshare();
    if !uts {
        eprintln!("unshare --uts is not allowed here: the workers share this host's name");
    }
    // Every step appends a line per attempt; the run pauses first, so that
    // all instances are due when the workers start.
    let mut yaml = String::from("name: fleet\nsteps:\n  - id: nap\n    sleep: 1s\n");
    for i in 1..=3 {
        let needs = if i == 1 {
            "nap".to_string()
        } else {
            format!("s{}", i - 1)
        };
        yaml += &format!(
            "  - id: s{i}\n    needs: [{needs}]\n    run: echo \"$WF_INSTANCE_ID s{i}\" >> side.log; sleep 0.2\n"
        );
    }
    let path = t.write("fleet.yaml", &yaml);
    let ids: Vec<String> = (1..=42).map(|i| format!("f{i:02}")).collect();
    for id in &ids {
        t.wf(&[
            "run",
            path.to_str().unwrap(),
            "--id",
            id,
            "--inline-wait",
            "100ms",
        ])
        .code(3);
    }

    let mut a = worker_on_host(&t, "wf-host-a", uts);
    let b = worker_on_host(&t, "wf-host-b", uts);
    let c = worker_on_host(&t, "wf-host-c", uts);
    // Once the workers are busy: host a dies, host b stalls. Host c alone
    // finishes everything, b's instances once its leases expire.
    eventually("a few steps to run", || lines(&t, "side.log").len() >= 12);
    a.kill9();
    b.signal("STOP");
    eventually("every instance to complete", || {
        let list = t.wf(&["list", "--json"]).code(0).json();
        list.as_array()
            .is_some_and(|l| l.len() == ids.len() && l.iter().all(|i| i["status"] == "completed"))
    });
    drop(a);
    let (rb, _) = stop_workers(&t, b, c);

    // Every step ran once per recorded attempt: no attempt ran twice at
    // once, none ran unrecorded, none was lost.
    let log = lines(&t, "side.log");
    let mut recorded = 0;
    for id in &ids {
        let v: Value = t.inspect(id);
        for s in 1..=3 {
            let step = Test::step(&v, &format!("s{s}"));
            let attempts = step["attempt_list"].as_array().unwrap();
            let ran = log.iter().filter(|l| **l == format!("{id} s{s}")).count();
            // An attempt whose process was killed before its echo left no
            // line; one that echoed is recorded.
            assert!(
                ran <= attempts.len() && ran >= 1,
                "{id} s{s}: {ran} side effects for {} recorded attempts: {attempts:#?}",
                attempts.len()
            );
            assert_eq!(
                attempts.last().unwrap()["outcome"],
                "ok",
                "{id} s{s}: {attempts:#?}"
            );
            recorded += attempts.len();
        }
    }
    assert!(
        log.len() <= recorded,
        "{} lines, {recorded} attempts",
        log.len()
    );
    eprintln!(
        "{} side effects for {recorded} recorded attempts of {} steps",
        log.len(),
        ids.len() * 3
    );
    // The stalled worker was busy when stopped: it learnt of the takeovers.
    assert!(rb.stderr.contains("was taken over by"), "{}", rb.stderr);
    // The hosts are told apart in the leases they took.
    if uts {
        let owners = t.psql("SELECT string_agg(DISTINCT split_part(lease_owner, ':', 1), ',' ORDER BY split_part(lease_owner, ':', 1)) FROM instances");
        assert!(
            owners.split(',').all(|h| h.starts_with("wf-host-")),
            "{owners}"
        );
    }
}

// ------------------------------------------------ connection strings (issue 34)
