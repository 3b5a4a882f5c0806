//! Crash-state replay: what a power loss may leave of a SQLite history, and
//! whether wf's promises hold on every such state (docs/execution.md Durability: a
//! completed step survives a power loss whatever other processes do with the
//! file; the database is never left malformed).
//!
//! The way SQLite tests itself: every process of a scenario runs with an I/O
//! recorder (`crash/iolog.c`, loaded with `LD_PRELOAD`) that logs each write,
//! truncation and sync made to the database's files, in the order they reach
//! the kernel. The replayer walks that log and, just before each sync and at
//! the end, rebuilds what the disk may hold if the power went then: what was
//! synced is kept, and of what was written since, none, all, prefixes and
//! random subsets (at 512- and 4096-byte sector granularity). Each state must
//! pass `PRAGMA integrity_check`, open in `wf`, and hold every step that was
//! acknowledged before that moment: a step whose successor's process had
//! started (so its result's commit had returned), a `wf run` or `wf signal`
//! that had exited. Writers set to `synchronous=NORMAL` acknowledge nothing
//! (they may lose their last commits, never corrupt the file or lose what a
//! FULL commit acknowledged).

use crate::{Ran, Test, XorShift};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

// ------------------------------------------------------------ the recorder

/// The recorder, built once per test process with the machine's C compiler
/// (the one that builds SQLite for wf).
pub(crate) fn shim() -> &'static Path {
    static SHIM: OnceLock<PathBuf> = OnceLock::new();
    SHIM.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/crash/iolog.c");
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("iolog.so");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let built = Command::new(&cc)
            .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
            .arg(&out)
            .arg(&src)
            .arg("-ldl")
            .output()
            .unwrap_or_else(|e| panic!("the crash tests need a C compiler (`{cc}`): {e}"));
        assert!(
            built.status.success(),
            "building {}: {}",
            src.display(),
            String::from_utf8_lossy(&built.stderr)
        );
        out
    })
}

/// One recorded scenario: a database whose files' I/O is logged.
struct Recording {
    t: Test,
    log: PathBuf,
    /// The database's files when recording began (taken as on the disk).
    base: [Option<Vec<u8>>; 3],
}

const FILES: [&str; 3] = ["wf.db", "wf.db-wal", "wf.db-journal"];

impl Recording {
    /// `t`'s database, made by running `setup` (not recorded), then
    /// recorded from here on.
    fn new(t: Test, setup: &str) -> Recording {
        let path = t.write("setup.yaml", setup);
        t.wf(&["run", path.to_str().expect("utf-8")]).code(0);
        let base = FILES.map(|f| std::fs::read(t.path().join(f)).ok());
        assert!(base[0].is_some(), "setup made the database");
        let log = t.path().join("io.log");
        Recording { t, log, base }
    }

    /// `wf ARGS…` recorded (`normal`: with `WF_DURABILITY=normal`).
    fn cmd(&self, args: &[&str], normal: bool) -> Command {
        let mut cmd = self.t.cmd();
        cmd.args(args)
            .env("LD_PRELOAD", shim())
            .env("WF_IOLOG", &self.log)
            .env("WF_IOLOG_DB", &self.t.db)
            .stdin(Stdio::null());
        if normal {
            cmd.env("WF_DURABILITY", "normal");
        }
        cmd
    }

    /// Runs `wf ARGS…` recorded, to its end.
    fn wf(&self, args: &[&str], normal: bool) -> Ran {
        Ran::from(self.cmd(args, normal).output().expect("run wf"))
    }

    /// Starts `wf ARGS…` recorded, in the background.
    fn spawn(&self, args: &[&str], normal: bool) -> Child {
        self.cmd(args, normal)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn wf")
    }

    /// Appends a mark to the log (under the recorder's lock, so it is
    /// ordered with the I/O): what became acknowledged at this point.
    fn mark(&self, text: &str) {
        let mut log = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&self.log)
            .expect("open the log");
        log.lock().expect("lock the log");
        let mut rec = vec![b'M', 0];
        rec.extend_from_slice(&std::process::id().to_le_bytes());
        rec.extend_from_slice(&0i64.to_le_bytes());
        rec.extend_from_slice(&(text.len() as u32).to_le_bytes());
        rec.extend_from_slice(text.as_bytes());
        log.write_all(&rec).expect("write the log");
    }

    /// Instance `waiter`, recorded, waiting for the event `go` (then
    /// running the steps `more` lists).
    fn waiter(&self, more: &str) {
        let wait = self.t.write(
            "wait.yaml",
            &format!("name: wait\nsteps:\n  - id: go\n    wait_for_event: {{ name: go }}\n{more}"),
        );
        self.wf(
            &["run", wait.to_str().expect("utf-8"), "--id", "waiter"],
            false,
        )
        .code(3);
    }

    /// A `wf run FILE --id ID --json` that must complete: recorded, and its
    /// completion marked once it exited.
    fn run_completed(&self, file: &Path, id: &str, inputs: &[&str], normal: bool) {
        let mut args = vec!["run", file.to_str().expect("utf-8"), "--id", id, "--json"];
        args.extend_from_slice(inputs);
        let ran = self.wf(&args, normal);
        ran.code(0);
        if !normal {
            self.mark(&format!("instance {id} completed"));
        }
    }
}

// ------------------------------------------------------------ the log

#[derive(Debug, Clone)]
pub(crate) enum Op {
    Write {
        file: usize,
        at: u64,
        data: Vec<u8>,
    },
    Truncate {
        file: usize,
        size: u64,
    },
    Sync {
        file: usize,
    },
    Mark(String),
    /// A backup's temporary file linked to the backup's name.
    Link,
    /// A backup's temporary file's name removed.
    Unlink,
}

pub(crate) fn read_log(path: &Path) -> Vec<Op> {
    let bytes = std::fs::read(path).expect("read the I/O log");
    let mut ops = Vec::new();
    let mut i = 0;
    let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
    while i < bytes.len() {
        assert!(i + 18 <= bytes.len(), "a torn record at {i}");
        let kind = bytes[i];
        let file = bytes[i + 1] as usize;
        let at = i64::from_le_bytes(bytes[i + 6..i + 14].try_into().expect("8 bytes"));
        let len = u32_at(i + 14) as usize;
        let data = bytes[i + 18..i + 18 + len].to_vec();
        i += 18 + len;
        ops.push(match kind {
            b'W' => Op::Write {
                file,
                at: at as u64,
                data,
            },
            b'T' => Op::Truncate {
                file,
                size: at as u64,
            },
            b'S' => Op::Sync { file },
            b'M' => Op::Mark(String::from_utf8(data).expect("a UTF-8 mark")),
            b'L' => Op::Link,
            b'U' => Op::Unlink,
            other => panic!(
                "the recorder saw what the replay cannot model ({}: {} of {})",
                other as char,
                String::from_utf8_lossy(&data),
                FILES.get(file).unwrap_or(&"a backup's file")
            ),
        });
    }
    ops
}

/// Applies one write or truncation to a file's bytes.
pub(crate) fn apply(file: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Write { at, data, .. } => {
            let at = *at as usize;
            if file.len() < at + data.len() {
                file.resize(at + data.len(), 0);
            }
            file[at..at + data.len()].copy_from_slice(data);
        }
        Op::Truncate { size, .. } => file.resize(*size as usize, 0),
        Op::Sync { .. } | Op::Mark(_) | Op::Link | Op::Unlink => {}
    }
}

/// `op` cut at `sector` boundaries of its file (a truncation stays whole):
/// the units a power loss keeps or loses independently.
pub(crate) fn sectors(op: &Op, sector: u64) -> Vec<Op> {
    match op {
        Op::Write { file, at, data } => {
            let mut out = Vec::new();
            let mut pos = *at;
            let end = at + data.len() as u64;
            while pos < end {
                let next = ((pos / sector) + 1) * sector;
                let stop = next.min(end);
                out.push(Op::Write {
                    file: *file,
                    at: pos,
                    data: data[(pos - at) as usize..(stop - at) as usize].to_vec(),
                });
                pos = stop;
            }
            out
        }
        other => vec![other.clone()],
    }
}

fn file_of(op: &Op) -> usize {
    match op {
        Op::Write { file, .. } | Op::Truncate { file, .. } | Op::Sync { file } => *file,
        Op::Mark(_) => unreachable!("marks are not pending"),
        Op::Link | Op::Unlink => 3,
    }
}

// ------------------------------------------------------------ the checks

/// What must be in any state from the point it was acknowledged on.
#[derive(Debug, Clone, PartialEq)]
enum Ack {
    /// The step's attempt was recorded (its process started).
    Attempted { instance: String, step: String },
    /// The step completed (a later step's process started).
    Completed { instance: String, step: String },
    /// The instance ended with this status (`wf run` exited).
    Instance { instance: String, status: String },
    /// The event is stored (`wf signal` exited).
    Event { instance: String, name: String },
}

/// Reads a mark: step processes log `step ACK INSTANCE STEP PREV` (ACK 0:
/// a NORMAL writer's, acknowledging nothing), the test `instance ID STATUS`
/// and `event ID NAME`; several, separated by `; `.
fn acks_of(mark: &str) -> Vec<Ack> {
    if mark.contains("; ") {
        return mark.split("; ").flat_map(acks_of).collect();
    }
    let words: Vec<&str> = mark.split(' ').collect();
    match words.as_slice() {
        ["step", "0", ..] => vec![],
        ["step", "1", instance, step, prev] => {
            let mut acks = vec![Ack::Attempted {
                instance: instance.to_string(),
                step: step.to_string(),
            }];
            if *prev != "-" {
                acks.push(Ack::Completed {
                    instance: instance.to_string(),
                    step: prev.to_string(),
                });
            }
            acks
        }
        ["instance", instance, status] => vec![Ack::Instance {
            instance: instance.to_string(),
            status: status.to_string(),
        }],
        ["event", instance, name] => vec![Ack::Event {
            instance: instance.to_string(),
            name: name.to_string(),
        }],
        _ => panic!("an unknown mark: {mark}"),
    }
}

/// Checks one crash state (the files' bytes); `Err` says what is wrong.
fn check(
    dir: &Path,
    files: &[Option<Vec<u8>>; 3],
    acks: &[Ack],
    with_wf: bool,
) -> Result<(), String> {
    for (name, bytes) in FILES.iter().zip(files) {
        let path = dir.join(name);
        match bytes {
            Some(b) => std::fs::write(&path, b).expect("write a crash state"),
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    let _ = std::fs::remove_file(dir.join("wf.db-shm"));
    let db = dir.join("wf.db");
    let conn = rusqlite::Connection::open(&db).map_err(|e| format!("open: {e}"))?;
    let integrity: Vec<String> = conn
        .prepare("PRAGMA integrity_check")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(|e| format!("integrity_check: {e}"))?;
    if integrity != ["ok"] {
        return Err(format!("integrity_check: {integrity:?}"));
    }
    // The first column of the first row of `sql` with `a` and `b`, as text.
    let first = |sql: &str, a: &str, b: &str| -> Result<Option<String>, String> {
        use rusqlite::OptionalExtension;
        conn.query_row(sql, [a, b], |r| r.get::<_, rusqlite::types::Value>(0))
            .optional()
            .map(|v| {
                v.map(|v| match v {
                    rusqlite::types::Value::Text(t) => t,
                    other => format!("{other:?}"),
                })
            })
            .map_err(|e| format!("{sql}: {e}"))
    };
    for ack in acks {
        let ok = match ack {
            Ack::Attempted { instance, step } => first(
                "SELECT attempt FROM attempts WHERE instance_id=?1 AND step_key=?2",
                instance,
                step,
            )?
            .is_some(),
            Ack::Completed { instance, step } => {
                first(
                    "SELECT status FROM steps WHERE instance_id=?1 AND key=?2",
                    instance,
                    step,
                )?
                .as_deref()
                    == Some("completed")
            }
            Ack::Instance { instance, status } => {
                first(
                    "SELECT status FROM instances WHERE id=?1 AND ?2 IS NOT NULL",
                    instance,
                    status,
                )?
                .as_ref()
                    == Some(status)
            }
            Ack::Event { instance, name } => first(
                "SELECT id FROM events WHERE instance_id=?1 AND name=?2",
                instance,
                name,
            )?
            .is_some(),
        };
        if !ok {
            return Err(format!("acknowledged but missing: {ack:?}"));
        }
    }
    drop(conn);
    if with_wf {
        // Rebuilt again: the check above may have checkpointed the copy.
        for (name, bytes) in FILES.iter().zip(files) {
            if let Some(b) = bytes {
                std::fs::write(dir.join(name), b).expect("write a crash state");
            }
        }
        let _ = std::fs::remove_file(dir.join("wf.db-shm"));
        let out = Command::new(assert_cmd::cargo::cargo_bin("wf"))
            .args(["list", "--json", "--db"])
            .arg(&db)
            .env_remove("WF_DB")
            .output()
            .expect("run wf list");
        if !out.status.success() {
            return Err(format!(
                "wf list: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    Ok(())
}

/// What the replay went through.
#[derive(Debug, Default)]
struct Replayed {
    crash_points: usize,
    states: usize,
    acks: usize,
}

/// Replays `rec`'s log: every crash state at every sync and at the end,
/// random choices from `WF_CRASH_SEED` or the clock (said on stderr).
fn replay(rec: &Recording) -> Replayed {
    let seed = seed();
    let done = replay_with(rec, seed);
    eprintln!("{done:?} (seed {seed})");
    done
}

fn replay_with(rec: &Recording, seed: u64) -> Replayed {
    let ops = read_log(&rec.log);
    let scratch = tempfile::tempdir().expect("temp dir");
    let mut rng = XorShift(seed | 1);
    let mut durable: [Option<Vec<u8>>; 3] = rec.base.clone();
    let mut pending: Vec<Op> = Vec::new();
    let mut acks: Vec<Ack> = Vec::new();
    let mut seen: HashMap<u64, usize> = HashMap::new();
    // Bumped whenever a sync made more of the log durable.
    let mut generation = 0usize;
    let mut done = Replayed::default();
    let mut failures: Vec<String> = Vec::new();
    let mut at_crash = |label: &str,
                        generation: usize,
                        durable: &[Option<Vec<u8>>; 3],
                        pending: &[Op],
                        acks: &[Ack],
                        rng: &mut XorShift,
                        done: &mut Replayed| {
        done.crash_points += 1;
        let mut variants: Vec<(String, Vec<Op>)> =
            vec![("none".into(), vec![]), ("all".into(), pending.to_vec())];
        let n = pending.len();
        if n > 1 {
            let cuts: Vec<usize> = if n <= 4 {
                (1..n).collect()
            } else {
                (1..4).map(|k| k * n / 4).collect()
            };
            for k in cuts {
                variants.push((format!("prefix {k}/{n}"), pending[..k].to_vec()));
            }
        }
        if n > 0 {
            for sector in [512u64, 4096] {
                let units: Vec<Op> = pending.iter().flat_map(|op| sectors(op, sector)).collect();
                for (round, keep) in [1u64, 2, 3].into_iter().enumerate() {
                    // Keep each unit with probability 1/4, 1/2, 3/4.
                    let chosen: Vec<Op> = units
                        .iter()
                        .filter(|_| rng.below(4) < keep)
                        .cloned()
                        .collect();
                    variants.push((format!("random {sector} #{round}"), chosen));
                }
            }
        }
        for (i, (name, chosen)) in variants.into_iter().enumerate() {
            let mut files = durable.clone();
            for op in &chosen {
                let f = file_of(op);
                apply(files[f].get_or_insert_with(Vec::new), op);
            }
            // A state is what was synced (its generation) and which units
            // of what was not were kept.
            let key = {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                generation.hash(&mut h);
                for op in &chosen {
                    if let Op::Write { file, at, data } = op {
                        (file, at, data.len()).hash(&mut h);
                    } else if let Op::Truncate { file, size } = op {
                        (file, size, "t").hash(&mut h);
                    }
                }
                h.finish()
            };
            if seen.get(&key).is_some_and(|&checked| checked >= acks.len()) {
                continue;
            }
            seen.insert(key, acks.len());
            done.states += 1;
            let with_wf = i < 2 && done.crash_points.is_multiple_of(10);
            if let Err(e) = check(scratch.path(), &files, acks, with_wf) {
                failures.push(format!("{label}, {name} of {n} unsynced: {e}"));
            }
        }
    };
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Mark(text) => acks.extend(acks_of(text)),
            Op::Sync { file } => {
                at_crash(
                    &format!("before op {i} (sync of {})", FILES[*file]),
                    generation,
                    &durable,
                    &pending,
                    &acks,
                    &mut rng,
                    &mut done,
                );
                let (now, later): (Vec<Op>, Vec<Op>) =
                    pending.drain(..).partition(|p| file_of(p) == *file);
                for p in &now {
                    apply(durable[*file].get_or_insert_with(Vec::new), p);
                }
                generation += usize::from(!now.is_empty());
                pending = later;
            }
            write_or_truncate => pending.push(write_or_truncate.clone()),
        }
    }
    at_crash(
        "at the end",
        generation,
        &durable,
        &pending,
        &acks,
        &mut rng,
        &mut done,
    );
    done.acks = acks.len();
    assert!(
        failures.is_empty(),
        "{} of {} crash states break a promise (seed {seed}); the first ones:\n{}",
        failures.len(),
        done.states,
        failures
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    done
}

// ------------------------------------------------------------ scenarios

/// A sequential workflow of `n` `true` steps, each marking its start.
fn chain(name: &str, n: usize) -> String {
    let mut y = format!("name: {name}\ninputs:\n  ack: {{ default: \"1\" }}\nsteps:\n");
    for i in 0..n {
        let prev = if i == 0 {
            "-".to_string()
        } else {
            format!("s{}", i - 1)
        };
        y.push_str(&format!(
            "  - id: s{i}\n    run: \"true\"\n    env: {{ WF_IOLOG_MARK: \"step ${{{{ inputs.ack }}}} ${{{{ instance.id }}}} s{i} {prev}\" }}\n"
        ));
    }
    y
}

const SETUP: &str = "name: setup\nsteps:\n  - id: a\n    run: \"true\"\n";

pub(crate) fn seed() -> u64 {
    std::env::var("WF_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
}

/// Sequential FULL runs, long enough to cross several autocheckpoints
/// (250 WAL pages) and WAL restarts, each closing with its checkpoint.
#[test]
fn sequential_runs_across_autocheckpoints_survive_any_power_loss() {
    if crate::sqlite_only("power loss of a SQLite file") {
        return;
    }
    let rec = Recording::new(Test::new(), SETUP);
    let long = rec.t.write("long.yaml", &chain("long", 60));
    let short = rec.t.write("short.yaml", &chain("short", 2));
    for i in 0..3 {
        rec.run_completed(&long, &format!("long{i}"), &[], false);
        rec.run_completed(&short, &format!("short{i}"), &[], false);
    }
    let done = replay(&rec);
    assert!(done.acks >= 3 * 63, "every step was acknowledged: {done:?}");
}

/// FULL runs that overlap, beside `wf list`, `wf signal` and a worker.
#[test]
fn overlapping_runs_with_list_signal_and_a_worker_survive_any_power_loss() {
    if crate::sqlite_only("power loss of a SQLite file") {
        return;
    }
    let rec = Recording::new(Test::new(), SETUP);
    let long = rec.t.write("long.yaml", &chain("long", 30));
    rec.waiter("  - id: after\n    run: \"true\"\n");
    std::thread::scope(|s| {
        for lane in 0..2 {
            let (rec, long) = (&rec, &long);
            s.spawn(move || {
                for i in 0..2 {
                    rec.run_completed(long, &format!("lane{lane}-{i}"), &[], false);
                }
            });
        }
        let listing = s.spawn(|| {
            for _ in 0..10 {
                rec.wf(&["list", "--json"], false).code(0);
            }
        });
        let mut worker = rec.spawn(&["worker"], false);
        rec.wf(&["signal", "waiter", "go"], false).code(0);
        rec.mark("event waiter go");
        listing.join().expect("the listing thread");
        // Asked through recorded processes: every process that opens the
        // database may write it (a closing checkpoint).
        crate::durable::eventually("the worker completes the waiter", || {
            let listed = rec.wf(&["list", "--json"], false).json();
            listed.as_array().is_some_and(|l| {
                l.iter()
                    .any(|i| i["id"] == "waiter" && i["status"] == "completed")
            })
        });
        let _ = worker.kill();
        let _ = worker.wait();
    });
    let done = replay(&rec);
    // 4 runs of 30 steps and their ends, the event.
    assert!(done.acks > 4 * 31, "{done:?}");
}

/// A fan-out of children run in the parent's process, whose commits the
/// children's shared connection makes in groups (one transaction and one
/// sync for the commits that are ready together, each on its own fence):
/// every child's step that was acknowledged (its successor started, so its
/// group's commit had returned) is in every crash state.
#[test]
fn a_fan_out_of_children_committing_in_groups_survives_any_power_loss() {
    if crate::sqlite_only("power loss of a SQLite file") {
        return;
    }
    let rec = Recording::new(Test::new(), SETUP);
    rec.t.write("child.yaml", &chain("child", 6));
    let fan = rec.t.write(
        "fan.yaml",
        "name: fan\nsteps:\n  - id: f\n    for_each: [1, 2, 3, 4, 5, 6, 7, 8]\n    workflow: child.yaml\n",
    );
    for i in 0..2 {
        rec.run_completed(&fan, &format!("fan{i}"), &[], false);
    }
    let done = replay(&rec);
    // 2 fans of 8 children of 6 steps: 5 completions and 6 starts each.
    assert!(done.acks >= 2 * 8 * 11, "{done:?}");
}

/// Sequential children run in the parent's process. Of a child's commits
/// only the one that records its first attempt syncs: the parent's commit
/// that makes it, and the child's end (with its last step's result), leave
/// their sync to the next one (`Runner::defers_sync`). Every acknowledged
/// step is in every crash state all the same: a child's first step, once
/// started, acknowledges its own attempt, the parent's attempt that made
/// it, and the parent's step before (whose child ended before it).
#[test]
fn sequential_children_leaving_their_syncs_to_the_next_survive_any_power_loss() {
    if crate::sqlite_only("power loss of a SQLite file") {
        return;
    }
    let rec = Recording::new(Test::new(), SETUP);
    rec.t.write(
        "child.yaml",
        "name: child\ninputs:\n  parent: { required: true }\n  step: { required: true }\n  prev: { required: true }\nsteps:\n  \
         - id: s0\n    run: \"true\"\n    env: { WF_IOLOG_MARK: \"step 1 ${{ instance.id }} s0 -; step 1 ${{ inputs.parent }} ${{ inputs.step }} ${{ inputs.prev }}\" }\n  \
         - id: s1\n    run: \"true\"\n    env: { WF_IOLOG_MARK: \"step 1 ${{ instance.id }} s1 s0\" }\n",
    );
    let mut parent = String::from("name: seq\nsteps:\n");
    for i in 0..6 {
        let prev = if i == 0 {
            "-".to_string()
        } else {
            format!("c{}", i - 1)
        };
        parent.push_str(&format!(
            "  - id: c{i}\n    workflow: child.yaml\n    with: {{ parent: \"${{{{ instance.id }}}}\", step: c{i}, prev: \"{prev}\" }}\n"
        ));
    }
    let seq = rec.t.write("seq.yaml", &parent);
    for i in 0..2 {
        rec.run_completed(&seq, &format!("seq{i}"), &[], false);
    }
    let done = replay(&rec);
    // 2 parents of 6 children: 4 acks a child (5 but the first's), and the parent's end.
    assert!(done.acks >= 2 * (6 * 4 + 5 + 1), "{done:?}");
}

/// A writer set to `synchronous=NORMAL` (a `WF_DURABILITY=normal` wf, as a
/// python or sqlite3 client on NORMAL would be) commits beside FULL runs:
/// its commits are never synced by itself, and no checkpoint may copy them
/// into the database file before they are on the disk.
#[test]
fn a_normal_writer_beside_full_runs_never_corrupts_the_file() {
    if crate::sqlite_only("power loss of a SQLite file") {
        return;
    }
    let rec = Recording::new(Test::new(), SETUP);
    let short = rec.t.write("short.yaml", &chain("short", 2));
    rec.waiter("");
    // In turn: each NORMAL writer's close is then the last connection's,
    // whose checkpoint copies that writer's unsynced frames; the long runs
    // cross autocheckpoints, so the WAL starts over between them and those
    // frames' pages are not shadowed by older frames of the WAL.
    let long = rec.t.write("long.yaml", &chain("long", 45));
    for i in 0..6 {
        rec.run_completed(&long, &format!("long{i}"), &[], false);
        rec.wf(&["signal", "waiter", &format!("seq{i}")], true)
            .code(0);
        rec.run_completed(
            &short,
            &format!("normal-seq{i}"),
            &["--input", "ack=0"],
            true,
        );
    }
    // At once: NORMAL runs and signals beside FULL runs.
    std::thread::scope(|s| {
        let (rec, short) = (&rec, &short);
        s.spawn(move || {
            for i in 0..12 {
                rec.run_completed(short, &format!("normal{i}"), &["--input", "ack=0"], true);
                rec.wf(&["signal", "waiter", &format!("n{i}")], true)
                    .code(0);
            }
        });
        for i in 0..12 {
            rec.run_completed(short, &format!("full{i}"), &[], false);
        }
    });
    let done = replay(&rec);
    assert!(done.acks >= 6 * 46 + 12 * 3, "{done:?}");
}
