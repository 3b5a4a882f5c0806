//! The environment switches that turn off one of wf's Linux fast paths
//! (docs/commands.md, Environment variables): each is proven to take effect
//! by the system calls the real `wf` makes, as strace sees them, against a
//! run without it; and a value that is not one of the documented ones is
//! refused. (.ci/run runs the whole suite once more with all three set.)

use crate::{Ran, Test};
use std::process::{Command, Stdio};

/// The switches, unset in the run each test compares against (the suite
/// may be running with them set).
const SWITCHES: [&str; 3] = ["WF_NO_CLONE3", "WF_NO_SPAWN_HOLD", "WF_NO_WAL_VFS"];

/// Two steps one after the other: two processes cloned, each while an
/// attempt commits (the run's opening, the first step's result).
const TWO_STEPS: &str =
    "name: two\nsteps:\n  - id: a\n    run: 'true'\n  - id: b\n    needs: [a]\n    run: 'true'\n";

/// Runs `wf run TWO_STEPS` under `strace OPTIONS`, with `switch` set to 1
/// (or none), the others unset; what strace wrote.
fn traced(t: &Test, options: &[&str], switch: Option<&str>) -> String {
    let probe = Command::new("strace").arg("-V").output();
    assert!(
        probe.as_ref().is_ok_and(|o| o.status.success()),
        "this test needs `strace` (Debian package strace; .ci/run installs it): {probe:?}"
    );
    let workflow = t.write("two.yaml", TWO_STEPS);
    let log = t
        .path()
        .join(format!("strace-{}.log", switch.unwrap_or("none")));
    let mut wf = t.cmd();
    wf.args(["run", workflow.to_str().expect("utf-8 path"), "--json"]);
    let mut strace = Command::new("strace");
    strace
        .args(options)
        .arg("-o")
        .arg(&log)
        .arg("--")
        .arg(wf.get_program())
        .args(wf.get_args())
        .current_dir(t.path())
        .stdin(Stdio::null());
    for (k, v) in wf.get_envs() {
        match v {
            Some(v) => strace.env(k, v),
            None => strace.env_remove(k),
        };
    }
    for name in SWITCHES {
        strace.env_remove(name);
    }
    if let Some(name) = switch {
        strace.env(name, "1");
    }
    let ran = Ran::from(strace.output().expect("strace runs wf"));
    ran.code(0);
    assert_eq!(ran.json()["status"], "completed", "{}", ran.stdout);
    std::fs::read_to_string(&log).expect("strace's log")
}

/// The clone calls that start a step's process (its flags hold
/// `CLONE_VFORK`; a thread's do not), named by the call: `clone3` or `clone`.
#[cfg(target_arch = "x86_64")]
fn step_clones(trace: &str) -> Vec<&str> {
    trace
        .lines()
        .filter(|l| l.contains("CLONE_VFORK"))
        .map(|l| l.split('(').next().unwrap_or_default().trim())
        .collect()
}

/// Without `WF_NO_CLONE3`, a step's process is asked of `clone3` (which an
/// old kernel or a seccomp filter may refuse: then `clone`); with it,
/// `clone3` is never asked, and `clone` starts every step.
#[cfg(target_arch = "x86_64")]
#[test]
fn wf_no_clone3_clones_steps_with_clone() {
    let t = Test::new();
    let options = ["-e", "trace=clone,clone3"];
    let fast = traced(&t, &options, None);
    let clones = step_clones(&fast);
    assert!(clones.contains(&"clone3"), "{fast}");

    let slow = traced(&t, &options, Some("WF_NO_CLONE3"));
    assert_eq!(step_clones(&slow), ["clone", "clone"], "{slow}");
}

/// Without `WF_NO_SPAWN_HOLD`, a step's process is held at its exec while
/// its attempt commits, and let go with `PTRACE_DETACH`; with it, wf makes
/// no ptrace call (only wf's own thread is traced: the children are not, so
/// that they may ask wf to trace them).
#[test]
fn wf_no_spawn_hold_starts_steps_unheld() {
    let t = Test::new();
    let options = ["-e", "trace=ptrace"];
    let fast = traced(&t, &options, None);
    assert_eq!(
        fast.matches("ptrace(PTRACE_DETACH").count(),
        2,
        "both steps held: {fast}"
    );

    let slow = traced(&t, &options, Some("WF_NO_SPAWN_HOLD"));
    assert!(!slow.contains("ptrace("), "{slow}");
}

/// The lengths of the writes to the database's WAL file.
fn wal_writes(trace: &str) -> Vec<usize> {
    trace
        .lines()
        .filter(|l| l.contains("pwrite64(") && l.contains("-wal>"))
        .filter_map(|l| l.rsplit("= ").next()?.trim().parse().ok())
        .collect()
}

/// Without `WF_NO_WAL_VFS`, a commit's WAL frames (a 24-byte header and a
/// page each) reach the file in one write, longer than a page; with it,
/// SQLite's own VFS writes each header and each page on its own.
#[test]
fn wf_no_wal_vfs_writes_the_wal_as_sqlite_does() {
    let t = Test::new();
    if t.sqlite_only("the WAL file of an SQLite database") {
        return;
    }
    // The database made first, so that its page size can be read. Traced
    // with -f: commits are made on a thread of wf's own (-y names files).
    let (_, ran) = t.run_yaml("first.yaml", TWO_STEPS, &[]);
    ran.code(0);
    let page: usize = t.sql("PRAGMA page_size").parse().expect("page size");
    let options = ["-f", "-y", "-e", "trace=pwrite64"];
    let fast = wal_writes(&traced(&t, &options, None));
    assert!(fast.iter().any(|&n| n > page), "{page}: {fast:?}");

    let slow = wal_writes(&traced(&t, &options, Some("WF_NO_WAL_VFS")));
    assert!(slow.contains(&24), "frame headers: {slow:?}");
    assert!(slow.iter().all(|&n| n <= page), "{page}: {slow:?}");
}

/// A switch is `1`, `true`, `0`, `false` or empty; any other value stops
/// every command before it does anything, with exit 2 and one line.
#[test]
fn a_switch_set_to_another_value_is_refused() {
    let t = Test::new();
    let workflow = t.write("two.yaml", TWO_STEPS);
    let run = ["run", workflow.to_str().expect("utf-8 path")];
    for name in SWITCHES {
        let mut cmd = t.cmd();
        for other in SWITCHES {
            cmd.env_remove(other);
        }
        let ran = Ran::from(cmd.env(name, "yes").args(run).output().expect("wf"));
        ran.code(2);
        assert_eq!(
            ran.stderr,
            format!(
                "error: {name} `yes`: expected 1 or true (turn it off), 0 or false (keep it)\n"
            )
        );
        assert!(!t.database_written());
    }
    for value in ["1", "true", "0", "false", ""] {
        let mut cmd = t.cmd();
        for name in SWITCHES {
            cmd.env(name, value);
        }
        Ran::from(cmd.args(run).output().expect("wf")).code(0);
    }
}
