//! Who holds a lease, judged the same way from anywhere (docs/postgres.md): on
//! PostgreSQL by the server's clock, never a client's, and a holder named by
//! host, boot, pid namespace and pid, so that a worker whose clock runs
//! ahead, or a runner in another container sharing the host name, never
//! takes a live holder's instance (issue 34, item 6).

use crate::Test;
use crate::durable::{Bg, blocking_step, eventually};
use std::process::{Command, Stdio};

/// `t`'s `wf ARGS…` command run through `wrapper` (`faketime …`,
/// `unshare …`), with the same environment and folder.
fn wrapped(t: &Test, wrapper: &[&str], args: &[&str]) -> Command {
    let mut inner = t.cmd();
    inner.args(args);
    let mut cmd = like(&inner, wrapper[0]);
    cmd.args(&wrapper[1..])
        .arg(inner.get_program())
        .args(inner.get_args());
    cmd
}

/// `program` with `wf`'s environment and folder.
fn like(wf: &Command, program: &str) -> Command {
    let mut cmd = Command::new(program);
    cmd.stdin(Stdio::null());
    if let Some(dir) = wf.get_current_dir() {
        cmd.current_dir(dir);
    }
    for (k, v) in wf.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd
}

fn ran(mut cmd: Command) -> crate::Ran {
    crate::Ran::from(cmd.output().expect("run the wrapped wf"))
}

/// The steps' side effects: one line per run of `block`.
const HELD: &str = "name: held\nsteps:\n  - id: block\n    retry: { max_attempts: 2 }\n    run: 'echo ran >> side.log; BLOCK'\n";

fn held(t: &Test) -> std::path::PathBuf {
    t.write(
        "held.yaml",
        &HELD.replace("BLOCK", &blocking_step("started")),
    )
}

/// The holder, the worker's refusal and the end: `block` ran once.
fn finish_once(t: &Test, holder: Bg) {
    std::fs::write(t.path().join("release"), "").expect("release the step");
    holder.finish().code(0);
    let v = t.inspect("held");
    assert_eq!(v["status"], "completed");
    assert_eq!(Test::step(&v, "block")["attempts"], 1, "{v:#}");
    assert_eq!(t.read("side.log"), "ran\n");
}

#[test]
fn a_worker_whose_clock_runs_40s_ahead_never_takes_a_live_lease_on_postgresql() {
    let t = Test::new().env("WF_LEASE_TTL", "5s");
    if !t.on_pg() {
        // On SQLite every process shares one machine and its clock.
        eprintln!("PostgreSQL only (clients with clocks of their own): not run on SQLite");
        return;
    }
    // libfaketime, as the `faketime` command loads it (Debian `faketime`).
    let ahead = ["faketime", "-f", "+40s"];
    let probe = Command::new("faketime")
        .args(["-f", "+40s", "date", "+%s"])
        .output();
    assert!(
        probe.as_ref().is_ok_and(|o| o.status.success()),
        "this test needs `faketime` (Debian package faketime; .ci/run installs it): {probe:?}"
    );
    let path = held(&t);
    let holder = crate::durable::spawn(&t, &["run", path.to_str().expect("utf-8"), "--id", "held"]);
    eventually("the step to start", || t.path().join("started").exists());

    let mut resume = wrapped(&t, &ahead, &["resume", "held"]);
    // Timers (tokio's) keep the machine's monotonic clock.
    resume.env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    let refused = ran(resume);
    refused.code(5);
    assert!(refused.stderr.contains("held"), "{}", refused.stderr);

    let before =
        t.psql("SELECT lease_owner || ' ' || lease_epoch FROM instances WHERE id = 'held'");
    let mut worker = wrapped(&t, &ahead, &["worker", "--once"]);
    worker.env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    ran(worker).code(0);
    let after = t.psql("SELECT lease_owner || ' ' || lease_epoch FROM instances WHERE id = 'held'");
    assert_eq!(before, after, "the worker left the live lease alone");
    finish_once(&t, holder);
}

/// Two pid namespaces (containers) on one host share its name: a pid of one
/// means nothing in the other, so neither may judge the other's holder dead
/// because no process of its own has that pid.
#[test]
fn runners_in_two_pid_namespaces_with_one_host_name_never_judge_each_other_dead() {
    let t = Test::new().env("WF_LEASE_TTL", "30s");
    let ns = [
        "unshare",
        "--user",
        "--map-root-user",
        "--pid",
        "--fork",
        "--mount-proc",
    ];
    let probe = Command::new(ns[0]).args(&ns[1..]).arg("true").output();
    assert!(
        probe.as_ref().is_ok_and(|o| o.status.success()),
        "this test needs `unshare` with user and pid namespaces (util-linux): {probe:?}"
    );
    let path = held(&t);
    // In the first namespace the holder is not its first processes (pid
    // 1..), so that in the second, where wf is pid 1 with a few threads, no
    // process has the holder's pid.
    let mut inner = t.cmd();
    inner.args(["run", path.to_str().expect("utf-8"), "--id", "held"]);
    let mut line = String::from("i=0; while [ $i -lt 60 ]; do /bin/true; i=$((i+1)); done; ");
    line.push_str(&format!("'{}'", inner.get_program().to_string_lossy()));
    for a in inner.get_args() {
        line.push_str(&format!(" '{}'", a.to_string_lossy()));
    }
    let mut cmd = like(&inner, ns[0]);
    cmd.args(&ns[1..]).args(["sh", "-c", &line]);
    let holder = Bg::from_child(
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the holder's namespace"),
    );
    eventually("the step to start", || t.path().join("started").exists());
    let pid: u32 = t
        .read("started.pid")
        .trim()
        .parse()
        .expect("the step's pid");
    assert!(pid > 1, "the step runs in the first namespace: pid {pid}");

    let refused = ran(wrapped(&t, &ns, &["resume", "held"]));
    refused.code(5);
    assert!(refused.stderr.contains("held"), "{}", refused.stderr);
    let worker = ran(wrapped(&t, &ns, &["worker", "--once"]));
    worker.code(0);
    assert!(
        !t.path().join("release").exists() && t.read("side.log") == "ran\n",
        "nothing ran `block` again"
    );
    finish_once(&t, holder);
}
