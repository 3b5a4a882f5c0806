//! The database going away is not a workflow failure (docs/postgres.md, issue 34,
//! item 3): runs and workers ride out a restarted server (`pg_ctl restart`
//! `-m fast` and `-m immediate`) and a killed backend
//! (`pg_terminate_backend`), reconnecting while their steps keep running;
//! each step's side effect happens once per recorded attempt. A server that
//! stays away makes a run give up after `WF_DB_RETRY` with exit 6, its
//! steps' processes ended, and the instance resumes once it is back. Each
//! test has a server of its own (scripts/pg), which it restarts.

use crate::Test;
use crate::durable::{Bg, alive, eventually, lines, spawn};
use crate::pg::{Server, pg_test};

/// `a`, then `b` (which says it started, then waits for the file
/// `release`), then `c`: each appends its name to side.log.
const THREE: &str = "name: three\nsteps:\n  - id: a\n    run: echo a >> side.log\n  \
     - id: b\n    run: touch started; while [ ! -f release ]; do sleep 0.05; done; echo b >> side.log\n  \
     - id: c\n    run: echo c >> side.log\n";

/// A test on a server of its own, in schema `s`.
fn on_own_server() -> Option<(Test, Server)> {
    let mut t = pg_test()?;
    let server = Server::start();
    t.pg = Some((server.url.clone(), "s".into()));
    Some((t, server))
}

/// Every step completed with one attempt, and side.log says each ran once.
#[track_caller]
fn each_step_once(t: &Test, id: &str) {
    let v = t.inspect(id);
    assert_eq!(v["status"], "completed", "{v:#}");
    for step in ["a", "b", "c"] {
        assert_eq!(Test::step(&v, step)["attempts"], 1, "{step}: {v:#}");
    }
    assert_eq!(lines(t, "side.log"), ["a", "b", "c"]);
}

fn rides_out_a_restart(mode: &str) {
    let Some((t, server)) = on_own_server() else {
        return;
    };
    let path = t.write("three.yaml", THREE);
    let run = spawn(&t, &["run", path.to_str().expect("utf-8"), "--id", "r"]);
    eventually("step b to start", || t.path().join("started").exists());
    server.pg_ctl(&["-m", mode, "-w", "restart"]);
    std::fs::write(t.path().join("release"), "").expect("release b");
    let ran = run.finish();
    ran.code(0);
    each_step_once(&t, "r");
}

#[test]
fn a_run_rides_out_a_fast_restart_of_the_server() {
    rides_out_a_restart("fast");
}

#[test]
fn a_run_rides_out_an_immediate_restart_of_the_server() {
    rides_out_a_restart("immediate");
}

/// Ends every other session of the server's database (the run's, its
/// heartbeat's, the workers').
fn terminate_backends(t: &Test) {
    t.psql(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE pid <> pg_backend_pid() AND datname = current_database()",
    );
}

#[test]
fn a_run_rides_out_its_backend_being_terminated() {
    let Some((t, _server)) = on_own_server() else {
        return;
    };
    let path = t.write("three.yaml", THREE);
    let run = spawn(&t, &["run", path.to_str().expect("utf-8"), "--id", "r"]);
    eventually("step b to start", || t.path().join("started").exists());
    terminate_backends(&t);
    std::fs::write(t.path().join("release"), "").expect("release b");
    run.finish().code(0);
    each_step_once(&t, "r");
}

#[test]
fn idle_workers_ride_out_restarts_and_terminated_backends() {
    let Some((t, server)) = on_own_server() else {
        return;
    };
    let workers: Vec<Bg> = (0..3)
        .map(|_| spawn(&t, &["worker", "--poll", "200ms", "--inline-wait", "0s"]))
        .collect();
    eventually("the workers to be connected and listening", || {
        t.psql(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND query LIKE 'LISTEN%'",
        ) == "3"
    });
    // Each disturbance, then an instance for the workers: it sleeps (the
    // run ends, exit 3), and a worker finishes it.
    let napping = t.write(
        "nap.yaml",
        "name: nap\nsteps:\n  - id: nap\n    sleep: 300ms\n  - id: after\n    run: echo ${{ instance.id }} >> side.log\n",
    );
    let disturbances: [(&str, &dyn Fn()); 3] = [
        ("a fast restart", &|| {
            server.pg_ctl(&["-m", "fast", "-w", "restart"]);
        }),
        ("terminated backends", &|| terminate_backends(&t)),
        ("an immediate restart", &|| {
            server.pg_ctl(&["-m", "immediate", "-w", "restart"]);
        }),
    ];
    for (i, (what, disturb)) in disturbances.iter().enumerate() {
        disturb();
        let id = format!("nap{i}");
        t.wf(&[
            "run",
            napping.to_str().expect("utf-8"),
            "--id",
            &id,
            "--inline-wait",
            "0s",
        ])
        .code(3);
        eventually(&format!("a worker to finish {id} after {what}"), || {
            lines(&t, "side.log").contains(&id)
        });
    }
    let mut workers = workers;
    for w in &mut workers {
        assert!(!w.exited(), "a worker exited on a database error");
    }
    assert_eq!(lines(&t, "side.log"), ["nap0", "nap1", "nap2"]);
}

/// A server that stays away: after `WF_DB_RETRY` the run gives up with
/// exit 6, having ended its steps' process groups (a step's background
/// child included), and `wf resume` finishes the instance once the server
/// is back.
#[test]
fn a_run_gives_up_after_wf_db_retry_with_exit_6_and_no_step_left_running() {
    let Some((t, server)) = on_own_server() else {
        return;
    };
    let t = t.env("WF_DB_RETRY", "2s");
    let path = t.write(
        "two.yaml",
        "name: two\nsteps:\n  - id: quick\n    needs: []\n    \
           run: while [ ! -f go ]; do sleep 0.05; done; echo quick >> side.log\n  \
         - id: long\n    needs: []\n    \
           run: sleep 60 & echo $! > child.pid; echo $$ > long.pid; touch started; \
             while [ ! -f done ]; do sleep 0.05; done; kill $!; echo long >> side.log\n",
    );
    let run = spawn(&t, &["run", path.to_str().expect("utf-8"), "--id", "g"]);
    eventually("step long to start", || t.path().join("started").exists());
    let pids: Vec<u32> = ["long.pid", "child.pid"]
        .iter()
        .map(|f| t.read(f).trim().parse().expect("a pid"))
        .collect();
    server.pg_ctl(&["-m", "fast", "-w", "stop"]);
    // `quick` ends: its result cannot be committed.
    std::fs::write(t.path().join("go"), "").expect("let quick end");
    let ran = run.finish();
    ran.code(6);
    let errors: Vec<&str> = ran
        .stderr
        .lines()
        .filter(|l| l.starts_with("error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{}", ran.stderr);
    assert!(errors[0].contains("unreachable for 2s"), "{}", errors[0]);
    for pid in &pids {
        assert!(
            !alive(*pid),
            "step process {pid} outlived wf: {}",
            ran.stderr
        );
    }
    // Back: the attempts that were running are found crashed, and run again.
    server.pg_ctl(&["-w", "restart"]);
    std::fs::write(t.path().join("done"), "").expect("let long end");
    t.wf(&["resume", "g"]).code(0);
    let v = t.inspect("g");
    for step in ["quick", "long"] {
        assert_eq!(
            crate::durable::outcomes(Test::step(&v, step)),
            ["crashed", "ok"],
            "{step}: {v:#}"
        );
    }
    // `quick` ran twice (once per recorded attempt), `long` once to its end.
    let mut side = lines(&t, "side.log");
    side.sort();
    assert_eq!(side, ["long", "quick", "quick"]);
}

/// `t` reaching the test's server through a proxy that can lose a reply.
fn behind_proxy(t: &mut Test) -> crate::proxy::Proxy {
    let (url, schema) = t.pg.clone().expect("a PostgreSQL run");
    let proxy = crate::proxy::Proxy::start(crate::pg::host_port(&url));
    t.pg = Some((proxy.url(&url), schema));
    proxy
}

/// A commit's reply lost after the server applied it (docs/postgres.md, issue 34,
/// item 4): the commit that holds `b`'s result and `c`'s start is in, its
/// acknowledgement never arrives. wf reconnects and sends it again; the
/// server finds its id in and applies nothing twice; `c` (at most once)
/// runs once and is never taken for crashed.
#[test]
fn a_commit_whose_reply_was_lost_is_looked_up_not_guessed() {
    let Some(mut t) = pg_test() else { return };
    let proxy = behind_proxy(&mut t);
    // No renewal while the test runs: the cut is the commit's.
    let t = t.env("WF_LEASE_TTL", "60s");
    let path = t.write(
        "three.yaml",
        &THREE.replace("  - id: c\n", "  - id: c\n    retry: { max_attempts: 1 }\n"),
    );
    let run = spawn(&t, &["run", path.to_str().expect("utf-8"), "--id", "r"]);
    eventually("step b to start", || t.path().join("started").exists());
    // The batch of a sequential step: its attempt's end, the next's start.
    proxy.arm("WITH f AS (SELECT lease_epoch = $2");
    std::fs::write(t.path().join("release"), "").expect("release b");
    let ran = run.finish();
    assert_eq!(proxy.cuts(), 1, "the commit's reply was dropped");
    ran.code(0);
    each_step_once(&t, "r");
}

/// `wf run`'s creation of its instance, its reply lost: sent again, it
/// finds the instance in, its own (leased to this process), and runs it.
#[test]
fn a_run_whose_creation_reply_was_lost_runs_its_instance_once() {
    let Some(mut t) = pg_test() else { return };
    // Migrated first (a worker's sweep over nothing), so that the creation
    // is the first thing armed.
    t.wf(&["worker", "--once"]).code(0);
    let proxy = behind_proxy(&mut t);
    let path = t.write(
        "three.yaml",
        &THREE.replace("while [ ! -f release ]; do sleep 0.05; done; ", ""),
    );
    proxy.arm("INSERT INTO instances");
    let ran = t.wf(&["run", path.to_str().expect("utf-8"), "--id", "r"]);
    assert_eq!(proxy.cuts(), 1, "the creation's reply was dropped");
    ran.code(0);
    each_step_once(&t, "r");
}
