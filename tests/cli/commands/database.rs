//! Where the database is and how it is kept: its mode, its file whole after wf exits, a missing or read-only one, --db, WF_DB, XDG_DATA_HOME and the home fallback.

use super::*;

/// A `wf` command with no `--db` and nothing of the caller's environment that
/// could pick a database: `HOME` points into the test dir, so a default path
/// never touches the real home.
pub(crate) fn bare_wf(t: &Test) -> Command {
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
