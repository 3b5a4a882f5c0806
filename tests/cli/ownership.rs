//! One owner at a time (docs/execution.md, issue 11): fenced leases, no orphaned step
//! processes, crash recovery that finishes by default, SIGHUP, timeouts that
//! hold against a descendant that left the process group, and suspension on
//! events. Real processes and real signals (SIGSTOP/SIGCONT, SIGKILL,
//! SIGHUP); a short `WF_LEASE_TTL` so a lease expires within the test.

use crate::Test;
use crate::durable::{Bg, alive, eventually, lines, listed_status, outcomes, spawn};
use std::process::Command;

/// The logical content of the database (every row), independent of how
/// the backend laid it out.
fn dump(t: &Test) -> String {
    t.dump()
}

/// The state letter of a process (`R`, `S`, `Z`, …), or None when it is gone.
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

fn pid_in(t: &Test, file: &str) -> u32 {
    t.read(file)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("no pid in {file}"))
}

/// Kills a process we left running on purpose, if it is still there.
fn kill_pid(pid: u32) {
    let _ = Command::new("kill")
        .arg("-KILL")
        .arg(pid.to_string())
        .status();
}

/// A step that writes `<step> <attempt> start`, its shell's pid, then waits
/// for the file `go.<attempt>` and writes `<step> <attempt> end`.
const GATED: &str = r#"
name: gated
steps:
  - id: a
    run: |
      echo "a $WF_ATTEMPT start" >> side.log
      echo $$ > a.$WF_ATTEMPT.pid
      i=0; while [ ! -f go.$WF_ATTEMPT ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
      echo "a $WF_ATTEMPT end" >> side.log
  - id: b
    run: echo "b $WF_ATTEMPT" >> side.log
"#;

/// Holder A runs `GATED` as instance `id` and stalls (SIGSTOP) in the first
/// attempt of `a` once it recorded that attempt's process group (erased
/// again with `erase_record`, as if A had stopped before recording it),
/// until its lease expires. Returns A and the attempt's shell pid.
fn stall_in_gated_step(t: &Test, id: &str, erase_record: bool) -> (Bg, u32) {
    let path = t.write("wf.yaml", GATED);
    let a = spawn(t, &["run", path.to_str().unwrap(), "--id", id]);
    eventually("a's first attempt to start", || {
        t.read("side.log").contains("a 1 start") && t.read("a.1.pid").ends_with('\n')
    });
    let attempt1 = pid_in(t, "a.1.pid");
    eventually("a's process group to be recorded", || {
        t.sql("SELECT count(*) FROM attempts WHERE proc_pgid IS NOT NULL") == "1"
    });
    a.signal("STOP");
    if erase_record {
        t.sql("UPDATE attempts SET proc_host = NULL, proc_pgid = NULL, proc_start = NULL");
    }
    eventually("the stalled lease to expire", || {
        listed_status(t, id) == "interrupted"
    });
    (a, attempt1)
}

#[test]
fn a_paused_holder_that_lost_its_lease_exits_5_and_writes_nothing() {
    let t = Test::new().env("WF_LEASE_TTL", "1s");
    let (a, attempt1) = stall_in_gated_step(&t, "own1", false);

    // B takes over: it ends A's attempt before its own starts.
    let b = spawn(&t, &["resume", "own1"]);
    eventually("b's attempt to start", || {
        t.read("side.log").contains("a 2 start")
    });
    assert!(
        !alive(attempt1),
        "the lost attempt's process is still running ({:?}) beside the new one",
        state(attempt1)
    );
    t.write("go.2", "");
    let b_pid = b.pid();
    let done = b.finish();
    done.code(0);
    let before = dump(&t);

    // A continues: it finds the instance taken, stops, writes nothing, exits 5.
    t.write("go.1", "");
    a.signal("CONT");
    let ran = a.finish();
    ran.code(5);
    assert!(
        ran.stderr.contains("taken over by") && ran.stderr.contains(&format!(":{b_pid}:")),
        "the message names the new holder (pid {b_pid}): {}",
        ran.stderr
    );
    assert_eq!(
        dump(&t),
        before,
        "the stalled holder wrote after it lost the lease"
    );

    // Every side effect happened once per recorded attempt.
    assert_eq!(
        lines(&t, "side.log"),
        ["a 1 start", "a 2 start", "a 2 end", "b 1"]
    );
    let v = t.inspect("own1");
    assert_eq!(v["status"], "completed");
    assert_eq!(outcomes(Test::step(&v, "a")), ["crashed", "ok"]);
    assert_eq!(outcomes(Test::step(&v, "b")), ["ok"]);
}

/// Holder A stalled in attempt 1 of `id`'s step `a`, its process group's
/// record erased (`stall_in_gated_step`); B takes over with `wf resume`.
/// `at_takeover` runs once B's attempt started; then both finish. Returns
/// whether A's attempt had ended by then (and its state), B's and A's runs.
fn take_over_unrecorded(
    t: &Test,
    id: &str,
    at_takeover: impl FnOnce(),
) -> (bool, Option<char>, crate::Ran, crate::Ran) {
    let (a, attempt1) = stall_in_gated_step(t, id, true);
    let b = spawn(t, &["resume", id]);
    eventually("b's attempt to start", || {
        t.read("side.log").contains("a 2 start")
    });
    let ended = !alive(attempt1);
    let state1 = state(attempt1);
    at_takeover();
    t.write("go.2", "");
    let done = b.finish();
    t.write("go.1", "");
    a.signal("CONT");
    let ran = a.finish();
    kill_pid(attempt1);
    (ended, state1, done, ran)
}

/// A holder can stop (or die) after starting an attempt's process and
/// before recording its process group. The takeover then finds the group by
/// the variables wf gave the attempt's process. The missed record is made
/// here by erasing it while the holder is stopped.
#[test]
fn a_takeover_ends_an_attempt_whose_process_group_was_never_recorded() {
    let t = Test::new().env("WF_LEASE_TTL", "1s");
    let (ended, state1, done, ran) = take_over_unrecorded(&t, "own2", || {});
    assert!(
        ended,
        "the unrecorded attempt's process is still running ({state1:?}) beside the new one"
    );
    done.code(0);
    assert!(
        done.stderr.contains("a: ended ") && done.stderr.contains("left running by attempt 1"),
        "{}",
        done.stderr
    );
    ran.code(5);
    assert_eq!(
        lines(&t, "side.log"),
        ["a 1 start", "a 2 start", "a 2 end", "b 1"]
    );
}

/// A takeover finds an unrecorded attempt by its processes' variables and
/// its run's trace: an instance of the same id in another database (ids
/// given with `--id` often are the same) is another run, whose step runs
/// on. (Two tests of one module ended each other's steps so.)
#[test]
fn a_takeover_leaves_alone_the_step_of_an_instance_of_the_same_id_in_another_database() {
    let other = Test::new();
    let path = other.write("wf.yaml", GATED);
    let o = spawn(&other, &["run", path.to_str().unwrap(), "--id", "own9"]);
    eventually("the other database's attempt to start", || {
        other.read("a.1.pid").ends_with('\n')
    });
    let theirs = pid_in(&other, "a.1.pid");

    let t = Test::new().env("WF_LEASE_TTL", "1s");
    let mut spared = false;
    let (ended, _, done, ran) = take_over_unrecorded(&t, "own9", || spared = alive(theirs));
    other.write("go.1", "");
    let went_on = o.finish();
    assert!(ended, "the unrecorded attempt's process is still running");
    assert!(
        spared,
        "the takeover ended the step of instance own9 in another database"
    );
    done.code(0);
    ran.code(5);
    went_on.code(0);
    assert_eq!(lines(&other, "side.log"), ["a 1 start", "a 1 end", "b 1"]);
}

/// Resumes instance `id`, which must end the crashed attempt's `grandchild`
/// before it finishes (killed here if it did not, so no test leaves it).
fn resume_ending(t: &Test, id: &str, grandchild: u32) -> crate::Ran {
    let resumed = t.wf(&["resume", id]);
    let left = alive(grandchild);
    if left {
        kill_pid(grandchild);
    }
    resumed.code(0);
    assert!(
        !left,
        "resume left the crashed attempt's grandchild running"
    );
    resumed
}

#[test]
fn resume_after_kill_9_ends_the_leftover_grandchild_and_finishes_by_default() {
    let t = Test::new();
    let path = t.write(
        "wf.yaml",
        r#"
name: orphans
steps:
  - id: a
    run: |
      echo $$ > sh.$WF_ATTEMPT.pid
      if [ "$WF_ATTEMPT" = 1 ]; then
        # A grandchild in the step's process group that outlives its shell.
        ( trap '' HUP; while true; do sleep 0.05; done ) &
        echo $! > grandchild.pid
        wait
      fi
      g=$(cat grandchild.pid)
      echo "attempt $WF_ATTEMPT sees the leftover as: $(cut -d' ' -f3 /proc/$g/stat 2>/dev/null)" >> side.log
  - id: b
    run: echo b >> side.log
"#,
    );
    let mut run = spawn(&t, &["run", path.to_str().unwrap(), "--id", "orph1"]);
    eventually("the grandchild to start", || {
        // Written whole (the shell creates the file before it writes it).
        t.read("grandchild.pid").ends_with('\n') && t.read("sh.1.pid").ends_with('\n')
    });
    let shell = pid_in(&t, "sh.1.pid");
    let grandchild = pid_in(&t, "grandchild.pid");
    run.kill9();
    drop(run);
    // The step's direct child dies with wf (parent-death signal)…
    eventually("the step's shell to die with wf", || !alive(shell));
    // …while its grandchild lives on, until a runner takes the instance over.
    assert!(alive(grandchild), "the grandchild should still be running");

    resume_ending(&t, "orph1", grandchild);
    let log = lines(&t, "side.log");
    assert_eq!(log.len(), 2, "{log:?}");
    assert!(
        log[0] == "attempt 2 sees the leftover as: "
            || log[0] == "attempt 2 sees the leftover as: Z",
        "the leftover was still running when attempt 2 started: {log:?}"
    );
    assert_eq!(log[1], "b");
    let v = t.inspect("orph1");
    assert_eq!(v["status"], "completed");
    assert_eq!(outcomes(Test::step(&v, "a")), ["crashed", "ok"]);
}

/// A step's process group is recorded once the step has run 20 ms. Here the
/// step stops wf (SIGSTOP to its parent) as its first act, so wf dies
/// (SIGKILL) before it could record anything (unless this machine took over
/// 20 ms to start a shell, when the record exists: the outcome is the same).
/// The resume ends the grandchild the step left by its variables.
#[test]
fn a_runner_killed_in_a_steps_first_moments_leaves_nothing_running_after_resume() {
    let t = Test::new();
    let path = t.write(
        "wf.yaml",
        r#"
name: early
steps:
  - id: a
    run: |
      if [ "$WF_ATTEMPT" = 1 ]; then
        kill -STOP $PPID
        ( trap '' HUP; while true; do sleep 0.05; done ) &
        echo $! > grandchild.pid
        wait
      fi
      echo "attempt $WF_ATTEMPT" >> side.log
"#,
    );
    let mut run = spawn(&t, &["run", path.to_str().unwrap(), "--id", "early1"]);
    let wf_pid = run.pid();
    eventually("the grandchild to start with wf stopped", || {
        t.read("grandchild.pid").ends_with('\n') && state(wf_pid) == Some('T')
    });
    let grandchild = pid_in(&t, "grandchild.pid");
    run.kill9();
    drop(run);
    assert!(alive(grandchild), "the grandchild should still be running");

    let resumed = resume_ending(&t, "early1", grandchild);
    assert!(
        resumed.stderr.contains("a: ended ")
            && resumed.stderr.contains("left running by attempt 1"),
        "{}",
        resumed.stderr
    );
    assert_eq!(lines(&t, "side.log"), ["attempt 2"]);
    let v = t.inspect("early1");
    assert_eq!(outcomes(Test::step(&v, "a")), ["crashed", "ok"]);
}

#[test]
fn a_step_that_must_run_at_most_once_fails_on_a_crash_and_says_how_to_retry() {
    let t = Test::new();
    let path = t.write(
        "wf.yaml",
        r#"
name: once
steps:
  - id: pay
    retry: { max_attempts: 1 }
    run: |
      echo $$ > pay.pid
      i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
"#,
    );
    let mut run = spawn(&t, &["run", path.to_str().unwrap(), "--id", "once1"]);
    eventually("the step to start", || t.path().join("pay.pid").exists());
    run.kill9();
    drop(run);
    let resumed = t.wf(&["resume", "once1"]);
    resumed.code(1);
    let said = format!("{}{}", resumed.stdout, resumed.stderr);
    assert!(
        said.contains("wf resume once1 --retry-failed"),
        "the message names the way out: {said}"
    );
    let v = t.inspect("once1");
    assert_eq!(v["status"], "failed");
    assert_eq!(outcomes(Test::step(&v, "pay")), ["crashed"]);
}

#[test]
fn sighup_interrupts_like_sigterm_and_leaves_nothing_running() {
    let t = Test::new();
    let path = t.write(
        "wf.yaml",
        r#"
name: hup
steps:
  - id: long
    run: |
      echo $$ > long.pid
      ( trap '' HUP; while true; do sleep 0.05; done ) &
      echo $! > child.pid
      wait
  - id: after
    run: echo after >> side.log
"#,
    );
    let run: Bg = spawn(&t, &["run", path.to_str().unwrap(), "--id", "hup1"]);
    eventually("the step to start", || t.read("child.pid").ends_with('\n'));
    let child = pid_in(&t, "child.pid");
    run.signal("HUP");
    let ran = run.finish();
    ran.code(130);
    assert!(
        !ran.stderr.contains("interrupted: interrupted"),
        "{}",
        ran.stderr
    );
    let left = alive(child);
    if left {
        kill_pid(child);
    }
    assert!(!left, "SIGHUP left the step's processes running");
    let v = t.inspect("hup1");
    assert_eq!(outcomes(Test::step(&v, "long")), ["interrupted"]);
    assert_eq!(listed_status(&t, "hup1"), "interrupted");
}

#[test]
fn a_timeout_holds_when_a_setsid_descendant_keeps_stdout_open() {
    let t = Test::new();
    let path = t.write(
        "wf.yaml",
        r#"
name: escapee
steps:
  - id: leaky
    timeout: 1s
    run: |
      echo before
      setsid sh -c 'echo $$ > daemon.pid; exec sleep 600' &
      sleep 600
"#,
    );
    let run = spawn(&t, &["run", path.to_str().unwrap(), "--id", "esc1"]);
    // Bounded by the harness's patience: without the fix this waits 600 s.
    let ran = run.finish();
    if t.path().join("daemon.pid").exists() {
        kill_pid(pid_in(&t, "daemon.pid"));
    }
    ran.code(1);
    let v = t.inspect("esc1");
    let step = Test::step(&v, "leaky");
    assert_eq!(step["error_type"], "timeout");
    let logs = t.wf(&["logs", "esc1", "leaky"]);
    logs.code(0);
    assert!(
        logs.stdout.contains("before"),
        "what was captured is kept: {}",
        logs.stdout
    );
}

#[test]
fn a_wait_for_event_with_a_long_timeout_suspends_at_once() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: patient
steps:
  - id: gate
    wait_for_event: { name: go, timeout: 20s }
  - id: after
    run: echo after >> side.log
"#,
        &["--inline-wait", "1m"],
    );
    // Had the run waited for the event, it would have timed out (exit 1).
    ran.code(3);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "waiting");
    assert_eq!(Test::step(&v, "gate")["status"], "waiting");
    t.wf(&["signal", &id, "go"]).code(0);
    t.wf(&["resume", &id]).code(0);
    assert_eq!(lines(&t, "side.log"), ["after"]);
}

#[test]
fn an_event_signaled_during_an_inline_wait_is_taken_at_once() {
    let t = Test::new();
    let path = t.write(
        "wf.yaml",
        r#"
name: inline
steps:
  - id: nap
    needs: []
    sleep: 25s
  - id: gate
    needs: []
    wait_for_event: { name: go }
  - id: after-gate
    needs: [gate]
    run: echo "after-gate $(cat /dev/null)" >> side.log
"#,
    );
    let run = spawn(&t, &["run", path.to_str().unwrap(), "--id", "inl1"]);
    eventually("the run to wait inline on the nap and the gate", || {
        t.wf(&["inspect", "inl1", "--json"]).code == 0 && {
            let v = t.inspect("inl1");
            Test::step(&v, "nap")["status"] == "sleeping"
                && Test::step(&v, "gate")["status"] == "waiting"
        }
    });
    t.wf(&["signal", "inl1", "go"]).code(0);
    eventually("the signaled branch to go on inside the run", || {
        t.read("side.log").contains("after-gate")
    });
    // Still the same run, still waiting out the nap.
    let v = t.inspect("inl1");
    assert_eq!(Test::step(&v, "nap")["status"], "sleeping");
    assert_eq!(v["runs"].as_array().map(Vec::len), Some(1));
    run.signal("INT");
    run.finish().code(130);
}

/// A worker whose lease was taken while it was stalled takes the instance
/// up again as soon as the lease that took it is dead (issue 53, item 11),
/// not after a fixed pause (it was 30 s).
#[test]
fn a_worker_that_lost_a_lease_takes_the_instance_up_again_once_that_lease_is_dead() {
    let t = Test::new().env("WF_LEASE_TTL", "2s");
    let file = t.write(
        "gate.yaml",
        "name: gate\nsteps:\n  - id: s\n    run: |\n      echo ran >> runs\n      \
         while [ ! -e go ]; do sleep 0.02; done\n",
    );
    t.wf(&["run", file.to_str().unwrap(), "--detach", "--id", "a"])
        .code(0);
    let runs = || {
        std::fs::read_to_string(t.path().join("runs"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    let worker = spawn(&t, &["worker"]);
    eventually("the worker to start the step", || runs() == 1);
    worker.signal("STOP");
    // Once its lease expired, `wf resume` takes the instance over (refused
    // until then), starts the step again, and is killed.
    let mut resumer = None;
    eventually("a resume to take the lease over", || {
        let mut r = spawn(&t, &["resume", "a"]);
        loop {
            if runs() == 2 {
                resumer = Some(r);
                return true;
            }
            if r.exited() {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    });
    let mut resumer = resumer.expect("a resumer");
    resumer.kill9();
    eventually("the resume to be gone", || resumer.exited());
    // The worker wakes to a lost lease, and takes the instance up again at
    // once: its holder is dead. (A pause of its own would be 30 s.)
    worker.signal("CONT");
    let woke = std::time::Instant::now();
    while runs() < 3 {
        assert!(
            woke.elapsed() < std::time::Duration::from_secs(20),
            "the worker left the instance alone"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    t.write("go", "");
    eventually("a to complete", || t.inspect("a")["status"] == "completed");
    let steps = t.inspect("a");
    let outcomes: Vec<&str> = Test::step(&steps, "s")["attempt_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["crashed", "crashed", "ok"], "{steps}");
    worker.signal("TERM");
    worker.finish();
}
