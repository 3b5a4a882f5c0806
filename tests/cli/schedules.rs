//! Schedules (issue 15): `wf schedule add/rm/list`, and `wf worker`
//! starting an instance for each due fire time exactly once however many
//! workers run, with `overlap` and `catchup` as docs/workflow-file.md and docs/execution.md say. (The DST
//! rules are unit tests with a fixed clock: `workflow::trigger`.)

use crate::Test;
use crate::durable::{eventually, spawn};
use serde_json::Value;
use std::time::Duration;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn ms(rfc3339: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .unwrap_or_else(|e| panic!("{rfc3339}: {e}"))
        .timestamp_millis()
}

fn list(t: &Test) -> Vec<Value> {
    t.wf(&["list", "--json"])
        .code(0)
        .json()
        .as_array()
        .unwrap()
        .clone()
}

fn schedules(t: &Test) -> Vec<Value> {
    t.wf(&["schedule", "list", "--json"])
        .code(0)
        .json()
        .as_array()
        .unwrap()
        .clone()
}

/// Waits until the first entry's next fire time has passed (a wait for the
/// clock: nothing else can say a fire time is due).
pub(crate) fn until_due(t: &Test) {
    let next = ms(schedules(t)[0]["next_fire_at"].as_str().unwrap());
    let wait = next - now_ms() + 20;
    if wait > 0 {
        std::thread::sleep(Duration::from_millis(wait as u64));
    }
}

/// One sweep of a worker: fires what is due, runs it, exits.
fn sweep(t: &Test) -> String {
    let ran = t.wf(&["worker", "--once"]);
    ran.code(0);
    ran.stderr.clone()
}

/// An instance that stays open (sleeping) until canceled.
fn napper(overlap: &str) -> String {
    format!(
        "name: napper\non:\n  schedule:\n    - every: 1s\n      overlap: {overlap}\nsteps:\n  - id: nap\n    sleep: 1h\n"
    )
}

/// Registers [`napper`] with `overlap`, lets its first fire time start an
/// instance (which stays open), waits for the next fire time, and sweeps
/// again: the first instance's id and the second sweep's log.
fn second_fire_while_open(t: &Test, overlap: &str) -> (String, String) {
    let wf = t.write("napper.yaml", &napper(overlap));
    t.wf(&["schedule", "add", wf.to_str().unwrap()]).code(0);
    until_due(t);
    sweep(t);
    let first = list(t);
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0]["status"], "sleeping");
    until_due(t);
    let log = sweep(t);
    (first[0]["id"].as_str().unwrap().to_string(), log)
}

#[test]
fn add_list_and_rm() {
    let t = Test::new();
    let wf = t.write(
        "nightly.yaml",
        "name: nightly\ninputs:\n  who: { required: true }\non:\n  schedule:\n    \
         - cron: \"0 9 * * 1-5\"\n      timezone: Europe/Paris\n      inputs: { who: ana }\n    \
         - every: 30s\n      inputs: { who: bob }\n      overlap: buffer_one\n      catchup: 1h\n\
         steps:\n  - id: a\n    run: echo hi ${{ inputs.who }}\n",
    );
    let path = wf.to_str().unwrap();
    // Before the database exists, the list says there is none (exit 1).
    let ran = t.wf(&["schedule", "list", "--json"]);
    ran.code(1);
    assert!(ran.stderr.contains("no database at"), "{}", ran.stderr);
    let added = t.wf(&["schedule", "add", path]);
    added.code(0);
    assert!(
        added
            .stderr
            .contains("schedule nightly: 0 9 * * 1-5 (Europe/Paris)"),
        "{}",
        added.stderr
    );
    assert!(
        added.stderr.contains("schedule nightly[1]: every 30s"),
        "{}",
        added.stderr
    );

    let rows = schedules(&t);
    assert_eq!(rows.len(), 2, "{rows:?}");
    let (cron, every) = (&rows[0], &rows[1]);
    assert_eq!(cron["workflow"], "nightly");
    assert_eq!(cron["spec"], "0 9 * * 1-5");
    assert_eq!(cron["timezone"], "Europe/Paris");
    assert_eq!(cron["overlap"], "skip");
    assert_eq!(cron["inputs"]["who"], "ana");
    assert_eq!(cron["last_instance"], Value::Null);
    // 09:00 in Paris is 07:00 or 08:00 UTC, on a weekday, in the future.
    let next =
        chrono::DateTime::parse_from_rfc3339(cron["next_fire_at"].as_str().unwrap()).unwrap();
    use chrono::{Datelike, Timelike};
    assert!(next.timestamp_millis() > now_ms());
    assert!(matches!(next.hour(), 7 | 8) && next.minute() == 0, "{next}");
    assert!(next.weekday().number_from_monday() <= 5, "{next}");
    assert_eq!(every["spec"], "every 30s");
    assert_eq!(every["timezone"], Value::Null);
    assert_eq!(every["overlap"], "buffer_one");
    assert_eq!(every["catchup"], "1h");
    let every_next = ms(every["next_fire_at"].as_str().unwrap());
    assert_eq!(every_next % 30_000, 0);
    assert!(every_next > now_ms() - 1000 && every_next <= now_ms() + 30_000);

    // The table shows both.
    let table = t.wf(&["schedule", "list"]);
    table.code(0);
    assert!(table.stdout.contains("nightly[1]"), "{}", table.stdout);
    assert!(table.stdout.contains("Europe/Paris"), "{}", table.stdout);

    // Registering again with the same specs keeps the fire times; a changed
    // spec starts afresh.
    t.wf(&["schedule", "add", path]).code(0);
    assert_eq!(schedules(&t)[0]["next_fire_at"], cron["next_fire_at"]);
    let changed = std::fs::read_to_string(&wf)
        .unwrap()
        .replace("0 9 * * 1-5", "30 23 * * *");
    std::fs::write(&wf, changed).unwrap();
    t.wf(&["schedule", "add", path]).code(0);
    let rows = schedules(&t);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["spec"], "30 23 * * *");
    let next =
        chrono::DateTime::parse_from_rfc3339(rows[0]["next_fire_at"].as_str().unwrap()).unwrap();
    assert_eq!(next.minute(), 30);

    // rm: an unknown name is refused, naming what is registered.
    let ran = t.wf(&["schedule", "rm", "nope"]);
    ran.code(2);
    assert!(
        ran.stderr
            .contains("no schedule is registered for `nope` (registered: nightly)"),
        "{}",
        ran.stderr
    );
    t.wf(&["schedule", "rm", "nightly"]).code(0);
    assert_eq!(schedules(&t), Vec::<Value>::new());
    // Nothing was started by any of this.
    assert!(list(&t).is_empty());
}

#[test]
fn bad_schedules_are_refused_before_anything_is_registered() {
    let t = Test::new();
    let none = t.write(
        "none.yaml",
        "name: none\nsteps:\n  - id: a\n    run: \"true\"\n",
    );
    let ran = t.wf(&["schedule", "add", none.to_str().unwrap()]);
    ran.code(2);
    assert!(
        ran.stderr.contains("has no `on.schedule`"),
        "{}",
        ran.stderr
    );
    for (yaml, error) in [
        (
            "    - cron: \"* * *\"\n",
            "bad.yaml:4:13: invalid cron expression `* * *`",
        ),
        (
            "    - cron: \"0 9 * * *\"\n      timezone: Mars/Olympus\n",
            "bad.yaml:5:17: unknown time zone `Mars/Olympus`",
        ),
        (
            "    - every: 10ms\n",
            "bad.yaml:4:14: `every` must be at least 1s",
        ),
        (
            "    - every: 1m\n      cron: \"* * * * *\"\n",
            "a schedule has `cron` or `every`, not both",
        ),
        (
            "    - every: 1m\n      overlap: sometimes\n",
            "unknown variant `sometimes`",
        ),
        (
            "    - every: 1m\n      inputs: { whom: x }\n",
            "unknown input `whom`",
        ),
    ] {
        let bad = t.write(
            "bad.yaml",
            &format!("name: bad\non:\n  schedule:\n{yaml}steps:\n  - id: a\n    run: \"true\"\n"),
        );
        let ran = t.wf(&["schedule", "add", bad.to_str().unwrap()]);
        ran.code(2);
        assert!(ran.stderr.contains(error), "{yaml}: {}", ran.stderr);
    }
    assert_eq!(schedules(&t), Vec::<Value>::new());
}

/// Two workers over an `every: 1s` schedule: every fire time starts one
/// instance, none twice, none missing, and each instance says which fire
/// time started it.
#[test]
fn two_workers_start_each_fire_time_once() {
    let t = Test::new();
    let wf = t.write(
        "tick.yaml",
        "name: tick\ninputs:\n  who: { default: nobody }\non:\n  schedule:\n    - every: 1s\n      \
         overlap: allow\n      inputs: { who: sched }\nsteps:\n  - id: hello\n    \
         run: echo \"$WF_INSTANCE_ID ${{ inputs.who }}\" >> ticks.log\n",
    );
    t.wf(&["schedule", "add", wf.to_str().unwrap()]).code(0);
    let a = spawn(&t, &["worker", "--poll", "50ms"]);
    let b = spawn(&t, &["worker", "--poll", "50ms"]);
    eventually("6 scheduled instances to complete", || {
        list(&t)
            .iter()
            .filter(|i| i["status"] == "completed")
            .count()
            >= 6
    });
    a.signal("TERM");
    b.signal("TERM");
    let (a, b) = (a.finish(), b.finish());
    let mut fires = Vec::new();
    for inst in list(&t) {
        let id = inst["id"].as_str().unwrap();
        let v = t.inspect(id);
        assert_eq!(v["schedule"]["workflow"], "tick", "{v}");
        assert_eq!(v["schedule"]["spec"], "every 1s");
        assert_eq!(v["inputs"]["who"], "sched");
        fires.push(ms(v["schedule"]["fire_at"].as_str().unwrap()));
    }
    fires.sort();
    // Consecutive seconds, each once.
    for pair in fires.windows(2) {
        assert_eq!(pair[1] - pair[0], 1000, "fire times {fires:?}");
    }
    // Each instance that ran ran once (stopped workers may leave the newest
    // ones interrupted, never doubled).
    let log = t.read("ticks.log");
    let lines: Vec<&str> = log.lines().collect();
    let mut unique = lines.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), lines.len(), "{log}");
    assert!(lines.iter().all(|l| l.ends_with(" sched")), "{log}");
    // What each worker started, from its log: together, every instance, once.
    let started = |r: &crate::Ran| r.stderr.matches("started instance").count();
    assert_eq!(
        started(&a) + started(&b),
        fires.len(),
        "{}\n{}",
        a.stderr,
        b.stderr
    );
    let last = &schedules(&t)[0];
    assert!(last["last_instance"].is_string());
}

#[test]
fn overlap_skip_starts_nothing_while_the_previous_is_open() {
    let t = Test::new();
    let (first, log) = second_fire_while_open(&t, "skip");
    assert!(log.contains("is still open (overlap)"), "{log}");
    assert_eq!(list(&t).len(), 1);
    assert!(schedules(&t)[0]["skipped"].as_i64().unwrap() >= 1);
    // Once it ended, the next fire time starts again.
    t.wf(&["cancel", &first]).code(0);
    until_due(&t);
    sweep(&t);
    assert_eq!(list(&t).len(), 2);
}

#[test]
fn overlap_allow_starts_beside_the_open_one() {
    let t = Test::new();
    second_fire_while_open(&t, "allow");
    let all = list(&t);
    assert!(all.len() >= 2, "{all:?}");
    assert!(all.iter().all(|i| i["status"] == "sleeping"), "{all:?}");
}

#[test]
fn overlap_buffer_one_starts_the_kept_fire_time_when_the_previous_ends() {
    let t = Test::new();
    let (first, log) = second_fire_while_open(&t, "buffer_one");
    assert!(log.contains("waits for instance"), "{log}");
    assert_eq!(list(&t).len(), 1);
    let buffered = schedules(&t)[0]["buffered_fire_at"]
        .as_str()
        .unwrap()
        .to_string();
    t.wf(&["cancel", &first]).code(0);
    sweep(&t);
    let all = list(&t);
    assert_eq!(all.len(), 2, "{all:?}");
    let second = all.iter().find(|i| i["id"] != first.as_str()).unwrap();
    let v = t.inspect(second["id"].as_str().unwrap());
    assert_eq!(v["schedule"]["fire_at"], buffered.as_str());
    assert_eq!(schedules(&t)[0]["buffered_fire_at"], Value::Null);
}

#[test]
fn overlap_cancel_previous_cancels_the_open_one_and_starts() {
    let t = Test::new();
    let (first, log) = second_fire_while_open(&t, "cancel_previous");
    assert!(
        log.contains(&format!("asked instance {} to cancel", &first[..12])),
        "{log}"
    );
    assert_eq!(t.inspect(&first)["status"], "canceled");
    let all = list(&t);
    assert_eq!(all.len(), 2, "{all:?}");
    let second = all.iter().find(|i| i["id"] != first.as_str()).unwrap();
    assert_eq!(second["status"], "sleeping");
}

/// Fire times missed while no worker ran: those within `catchup` start once
/// each, older ones are skipped and reported.
#[test]
fn catchup_starts_missed_fire_times_within_the_window_only() {
    let t = Test::new();
    let wf = t.write(
        "hourly.yaml",
        "name: hourly\non:\n  schedule:\n    - every: 1h\n      overlap: allow\n      catchup: 2h\n\
         steps:\n  - id: a\n    run: echo \"$WF_INSTANCE_ID\" >> ran.log\n",
    );
    t.wf(&["schedule", "add", wf.to_str().unwrap()]).code(0);
    // Not within 5 s of an hour: the answer below must not straddle one.
    let hour = 3_600_000;
    let into = now_ms() % hour;
    if into < 5_000 || into > hour - 5_000 {
        std::thread::sleep(Duration::from_millis(((hour - into) % hour + 6_000) as u64));
    }
    let h = now_ms() / hour * hour;
    // As if no worker had run for five hours.
    t.sql(&format!(
        "UPDATE schedules SET next_fire_ms = {}",
        h - 5 * hour
    ));
    let log = sweep(&t);
    // h-5h … h-2h are older than the window (now-2h); h-1h and h start.
    assert!(
        log.contains("skipped 4 fire times missed while no worker ran"),
        "{log}"
    );
    let mut fired: Vec<i64> = list(&t)
        .iter()
        .map(|i| {
            ms(t.inspect(i["id"].as_str().unwrap())["schedule"]["fire_at"]
                .as_str()
                .unwrap())
        })
        .collect();
    fired.sort();
    assert_eq!(fired, [h - hour, h]);
    assert_eq!(t.read("ran.log").lines().count(), 2);
    let row = &schedules(&t)[0];
    assert_eq!(ms(row["next_fire_at"].as_str().unwrap()), h + hour);
    assert_eq!(row["skipped"], 4);
    // Nothing more is due: another sweep starts nothing.
    sweep(&t);
    assert_eq!(list(&t).len(), 2);
}

/// Prune keeps what a registered schedule needs (its pinned definition).
#[test]
fn prune_keeps_a_registered_definition() {
    let t = Test::new();
    let wf = t.write(
        "tick.yaml",
        "name: tick\non:\n  schedule:\n    - every: 1s\nsteps:\n  - id: a\n    run: \"true\"\n",
    );
    t.wf(&["schedule", "add", wf.to_str().unwrap()]).code(0);
    until_due(&t);
    sweep(&t);
    assert_eq!(list(&t)[0]["status"], "completed");
    // The file changes; the registered text is what runs.
    std::fs::write(&wf, "name: tick\nsteps:\n  - id: b\n    run: \"false\"\n").unwrap();
    t.wf(&["prune", "--older-than", "0s"]).code(0);
    assert!(list(&t).is_empty());
    until_due(&t);
    sweep(&t);
    let all = list(&t);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["status"], "completed");
}

/// The README's schedule example registers its two entries as documented.
#[test]
fn the_nightly_example_registers() {
    let t = Test::new();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/workflows/nightly.yaml");
    let ran = t.wf(&["schedule", "add", example]);
    ran.code(0);
    assert!(
        ran.stderr
            .contains("schedule nightly: 30 2 * * 1-5 (Europe/Paris); next fire "),
        "{}",
        ran.stderr
    );
    let rows = schedules(&t);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(
        (&rows[0]["overlap"], &rows[0]["catchup"]),
        (&Value::from("skip"), &Value::from("6h"))
    );
    assert_eq!(rows[1]["spec"], "every 15m");
    assert_eq!(rows[1]["overlap"], "buffer_one");
    assert_eq!(rows[1]["inputs"]["scope"], "quick");
    assert_eq!(rows[0]["inputs"]["scope"], "full");
}

/// Sets a flag when dropped (also when a test panics), so that helper
/// threads stop.
struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Every fire record: (entry, fire time, instance), by entry and fire time.
fn fires(t: &Test) -> Vec<(i64, i64, String)> {
    t.sql("SELECT idx, fire_ms, instance_id FROM schedule_fires ORDER BY idx, fire_ms")
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('|').collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].to_string(),
            )
        })
        .collect()
}

/// `wf schedule add` of the same file again and again, two at a time, while
/// three workers fire its four entries (issue 34). A registration used to read the
/// entry before the transaction that wrote it back: a fire in between was
/// undone (the cursor put back), and the next fire of that time failed on
/// a duplicate key, stopping every worker. Now no worker stops, every
/// registration succeeds, each fire time starts one instance, in order,
/// and after a prune no fire time starts again.
#[test]
fn registering_again_while_workers_fire_never_undoes_a_fire() {
    let t = Test::new();
    let wf = t.write(
        "tick.yaml",
        &format!(
            "name: tick\non:\n  schedule:\n{}steps:\n  - id: mark\n",
            "    - every: 1s\n      overlap: allow\n".repeat(4)
        ),
    );
    let path = wf.to_str().unwrap().to_string();
    t.wf(&["schedule", "add", &path]).code(0);
    let mut workers: Vec<_> = (0..3)
        .map(|_| spawn(&t, &["worker", "--poll", "20ms"]))
        .collect();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let registrations = std::thread::scope(|s| {
        let registrars: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut n = 0;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let ran = t.wf(&["schedule", "add", &path]);
                        if ran.code != 0 {
                            stop.store(true, std::sync::atomic::Ordering::Relaxed);
                            panic!("wf schedule add failed: {}", ran.stderr);
                        }
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let _stop = StopOnDrop(&stop);
        eventually("32 fire times to start", || {
            stop.load(std::sync::atomic::Ordering::Relaxed) || fires(&t).len() >= 32
        });
        drop(_stop);
        registrars
            .into_iter()
            .map(|r| r.join().expect("a registrar failed"))
            .sum::<usize>()
    });
    assert!(registrations > 10, "{registrations} registrations");
    for w in &mut workers {
        assert!(!w.exited(), "a worker stopped");
    }
    for w in workers {
        w.signal("TERM");
        let ran = w.finish();
        // (Stopped by the signal: 130, or 0 when it was idle.)
        assert!(matches!(ran.code, 0 | 130), "{}: {}", ran.code, ran.stderr);
        assert!(!ran.stderr.contains("error"), "{}", ran.stderr);
        // No registration put a cursor back on a fire time it had passed.
        assert!(!ran.stderr.contains("already started"), "{}", ran.stderr);
    }
    // Each fire time of each entry once, every second, none skipped
    // (overlap: allow), and one instance each.
    let before = fires(&t);
    for pair in before.windows(2).filter(|p| p[0].0 == p[1].0) {
        assert_eq!(pair[1].1 - pair[0].1, 1000, "{before:?}");
    }
    let instances = t.wf(&["list", "--json", "--limit", "10000"]).code(0).json();
    assert_eq!(instances.as_array().map(Vec::len), Some(before.len()));

    // Pruned, the instances take their fire records with them; the cursor
    // is past them, so none of those fire times starts again.
    let last = |idx: i64| before.iter().filter(|f| f.0 == idx).map(|f| f.1).max();
    t.wf(&["prune", "--older-than", "0s"]).code(0);
    until_due(&t);
    sweep(&t);
    let old: std::collections::HashSet<&String> = before.iter().map(|(_, _, id)| id).collect();
    let new: Vec<(i64, i64, String)> = fires(&t)
        .into_iter()
        .filter(|(_, _, id)| !old.contains(id))
        .collect();
    assert!(!new.is_empty());
    for (idx, ms, _) in &new {
        assert!(Some(*ms) > last(*idx), "entry {idx}: {ms} after {before:?}");
    }
}

/// A fire time that already started an instance (the entry's cursor put
/// back on it, as a registration could before issue 34) is skipped with a
/// line saying so: never an error that stops the worker.
#[test]
fn a_fire_time_started_before_is_skipped_never_an_error() {
    let t = Test::new();
    let wf = t.write(
        "tick.yaml",
        "name: tick\non:\n  schedule:\n    - every: 1s\n      overlap: allow\nsteps:\n  - id: mark\n",
    );
    t.wf(&["schedule", "add", wf.to_str().unwrap()]).code(0);
    until_due(&t);
    sweep(&t);
    let first = fires(&t);
    assert_eq!(first.len(), 1, "{first:?}");
    let (_, at, id) = first[0].clone();
    t.sql(&format!(
        "UPDATE schedules SET next_fire_ms = {at} WHERE workflow = 'tick'"
    ));
    let log = sweep(&t);
    assert!(
        log.contains(&format!(
            "fire time {} already started an instance: skipped",
            chrono::DateTime::<chrono::Utc>::from_timestamp_millis(at)
                .unwrap()
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        )),
        "{log}"
    );
    let after = fires(&t);
    assert_eq!(after.iter().filter(|f| f.1 == at).count(), 1);
    assert_eq!(after.iter().find(|f| f.1 == at).unwrap().2, id);
    let instances = t.wf(&["list", "--json"]).code(0).json();
    assert_eq!(instances.as_array().map(Vec::len), Some(after.len()));
    assert!(ms(schedules(&t)[0]["next_fire_at"].as_str().unwrap()) > at);
    // The worker goes on: the next fire time starts.
    until_due(&t);
    sweep(&t);
    assert!(fires(&t).len() > after.len());
}

#[test]
fn a_scheduled_instance_whose_secret_the_worker_lacks_fails_and_blocks_nothing() {
    let t = Test::new();
    let secret = "WF_TEST_SCHEDULED_TOKEN";
    let wf = t.write(
        "secretive.yaml",
        &format!(
            "name: secretive\nsecrets: [{secret}]\non:\n  schedule:\n    - every: 1s\n      \
             overlap: skip\nsteps:\n  - id: use\n    run: echo \"${{{{ secrets.{secret} }}}}\" > used.txt\n"
        ),
    );
    // Registering says what the worker's environment will need.
    let added = t.wf(&["schedule", "add", wf.to_str().unwrap()]);
    added.code(0);
    assert!(
        added.stderr.contains(&format!("`{secret}`")) && added.stderr.contains("`wf worker`"),
        "{}",
        added.stderr
    );

    // The worker lacks it: the instance fails, naming it, with nothing run.
    until_due(&t);
    sweep(&t);
    let first = list(&t);
    assert_eq!(first.len(), 1, "{first:?}");
    let id = first[0]["id"].as_str().unwrap().to_string();
    let i = t.inspect(&id);
    assert_eq!(i["status"], "failed", "{i:#}");
    let error = i["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!("secret `{secret}` is not set")) && error.contains("worker"),
        "{i:#}"
    );
    assert_eq!(t.read("used.txt"), "");

    // The next fire time is not skipped behind it (`overlap: skip`).
    until_due(&t);
    let log = sweep(&t);
    assert!(!log.contains("still open"), "{log}");
    assert_eq!(list(&t).len(), 2, "{log}");

    // Where the secret is set, it runs.
    let resumed = crate::Ran::from(
        t.cmd()
            .env(secret, "s3cret")
            .args(["resume", &id, "--retry-failed"])
            .output()
            .unwrap(),
    );
    resumed.code(0);
    assert_eq!(t.read("used.txt"), "s3cret\n");
    assert_eq!(t.inspect(&id)["status"], "completed");
}
