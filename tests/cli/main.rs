//! Integration tests that drive the real `wf` binary: a real SQLite file in a
//! temp dir (or, when `WF_TEST_PG` names a server, a schema of its own on a
//! real PostgreSQL server), real processes, real signals. One module per
//! feature; the [`Test`] builder keeps each test to what it is about.
//! `scripts/test` runs the suite on both backends.

mod actions;
mod backup_crash;
mod budgets;
mod bulk;
mod cache;
mod chaos;
mod collector;
mod commands;
mod control;
mod corpus;
mod crash;
mod db;
mod db_api;
mod db_backup;
mod definition;
mod detach;
mod durable;
mod expressions;
mod failover;
mod finding;
mod holders;
mod http;
mod injection;
mod inspect;
mod inspector;
mod labels;
mod leaks;
mod locks;
mod matrix;
mod metrics;
mod openapi;
mod outputs;
mod ownership;
mod partition;
mod pg;
mod prometheus;
mod proxy;
mod prune;
mod queues;
mod refusals;
mod restart;
mod retries;
mod run;
mod schedules;
mod schema;
mod serve;
mod serve_security;
mod state;
mod subworkflows;
mod switches;
mod tokens;
mod traces;
mod upgrade;
mod upgrades;
mod webhooks;

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// One test's world: a temp dir holding the workflows and the database.
pub struct Test {
    pub dir: tempfile::TempDir,
    /// The SQLite file (on SQLite runs).
    pub db: PathBuf,
    /// On PostgreSQL runs: the server's URL and this test's schema.
    pub pg: Option<(String, String)>,
    env: Vec<(String, String)>,
    /// wf's TMPDIR (its `$WF_OUTPUT` files): one per test, so that a wf a
    /// test kills leaves nothing in the machine's /tmp.
    tmp: tempfile::TempDir,
}

/// The PostgreSQL server the suite runs against, if any (`scripts/test`
/// starts one and sets `WF_TEST_PG`).
pub fn pg_url() -> Option<String> {
    std::env::var("WF_TEST_PG").ok().filter(|u| !u.is_empty())
}

/// A PostgreSQL client program (`psql`, `pg_dump`): from the test server's
/// `WF_TEST_PG_BIN` when set, else from `PATH`.
pub fn pg_tool(name: &str) -> String {
    match std::env::var("WF_TEST_PG_BIN") {
        Ok(bin) if !bin.is_empty() => format!("{bin}/{name}"),
        _ => name.to_string(),
    }
}

/// What a finished `wf` invocation left behind.
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    pub fn from(out: Output) -> Ran {
        Ran {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Asserts the exit code, showing the output when it is wrong.
    #[track_caller]
    pub fn code(&self, expected: i32) -> &Ran {
        assert_eq!(
            self.code, expected,
            "unexpected exit code\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        );
        self
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\n--- stderr\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

impl Default for Test {
    fn default() -> Self {
        Test::new()
    }
}

impl Test {
    pub fn new() -> Test {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("wf.db");
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let pg = pg_url().map(|url| {
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (url, format!("t{}_{n}", std::process::id()))
        });
        Test {
            dir,
            db,
            pg,
            env: Vec::new(),
            tmp: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// Whether this test runs against PostgreSQL.
    pub fn on_pg(&self) -> bool {
        self.pg.is_some()
    }

    /// For a test about what only SQLite has (its file, its locks): true
    /// (and says so) on PostgreSQL runs, where the test returns early.
    pub fn sqlite_only(&self, why: &str) -> bool {
        if self.on_pg() {
            eprintln!("SQLite only ({why}): not run on PostgreSQL");
        }
        self.on_pg()
    }

    /// What `--db` is: the file, or the server's URL.
    pub fn db_arg(&self) -> std::ffi::OsString {
        match &self.pg {
            Some((url, _)) => url.into(),
            None => self.db.clone().into(),
        }
    }

    /// `wf --db …` as a shell command line (for a terminal test).
    pub fn shell_wf(&self, wf: &Path) -> String {
        match &self.pg {
            Some((url, schema)) => {
                format!("env WF_PG_SCHEMA={schema} {} --db '{url}'", wf.display())
            }
            None => format!("{} --db {}", wf.display(), self.db.display()),
        }
    }

    /// `wf ARGS…` on a pseudo terminal `cols` wide (util-linux `script`),
    /// with this test's database and environment; its output with the
    /// terminal's carriage returns taken out.
    pub fn on_terminal(&self, cols: u16, args: &[&str]) -> Ran {
        let cmd = self.cmd();
        let quote =
            |s: &std::ffi::OsStr| format!("'{}'", s.to_string_lossy().replace('\'', "'\\''"));
        let mut line = format!(
            "stty cols {cols} rows 60; exec {}",
            quote(cmd.get_program())
        );
        for a in cmd.get_args().chain(args.iter().map(std::ffi::OsStr::new)) {
            line.push(' ');
            line.push_str(&quote(a));
        }
        let mut script = Command::new("script");
        script
            .args(["-qec", &line, "/dev/null"])
            .current_dir(self.path())
            .stdin(std::process::Stdio::null());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => script.env(k, v),
                None => script.env_remove(k),
            };
        }
        let out = script
            .output()
            .expect("script (util-linux) runs wf on a pseudo terminal");
        let mut ran = Ran::from(out);
        ran.stdout = ran.stdout.replace('\r', "");
        ran
    }

    /// Runs `sql` with psql in this test's schema; its output (`-At`).
    pub fn psql(&self, sql: &str) -> String {
        let (url, schema) = self.pg.as_ref().expect("a PostgreSQL run");
        let out = Command::new(pg_tool("psql"))
            .arg(url)
            .args(["-qAt", "-v", "ON_ERROR_STOP=1", "-c"])
            .arg(format!("SET search_path TO {schema}; {sql}"))
            .output()
            .expect("psql");
        assert!(
            out.status.success(),
            "psql: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Runs one SQL statement on either backend (psql, or python3's sqlite3
    /// module, committed); its rows, a line each, columns joined by `|`.
    pub fn sql(&self, sql: &str) -> String {
        if self.pg.is_some() {
            return self.psql(sql);
        }
        python_sqlite(
            &self.db,
            &format!(
                "import sys, sqlite3\nc = sqlite3.connect(sys.argv[1])\n\
                 rows = c.execute({sql:?}).fetchall()\nc.commit()\n\
                 print('\\n'.join('|'.join('' if v is None else str(v) for v in r) for r in rows))"
            ),
        )
        .trim()
        .to_string()
    }

    /// Whether anything was recorded: the SQLite file exists, or the
    /// PostgreSQL schema holds an instance.
    pub fn database_written(&self) -> bool {
        match &self.pg {
            None => self.db.exists(),
            Some((_, schema)) => {
                let exists = self.psql(&format!(
                    "SELECT count(*) FROM pg_tables WHERE schemaname = '{schema}' AND tablename = 'instances'"
                ));
                exists != "0" && self.psql("SELECT count(*) FROM instances") != "0"
            }
        }
    }

    /// A logical dump of the history recorded (rows in a stable order):
    /// not `/metrics`' kept counts, which a new instance changes, as it
    /// should, whatever else it leaves.
    pub fn dump(&self) -> String {
        match &self.pg {
            None => python_sqlite(
                &self.db,
                "import sqlite3, sys\n\
                 c = sqlite3.connect(sys.argv[1])\n\
                 for line in c.iterdump():\n\
                 \x20   if not line.startswith('INSERT INTO \"metric_'): print(line)",
            ),
            Some(_) => {
                let mut out = String::new();
                // Spans name their instance by its seq: each row is shown
                // with the instance's id.
                for table in [
                    "instances",
                    "runs",
                    "steps",
                    "attempts",
                    "events",
                    "(SELECT i.id, s.* FROM spans s JOIN instances i ON i.seq = s.instance_seq)",
                ] {
                    out.push_str(
                        &self.psql(&format!("SELECT t::text FROM {table} t ORDER BY t::text")),
                    );
                    out.push('\n');
                }
                out
            }
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The TMPDIR every wf of this test gets (where its `$WF_OUTPUT` files are).
    pub fn tmp_path(&self) -> &Path {
        self.tmp.path()
    }

    /// Writes a file (a workflow, a script) into the test dir; returns its path.
    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&path, contents).expect("write");
        if name.ends_with(".sh") {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        path
    }

    pub fn env(mut self, key: &str, value: &str) -> Test {
        self.env.push((key.into(), value.into()));
        self
    }

    /// A `wf` command with `--db` pointing into the test dir and a clean env.
    pub fn cmd(&self) -> Command {
        self.cmd_of(Command::cargo_bin("wf").expect("wf binary"))
    }

    /// [`Test::cmd`] of another `wf` binary (`tests/cli/upgrade.rs`: the
    /// previous release's).
    pub fn cmd_of(&self, mut cmd: Command) -> Command {
        cmd.current_dir(self.dir.path())
            .env_remove("WF_DB")
            .env_remove("TRACEPARENT")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("WF_DURABILITY")
            .env("NO_COLOR", "1")
            .env("TMPDIR", self.tmp.path())
            .arg("--db")
            .arg(self.db_arg());
        if let Some((_, schema)) = &self.pg {
            cmd.env("WF_PG_SCHEMA", schema);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs `wf ARGS…` to completion.
    pub fn wf(&self, args: &[&str]) -> Ran {
        Ran::from(self.cmd().args(args).output().expect("run wf"))
    }

    /// Writes each `(yaml, at, says)` as `wf.yaml` and checks that `wf
    /// validate` refuses it with exit 2 and an error at `at` (`wf.yaml:LINE:COL`,
    /// or a prefix of it) whose message holds `says`.
    #[track_caller]
    pub fn refuses(&self, cases: &[(&str, &str, &str)]) {
        for (yaml, at, says) in cases {
            let path = self.write("wf.yaml", yaml);
            let ran = self.wf(&["validate", path.to_str().expect("utf-8 path")]);
            ran.code(2);
            assert!(
                ran.stderr.contains(&format!("/{at}")) && ran.stderr.contains(says),
                "{yaml}\n{}",
                ran.stderr
            );
        }
    }

    /// An instance of a 1-step workflow that failed for want of a file
    /// (exit 1 checked); returns (id, that file), whose writing fixes it.
    pub fn failed_until_fixed(&self) -> (String, PathBuf) {
        let flag = self.path().join("fixed");
        let flaky = format!(
            "name: flaky\nsteps:\n  - id: once\n    run: test -e {}\n",
            flag.display()
        );
        let (id, ran) = self.run_yaml("flaky.yaml", &flaky, &[]);
        ran.code(1);
        (id, flag)
    }

    /// Writes `yaml` as `name` and runs it with `wf run --json`; returns (id, ran).
    pub fn run_yaml(&self, name: &str, yaml: &str, extra: &[&str]) -> (String, Ran) {
        let path = self.write(name, yaml);
        let mut args = vec!["run", path.to_str().expect("utf-8 path"), "--json"];
        args.extend_from_slice(extra);
        let ran = self.wf(&args);
        let id = serde_json::from_str::<Value>(&ran.stdout)
            .ok()
            .and_then(|v| v["id"].as_str().map(String::from))
            .unwrap_or_default();
        (id, ran)
    }

    /// `wf inspect ID --json --attempts` as JSON.
    pub fn inspect(&self, id: &str) -> Value {
        self.wf(&["inspect", id, "--json", "--attempts"])
            .code(0)
            .json()
    }

    /// Each run's root span of instance `id` (`wf trace --format json`), in
    /// run order.
    pub fn run_roots(&self, id: &str) -> Vec<Value> {
        let r = self.wf(&["trace", id, "--format", "json"]);
        r.code(0);
        let runs: Value = serde_json::from_str(&r.stdout).expect("trace json");
        runs.as_array()
            .expect("runs")
            .iter()
            .filter(|run| run["instance_id"] == id)
            .map(|run| {
                let root = run["spans"][0].clone();
                assert!(
                    root["name"]
                        .as_str()
                        .is_some_and(|n| n.ends_with("/workflow")),
                    "{root}"
                );
                root
            })
            .collect()
    }

    /// Reads a file the workflow wrote into the test dir ("" if missing).
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default()
    }

    /// The step named `id` in an inspect JSON.
    pub fn step<'a>(inspect: &'a Value, id: &str) -> &'a Value {
        inspect["steps"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["id"] == id))
            .unwrap_or_else(|| panic!("no step {id} in {inspect:#}"))
    }
}

/// A small seeded PRNG (xorshift64), so the crash tests need no rand crate.
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// For a test about what only SQLite has (its file, its locks): true (and
/// says so) on PostgreSQL runs, where the test returns early.
pub fn sqlite_only(why: &str) -> bool {
    let pg = pg_url().is_some();
    if pg {
        eprintln!("SQLite only ({why}): not run on PostgreSQL");
    }
    pg
}

/// Runs a python3 `sqlite3` script with the database path as `sys.argv[1]`;
/// its stdout (the script must succeed).
pub fn python_sqlite(db: &Path, script: &str) -> String {
    python(script, &[db.as_os_str()])
}

/// Runs a python3 script with `args` as `sys.argv[1:]`; its stdout (the
/// script must succeed).
pub fn python(script: &str, args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `PRAGMA integrity_check` of a database file, through the sqlite3 CLI when
/// the machine has it, else python3's sqlite3 module.
pub fn integrity_check(db: &Path) -> String {
    let cli = Command::new("sqlite3")
        .arg(db)
        .arg("PRAGMA integrity_check;")
        .output();
    let out = match cli {
        Ok(out) if out.status.success() => out,
        _ => Command::new("python3")
            .arg("-c")
            .arg(
                "import sqlite3, sys\n\
                 c = sqlite3.connect(sys.argv[1])\n\
                 print('\\n'.join(r[0] for r in c.execute('PRAGMA integrity_check')))",
            )
            .arg(db)
            .output()
            .expect("neither sqlite3 nor python3 can check the database"),
    };
    assert!(
        out.status.success(),
        "integrity check failed to run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
