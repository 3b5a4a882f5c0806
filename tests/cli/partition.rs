//! Partitions (issue 62; docs/execution.md "Leases and partitions",
//! docs/postgres.md "Partitions"): a holder cut off from PostgreSQL stops
//! its steps before another host may take its instance over, and no call
//! waits forever.
//!
//! Two "hosts": host A is a `wf` in a UTS and a pid namespace of its own
//! (host name `host-a`), as a container or another machine would be, so
//! host B cannot judge its holder dead or reach its processes; it only sees
//! the lease expire. Host A reaches the server through a proxy that
//! black-holes the traffic (connections stay open, nothing passes, no RST
//! or FIN) and, once healed, delivers what was held, as TCP would. The step
//! ticks into a file with the time every 50 ms while it runs, so the
//! attempts' lives are seen from the step itself: the last tick of host A's
//! attempt must come before the first of host B's.

use crate::durable::{Bg, PATIENCE, eventually, lines, outcomes};
use crate::pg::pg_test;
use crate::proxy::Proxy;
use crate::{Ran, Test};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The lease's TTL for these tests; A stops its steps two thirds of it
/// after its last renewal, B may take over after all of it.
const TTL: &str = "3s";
/// How long a command tries to reach the database again.
const DB_RETRY: Duration = Duration::from_secs(6);

/// One step that writes its attempt to `starts`, ticks (`ATTEMPT NANOS` in
/// `ticks`) every 50 ms until the file `release` exists (an attempt after
/// the first: after 20 ticks), then writes its attempt to `side.log`.
const TICKER: &str = r#"name: ticker
steps:
  - id: a
    run: |
      echo $WF_ATTEMPT >> starts
      n=0
      while :; do
        echo "$WF_ATTEMPT $(date +%s%N)" >> ticks
        n=$((n+1))
        [ -f release ] && break
        [ "$WF_ATTEMPT" != 1 ] && [ $n -ge 20 ] && break
        sleep 0.05
      done
      echo $WF_ATTEMPT >> side.log
"#;

/// A test on PostgreSQL whose host A goes through a black-holing proxy;
/// `t.pg` stays the server's own URL (host B's).
fn partitionable() -> Option<(Test, Proxy, String)> {
    let t = pg_test()?
        .env("WF_LEASE_TTL", TTL)
        .env("WF_DB_RETRY", "6s")
        .env("WF_DB_TIMEOUT", "1s");
    let (url, _) = t.pg.clone().expect("pg");
    let proxy = Proxy::start(crate::pg::host_port(&url));
    let through = proxy.url(&url);
    Some((t, proxy, through))
}

/// `wf ARGS…` through the proxy (`through`).
fn via(t: &mut Test, through: &str, args: &[&str]) -> Command {
    let (url, schema) = t.pg.clone().expect("pg");
    t.pg = Some((through.to_string(), schema.clone()));
    let mut cmd = t.cmd();
    t.pg = Some((url, schema));
    cmd.args(args);
    cmd
}

/// `wf ARGS…` as host A runs it: through the proxy (`through`), in a UTS
/// and pid namespace of its own named `host-a`.
fn host_a(t: &mut Test, through: &str, args: &[&str]) -> Command {
    let cmd = via(t, through, args);
    let mut ns = Command::new("unshare");
    if !nix::unistd::geteuid().is_root() {
        ns.args(["--user", "--map-root-user"]);
    }
    ns.args([
        "--uts",
        "--pid",
        "--fork",
        "--mount-proc",
        "--kill-child",
        "sh",
        "-c",
        "hostname host-a && \"$@\"; exit $?",
        "sh",
    ]);
    ns.arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => ns.env(k, v),
            None => ns.env_remove(k),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        ns.current_dir(dir);
    }
    ns
}

/// SIGTERM to the `wf` that `unshare` (pid `pid`) runs in its namespaces
/// (`unshare` itself does not pass signals on).
fn terminate_inside_pid(pid: u32) {
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
        if comm.trim() == "wf" {
            let status = Command::new("kill")
                .args(["-TERM", &p.to_string()])
                .status()
                .expect("run kill");
            assert!(status.success());
            return;
        }
        let children =
            std::fs::read_to_string(format!("/proc/{p}/task/{p}/children")).unwrap_or_default();
        todo.extend(
            children
                .split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok()),
        );
    }
    panic!("no wf under process {pid}");
}

fn terminate_inside(bg: &Bg) {
    terminate_inside_pid(bg.pid());
}

fn spawn_bg(mut cmd: Command) -> Bg {
    Bg::from_child(
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn wf in namespaces (unshare)"),
    )
}

/// The ticks of each attempt, in order: (attempt, unix nanoseconds).
fn ticks(t: &Test) -> Vec<(u32, u128)> {
    t.read("ticks")
        .lines()
        .filter_map(|l| {
            let (a, at) = l.split_once(' ')?;
            Some((a.parse().ok()?, at.parse().ok()?))
        })
        .collect()
}

/// Whether attempt `n` has ticked.
fn ticked(t: &Test, n: u32) -> bool {
    t.path().join("ticks").exists() && ticks(t).iter().any(|(a, _)| *a == n)
}

/// Attempt 1 (host A's) stopped ticking before attempt 2 (host B's) began:
/// the two never ran at once.
#[track_caller]
fn never_overlapped(t: &Test) {
    let all = ticks(t);
    let last_a = all.iter().filter(|(a, _)| *a == 1).map(|(_, at)| *at).max();
    let first_b = all.iter().filter(|(a, _)| *a == 2).map(|(_, at)| *at).min();
    let (Some(last_a), Some(first_b)) = (last_a, first_b) else {
        panic!("both attempts should have ticked: {all:?}");
    };
    assert!(
        last_a < first_b,
        "host A's attempt ticked {} ms after host B's began",
        (last_a - first_b) / 1_000_000
    );
}

/// A test whose host A runs the ticker (`wf run … --id ID`) through the
/// proxy, once the step has ticked.
fn run_on_host_a(id: &str) -> Option<(Test, Proxy, Bg)> {
    let (mut t, proxy, through) = partitionable()?;
    let path = t.write("ticker.yaml", TICKER);
    let cmd = host_a(
        &mut t,
        &through,
        &["run", path.to_str().expect("utf-8"), "--id", id],
    );
    let a = spawn_bg(cmd);
    eventually("host A's attempt to tick", || ticked(&t, 1));
    Some((t, proxy, a))
}

/// Host B resumes the instance until it is no longer held (the lease
/// expired by the server's clock), which completes it.
fn host_b_resumes(t: &Test, id: &str) {
    let start = Instant::now();
    loop {
        let ran = t.wf(&["resume", id]);
        if ran.code != 5 {
            ran.code(0);
            return;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "host B never took over: {}",
            ran.stderr
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The instance completed with host A's attempt `crashed` (as host B found
/// it: nothing host A wrote after it was taken over went in, not even once
/// the partition healed) and host B's `ok`; each attempt started once, and
/// the step's side effect happened once, in host B's.
#[track_caller]
fn completed_by_host_b(t: &Test, id: &str) {
    let v = t.inspect(id);
    assert_eq!(v["status"], "completed", "{v:#}");
    assert_eq!(outcomes(Test::step(&v, "a")), ["crashed", "ok"], "{v:#}");
    assert_eq!(lines(t, "starts"), ["1", "2"]);
    assert_eq!(lines(t, "side.log"), ["2"]);
    never_overlapped(t);
}

/// What host A held, delivered once the partition healed, went to the
/// server (or nowhere): every connection through the proxy is over.
fn drained(proxy: &Proxy) {
    eventually("the proxy's connections to end", || proxy.relaying() == 0);
}

#[test]
fn a_partitioned_run_stops_its_step_before_another_host_takes_over_and_gives_up() {
    let Some((t, proxy, mut a)) = run_on_host_a("p") else {
        return;
    };
    proxy.black_hole();
    let cut = Instant::now();
    host_b_resumes(&t, "p");
    // Host A gave up on the database (exit 6) within WF_DB_RETRY of its
    // first unanswered call, plus the lease's TTL and a margin.
    eventually("host A to exit", || a.exited());
    let took = cut.elapsed();
    let ran = a.finish();
    never_overlapped(&t);
    ran.code(6);
    assert!(
        took < DB_RETRY + Duration::from_secs(10),
        "host A exited {took:?} after the partition"
    );
    assert!(ran.stderr.contains("was not renewed"), "{}", ran.stderr);
    proxy.heal();
    drained(&proxy);
    completed_by_host_b(&t, "p");
}

#[test]
fn a_partitioned_run_that_hears_again_is_refused_and_names_the_new_holder() {
    let Some((t, proxy, a)) = run_on_host_a("q") else {
        return;
    };
    proxy.black_hole();
    host_b_resumes(&t, "q");
    // Healed before host A gave up: its commit of the stopped attempt is
    // refused by the fence, and it exits 5 naming host B.
    proxy.heal();
    let ran = a.finish();
    ran.code(5);
    assert!(ran.stderr.contains("was not renewed"), "{}", ran.stderr);
    assert!(ran.stderr.contains("taken over by"), "{}", ran.stderr);
    drained(&proxy);
    completed_by_host_b(&t, "q");
}

#[test]
fn a_partition_shorter_than_the_margin_keeps_the_lease() {
    let Some((t, proxy, a)) = run_on_host_a("s") else {
        return;
    };
    // A renewal is due every half second: one is held, none is lost.
    proxy.black_hole();
    std::thread::sleep(Duration::from_millis(700));
    proxy.heal();
    // Past the point where a lapsed lease would have stopped the step.
    std::thread::sleep(Duration::from_secs(3));
    std::fs::write(t.path().join("release"), "").expect("release the step");
    let ran = a.finish();
    ran.code(0);
    assert!(!ran.stderr.contains("was not renewed"), "{}", ran.stderr);
    let v = t.inspect("s");
    assert_eq!(v["status"], "completed", "{v:#}");
    assert_eq!(outcomes(Test::step(&v, "a")), ["ok"], "{v:#}");
    assert_eq!(lines(&t, "starts"), ["1"]);
    assert_eq!(lines(&t, "side.log"), ["1"]);
}

/// A worker (`wf worker`, or `wf serve --worker`) on host A claims the
/// instance and is cut off mid-step; a worker on host B takes it over once
/// the lease expires. Host A's worker stops the step in time, says why, and
/// writes nothing once the partition heals; it keeps running (a worker
/// never exits on a database error).
fn a_partitioned_worker(serve: bool) {
    let Some((mut t, proxy, through)) = partitionable() else {
        return;
    };
    let path = t.write("ticker.yaml", TICKER);
    enum HostA {
        Worker(Bg),
        Serve(crate::serve::Server),
    }
    let log = t.path().join("host-a.log");
    let a = if serve {
        let mut cmd = host_a(
            &mut t,
            &through,
            &[
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--worker",
                "--poll",
                "100ms",
            ],
        );
        cmd.env("WF_SERVE_TOKEN", crate::serve::TOKEN)
            .env("XDG_STATE_HOME", t.path().join("state"));
        HostA::Serve(crate::serve::Server::spawn(cmd, crate::serve::TOKEN.into()))
    } else {
        let mut cmd = host_a(&mut t, &through, &["worker", "--poll", "100ms"]);
        let file = std::fs::File::create(&log).expect("host A's log");
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(file);
        HostA::Worker(Bg::from_child(cmd.spawn().expect("spawn wf in namespaces")))
    };
    t.wf(&[
        "run",
        path.to_str().expect("utf-8"),
        "--id",
        "w",
        "--detach",
    ])
    .code(0);
    eventually("host A's attempt to tick", || ticked(&t, 1));
    proxy.black_hole();
    let b = crate::durable::spawn(&t, &["worker", "--poll", "100ms"]);
    eventually("host B to complete the instance", || {
        t.inspect("w")["status"] == "completed"
    });
    proxy.heal();
    b.signal("TERM");
    b.finish();
    // Host A's worker says why its run stopped the step (the lease lapsed,
    // then host B's takeover refused its commit), and goes on.
    let said = |what: &str| match &a {
        HostA::Worker(_) => std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains(what),
        HostA::Serve(server) => server.log().contains(what),
    };
    let start = Instant::now();
    while !(said("was not renewed") && said("taken over by")) {
        assert!(
            start.elapsed() < PATIENCE,
            "host A's worker did not say its lease lapsed:\n{}",
            match &a {
                HostA::Worker(_) => std::fs::read_to_string(&log).unwrap_or_default(),
                HostA::Serve(server) => server.log(),
            }
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    match a {
        HostA::Worker(mut a) => {
            assert!(!a.exited(), "a worker never exits on a database error");
            terminate_inside(&a);
            a.finish();
        }
        HostA::Serve(server) => {
            terminate_inside_pid(server.pid());
            server.stop("KILL");
        }
    }
    drained(&proxy);
    completed_by_host_b(&t, "w");
}

#[test]
fn a_partitioned_worker_stops_its_step_before_another_host_takes_over() {
    a_partitioned_worker(false);
}

#[test]
fn a_partitioned_serve_worker_stops_its_step_before_another_host_takes_over() {
    a_partitioned_worker(true);
}

/// A command that only reads, cut off while it waits (`wf result --wait`),
/// gives up after `WF_DB_RETRY` with exit 6; `wf serve` answers a request
/// the database does not with 503 within it; and a command started while
/// the server is out of reach says so (exit 1) within its connect
/// deadline, never waiting forever.
#[test]
fn reads_and_the_api_give_up_on_a_black_hole_in_time() {
    let Some((mut t, proxy, through)) = partitionable() else {
        return;
    };
    let path = t.write("ticker.yaml", TICKER);
    t.wf(&[
        "run",
        path.to_str().expect("utf-8"),
        "--id",
        "r",
        "--detach",
    ])
    .code(0);
    let waiting = spawn_bg(via(&mut t, &through, &["result", "r", "--wait"]));
    // Connected, and waiting for news (`LISTEN`).
    let (_, schema) = t.pg.clone().expect("pg");
    eventually("wf result to wait", || {
        t.psql(&format!(
            "SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN \"wf_{schema}\"'"
        )) == "1"
    });
    let mut serve = via(&mut t, &through, &["serve", "--listen", "127.0.0.1:0"]);
    serve
        .env("WF_SERVE_TOKEN", crate::serve::TOKEN)
        .env("XDG_STATE_HOME", t.path().join("state"));
    let server = crate::serve::Server::spawn(serve, crate::serve::TOKEN.into());
    assert_eq!(server.get("/api/v1/instances/r").status, 200);
    proxy.black_hole();
    let cut = Instant::now();
    let answered = server.get("/api/v1/instances/r");
    assert_eq!(answered.status, 503, "{}", answered.text());
    assert!(
        cut.elapsed() < DB_RETRY + Duration::from_secs(5),
        "{:?}",
        cut.elapsed()
    );
    let ran = waiting.finish();
    ran.code(6);
    assert!(ran.stderr.contains("unreachable for 6s"), "{}", ran.stderr);
    assert!(
        cut.elapsed() < DB_RETRY + Duration::from_secs(5),
        "{:?}",
        cut.elapsed()
    );
    let started = Instant::now();
    let listed = Ran::from(
        via(&mut t, &through, &["list"])
            .output()
            .expect("run wf list"),
    );
    listed.code(1);
    assert!(
        listed.stderr.contains("no answer within"),
        "{}",
        listed.stderr
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    proxy.heal();
    server.stop("TERM");
}

/// On SQLite, a lease that cannot be renewed lapses the same way: another
/// process holds the database's write lock past the margin (as a stalled
/// file system or a stuck client would), so no renewal goes in; the run
/// stops its step while the lock is still held, records the attempt
/// `interrupted` once it can write again, and exits 5 saying why; `wf
/// resume` runs the step again.
#[test]
fn on_sqlite_a_lease_that_cannot_be_renewed_stops_the_step_in_time() {
    let t = Test::new().env("WF_LEASE_TTL", TTL);
    if t.sqlite_only("the write lock of a file") {
        return;
    }
    let path = t.write("ticker.yaml", TICKER);
    let a = crate::durable::spawn(&t, &["run", path.to_str().expect("utf-8"), "--id", "l"]);
    eventually("the attempt to tick", || ticked(&t, 1));
    let holder = t.write(
        "hold.py",
        "import pathlib, sqlite3, sys, time\n\
         c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)\n\
         c.execute('BEGIN IMMEDIATE')\n\
         pathlib.Path('locked').write_text('')\n\
         time.sleep(4)\n\
         pathlib.Path('released').write_text(str(time.time_ns()))\n\
         c.execute('ROLLBACK')\n",
    );
    let db = t.db_arg();
    let mut hold = Command::new("python3");
    hold.arg(&holder).arg(&db).current_dir(t.path());
    let held = hold.status().expect("run python3");
    assert!(held.success());
    let ran = a.finish();
    ran.code(5);
    assert!(ran.stderr.contains("was not renewed"), "{}", ran.stderr);
    let released: u128 = t.read("released").trim().parse().expect("a time");
    let last = ticks(&t)
        .iter()
        .filter(|(a, _)| *a == 1)
        .map(|(_, at)| *at)
        .max()
        .expect("ticks");
    assert!(
        last < released,
        "the step ticked {} ms after the lock was released",
        (last - released) / 1_000_000
    );
    t.wf(&["resume", "l"]).code(0);
    let v = t.inspect("l");
    assert_eq!(
        outcomes(Test::step(&v, "a")),
        ["interrupted", "ok"],
        "{v:#}"
    );
    assert_eq!(lines(&t, "starts"), ["1", "2"]);
    assert_eq!(lines(&t, "side.log"), ["2"]);
}

/// A deadline or retry window that is not a duration is said, not taken
/// for the default.
#[test]
fn an_unreadable_db_timeout_is_said() {
    let Some(t) = pg_test() else {
        return;
    };
    for (var, value) in [("WF_DB_TIMEOUT", "soon"), ("WF_DB_RETRY", "30 parsecs")] {
        let ran = Ran::from(
            t.cmd()
                .env(var, value)
                .arg("list")
                .output()
                .expect("run wf"),
        );
        ran.code(1);
        assert!(
            ran.stderr
                .contains(&format!("{var} `{value}` is not a duration")),
            "{}",
            ran.stderr
        );
    }
}
