//! Durable execution (docs/execution.md, issue 3) with real processes and real kills:
//! durable timers and retry backoffs that suspend a run, events delivered
//! with `wf signal`, `wf resume` replaying history, leases between processes,
//! crash recovery after SIGKILL at random moments, SIGINT/SIGTERM, and
//! `wf worker`. Nothing here asserts a duration: conditions are polled with
//! generous bounds.
//!
//! Its tests by topic, beside the ones here: `crashes.rs`, `events.rs`, `resume.rs`, `workers.rs` (in `durable/`).

mod crashes;
mod events;
mod resume;
mod workers;

use crate::{Ran, Test, XorShift, integrity_check};
use serde_json::{Value, json};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------- helpers

/// Generous bound for anything we poll for (2 cores, other suites running).
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

/// Polls `cond` until it holds; panics naming `what` after [`PATIENCE`].
#[track_caller]
pub(crate) fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A `wf` process running in the background. SIGKILLed and reaped if it is
/// still running when dropped, so a failing test leaves nothing behind.
pub(crate) struct Bg {
    child: Option<Child>,
}

impl Bg {
    pub(crate) fn from_child(child: Child) -> Bg {
        Bg { child: Some(child) }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().expect("child").id()
    }

    /// Sends `sig` (`INT`, `TERM`, …) with the `kill` command.
    pub(crate) fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{sig} {} failed", self.pid());
    }

    /// SIGKILL, without reaping: the process stays a zombie until reaped.
    pub(crate) fn kill9(&mut self) {
        let _ = self.child.as_mut().expect("child").kill();
    }

    /// Whether the process has exited (reaps it if so).
    pub(crate) fn exited(&mut self) -> bool {
        matches!(self.child.as_mut().expect("child").try_wait(), Ok(Some(_)))
    }

    /// SIGKILL and reap.
    fn kill_and_reap(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Waits (bounded) for the process to exit and collects what it printed.
    #[track_caller]
    pub(crate) fn finish(mut self) -> Ran {
        let start = Instant::now();
        while !self.exited() {
            if start.elapsed() > PATIENCE {
                self.kill_and_reap();
                panic!("wf did not exit within {PATIENCE:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let child = self.child.take().expect("child");
        let out = child.wait_with_output().expect("collect output");
        Ran {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        self.kill_and_reap();
    }
}

/// Starts `wf ARGS…` in the background with its output captured.
pub(crate) fn spawn(t: &Test, args: &[&str]) -> Bg {
    let child = t
        .cmd()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn wf");
    Bg { child: Some(child) }
}

/// Starts `wf ARGS…` in the background with its output discarded.
fn spawn_quiet(t: &Test, args: &[&str]) -> Bg {
    let child = t
        .cmd()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn wf");
    Bg { child: Some(child) }
}

/// Whether a process exists and is not a zombie.
pub(crate) fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// The status `wf list --json` shows for instance `id`.
pub(crate) fn listed_status(t: &Test, id: &str) -> String {
    let list = t.wf(&["list", "--json"]).code(0).json();
    list.as_array()
        .and_then(|l| l.iter().find(|i| i["id"] == id))
        .and_then(|i| i["status"].as_str())
        .unwrap_or_else(|| panic!("{id} not in wf list: {list:#}"))
        .to_string()
}

/// Whether instance `id` exists in the database yet.
fn exists(t: &Test, id: &str) -> bool {
    t.wf(&["inspect", id, "--json"]).code == 0
}

/// Outcomes of a step's attempts, in order.
pub(crate) fn outcomes(step: &Value) -> Vec<String> {
    step["attempt_list"]
        .as_array()
        .unwrap_or_else(|| panic!("no attempt_list: {step:#}"))
        .iter()
        .map(|a| a["outcome"].as_str().unwrap_or("<none>").to_string())
        .collect()
}

/// Outcomes of the instance's runs, in order.
fn run_outcomes(inspect: &Value) -> Vec<String> {
    inspect["runs"]
        .as_array()
        .unwrap_or_else(|| panic!("no runs: {inspect:#}"))
        .iter()
        .map(|r| r["outcome"].as_str().unwrap_or("<none>").to_string())
        .collect()
}

/// Lines of a file the workflow wrote into the test dir.
pub(crate) fn lines(t: &Test, name: &str) -> Vec<String> {
    t.read(name).lines().map(String::from).collect()
}

/// How many lines of `name` equal `line`.
fn count_lines(t: &Test, name: &str, line: &str) -> usize {
    t.read(name).lines().filter(|l| *l == line).count()
}

/// A line of `wf inspect ID` (human) starting with `label`, if any.
fn header_line(t: &Test, id: &str, label: &str) -> Option<String> {
    t.wf(&["inspect", id])
        .code(0)
        .stdout
        .lines()
        .find(|l| l.starts_with(label))
        .map(String::from)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

/// Days since 1970-01-01 of a civil date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Unix ms of an RFC 3339 UTC time as `wf` writes them (`…T12:00:00.000Z`).
#[track_caller]
fn epoch_ms(t: &str) -> i64 {
    let num = |r: std::ops::Range<usize>| -> i64 {
        t.get(r)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not an RFC 3339 UTC time: {t:?}"))
    };
    assert!(t.ends_with('Z'), "not a UTC time: {t:?}");
    let ms = if t.as_bytes().get(19) == Some(&b'.') {
        num(20..23)
    } else {
        0
    };
    let days = days_from_civil(num(0..4), num(5..7), num(8..10));
    ((days * 24 + num(11..13)) * 60 + num(14..16)) * 60_000 + num(17..19) * 1000 + ms
}

/// Unix ms as RFC 3339 UTC with milliseconds.
fn rfc3339(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    // Inverse of days_from_civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("hostname")
        .trim()
        .to_string()
}

/// A shell step body that writes `marker` (and its pid to `marker.pid`),
/// then waits for the file `release` (at most ~30 s, so an orphan left by a
/// killed runner always ends).
pub(crate) fn blocking_step(marker: &str) -> String {
    format!(
        "echo $$ > {marker}.pid; touch {marker}; i=0; \
         while [ ! -f release ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done"
    )
}

// ------------------------------------------------ 1. timers and backoffs

#[test]
fn a_long_sleep_suspends_the_run_with_a_stored_wake_up_time() {
    let t = Test::new();
    let before = now_ms();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: nap
steps:
  - id: first
    run: echo first >> side.log
  - id: nap
    sleep: 1h
  - id: after
    run: echo after >> side.log
"#,
        &[],
    );
    ran.code(3);
    assert_eq!(ran.json()["status"], "sleeping");
    assert_eq!(
        lines(&t, "side.log"),
        ["first"],
        "the run stopped at the sleep"
    );

    let v = t.inspect(&id);
    assert_eq!(v["status"], "sleeping");
    let wake = epoch_ms(v["wake_at"].as_str().expect("wake_at is stored"));
    let hour = 3_600_000;
    assert!(
        wake >= before + hour && wake <= now_ms() + hour,
        "wake_at {} is not an hour after the sleep started",
        v["wake_at"]
    );
    let nap = Test::step(&v, "nap");
    assert_eq!(nap["status"], "sleeping");
    assert_eq!(nap["wake_at"], v["wake_at"]);
    assert_eq!(Test::step(&v, "after")["status"], "pending");
    assert_eq!(run_outcomes(&v), ["sleeping"]);

    let line = header_line(&t, &id, "Wakes at:").expect("`Wakes at:` in wf inspect");
    assert!(line.contains(v["wake_at"].as_str().unwrap()), "{line}");
    assert_eq!(listed_status(&t, &id), "sleeping");

    // `--now` fires the timer instead of waiting an hour.
    t.wf(&["resume", &id, "--now"]).code(0);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    assert_eq!(Test::step(&v, "nap")["status"], "completed");
    assert_eq!(lines(&t, "side.log"), ["first", "after"]);
    assert!(header_line(&t, &id, "Wakes at:").is_none());
}

#[test]
fn a_short_sleep_happens_inside_the_run() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: doze
steps:
  - id: doze
    sleep: 300ms
  - id: after
    run: echo after >> side.log
"#,
        &[],
    );
    ran.code(0);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    assert_eq!(run_outcomes(&v), ["completed"], "one run, no suspension");
    assert_eq!(Test::step(&v, "doze")["status"], "completed");
    assert_eq!(lines(&t, "side.log"), ["after"]);
}

#[test]
fn a_sleep_longer_than_inline_wait_suspends_and_resume_waits_for_the_timer() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: nap
steps:
  - id: nap
    sleep: 1s
  - id: after
    run: echo after >> side.log
"#,
        &["--inline-wait", "100ms"],
    );
    ran.code(3);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "sleeping");
    let wake = v["wake_at"].as_str().expect("wake_at").to_string();
    assert_eq!(t.read("side.log"), "");

    // Without --now, resume waits for the timer, then continues.
    t.wf(&["resume", &id]).code(0);
    assert!(
        now_ms() >= epoch_ms(&wake),
        "resume ran before the timer was due"
    );
    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    assert_eq!(run_outcomes(&v), ["sleeping", "completed"]);
    assert_eq!(lines(&t, "side.log"), ["after"]);
}

#[test]
fn sleep_until_a_time_suspends_until_exactly_that_time() {
    let t = Test::new();
    let yaml = r#"
name: until
inputs:
  when: { required: true }
steps:
  - id: wait
    sleep: { until: "${{ inputs.when }}" }
  - id: after
    run: echo after >> side.log
"#;
    // Far in the future: suspended, and the wake-up time is that time.
    let (id, ran) = t.run_yaml("wf.yaml", yaml, &["--input", "when=2099-01-01T00:00:00Z"]);
    ran.code(3);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "sleeping");
    assert_eq!(
        epoch_ms(v["wake_at"].as_str().expect("wake_at")),
        epoch_ms("2099-01-01T00:00:00.000Z")
    );
    t.wf(&["resume", &id, "--now"]).code(0);
    assert_eq!(t.inspect(&id)["status"], "completed");

    // In the past: nothing to wait for.
    let (id, ran) = t.run_yaml("wf.yaml", yaml, &["--input", "when=2001-01-01T00:00:00Z"]);
    ran.code(0);
    assert_eq!(run_outcomes(&t.inspect(&id)), ["completed"]);

    // Three seconds from now, longer than the inline wait: suspended, then resume waits for it.
    let when = rfc3339(now_ms() + 3000);
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        yaml,
        &["--input", &format!("when={when}"), "--inline-wait", "100ms"],
    );
    ran.code(3);
    let v = t.inspect(&id);
    assert_eq!(
        epoch_ms(v["wake_at"].as_str().expect("wake_at")),
        epoch_ms(&when)
    );
    t.wf(&["resume", &id]).code(0);
    assert!(now_ms() >= epoch_ms(&when));
    assert_eq!(t.inspect(&id)["status"], "completed");
    assert_eq!(lines(&t, "side.log"), ["after", "after", "after"]);
}

/// A step that fails on its first attempt only.
const FAIL_ONCE: &str =
    r#"n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; [ $n -ge 2 ]"#;

#[test]
fn a_retry_backoff_longer_than_inline_wait_suspends_the_run() {
    let t = Test::new();
    let before = now_ms();
    let yaml = format!(
        r#"
name: backoff
steps:
  - id: flaky
    retry: {{ max_attempts: 3, backoff: fixed, interval: 1h }}
    run: '{FAIL_ONCE}'
"#
    );
    let (id, ran) = t.run_yaml("wf.yaml", &yaml, &[]);
    ran.code(3);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "sleeping");
    let flaky = Test::step(&v, "flaky");
    assert_eq!(flaky["status"], "retrying");
    assert_eq!(outcomes(flaky), ["retry"]);
    let wake = epoch_ms(v["wake_at"].as_str().expect("wake_at is stored"));
    let hour = 3_600_000;
    assert!(
        wake >= before + hour && wake <= now_ms() + hour,
        "{}",
        v["wake_at"]
    );
    assert!(header_line(&t, &id, "Wakes at:").is_some());

    t.wf(&["resume", &id, "--now"]).code(0);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    assert_eq!(outcomes(Test::step(&v, "flaky")), ["retry", "ok"]);
    assert_eq!(t.read("count").trim(), "2");
}

#[test]
fn a_retry_backoff_over_the_inline_wait_flag_suspends_and_resume_waits_for_it() {
    let t = Test::new();
    let yaml = format!(
        r#"
name: backoff
steps:
  - id: flaky
    retry: {{ max_attempts: 3, backoff: fixed, interval: 1s }}
    run: '{FAIL_ONCE}'
"#
    );
    let (id, ran) = t.run_yaml("wf.yaml", &yaml, &["--inline-wait", "100ms"]);
    ran.code(3);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "sleeping");
    let wake = v["wake_at"].as_str().expect("wake_at").to_string();
    t.wf(&["resume", &id]).code(0);
    assert!(now_ms() >= epoch_ms(&wake));
    let v = t.inspect(&id);
    assert_eq!(outcomes(Test::step(&v, "flaky")), ["retry", "ok"]);
    assert_eq!(run_outcomes(&v), ["sleeping", "completed"]);
}

#[test]
fn a_short_retry_backoff_happens_inside_the_run() {
    let t = Test::new();
    let yaml = format!(
        r#"
name: backoff
steps:
  - id: flaky
    retry: {{ max_attempts: 3, backoff: fixed, interval: 200ms }}
    run: '{FAIL_ONCE}'
"#
    );
    let (id, ran) = t.run_yaml("wf.yaml", &yaml, &[]);
    ran.code(0);
    let v = t.inspect(&id);
    assert_eq!(run_outcomes(&v), ["completed"], "one run, no suspension");
    assert_eq!(outcomes(Test::step(&v, "flaky")), ["retry", "ok"]);
}

// ------------------------------------------------------------ 2. events
