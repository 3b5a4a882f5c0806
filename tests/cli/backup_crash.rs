//! A backup and a power loss: whatever a power loss at any moment of
//! `wf db backup DEST` leaves on the disk, DEST is absent or a whole backup,
//! and once the command has said it is done, DEST is there. Proven by
//! crash-state replay as in `crash.rs`: the same I/O recorder logs the
//! backup's temporary file, its link to DEST and its folder's syncs, and
//! the replay rebuilds what the disk may hold before each sync and at the
//! end. The temporary file is written without a journal or syncs of its
//! own (`store::sqlite::portable`); what makes DEST whole is that the file
//! is synced before its name is linked, and what makes it last that the
//! folder is synced after: this test fails if either is not so.

use crate::crash::{Op, apply, read_log, sectors, seed, shim};
use crate::{Test, XorShift};
use std::path::Path;
use std::process::Command;

/// Whether the file at `db` is a whole backup of the `want` instances:
/// `wf db check` finds it sound and `wf list` shows each completed.
fn whole(db: &Path, want: &[String]) -> Result<(), String> {
    let wf = |args: &[&str]| {
        Command::new(assert_cmd::cargo::cargo_bin("wf"))
            .arg("--db")
            .arg(db)
            .args(args)
            .env_remove("WF_DB")
            .env_remove("WF_PG_SCHEMA")
            .output()
            .expect("run wf")
    };
    let checked = wf(&["db", "check"]);
    if !checked.status.success() {
        return Err(format!(
            "wf db check: {}{}",
            String::from_utf8_lossy(&checked.stdout).trim(),
            String::from_utf8_lossy(&checked.stderr).trim()
        ));
    }
    let listed = wf(&["list", "--json", "--limit", "0"]);
    let list: serde_json::Value = serde_json::from_slice(&listed.stdout).map_err(|e| {
        format!(
            "wf list --json: {e}: {}",
            String::from_utf8_lossy(&listed.stderr)
        )
    })?;
    for id in want {
        let found = list
            .as_array()
            .into_iter()
            .flatten()
            .find(|i| i["id"] == id.as_str());
        match found {
            Some(i) if i["status"] == "completed" => {}
            other => return Err(format!("instance {id}: {other:?}")),
        }
    }
    Ok(())
}

#[test]
fn a_backup_is_whole_or_absent_after_a_power_loss_at_any_moment() {
    let t = Test::new();
    let flow = t.write(
        "three.yaml",
        "name: three\nsteps:\n  - id: a\n    run: echo a\n  - id: b\n    run: echo b\n  - id: c\n    run: echo c\n",
    );
    let ids: Vec<String> = (0..6).map(|i| format!("before-{i}")).collect();
    for id in &ids {
        t.wf(&["run", flow.to_str().expect("utf-8"), "--id", id])
            .code(0);
    }
    // A folder of its own: the source's own syncs of its folder (at its
    // close) must not be taken for the backup's.
    let dest = t.path().join("backups").join("backup.db");
    std::fs::create_dir(t.path().join("backups")).expect("mkdir");
    let log = t.path().join("io.log");
    let ran = t
        .cmd()
        .args(["db", "backup"])
        .arg(&dest)
        .env("LD_PRELOAD", shim())
        .env("WF_IOLOG", &log)
        .env("WF_IOLOG_BACKUP", &dest)
        .output()
        .expect("run wf db backup");
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let ops = read_log(&log);
    assert!(
        ops.iter().any(|o| matches!(o, Op::Write { file: 3, .. })),
        "the recorder saw the backup's writes"
    );
    assert!(
        ops.iter().any(|o| matches!(o, Op::Link)),
        "the recorder saw the backup's link"
    );

    let scratch = tempfile::tempdir().expect("temp dir");
    let state = scratch.path().join("backup.db");
    let seed = seed();
    let mut rng = XorShift(seed | 1);
    let mut synced: Vec<u8> = Vec::new();
    let mut pending: Vec<Op> = Vec::new();
    let (mut linked, mut lasting) = (false, false);
    let (mut states, mut failures) = (0usize, Vec::<String>::new());
    // Every state a power loss at this point may leave in which DEST
    // exists (its link made, lasting or not): DEST's bytes are what was
    // synced and any part of what was written since.
    let mut at_crash = |label: &str, linked: bool, synced: &[u8], pending: &[Op]| {
        if !linked {
            return;
        }
        let mut variants: Vec<(String, Vec<Op>)> =
            vec![("none".into(), vec![]), ("all".into(), pending.to_vec())];
        if !pending.is_empty() {
            for sector in [512u64, 4096] {
                let units: Vec<Op> = pending.iter().flat_map(|op| sectors(op, sector)).collect();
                for keep in [1u64, 2, 3] {
                    let chosen = units
                        .iter()
                        .filter(|_| rng.below(4) < keep)
                        .cloned()
                        .collect();
                    variants.push((format!("random {sector} ({keep}/4 kept)"), chosen));
                }
            }
        }
        for (name, chosen) in variants {
            let mut bytes = synced.to_vec();
            for op in &chosen {
                apply(&mut bytes, op);
            }
            for suffix in ["-wal", "-shm", "-journal"] {
                let _ = std::fs::remove_file(scratch.path().join(format!("backup.db{suffix}")));
            }
            std::fs::write(&state, &bytes).expect("write a crash state");
            states += 1;
            if let Err(e) = whole(&state, &ids) {
                failures.push(format!(
                    "{label}, {name} of {} unsynced writes: {e}",
                    pending.len()
                ));
            }
        }
    };
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Write { file: 3, .. } | Op::Truncate { file: 3, .. } => pending.push(op.clone()),
            Op::Sync { file: 3 } => {
                at_crash(
                    &format!("before op {i} (the file's sync)"),
                    linked,
                    &synced,
                    &pending,
                );
                for p in pending.drain(..) {
                    apply(&mut synced, &p);
                }
            }
            Op::Sync { file: 4 } => {
                at_crash(
                    &format!("before op {i} (the folder's sync)"),
                    linked,
                    &synced,
                    &pending,
                );
                lasting |= linked;
            }
            Op::Link => linked = true,
            _ => {}
        }
    }
    at_crash("at the end", linked, &synced, &pending);
    eprintln!("{states} crash states with the backup's name (seed {seed})");
    assert!(states > 0, "no state had the backup's name");
    assert!(
        failures.is_empty(),
        "{} of {states} crash states hold a backup that is not whole (seed {seed}):\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        lasting,
        "the backup's folder was not synced after its link: a power loss after `wf db backup` said done may lose it"
    );
}
