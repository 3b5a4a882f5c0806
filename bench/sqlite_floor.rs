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
//! Usage: `sqlite_floor STEPS DB [PROGRAM]` (DB is created afresh; PROGRAM
//! defaults to `/bin/true`). Built by bench.py as a cargo example
//! (`cargo build --release --example sqlite_floor`), with the same SQLite as wf.

use rusqlite::{Connection, TransactionBehavior, params};
use std::io::Read;
use std::process::{Command, Stdio};

const INSTANCE: &str = "5f1d0c8e2b7a4c3d9e6f8a1b2c3d4e5f";

fn now() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

fn main() -> rusqlite::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: sqlite_floor STEPS DB [PROGRAM]");
        std::process::exit(2);
    }
    let steps: u64 = args[1].parse().expect("STEPS: a number");
    let program = args.get(3).map_or("/bin/true", String::as_str);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", args[2]));
    }
    let mut conn = Connection::open(&args[2])?;
    conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))?;
    conn.execute_batch(
        "PRAGMA synchronous=FULL;
         CREATE TABLE attempts (
             instance_id TEXT NOT NULL, step_key TEXT NOT NULL, attempt INTEGER NOT NULL,
             run INTEGER NOT NULL, outcome TEXT, exit_code INTEGER, started_at TEXT NOT NULL,
             finished_at TEXT, stdout BLOB, stderr BLOB,
             PRIMARY KEY (instance_id, step_key, attempt)
         ) WITHOUT ROWID;",
    )?;
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut ended: Option<(String, i32)> = None;
    let end = "UPDATE attempts SET outcome = 'ok', exit_code = ?3, finished_at = ?4, \
               stdout = ?5, stderr = ?6 WHERE instance_id = ?1 AND step_key = ?2 AND attempt = 1";
    for step in 0..steps {
        let key = format!("s{step}");
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if let Some((prev, code)) = &ended {
            tx.prepare_cached(end)?
                .execute(params![INSTANCE, prev, code, now(), &out, &err])?;
        }
        tx.prepare_cached(
            "INSERT INTO attempts (instance_id, step_key, attempt, run, started_at) \
             VALUES (?1, ?2, 1, 1, ?3)",
        )?
        .execute(params![INSTANCE, key, now()])?;
        tx.commit()?;
        let mut child = Command::new(program)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
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
        ended = Some((key, status.code().unwrap_or(-1)));
    }
    if let Some((prev, code)) = ended {
        conn.prepare_cached(end)?
            .execute(params![INSTANCE, prev, code, now(), &out, &err])?;
    }
    Ok(())
}
