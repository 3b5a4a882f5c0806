//! Broken databases: corrupt, from a newer wf, not a database, locked past the busy timeout, or holding a pinned definition that no longer parses; each gives one line and is left as it was.

use super::*;

/// The fixture's database file, checkpointed so the file alone holds it all.
fn db_bytes(fx: &Fixture) -> Vec<u8> {
    let out = Command::new("python3")
        .arg("-c")
        .arg(
            "import sqlite3, sys\n\
             c = sqlite3.connect(sys.argv[1])\n\
             c.execute('PRAGMA wal_checkpoint(TRUNCATE)')\n\
             c.close()",
        )
        .arg(&fx.t.db)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "checkpoint: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(&fx.t.db).expect("read db")
}

/// A fresh test dir with the fixture's files and no database yet.
fn with_files() -> Test {
    let t = Test::new().env("WF_BUSY_TIMEOUT_MS", BUSY_TIMEOUT_MS);
    write_inputs(&t);
    t
}

/// A fresh test dir whose database is `bytes`, with the fixture's files.
fn with_db(bytes: &[u8]) -> Test {
    let t = with_files();
    std::fs::write(&t.db, bytes).expect("write db");
    t
}

/// Runs every command of [`DB_COMMANDS`] against `t`: each exits 1 with one
/// line naming the problem, runs no step, and leaves the file's bytes as
/// they were.
fn check_broken_db(t: &Test, what: &str, needle: &str, failures: &mut Vec<String>) {
    let bytes = std::fs::read(&t.db).ok();
    for args in DB_COMMANDS {
        let ran = t.wf(args);
        // A command that only reads, or acts on an instance, says there is
        // no database, and creates none.
        let read_only = [
            "list", "inspect", "trace", "logs", "resume", "signal", "cancel",
        ]
        .contains(&args[0]);
        let needle = if read_only && !t.db.exists() {
            "no database at"
        } else {
            needle
        };
        if let Err(e) = rejected_with(&ran, 1, needle) {
            failures.push(format!("{what}: {args:?}: {e}"));
        }
        if std::fs::read(&t.db).ok() != bytes {
            failures.push(format!("{what}: {args:?} changed the database file"));
        }
        if t.path().join("ran.log").exists() {
            failures.push(format!("{what}: {args:?} ran a step"));
        }
    }
}

#[test]
fn a_corrupt_database_gives_one_line_and_is_left_as_it_was() {
    if crate::sqlite_only("the bytes of a database file") {
        return;
    }
    let fx = Fixture::new();
    let good = db_bytes(&fx);
    assert!(good.len() >= 8192 && good.starts_with(b"SQLite format 3\0"));
    let page = u16::from_be_bytes([good[16], good[17]]) as usize;
    let page = if page == 1 { 65536 } else { page };

    let mut garbage_pages = good.clone();
    for b in &mut garbage_pages[page..] {
        *b = 0xff;
    }
    let mut bad_header = good.clone();
    bad_header[..16].copy_from_slice(b"not a database!\0");
    let variants: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "truncated to half",
            good[..good.len() / 2].to_vec(),
            "malformed",
        ),
        (
            "truncated inside the header",
            good[..60].to_vec(),
            "malformed",
        ),
        ("header overwritten", bad_header, "not a database"),
        (
            "every page after the first is garbage",
            garbage_pages,
            "malformed",
        ),
        (
            "a text file",
            b"instances: done-1, done-2\n".to_vec(),
            "not a database",
        ),
    ];
    let mut failures = Vec::new();
    for (what, bytes, needle) in &variants {
        check_broken_db(&with_db(bytes), what, needle, &mut failures);
    }
    assert_no_failures(&failures, variants.len() * DB_COMMANDS.len());
    // The original is untouched by all this.
    fx.unchanged("the original database").unwrap();
}

#[test]
fn a_database_from_a_newer_wf_is_refused_and_left_as_it_was() {
    if crate::sqlite_only("PRAGMA user_version; see pg::") {
        return;
    }
    let fx = Fixture::new();
    let t = with_db(&db_bytes(&fx));
    let out = Command::new("python3")
        .arg("-c")
        .arg(
            "import sqlite3, sys\n\
             c = sqlite3.connect(sys.argv[1])\n\
             c.execute('PRAGMA user_version=999')\n\
             c.commit()\n\
             c.close()",
        )
        .arg(&t.db)
        .output()
        .expect("python3");
    assert!(out.status.success());
    let mut failures = Vec::new();
    check_broken_db(&t, "schema version 999", "upgrade wf", &mut failures);
    assert_no_failures(&failures, DB_COMMANDS.len());
}

#[test]
fn a_database_path_that_cannot_be_a_database_gives_one_line() {
    if crate::sqlite_only("a file path") {
        return;
    }
    let fx = Fixture::new();
    let mut failures = Vec::new();

    // A directory where the database file should be.
    let mut t = with_files();
    t.db = t.path().join("folder.db");
    std::fs::create_dir(&t.db).unwrap();
    check_broken_db(&t, "a directory", "is a directory", &mut failures);
    if std::fs::read_dir(&t.db)
        .map(std::iter::Iterator::count)
        .unwrap_or(1)
        != 0
    {
        failures.push("something was written into the directory".into());
    }

    // A folder that cannot be written. Permission bits do not stop root (the
    // tests may run as root), so the folder is made impossible instead: its
    // path names a regular file, which can hold no database below it.
    let mut t = with_files();
    std::fs::write(t.path().join("plain-file"), "not a folder\n").unwrap();
    t.db = t.path().join("plain-file").join("wf.db");
    check_broken_db(
        &t,
        "a regular file as the folder",
        "not a folder",
        &mut failures,
    );
    t.db = t.path().join("plain-file").join("deeper").join("wf.db");
    check_broken_db(
        &t,
        "a regular file up the path",
        "not a folder",
        &mut failures,
    );
    if t.read("plain-file") != "not a folder\n" {
        failures.push("the regular file was changed".into());
    }
    assert_no_failures(&failures, 3 * DB_COMMANDS.len());
    fx.unchanged("the fixture's database").unwrap();
}

#[test]
fn a_pinned_definition_that_no_longer_parses_gives_one_line_and_changes_nothing() {
    if crate::sqlite_only("the bytes of a database file") {
        return;
    }
    // As after an upgrade that tightened the workflow grammar: the instance's
    // pinned text is no longer a valid workflow.
    let fx = Fixture::new();
    let t = with_db(&db_bytes(&fx));
    crate::python_sqlite(
        &t.db,
        "import sqlite3, sys\n\
         c = sqlite3.connect(sys.argv[1])\n\
         c.execute(\"UPDATE definitions SET source = 'name: [unclosed' WHERE hash = \
             (SELECT definition_hash FROM instances WHERE id = 'wait-1')\")\n\
         assert c.total_changes == 1\n\
         c.commit()\n\
         c.close()",
    );
    let before = snapshot(&t);
    let mut failures = Vec::new();
    // (`wf cancel` is left out: it records the cancel request before it
    // reads the definition, by design, so that a process running the
    // instance sees it.)
    for args in [
        &["resume", "wait-1"][..],
        &["resume", "wait-1", "--now"],
        &["resume", "wait-1", "--retry-failed"],
    ] {
        if let Err(e) = rejected_with(&t.wf(args), 2, "pinned definition of wait-1") {
            failures.push(format!("{args:?}: {e}"));
        }
        if snapshot(&t) != before {
            failures.push(format!("{args:?} changed what was recorded"));
        }
    }

    // Once the event arrives the instance is due: one worker sweep tries it
    // once, reports it and ends (exit 1), instead of retrying it forever.
    t.wf(&["signal", "wait-1", "go"]).code(0);
    let before = snapshot(&t);
    let mut worker = t
        .cmd()
        .args(["--quiet", "worker", "--once"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn wf worker");
    let start = Instant::now();
    while worker.try_wait().expect("try_wait").is_none() {
        if start.elapsed() > Duration::from_secs(30) {
            let _ = worker.kill();
            let _ = worker.wait();
            panic!("`wf worker --once` did not end within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let ran = ran(worker.wait_with_output().expect("worker output"));
    if let Err(e) = rejected_with(&ran, 1, "instance wait-1: ") {
        failures.push(format!("worker --once: {e}"));
    }
    if snapshot(&t) != before {
        failures.push("worker --once changed what was recorded".into());
    }
    assert_no_failures(&failures, 4);
}

// ------------------------------------------------------ locked database

/// A python3 process holding a write lock on a database until dropped.
struct Locker {
    child: Child,
}

impl Locker {
    /// `exclusive`: also lock readers out (`locking_mode=EXCLUSIVE`); else a
    /// plain `BEGIN EXCLUSIVE`, which in WAL mode stops writers only.
    fn hold(db: &Path, exclusive: bool) -> Locker {
        let mut child = Command::new("python3")
            .arg("-c")
            .arg(
                "import sqlite3, sys\n\
                 c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
                 if sys.argv[2] == 'exclusive':\n    c.execute('PRAGMA locking_mode=EXCLUSIVE')\n\
                 c.execute('BEGIN EXCLUSIVE')\n\
                 c.execute('SELECT count(*) FROM instances').fetchone()\n\
                 print('locked', flush=True)\n\
                 sys.stdin.read()\n\
                 c.execute('ROLLBACK')",
            )
            .arg(db)
            .arg(if exclusive { "exclusive" } else { "normal" })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read from python3");
        assert_eq!(line.trim(), "locked", "python3 could not lock the database");
        Locker { child }
    }
}

impl Drop for Locker {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let start = Instant::now();
        while !matches!(self.child.try_wait(), Ok(Some(_))) {
            if start.elapsed() > Duration::from_secs(10) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[test]
fn a_locked_database_gives_one_line_after_the_busy_timeout_and_changes_nothing() {
    if crate::sqlite_only("the lock on a SQLite file") {
        return;
    }
    let fx = Fixture::new();
    let mut failures = Vec::new();
    let writers: &[&[&str]] = &[
        &["run", "good.yaml"],
        &["run", "good.yaml", "--id", "fresh"],
        &["run", "typed.yaml", "--input", "who=x", "--json"],
        &["signal", "wait-1", "go"],
        &["resume", "wait-1"],
        &["resume", "wait-1", "--now"],
        &["cancel", "wait-1"],
    ];
    let readers: &[&[&str]] = &[
        &["list"],
        &["list", "--json"],
        &["inspect", "done-1", "--json", "--attempts"],
        &["trace", "done-1"],
        &["logs", "done-1", "first"],
        &["worker", "--once"],
    ];
    {
        // Another process in a write transaction: writers wait for the busy
        // timeout, then fail; readers are not blocked (WAL).
        let _lock = Locker::hold(&fx.t.db, false);
        for args in writers {
            if let Err(e) = rejected_with(&fx.t.wf(args), 1, "locked") {
                failures.push(format!("write lock: {args:?}: {e}"));
            }
        }
        let list = fx.t.wf(&["list", "--json"]);
        if list.code != 0
            || serde_json::from_str::<Value>(&list.stdout).ok() != Some(fx.before.list.clone())
        {
            failures.push(format!(
                "write lock: a reader was blocked or saw something else: {} {}",
                list.stdout, list.stderr
            ));
        }
    }
    if let Err(e) = fx.unchanged("after the write lock") {
        failures.push(e);
    }
    {
        // The lock held in exclusive locking mode shuts readers out too.
        let _lock = Locker::hold(&fx.t.db, true);
        for args in readers.iter().chain(writers) {
            if let Err(e) = rejected_with(&fx.t.wf(args), 1, "locked") {
                failures.push(format!("exclusive lock: {args:?}: {e}"));
            }
        }
    }
    if let Err(e) = fx.unchanged("after the exclusive lock") {
        failures.push(e);
    }
    assert_no_failures(&failures, 2 * writers.len() + readers.len() + 1);

    // Released: the same commands work again.
    fx.t.wf(&["signal", "wait-1", "go"]).code(0);
    fx.t.wf(&["resume", "wait-1"]).code(0);
    assert_eq!(fx.t.read("ran.log"), "first\nfirst\nafter\n");
}
