//! `wf db backup` of a busy history (issue 56, item 1), proven by
//! crash-consistency: backups taken at random moments while two loops run
//! workflows on the database each check sound, hold every instance
//! acknowledged before they began, and are histories their own workers
//! finish, each attempt they record having run exactly once.

use crate::Test;
use crate::db::{ids, t_inspect, wf_on};
use serde_json::Value;
use std::ffi::OsStr;
use std::process::Command;
use std::time::Duration;

/// A shell loop in a process group of its own; the group is killed when
/// it is dropped.
struct Loop(std::process::Child);

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0.id())])
            .status();
        let _ = self.0.wait();
    }
}

/// A shell loop running `wf run FILE` on the test's database until dropped.
fn busy_loop(t: &Test, file: &str) -> Loop {
    use std::os::unix::process::CommandExt as _;
    let wf = assert_cmd::cargo::cargo_bin("wf");
    let line = format!(
        "while true; do {} run {file} > /dev/null 2>&1; done",
        t.shell_wf(&wf)
    );
    let child = Command::new("sh")
        .args(["-c", &line])
        .current_dir(t.path())
        .env("TMPDIR", t.tmp_path())
        .env("EXEC_LOG", t.path().join("executed-source.log"))
        .env("NO_COLOR", "1")
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("sh");
    Loop(child)
}

#[test]
fn backups_of_a_busy_history_are_sound_whole_and_resume_to_completion() {
    let t = Test::new();
    // Each step says, as it runs, which attempt of which step of which
    // instance it is, in the log of the database that runs it.
    let said = "echo \"$WF_INSTANCE_ID $WF_STEP_ID $WF_ATTEMPT\" >> \"$EXEC_LOG\"";
    let chain = t.write(
        "busy.yaml",
        &format!(
            "name: busy\nsteps:\n  - id: a\n    run: {said}; sleep 0.02\n  - id: b\n    run: {said}; sleep 0.02\n  - id: c\n    run: {said}\n"
        ),
    );
    let chain = chain.to_str().expect("utf-8").to_string();
    let loops = [busy_loop(&t, &chain), busy_loop(&t, &chain)];
    let mut rng = crate::XorShift(0xD1B5_4A32_D192_ED03 ^ u64::from(std::process::id()));
    let mut backups = Vec::new();
    for round in 0..4 {
        std::thread::sleep(Duration::from_millis(50 + rng.below(250)));
        // Acknowledged before the backup began: ended, as listed.
        let acked: Vec<String> = t
            .wf(&["list", "--json", "--limit", "1000", "--status", "completed"])
            .code(0)
            .json()
            .as_array()
            .expect("a list")
            .iter()
            .map(|i| i["id"].as_str().expect("an id").to_string())
            .collect();
        let dest = t.path().join(format!("backup-{round}.db"));
        t.wf(&["db", "backup", dest.to_str().expect("utf-8"), "--json"])
            .code(0);
        let backup = dest.into_os_string();
        wf_on(&t, &backup, &["db", "check"]).code(0);
        let held = ids(&t, &backup);
        for id in &acked {
            assert!(
                held.contains(id),
                "{id}, completed before backup {round}, is not in it"
            );
            let r = wf_on(&t, &backup, &["result", id, "--json"]).json();
            assert_eq!(r["status"], "completed", "{id} in backup {round}");
        }
        backups.push(backup);
    }
    // Every attempt a backup recorded was started by the source: wait
    // until the source's log says so before the loops stop (an attempt is
    // recorded just before its process starts).
    let recorded = |db: &OsStr| -> Vec<String> {
        let mut out = Vec::new();
        for id in ids(&t, db) {
            let inspect = t_inspect(&t, db, &id);
            for step in inspect["steps"].as_array().expect("steps") {
                for a in step["attempt_list"].as_array().expect("attempts") {
                    out.push(format!(
                        "{id} {} {}",
                        step["id"].as_str().unwrap(),
                        a["attempt"]
                    ));
                }
            }
        }
        out
    };
    let lines = |name: &str| -> Vec<String> {
        std::fs::read_to_string(t.path().join(name))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    };
    let before: Vec<Vec<String>> = backups.iter().map(|b| recorded(b)).collect();
    crate::durable::eventually("the source ran every attempt a backup recorded", || {
        let ran = lines("executed-source.log");
        before.iter().flatten().all(|a| ran.contains(a))
    });
    drop(loops);
    // Each backup is a history its own worker finishes: what was in flight
    // when it was taken is taken up (its leases were cleared), and each
    // attempt it records ran once, by the source or by its worker: none
    // twice, none without its record.
    for (n, backup) in backups.iter().enumerate() {
        let log = format!("executed-backup-{n}.log");
        let mut worker = Command::new(assert_cmd::cargo::cargo_bin("wf"));
        worker
            .current_dir(t.path())
            .env_remove("WF_DB")
            .env("TMPDIR", t.tmp_path())
            .env("EXEC_LOG", t.path().join(&log))
            .arg("--db")
            .arg(backup)
            .args(["worker", "--once"]);
        let ran = worker.output().expect("wf worker");
        assert!(
            ran.status.success(),
            "{}",
            String::from_utf8_lossy(&ran.stderr)
        );
        for id in ids(&t, backup) {
            let inspect = t_inspect(&t, backup, &id);
            assert_eq!(inspect["status"], "completed", "{inspect:#}");
            for step in inspect["steps"].as_array().expect("steps") {
                let attempts = step["attempt_list"].as_array().expect("attempts");
                let ok = attempts.iter().filter(|a| a["outcome"] == "ok").count();
                assert_eq!(ok, 1, "one success a step: {step:#}");
                assert_eq!(
                    attempts.last().map(|a| &a["outcome"]),
                    Some(&Value::from("ok"))
                );
            }
        }
        let by_worker = lines(&log);
        let source = lines("executed-source.log");
        let recorded = recorded(backup);
        let count = |lines: &[String], a: &String| lines.iter().filter(|l| *l == a).count();
        // What the backup held when it was taken ran once, in the source,
        // and its worker ran none of it again.
        for a in &before[n] {
            assert_eq!(
                count(&source, a),
                1,
                "attempt `{a}` of backup {n} in the source"
            );
            assert_eq!(
                count(&by_worker, a),
                0,
                "backup {n}'s worker ran `{a}` again"
            );
        }
        // What its worker added ran once, by it (the source may have run
        // an attempt of the same number after the backup was taken: that
        // is another history's).
        for a in recorded.iter().filter(|a| !before[n].contains(a)) {
            assert_eq!(
                count(&by_worker, a),
                1,
                "attempt `{a}` of backup {n} by its worker"
            );
        }
        for l in &by_worker {
            assert!(
                recorded.contains(l),
                "backup {n}'s worker ran `{l}`, which it never recorded"
            );
        }
        wf_on(&t, backup, &["db", "check"]).code(0);
    }
    // A backup never replaces a file.
    let again = t.wf(&["db", "backup", backups[0].to_str().expect("utf-8")]);
    again.code(2);
    assert!(again.stderr.contains("never replaces"), "{}", again.stderr);
}
