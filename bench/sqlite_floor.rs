//! The floor of a durable shell step recorded in SQLite, for `bench/bench.py`:
//! what any runner that keeps its history in SQLite (as wf does) and records
//! an attempt durably before its command runs must do at the least, and
//! nothing else: no spans, no step rows, no process groups, no engine.
//!
//! Each step is one IMMEDIATE transaction with wf's PRAGMAs (`journal_mode=WAL`,
//! `synchronous=FULL`: the WAL is synced at every commit) that ends the
//! previous attempt (its outcome, exit code and outputs) and inserts the new
//! one into a table shaped as wf's `attempts`; then the command starts as in
//! `bench/floor.rs` (stdin from /dev/null, stdout and stderr piped, both read
//! to their end, reaped). The last attempt's end is committed after the loop.
//!
//! RUNG (default 0, the floor) adds, one rung on another, what wf does
//! beside the attempt rows, so that each one's cost shows:
//! 1. the step rows (the ended step's, the started step's) in the commit;
//! 2. three span rows with their attributes in the commit;
//! 3. the command in a process group of its own;
//! 4. the process group recorded in a transaction without a sync while the
//!    command runs;
//! 5. a `$WF_OUTPUT` file made before the command starts and removed after
//!    it ended (wf makes and recycles them while steps run instead).
//!
//! `--overlap` measures the first idea issue 16 offers: each commit is made
//! on a thread of its own while the command's process is forked, and the
//! child waits on a pipe, before its `execve`, until the commit returned
//! (so nothing of the command runs before its attempt is durable). std's
//! `Command` forks (rather than `posix_spawn`s) once a `pre_exec` hook is
//! set, and waits for the `execve` itself.
//!
//! Usage: `sqlite_floor [--overlap] STEPS DB [RUNG [PROGRAM]]` (DB is created afresh;
//! PROGRAM defaults to `/bin/true`). Built by bench.py as a cargo example
//! (`cargo build --release --example sqlite_floor`), with the same SQLite as wf.
#![allow(
    unsafe_code,
    reason = "a benchmark of the floor of a step: its own pipes and pre_exec hook, outside wf (Cargo.toml's [lints])"
)]

use nix::libc;
use rusqlite::{Connection, TransactionBehavior, params};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

const INSTANCE: &str = "5f1d0c8e2b7a4c3d9e6f8a1b2c3d4e5f";

const SCHEMA: &str = "
    CREATE TABLE attempts (
        instance_id TEXT NOT NULL, step_key TEXT NOT NULL, attempt INTEGER NOT NULL,
        run INTEGER NOT NULL, outcome TEXT, exit_code INTEGER, started_at TEXT NOT NULL,
        finished_at TEXT, stdout BLOB, stderr BLOB, proc_pgid INTEGER,
        PRIMARY KEY (instance_id, step_key, attempt)
    ) WITHOUT ROWID;
    CREATE TABLE steps (
        instance_id TEXT NOT NULL, key TEXT NOT NULL, status TEXT NOT NULL,
        attempts INTEGER NOT NULL, outcome TEXT, output TEXT, started_at TEXT,
        finished_at TEXT, PRIMARY KEY (instance_id, key)
    ) WITHOUT ROWID;
    CREATE TABLE spans (
        instance_seq INTEGER NOT NULL, run INTEGER NOT NULL, start_ns INTEGER NOT NULL,
        end_ns INTEGER NOT NULL, span_id BLOB NOT NULL, parent BLOB, trace_id BLOB NOT NULL,
        name TEXT NOT NULL, attributes TEXT NOT NULL
    );
    CREATE INDEX spans_by_instance ON spans(instance_seq, run, start_ns);";

/// The spans a `/bin/true` step of wf ends with: its commit, its process and
/// its attempt.
const SPANS: [(&str, &str); 3] = [
    ("wf.commit", "{}"),
    (
        "process",
        r#"{"process.command":"/bin/true","process.pid":17629,"process.exit.code":0}"#,
    ),
    (
        "bench/s",
        r#"{"workflow.step.id":"s","workflow.step.attempt":1,"workflow.step.outcome":"ok"}"#,
    ),
];

fn now() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

fn main() -> rusqlite::Result<()> {
    let mut args: Vec<String> = std::env::args().collect();
    let overlap = args.iter().any(|a| a == "--overlap");
    args.retain(|a| a != "--overlap");
    if args.len() < 3 {
        eprintln!("usage: sqlite_floor [--overlap] STEPS DB [RUNG [PROGRAM]]");
        std::process::exit(2);
    }
    let steps: u64 = args[1].parse().expect("STEPS: a number");
    let rung: u32 = args.get(3).map_or(0, |r| r.parse().expect("RUNG: 0 to 5"));
    let program = args.get(4).map_or("/bin/true", String::as_str);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", args[2]));
    }
    let conn = Connection::open(&args[2])?;
    conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))?;
    conn.execute_batch(&format!("PRAGMA synchronous=FULL; {SCHEMA}"))?;
    let mut db = if overlap {
        committer(conn)
    } else {
        Db::Here(conn)
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut ended: Option<(String, i32)> = None;
    let output_dir = std::env::temp_dir();
    for step in 0..steps {
        let key = format!("s{step}");
        let job = {
            let (key, ended, out, err) = (key.clone(), ended.take(), out.clone(), err.clone());
            move |conn: &mut Connection| record(conn, rung, step, &key, ended, &out, &err)
        };
        let output_file = output_dir.join(format!("sqlite-floor-{}-{step}", std::process::id()));
        let mut command = Command::new(program);
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if rung >= 3 {
            command.process_group(0);
        }
        if rung >= 5 {
            std::fs::File::create(&output_file).expect("$WF_OUTPUT");
            command.env("WF_OUTPUT", &output_file);
        }
        let mut child = match &mut db {
            Db::Here(conn) => {
                job(conn)?;
                command.spawn().expect("spawn")
            }
            Db::Thread(jobs, _) => {
                // The child is forked while the commit is under way and
                // waits on the gate, before its exec, until it is durable.
                let (gate, open) = gate();
                // It closes the child's copy of the write end (still open
                // in the parent until `spawn` returned), so that a commit
                // that failed (the program exits) reads as the pipe's end.
                let hook = move || {
                    // SAFETY: the child's copy of our own descriptor.
                    unsafe { libc::close(open) };
                    wait_at(gate)
                };
                // SAFETY: the hook makes async-signal-safe calls only.
                unsafe { command.pre_exec(hook) };
                jobs.send(Box::new(move |conn| {
                    if let Err(e) = job(conn) {
                        eprintln!("sqlite_floor: commit: {e}");
                        std::process::exit(1);
                    }
                    // SAFETY: writes one byte to our own pipe.
                    unsafe { libc::write(open, [1u8].as_ptr().cast(), 1) };
                }))
                .expect("commit thread");
                let child = command.spawn().expect("spawn");
                // SAFETY: both ends, ours; the child has exec'd (its copies
                // closed with it), and the commit has written its byte.
                unsafe { libc::close(gate) };
                // SAFETY: as above.
                unsafe { libc::close(open) };
                child
            }
        };
        if rung >= 4 {
            let pid = child.id();
            db.run(move |conn| record_group(conn, &key, pid))?;
        }
        out.clear();
        err.clear();
        // /bin/true writes nothing: reading one pipe to its end, then the
        // other, cannot block on a full pipe.
        child
            .stdout
            .take()
            .unwrap()
            .read_to_end(&mut out)
            .expect("stdout");
        child
            .stderr
            .take()
            .unwrap()
            .read_to_end(&mut err)
            .expect("stderr");
        let status = child.wait().expect("wait");
        assert!(status.success(), "step {step}: {status}");
        if rung >= 5 {
            let _ = std::fs::read(&output_file);
            let _ = std::fs::remove_file(&output_file);
        }
        ended = Some((format!("s{step}"), status.code().unwrap_or(-1)));
    }
    if let Some((prev, code)) = ended {
        db.run(move |conn| {
            conn.prepare_cached(END)?
                .execute(params![INSTANCE, prev, code, now(), &out, &err])?;
            Ok(())
        })?;
    }
    if let Db::Thread(jobs, thread) = db {
        drop(jobs);
        thread.join().expect("commit thread");
    }
    Ok(())
}

const END: &str = "UPDATE attempts SET outcome = 'ok', exit_code = ?3, finished_at = ?4, \
                   stdout = ?5, stderr = ?6 WHERE instance_id = ?1 AND step_key = ?2 AND attempt = 1";

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// Where the connection is: here, or on the commit thread (`--overlap`),
/// which ends once its jobs' sender is dropped.
enum Db {
    Here(Connection),
    Thread(std::sync::mpsc::Sender<Job>, std::thread::JoinHandle<()>),
}

impl Db {
    /// Runs `f` on the connection, and waits for it.
    fn run(
        &mut self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<()> + Send + 'static,
    ) -> rusqlite::Result<()> {
        match self {
            Db::Here(conn) => f(conn),
            Db::Thread(jobs, _) => {
                let (tx, rx) = std::sync::mpsc::channel();
                jobs.send(Box::new(move |conn| {
                    let _ = tx.send(f(conn));
                }))
                .expect("commit thread");
                rx.recv().expect("commit thread")
            }
        }
    }
}

/// The thread that makes the commits in `--overlap` mode, in order.
fn committer(mut conn: Connection) -> Db {
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    let thread = std::thread::spawn(move || {
        for job in rx {
            job(&mut conn);
        }
    });
    Db::Thread(tx, thread)
}

/// A pipe (read end, write end), both close-on-exec.
fn gate() -> (i32, i32) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(r, 0, "pipe2: {}", std::io::Error::last_os_error());
    (fds[0], fds[1])
}

/// In the forked child: waits until the gate is opened (a byte), or fails
/// if it was closed unopened (the commit failed).
fn wait_at(gate: i32) -> std::io::Result<()> {
    let mut byte = 0u8;
    loop {
        // SAFETY: reads one byte into `byte`.
        match unsafe { libc::read(gate, (&raw mut byte).cast(), 1) } {
            1 => return Ok(()),
            0 => return Err(std::io::Error::other("the attempt was not recorded")),
            _ => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}

/// Step `step`'s commit: the end of the `ended` attempt, the new attempt,
/// and what rung `rung` adds.
fn record(
    conn: &mut Connection,
    rung: u32,
    step: u64,
    key: &str,
    ended: Option<(String, i32)>,
    out: &[u8],
    err: &[u8],
) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    if let Some((prev, code)) = &ended {
        tx.prepare_cached(END)?
            .execute(params![INSTANCE, prev, code, now(), out, err])?;
        if rung >= 1 {
            tx.prepare_cached(
                "UPDATE steps SET status = 'completed', outcome = 'ok', output = ?3, \
                 finished_at = ?4 WHERE instance_id = ?1 AND key = ?2",
            )?
            .execute(params![
                INSTANCE,
                prev,
                r#"{"stdout":"","exit_code":0,"json":null}"#,
                now()
            ])?;
        }
        if rung >= 2 {
            let mut insert = tx.prepare_cached(
                "INSERT INTO spans (instance_seq, run, start_ns, end_ns, span_id, parent, \
                 trace_id, name, attributes) VALUES (1, 1, ?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            for (i, (name, attributes)) in SPANS.iter().enumerate() {
                let ns = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0);
                let id = (step * 4 + i as u64).to_be_bytes();
                insert.execute(params![
                    ns,
                    ns + 1000,
                    &id,
                    &[9u8; 8],
                    &[7u8; 16],
                    name,
                    attributes
                ])?;
            }
        }
    }
    if rung >= 1 {
        tx.prepare_cached(
            "INSERT INTO steps (instance_id, key, status, attempts, started_at) \
             VALUES (?1, ?2, 'running', 1, ?3)",
        )?
        .execute(params![INSTANCE, key, now()])?;
    }
    tx.prepare_cached(
        "INSERT INTO attempts (instance_id, step_key, attempt, run, started_at) \
         VALUES (?1, ?2, 1, 1, ?3)",
    )?
    .execute(params![INSTANCE, key, now()])?;
    tx.commit()
}

/// The process group of a started attempt, in a transaction without a sync
/// (as wf records it while the command runs).
fn record_group(conn: &mut Connection, key: &str, pgid: u32) -> rusqlite::Result<()> {
    conn.execute_batch("PRAGMA synchronous=OFF")?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.prepare_cached(
        "UPDATE attempts SET proc_pgid = ?3 \
         WHERE instance_id = ?1 AND step_key = ?2 AND attempt = 1",
    )?
    .execute(params![INSTANCE, key, pgid])?;
    tx.commit()?;
    conn.execute_batch("PRAGMA synchronous=FULL")
}
