//! Durable execution (docs/execution.md, issue 3) with real processes and real kills:
//! durable timers and retry backoffs that suspend a run, events delivered
//! with `wf signal`, `wf resume` replaying history, leases between processes,
//! crash recovery after SIGKILL at random moments, SIGINT/SIGTERM, and
//! `wf worker`. Nothing here asserts a duration: conditions are polled with
//! generous bounds.

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

#[test]
fn wait_for_event_suspends_until_signalled_and_the_payload_is_the_output() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: approve
state: { approved: false }
steps:
  - id: approval
    wait_for_event: { name: approved }
    set_state: { approved: "${{ output.json.ok }}", by: "${{ output.json.by }}" }
  - id: apply
    run: echo "by ${{ steps.approval.output.json.by }}" >> side.log
"#,
        &[],
    );
    ran.code(3);
    assert_eq!(ran.json()["status"], "waiting");
    let v = t.inspect(&id);
    assert_eq!(v["status"], "waiting");
    assert_eq!(v["waiting_event"], "approved");
    assert_eq!(Test::step(&v, "approval")["status"], "waiting");
    let line = header_line(&t, &id, "Waiting for:").expect("`Waiting for:` in wf inspect");
    assert!(line.contains("approved"), "{line}");
    assert_eq!(listed_status(&t, &id), "waiting");

    // A bad payload is refused and changes nothing.
    let bad = t.wf(&["signal", &id, "approved", "--data", "{not json"]);
    bad.code(2);
    assert!(bad.stderr.contains("--data"), "{}", bad.stderr);

    // Another name does not satisfy the step.
    t.wf(&["signal", &id, "rejected", "--data", r#"{"ok": false}"#])
        .code(0);
    t.wf(&["resume", &id]).code(3);
    assert_eq!(t.inspect(&id)["status"], "waiting");

    let payload = json!({ "ok": true, "by": "ana", "n": [1, 2] });
    t.wf(&["signal", &id, "approved", "--data", &payload.to_string()])
        .code(0);
    t.wf(&["resume", &id]).code(0);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    assert_eq!(Test::step(&v, "approval")["output"]["json"], payload);
    assert_eq!(v["state"], json!({ "approved": true, "by": "ana" }));
    assert_eq!(lines(&t, "side.log"), ["by ana"]);
    assert!(v["waiting_event"].is_null());
}

#[test]
fn only_an_events_exact_name_makes_a_waiting_instance_due() {
    let t = Test::new();
    // Two waits at once: the instance waits for `approved` and `x`.
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: exact
steps:
  - id: approval
    wait_for_event: { name: approved }
  - id: other
    needs: []
    wait_for_event: { name: x }
  - id: apply
    needs: [approval]
    run: echo applied >> side.log
"#,
        &[],
    );
    ran.code(3);
    assert_eq!(t.inspect(&id)["waiting_event"], "approved,x");

    // Names a pattern would take for `approved` (or `approved,x`), a name in
    // another case, and names holding a comma: none is awaited, so none
    // makes the instance due, and a worker finds nothing to run.
    for name in [
        "approve_",
        "%",
        "APPROVED",
        "approved_x",
        "_pproved",
        "appr%",
        "approved,x",
        "x,approved",
    ] {
        t.wf(&["signal", &id, name]).code(0);
        let worker = t.wf(&["worker", "--once", "--json"]);
        worker.code(0);
        assert_eq!(
            worker.stdout.trim(),
            "",
            "the event `{name}` made the instance due\n{}",
            worker.stderr
        );
        let v = t.inspect(&id);
        assert_eq!(v["status"], "waiting", "after `{name}`");
        assert_eq!(run_outcomes(&v), ["waiting"], "after `{name}`: a new run");
        assert_eq!(listed_status(&t, &id), "waiting");
    }
    assert_eq!(t.read("side.log"), "");

    // The exact name does, once.
    t.wf(&["signal", &id, "approved"]).code(0);
    let worker = t.wf(&["worker", "--once", "--json"]);
    worker.code(0);
    let outcomes: Vec<Value> = worker
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line")["outcome"].clone())
        .collect();
    assert_eq!(outcomes, [json!("waiting")], "{}", worker.stderr);
    let v = t.inspect(&id);
    assert_eq!(run_outcomes(&v), ["waiting", "waiting"]);
    assert_eq!(Test::step(&v, "approval")["status"], "completed");
    assert_eq!(v["waiting_event"], "x");
    assert_eq!(lines(&t, "side.log"), ["applied"]);
    t.wf(&["worker", "--once", "--json"]).code(0);
    assert_eq!(t.inspect(&id)["status"], "waiting", "nothing new for it");
    assert_eq!(run_outcomes(&t.inspect(&id)).len(), 2);

    t.wf(&["signal", &id, "x"]).code(0);
    t.wf(&["worker", "--once", "--json"]).code(0);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    assert_eq!(run_outcomes(&v), ["waiting", "waiting", "completed"]);
}

#[test]
fn a_wait_for_an_event_name_holding_a_comma_or_a_nul_is_a_definition_error() {
    let t = Test::new();
    // (`\0` is YAML's escape: the name holds a NUL, which no `wf signal`
    // can send.)
    for name in [r#""a,b""#, r#"",""#, r#""ev\0""#, r#""a\tb""#] {
        let file = t.write(
            "wf.yaml",
            &format!(
                "name: odd\nsteps:\n  - id: approval\n    wait_for_event: {{ name: {name} }}\n"
            ),
        );
        let ran = t.wf(&["run", file.to_str().unwrap()]);
        ran.code(2);
        assert!(
            ran.stderr.contains("wf.yaml:4:")
                && ran.stderr.contains("comma or a control character")
                && ran.stderr.lines().count() == 1,
            "{name}: {}",
            ran.stderr
        );
        assert!(!t.database_written(), "{name}");
    }
}

#[test]
fn an_event_sent_before_the_step_is_reached_is_kept_and_used() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: early
steps:
  - id: nap
    sleep: 1h
  - id: go
    wait_for_event: { name: go, timeout: 1h }
  - id: after
    run: echo "n=${{ steps.go.output.json.n }}" >> side.log
"#,
        &[],
    );
    ran.code(3);
    assert_eq!(t.inspect(&id)["status"], "sleeping");

    // Delivered (durably, by another process) while the instance sleeps.
    t.wf(&["signal", &id, "go", "--data", r#"{"n": 7}"#])
        .code(0);
    assert_eq!(t.inspect(&id)["status"], "sleeping");

    // The one resume that fires the timer finds the event waiting for it.
    t.wf(&["resume", &id, "--now"]).code(0);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    assert_eq!(run_outcomes(&v), ["sleeping", "completed"]);
    assert_eq!(Test::step(&v, "go")["output"]["json"], json!({ "n": 7 }));
    assert_eq!(lines(&t, "side.log"), ["n=7"]);
}

/// An event signalled while an earlier step still runs is taken when the
/// run reaches its `wait_for_event`, in the same run (docs/execution.md Events).
#[test]
fn an_event_signalled_while_an_earlier_step_runs_is_taken_in_the_same_run() {
    let t = Test::new();
    let path = t.write(
        "wf.yaml",
        &format!(
            "name: during\nsteps:\n  - id: work\n    run: '{}'\n  - id: approval\n    \
             wait_for_event: {{ name: approved }}\n  - id: after\n    \
             run: echo \"by=${{{{ steps.approval.output.json.by }}}}\" >> side.log\n",
            blocking_step("started")
        ),
    );
    let run = spawn(&t, &["run", path.to_str().unwrap(), "--id", "ev"]);
    eventually("the first step to start", || {
        t.path().join("started").exists()
    });
    t.wf(&["signal", "ev", "approved", "--data", r#"{"by": "ana"}"#])
        .code(0);
    std::fs::write(t.path().join("release"), "").unwrap();
    run.finish().code(0);
    let v = t.inspect("ev");
    assert_eq!(v["status"], "completed", "{v:#}");
    assert_eq!(run_outcomes(&v), ["completed"]);
    assert_eq!(lines(&t, "side.log"), ["by=ana"]);
}

/// Ctrl-C of a `wf resume` that only waits for a timer: nothing ran, so the
/// instance stays sleeping until the same time (docs/execution.md Statuses stay
/// true); the process still says it was interrupted (exit 130).
#[test]
fn interrupting_a_resume_that_only_waits_for_a_timer_leaves_it_sleeping() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        "name: nap\nsteps:\n  - id: nap\n    sleep: 2h\n  - id: after\n    run: echo after >> side.log\n",
        &[],
    );
    ran.code(3);
    let wake_sql = format!(
        "SELECT i.wake_at || ' ' || s.retry_at FROM instances i JOIN steps s ON s.instance_id = i.id \
         WHERE i.id = '{id}' AND s.key = 'nap'"
    );
    let wake = t.sql(&wake_sql);
    assert!(wake.len() > 20, "a wake-up time is stored: {wake}");
    let resume = spawn(&t, &["resume", &id]);
    eventually("the resume to hold the instance", || {
        listed_status(&t, &id) == "running"
    });
    resume.signal("INT");
    resume.finish().code(130);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "sleeping", "{v:#}");
    assert_eq!(listed_status(&t, &id), "sleeping");
    assert_eq!(t.sql(&wake_sql), wake, "the same wake-up time");
    assert_eq!(run_outcomes(&v), ["sleeping", "interrupted"]);
    assert!(lines(&t, "side.log").is_empty());
}

#[test]
fn a_wait_times_out_when_no_event_arrives() {
    let t = Test::new();
    let yaml = r#"
name: timeout
steps:
  - id: approval
    wait_for_event: { name: approved, timeout: 1s }
  - id: after
    run: echo after >> side.log
"#;
    // A run does not wait for events, however short the timeout: it ends at
    // once with the deadline stored.
    let before = now_ms();
    let (id, ran) = t.run_yaml("wf.yaml", yaml, &[]);
    ran.code(3);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "waiting");
    assert_eq!(v["waiting_event"], "approved");
    let deadline = epoch_ms(v["wake_at"].as_str().expect("the timeout is stored"));
    assert!(deadline >= before + 1000 && deadline <= now_ms() + 1000);
    assert!(header_line(&t, &id, "Waiting for:").is_some());

    // Before the deadline a resume suspends again; after it, the step fails.
    if now_ms() < deadline {
        t.wf(&["resume", &id]).code(3);
    }
    while now_ms() <= deadline {
        std::thread::sleep(std::time::Duration::from_millis(
            (deadline + 1 - now_ms()).max(1) as u64,
        ));
    }
    t.wf(&["resume", &id]).code(1);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "failed");
    assert_eq!(Test::step(&v, "approval")["error_type"], "timeout");
    assert_eq!(t.read("side.log"), "");
}

// ------------------------------------------------------------ 3. resume

#[test]
fn resume_replays_completed_steps_without_running_them() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: replay
steps:
  - id: a
    run: 'echo a >> side.log; echo "{\"v\": \"$$\"}"'
  - id: nap
    sleep: 1h
  - id: c
    run: echo "c ${{ steps.a.output.json.v }}" >> side.log
"#,
        &[],
    );
    ran.code(3);
    let a_out = Test::step(&t.inspect(&id), "a")["output"]["json"]["v"]
        .as_str()
        .expect("a's output")
        .to_string();

    t.wf(&["resume", &id, "--now"]).code(0);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    // `a` ran once; `c` saw the output recorded in the first run.
    assert_eq!(
        lines(&t, "side.log"),
        ["a".to_string(), format!("c {a_out}")]
    );
    let a = Test::step(&v, "a");
    assert_eq!(a["attempts"], 1);
    assert_eq!(a["attempt_list"][0]["run"], 1);
    assert_eq!(Test::step(&v, "c")["attempt_list"][0]["run"], 2);

    // Resuming a completed instance runs nothing.
    t.wf(&["resume", &id]).code(0);
    assert_eq!(count_lines(&t, "side.log", "a"), 1);
    assert_eq!(run_outcomes(&t.inspect(&id)), ["sleeping", "completed"]);
}

#[test]
fn resume_runs_the_pinned_definition_not_the_file_on_disk() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: pinned
steps:
  - id: nap
    sleep: 1h
  - id: c
    run: echo "c v1" >> side.log
"#,
        &[],
    );
    ran.code(3);
    let hash = t.inspect(&id)["definition_hash"].clone();
    t.write(
        "wf.yaml",
        r#"
name: pinned
steps:
  - id: nap
    sleep: 1h
  - id: c
    run: echo "c v2" >> side.log
  - id: d
    run: echo "d v2" >> side.log
"#,
    );
    t.wf(&["resume", &id, "--now"]).code(0);
    assert_eq!(lines(&t, "side.log"), ["c v1"]);
    let v = t.inspect(&id);
    assert_eq!(v["definition_hash"], hash);
    let ids: Vec<&str> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["nap", "c"]);

    // Even with the file gone.
    let (id, ran) = t.run_yaml(
        "other.yaml",
        "name: gone\nsteps:\n  - id: nap\n    sleep: 1h\n  - id: c\n    run: echo gone >> side.log\n",
        &[],
    );
    ran.code(3);
    std::fs::remove_file(t.path().join("other.yaml")).expect("rm");
    t.wf(&["resume", &id, "--now"]).code(0);
    assert_eq!(lines(&t, "side.log"), ["c v1", "gone"]);
}

#[test]
fn resume_retry_failed_gives_a_fresh_attempt_budget_and_continues() {
    let t = Test::new();
    // Fails on attempts 1, 2 and 3, succeeds on the 4th.
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: again
steps:
  - id: first
    run: echo first >> side.log
  - id: flaky
    retry: { max_attempts: 2, backoff: fixed, interval: 10ms }
    run: 'n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; [ $n -ge 4 ]'
  - id: last
    run: echo last >> side.log
"#,
        &[],
    );
    ran.code(1);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "failed");
    assert_eq!(outcomes(Test::step(&v, "flaky")), ["retry", "failed"]);

    // Plain resume refuses a failed instance, and runs nothing.
    let refused = t.wf(&["resume", &id]);
    assert_ne!(refused.code, 0, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("--retry-failed"),
        "{}",
        refused.stderr
    );
    assert_eq!(t.read("count").trim(), "2");

    // A fresh budget: two more attempts; the second of them succeeds.
    t.wf(&["resume", &id, "--retry-failed"]).code(0);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    let flaky = Test::step(&v, "flaky");
    assert_eq!(outcomes(flaky), ["retry", "failed", "retry", "ok"]);
    assert_eq!(flaky["attempts"], 4);
    assert_eq!(
        lines(&t, "side.log"),
        ["first", "last"],
        "first is not re-run"
    );
}

// ------------------------------------------------------------ 4. leases

#[test]
fn a_second_resume_is_refused_naming_the_holder_and_a_killed_holder_is_taken_over() {
    let t = Test::new();
    let yaml = format!(
        "name: held\nsteps:\n  - id: block\n    retry: {{ max_attempts: 2 }}\n    run: '{}'\n  - id: after\n    run: echo after >> side.log\n",
        blocking_step("started")
    );
    let path = t.write("wf.yaml", &yaml);
    let mut runner = spawn(&t, &["run", path.to_str().unwrap(), "--id", "held"]);
    eventually("the step to start", || t.path().join("started").exists());

    let refused = t.wf(&["resume", "held"]);
    refused.code(5);
    let holder = format!("{}:{}", hostname(), runner.pid());
    assert!(
        refused.stderr.contains(&holder),
        "the refusal names the holder {holder}: {}",
        refused.stderr
    );
    assert_eq!(listed_status(&t, "held"), "running");

    // SIGKILL: the lease (valid for a while yet) names a pid that no longer runs.
    runner.kill9();
    eventually("the runner to die", || !alive(runner.pid()));
    assert_eq!(listed_status(&t, "held"), "interrupted");
    assert_eq!(t.inspect("held")["status"], "interrupted");

    // Taken over at once, even before the dead runner is reaped.
    std::fs::write(t.path().join("release"), "").unwrap();
    t.wf(&["resume", "held"]).code(0);
    runner.kill_and_reap();
    let v = t.inspect("held");
    assert_eq!(v["status"], "completed");
    assert_eq!(outcomes(Test::step(&v, "block")), ["crashed", "ok"]);
    assert_eq!(run_outcomes(&v), ["crashed", "completed"]);
    assert_eq!(lines(&t, "side.log"), ["after"]);
}

#[test]
fn ten_concurrent_resumes_run_each_step_exactly_once() {
    let t = Test::new();
    let mut yaml = String::from("name: herd\nsteps:\n  - id: nap\n    sleep: 1h\n");
    for i in 1..=5 {
        yaml += &format!("  - id: s{i}\n    run: echo s{i} >> side.log; sleep 0.1\n");
    }
    let (id, ran) = t.run_yaml("wf.yaml", &yaml, &[]);
    ran.code(3);

    let herd: Vec<Bg> = (0..10)
        .map(|_| spawn(&t, &["resume", &id, "--now"]))
        .collect();
    let results: Vec<Ran> = herd.into_iter().map(Bg::finish).collect();
    for r in &results {
        assert!(
            r.code == 0 || r.code == 5,
            "a resume exited {}: {}",
            r.code,
            r.stderr
        );
    }
    assert!(results.iter().any(|r| r.code == 0), "no resume ran it");

    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    let mut log = lines(&t, "side.log");
    log.sort();
    assert_eq!(log, ["s1", "s2", "s3", "s4", "s5"], "each step ran once");
    for i in 1..=5 {
        assert_eq!(outcomes(Test::step(&v, &format!("s{i}"))), ["ok"]);
    }
    assert_eq!(
        run_outcomes(&v),
        ["sleeping", "completed"],
        "one resume ran it; the others ran nothing"
    );
}

#[test]
fn ten_concurrent_takeovers_of_a_dead_lease_run_each_step_exactly_once() {
    let t = Test::new();
    let mut yaml = format!(
        "name: herd\nsteps:\n  - id: block\n    retry: {{ max_attempts: 2 }}\n    run: '{}'\n",
        blocking_step("started")
    );
    for i in 1..=5 {
        yaml += &format!("  - id: s{i}\n    run: echo s{i} >> side.log; sleep 0.1\n");
    }
    let path = t.write("wf.yaml", &yaml);
    let mut runner = spawn(&t, &["run", path.to_str().unwrap(), "--id", "herd"]);
    eventually("the step to start", || t.path().join("started").exists());
    runner.kill_and_reap();
    std::fs::write(t.path().join("release"), "").unwrap();
    assert_eq!(listed_status(&t, "herd"), "interrupted");

    let herd: Vec<Bg> = (0..10).map(|_| spawn(&t, &["resume", "herd"])).collect();
    let results: Vec<Ran> = herd.into_iter().map(Bg::finish).collect();
    for r in &results {
        assert!(
            r.code == 0 || r.code == 5,
            "a resume exited {}: {}",
            r.code,
            r.stderr
        );
    }
    let v = t.inspect("herd");
    assert_eq!(v["status"], "completed");
    assert_eq!(outcomes(Test::step(&v, "block")), ["crashed", "ok"]);
    let mut log = lines(&t, "side.log");
    log.sort();
    assert_eq!(log, ["s1", "s2", "s3", "s4", "s5"], "each step ran once");
    assert_eq!(run_outcomes(&v), ["crashed", "completed"]);
}

// ---------------------------------------------------- 5. crash recovery

#[test]
fn crashed_attempts_count_towards_max_attempts() {
    let t = Test::new();
    let yaml = r#"
name: crashes
steps:
  - id: fragile
    retry: { max_attempts: 2 }
    run: 'echo "$WF_ATTEMPT" >> side.log; touch started.$WF_ATTEMPT; i=0; while [ ! -f release ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done'
"#;
    let path = t.write("wf.yaml", yaml);
    let mut run = spawn(&t, &["run", path.to_str().unwrap(), "--id", "c"]);
    eventually("attempt 1 to start", || t.path().join("started.1").exists());
    run.kill_and_reap();

    let mut resume = spawn(&t, &["resume", "c"]);
    eventually("attempt 2 to start", || t.path().join("started.2").exists());
    resume.kill_and_reap();
    std::fs::write(t.path().join("release"), "").unwrap();

    // Both attempts crashed: the budget of 2 is spent, no third attempt runs.
    t.wf(&["resume", "c"]).code(1);
    let v = t.inspect("c");
    assert_eq!(v["status"], "failed");
    let step = Test::step(&v, "fragile");
    assert_eq!(step["status"], "failed");
    assert_eq!(step["error_type"], "crashed");
    assert_eq!(outcomes(step), ["crashed", "crashed"]);
    assert_eq!(lines(&t, "side.log"), ["1", "2"]);
    assert!(!t.path().join("started.3").exists());

    // A fresh budget after all.
    t.wf(&["resume", "c", "--retry-failed"]).code(0);
    let v = t.inspect("c");
    assert_eq!(v["status"], "completed");
    assert_eq!(
        outcomes(Test::step(&v, "fragile")),
        ["crashed", "crashed", "ok"]
    );
}

#[test]
fn a_durable_timer_survives_a_crash() {
    let t = Test::new();
    let path = t.write(
        "wf.yaml",
        "name: timer\nsteps:\n  - id: nap\n    sleep: 5s\n  - id: after\n    run: echo after >> side.log\n",
    );
    // The 5 s sleep happens inside the run (a wide window to observe it); kill the run during it.
    let mut run = spawn(&t, &["run", path.to_str().unwrap(), "--id", "timer"]);
    let mut wake = String::new();
    eventually("the sleep to start", || {
        if !exists(&t, "timer") {
            return false;
        }
        let nap = Test::step(&t.inspect("timer"), "nap").clone();
        match nap["wake_at"].as_str() {
            Some(w) if nap["status"] == "sleeping" => {
                wake = w.to_string();
                true
            }
            _ => false,
        }
    });
    run.kill_and_reap();
    assert_eq!(listed_status(&t, "timer"), "interrupted");

    // The resumed run keeps the recorded wake-up time: the timer does not restart.
    t.wf(&["resume", "timer"]).code(0);
    assert!(now_ms() >= epoch_ms(&wake));
    let v = t.inspect("timer");
    assert_eq!(v["status"], "completed");
    let nap = Test::step(&v, "nap");
    assert_eq!(
        epoch_ms(nap["output"]["slept_until"].as_str().expect("slept_until")),
        epoch_ms(&wake)
    );
    assert_eq!(lines(&t, "side.log"), ["after"]);
}

#[test]
fn twenty_random_kills_then_resume_completes_a_thirty_step_workflow() {
    const STEPS: usize = 30;
    const KILLS: usize = 20;
    let seed = std::env::var("WF_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9e37_79b9_7f4a_7c15_u64);
    eprintln!("crash test seed: {seed} (set WF_CRASH_SEED to change it)");
    let mut rng = XorShift(seed);

    let t = Test::new();
    t.write(
        "step.sh",
        "#!/bin/sh\necho \"$WF_STEP_ID $WF_ATTEMPT\" >> side.log\nsleep 0.05\necho \"{\\\"attempt\\\": $WF_ATTEMPT}\"\n",
    );
    let mut yaml = String::from("name: crashy\nstate: { initial: true }\nsteps:\n");
    for i in 1..=STEPS {
        yaml += &"  - id: s@\n    retry: { max_attempts: 25 }\n    run: ./step.sh\n    set_state: { s@: \"${{ output.json.attempt }}\" }\n"
            .replace('@', &format!("{i:02}"));
    }
    let path = t.write("wf.yaml", &yaml);
    let path = path.to_str().unwrap();

    let mut hit_running = 0;
    for _ in 0..KILLS {
        let mut wf = if exists(&t, "crashy") {
            spawn_quiet(&t, &["resume", "crashy"])
        } else {
            spawn_quiet(&t, &["run", path, "--id", "crashy"])
        };
        let delay = 15 + rng.below(300);
        std::thread::sleep(Duration::from_millis(delay));
        if !wf.exited() {
            hit_running += 1;
        }
        wf.kill_and_reap();
    }
    let done_before = if exists(&t, "crashy") {
        t.inspect("crashy")["steps"].as_array().map_or(0, |s| {
            s.iter().filter(|s| s["status"] == "completed").count()
        })
    } else {
        0
    };
    eprintln!(
        "{hit_running} of {KILLS} kills hit a running wf; {done_before} steps were done before the final resume"
    );

    if exists(&t, "crashy") {
        t.wf(&["resume", "crashy"]).code(0);
    } else {
        t.wf(&["run", path, "--id", "crashy"]).code(0);
    }

    let v = t.inspect("crashy");
    assert_eq!(v["status"], "completed");
    let runs = run_outcomes(&v);
    assert_eq!(runs.last().map(String::as_str), Some("completed"));
    assert!(
        runs.iter().all(|o| o == "completed" || o == "crashed"),
        "every run is closed: {runs:?}"
    );

    let side = t.read("side.log");
    let mut expected_state = json!({ "initial": true });
    let mut crashed_total = 0;
    for i in 1..=STEPS {
        let key = format!("s{i:02}");
        let step = Test::step(&v, &key);
        assert_eq!(step["status"], "completed", "{step:#}");
        let list = step["attempt_list"].as_array().expect("attempt_list");
        let outs = outcomes(step);
        assert_eq!(
            step["attempts"].as_u64(),
            Some(list.len() as u64),
            "{key}: attempts counts every recorded attempt"
        );
        for o in &outs {
            assert!(
                o == "ok" || o == "crashed",
                "{key}: attempt without a proper outcome: {outs:?}"
            );
        }
        let ok: Vec<&Value> = list.iter().filter(|a| a["outcome"] == "ok").collect();
        assert_eq!(ok.len(), 1, "{key} completed exactly once: {outs:?}");
        assert_eq!(
            outs.last().map(String::as_str),
            Some("ok"),
            "{key}: nothing ran after it succeeded"
        );
        let crashed = outs.iter().filter(|o| *o == "crashed").count();
        crashed_total += crashed;
        let numbers: Vec<u64> = list.iter().filter_map(|a| a["attempt"].as_u64()).collect();
        assert_eq!(
            numbers,
            (1..=list.len() as u64).collect::<Vec<_>>(),
            "{key}: attempts numbered without gaps"
        );

        // Side effects: at least the successful run, at most one per recorded attempt.
        let effects = side
            .lines()
            .filter(|l| l.split(' ').next() == Some(key.as_str()))
            .count();
        assert!(
            effects >= 1 && effects <= 1 + crashed,
            "{key}: {effects} side effects for {outs:?}"
        );
        let ok_attempt = ok[0]["attempt"].as_u64().unwrap();
        assert!(
            side.lines().any(|l| l == format!("{key} {ok_attempt}")),
            "{key}: the successful attempt's side effect is in the log"
        );
        expected_state[&key] = json!(ok_attempt);
    }
    eprintln!("{crashed_total} crashed attempts in all");
    assert!(crashed_total >= 1, "no kill landed inside a step");
    assert_eq!(
        v["state"], expected_state,
        "state is what the successful attempts set"
    );
    if !t.on_pg() {
        // (PostgreSQL checks its own pages.)
        assert_eq!(integrity_check(&t.db), "ok");
    }
    // The history stays readable, crashed attempts included.
    let trace = t.wf(&["trace", "crashy"]).code(0).stdout.clone();
    assert!(trace.contains("outcome=crashed"), "{trace}");
}

// ------------------------------------------------------ 6. SIGINT/SIGTERM

fn a_signal_interrupts_the_run_and_leaves_it_resumable(sig: &str) {
    let t = Test::new();
    // Two steps running in parallel when the signal arrives.
    let yaml = format!(
        "name: stop\nsteps:\n  - id: first\n    run: echo first >> side.log\n  \
         - id: block1\n    needs: [first]\n    run: '{}'\n  \
         - id: block2\n    needs: [first]\n    run: '{}'\n  \
         - id: after\n    needs: [block1, block2]\n    run: echo after >> side.log\n",
        blocking_step("started1"),
        blocking_step("started2")
    );
    let path = t.write("wf.yaml", &yaml);
    let runner = spawn(
        &t,
        &["run", path.to_str().unwrap(), "--id", "stop", "--json"],
    );
    eventually("both steps to start", || {
        t.path().join("started1").exists() && t.path().join("started2").exists()
    });
    let pids: Vec<u32> = ["started1.pid", "started2.pid"]
        .iter()
        .map(|f| t.read(f).trim().parse().expect("step pid"))
        .collect();

    runner.signal(sig);
    let ran = runner.finish();
    ran.code(130);
    assert_eq!(ran.json()["status"], "interrupted");
    for pid in pids {
        eventually("the steps' processes to be stopped", || !alive(pid));
    }

    let v = t.inspect("stop");
    assert_eq!(v["status"], "interrupted");
    assert_eq!(listed_status(&t, "stop"), "interrupted");
    for key in ["block1", "block2"] {
        assert_eq!(outcomes(Test::step(&v, key)), ["interrupted"], "{key}");
    }
    assert_eq!(run_outcomes(&v), ["interrupted"]);
    assert_eq!(Test::step(&v, "after")["status"], "pending");

    // Resumable; the interrupted attempts do not use up the budget of 1.
    std::fs::write(t.path().join("release"), "").unwrap();
    t.wf(&["resume", "stop"]).code(0);
    let v = t.inspect("stop");
    assert_eq!(v["status"], "completed");
    for key in ["block1", "block2"] {
        assert_eq!(
            outcomes(Test::step(&v, key)),
            ["interrupted", "ok"],
            "{key}"
        );
    }
    assert_eq!(lines(&t, "side.log"), ["first", "after"]);
}

#[test]
fn sigint_interrupts_the_run_and_leaves_it_resumable() {
    a_signal_interrupts_the_run_and_leaves_it_resumable("INT");
}

#[test]
fn sigterm_interrupts_the_run_and_leaves_it_resumable() {
    a_signal_interrupts_the_run_and_leaves_it_resumable("TERM");
}

#[test]
fn an_interrupted_attempt_is_shown_interrupted_once() {
    let t = Test::new();
    let yaml = format!(
        "name: stop\nsteps:\n  - id: block\n    run: '{}'\n",
        blocking_step("started")
    );
    let path = t.write("wf.yaml", &yaml);
    let runner = spawn(&t, &["run", path.to_str().unwrap(), "--id", "stop"]);
    eventually("the step to start", || t.path().join("started").exists());
    runner.signal("INT");
    let ran = runner.finish();
    ran.code(130);
    assert!(
        !ran.stderr.contains("interrupted: interrupted"),
        "{}",
        ran.stderr
    );
    let shown = t
        .wf(&["inspect", "stop", "--attempts"])
        .code(0)
        .stdout
        .clone();
    // The attempts table: the row after its header.
    let row = shown
        .lines()
        .skip_while(|l| !l.contains(" TRY "))
        .nth(1)
        .unwrap_or_else(|| panic!("no attempt row:\n{shown}"));
    assert_eq!(
        row.matches("interrupted").count(),
        2,
        "outcome and error: {row}"
    );
    assert!(!shown.contains("interrupted: interrupted"), "{shown}");
}

#[test]
fn a_signal_during_an_inline_sleep_stops_the_run_and_leaves_it_sleeping() {
    let t = Test::new();
    let path = t.write(
        "wf.yaml",
        "name: nap\nsteps:\n  - id: nap\n    sleep: 20s\n  - id: after\n    run: echo after >> side.log\n",
    );
    let runner = spawn(&t, &["run", path.to_str().unwrap(), "--id", "nap"]);
    eventually("the sleep to start", || {
        exists(&t, "nap") && Test::step(&t.inspect("nap"), "nap")["status"] == "sleeping"
    });
    runner.signal("INT");
    runner.finish().code(130);
    // Nothing ran but the timer: the instance sleeps on (docs/execution.md).
    assert_eq!(listed_status(&t, "nap"), "sleeping");
    t.wf(&["resume", "nap", "--now"]).code(0);
    assert_eq!(lines(&t, "side.log"), ["after"]);
}

// ------------------------------------------------------------ 7. worker

#[test]
fn several_workers_never_run_the_same_instance_twice() {
    let t = Test::new();
    let mut yaml = String::from("name: fleet\nsteps:\n  - id: nap\n    sleep: 1s\n");
    for i in 1..=3 {
        yaml += &format!(
            "  - id: s{i}\n    run: echo \"$WF_INSTANCE_ID $WF_STEP_ID\" >> side.log; sleep 0.1\n"
        );
    }
    let path = t.write("wf.yaml", &yaml);
    let ids: Vec<String> = (1..=5).map(|i| format!("inst{i}")).collect();
    for id in &ids {
        t.wf(&[
            "run",
            path.to_str().unwrap(),
            "--id",
            id,
            "--inline-wait",
            "100ms",
        ])
        .code(3);
    }

    let workers: Vec<Bg> = (0..3)
        .map(|_| spawn(&t, &["worker", "--poll", "100ms"]))
        .collect();
    eventually("every instance to complete", || {
        let list = t.wf(&["list", "--json"]).code(0).json();
        list.as_array()
            .is_some_and(|l| l.len() == 5 && l.iter().all(|i| i["status"] == "completed"))
    });

    // While they run: an event delivered to a waiting instance gets it resumed.
    let (ev, ran) = t.run_yaml(
        "ev.yaml",
        "name: ev\nsteps:\n  - id: go\n    wait_for_event: { name: go }\n  - id: after\n    run: echo \"$WF_INSTANCE_ID after\" >> ev.log\n",
        &["--id", "ev"],
    );
    ran.code(3);
    t.wf(&["signal", &ev, "go"]).code(0);
    eventually("the signalled instance to complete", || {
        listed_status(&t, "ev") == "completed"
    });
    assert_eq!(lines(&t, "ev.log"), ["ev after"]);

    for w in &workers {
        w.signal("TERM");
    }
    for w in workers {
        let ran = w.finish();
        assert!(
            ran.code == 0 || ran.code == 130,
            "worker exited {}: {}",
            ran.code,
            ran.stderr
        );
    }

    let log = lines(&t, "side.log");
    for id in &ids {
        for s in 1..=3 {
            let line = format!("{id} s{s}");
            assert_eq!(
                log.iter().filter(|l| **l == line).count(),
                1,
                "`{line}` ran exactly once: {log:#?}"
            );
        }
        let v = t.inspect(id);
        let runs = v["runs"].as_array().unwrap();
        // Runs of one instance never overlap.
        for pair in runs.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            assert!(
                epoch_ms(a["finished_at"].as_str().unwrap())
                    <= epoch_ms(b["started_at"].as_str().unwrap()),
                "{id}: overlapping runs {runs:#?}"
            );
        }
        assert_eq!(run_outcomes(&v), ["sleeping", "completed"], "{id}");
    }
    assert_eq!(log.len(), 15);
}

#[test]
fn worker_once_resumes_every_due_instance_and_only_those() {
    let t = Test::new();
    let yaml = format!(
        r#"
name: due
inputs:
  kind: {{ required: true }}
steps:
  - id: nap
    if: "${{{{ inputs.kind == 'timer' || inputs.kind == 'later' }}}}"
    sleep: 1s
  - id: later
    if: "${{{{ inputs.kind == 'later' }}}}"
    sleep: 1h
  - id: event
    if: "${{{{ inputs.kind == 'event' || inputs.kind == 'no-event' }}}}"
    wait_for_event: {{ name: go }}
  - id: block
    if: "${{{{ inputs.kind == 'dead' }}}}"
    retry: {{ max_attempts: 2 }}
    run: '{}'
  - id: done
    run: echo "$WF_INSTANCE_ID" >> side.log
"#,
        blocking_step("started")
    );
    let path = t.write("wf.yaml", &yaml);
    let path = path.to_str().unwrap();
    let run = |id: &str, code: i32| {
        t.wf(&[
            "run",
            path,
            "--id",
            id,
            "--input",
            &format!("kind={id}"),
            "--inline-wait",
            "100ms",
        ])
        .code(code);
    };
    run("timer", 3);
    run("later", 3);
    run("event", 3);
    run("no-event", 3);
    t.wf(&["signal", "event", "go", "--data", "{}"]).code(0);
    // A runner killed with SIGKILL while its step runs leaves a dead lease.
    let mut dead = spawn(&t, &["run", path, "--id", "dead", "--input", "kind=dead"]);
    eventually("the step to start", || t.path().join("started").exists());
    dead.kill_and_reap();
    std::fs::write(t.path().join("release"), "").unwrap();
    // The 1 s timer of `timer` is due.
    let wake = t.inspect("timer")["wake_at"].as_str().unwrap().to_string();
    eventually("the timer to be due", || now_ms() > epoch_ms(&wake));
    assert_eq!(listed_status(&t, "dead"), "interrupted");

    t.wf(&["worker", "--once", "--concurrency", "2"]).code(0);

    for id in ["timer", "event", "dead"] {
        assert_eq!(t.inspect(id)["status"], "completed", "{id}");
    }
    assert_eq!(t.inspect("later")["status"], "sleeping");
    assert_eq!(t.inspect("no-event")["status"], "waiting");
    let mut log = lines(&t, "side.log");
    log.sort();
    assert_eq!(log, ["dead", "event", "timer"]);
    assert_eq!(
        outcomes(Test::step(&t.inspect("dead"), "block")),
        ["crashed", "ok"]
    );
}

#[test]
fn a_stopped_worker_leaves_its_instance_interrupted_and_resumable() {
    let t = Test::new();
    let yaml = format!(
        "name: stopme\nsteps:\n  - id: nap\n    sleep: 1s\n  - id: block\n    run: '{}'\n  - id: after\n    run: echo after >> side.log\n",
        blocking_step("started")
    );
    let (id, ran) = t.run_yaml("wf.yaml", &yaml, &["--inline-wait", "100ms"]);
    ran.code(3);

    let worker = spawn(&t, &["worker", "--poll", "100ms"]);
    eventually("the worker to start the step", || {
        t.path().join("started").exists()
    });
    let step_pid: u32 = t.read("started.pid").trim().parse().expect("step pid");
    worker.signal("TERM");
    let ran = worker.finish();
    assert!(
        ran.code == 0 || ran.code == 130,
        "worker exited {}: {}",
        ran.code,
        ran.stderr
    );
    eventually("the step's process to be stopped", || !alive(step_pid));

    let v = t.inspect(&id);
    assert_eq!(v["status"], "interrupted");
    assert_eq!(outcomes(Test::step(&v, "block")), ["interrupted"]);
    std::fs::write(t.path().join("release"), "").unwrap();
    t.wf(&["resume", &id]).code(0);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    assert_eq!(outcomes(Test::step(&v, "block")), ["interrupted", "ok"]);
    assert_eq!(lines(&t, "side.log"), ["after"]);
}

// ------------------------------------------------- the approval example

/// The instance id in a `wf run` line such as `instance ID sleeping until …`.
fn id_in(line: &str) -> String {
    line.split_whitespace()
        .nth(1)
        .unwrap_or_else(|| panic!("no instance id in {line:?}"))
        .to_string()
}

#[test]
fn the_approval_example_in_the_readme_runs_end_to_end() {
    let t = Test::new();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/workflows/approval.yaml");

    // The README's session, step by step, with an id prefix as it uses one.
    let ran = t.wf(&["run", example, "--inline-wait", "0s"]);
    ran.code(3);
    assert!(ran.stdout.contains("sleeping until"), "{}", ran.stdout);
    let id = id_in(&ran.stdout);
    let prefix = &id[..4];
    let v = t.inspect(&id);
    assert_eq!(v["status"], "sleeping");
    assert!(v["wake_at"].is_string());

    let ran = t.wf(&["resume", prefix]);
    ran.code(3);
    assert!(
        ran.stdout.contains("waiting for event `approved`"),
        "{}",
        ran.stdout
    );
    assert_eq!(t.inspect(&id)["waiting_event"], "approved");

    t.wf(&[
        "signal",
        prefix,
        "approved",
        "--data",
        r#"{"ok": true, "by": "ana"}"#,
    ])
    .code(0);
    let ran = t.wf(&["resume", prefix]);
    ran.code(0);
    assert!(ran.stdout.contains("completed"), "{}", ran.stdout);

    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    assert_eq!(v["state"], json!({ "approved": true, "approver": "ana" }));
    assert_eq!(run_outcomes(&v), ["sleeping", "waiting", "completed"]);
    let apply = Test::step(&v, "apply");
    assert_eq!(apply["status"], "completed");
    assert_eq!(
        apply["output"]["stdout"].as_str().map(str::trim),
        Some("applying deploy v2, approved by ana")
    );
}

#[test]
fn the_approval_example_with_the_default_inline_wait_and_a_refusal() {
    let t = Test::new();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/workflows/approval.yaml");
    // The 2 s timer passes inside the run, which then waits for the approval.
    let ran = t.wf(&["run", example, "--json"]);
    ran.code(3);
    let id = ran.json()["id"].as_str().expect("id").to_string();
    let v = t.inspect(&id);
    assert_eq!(v["status"], "waiting");
    assert_eq!(run_outcomes(&v), ["waiting"]);
    t.wf(&[
        "signal",
        &id,
        "approved",
        "--data",
        r#"{"ok": false, "by": "bo"}"#,
    ])
    .code(0);
    t.wf(&["resume", &id]).code(0);
    let v = t.inspect(&id);
    assert_eq!(v["status"], "completed");
    assert_eq!(v["state"], json!({ "approved": false, "approver": "bo" }));
    assert_eq!(Test::step(&v, "apply")["status"], "skipped");
}

// ------------------------------------------------- the compiled definition

/// `wf run` stores the validated definition beside its text; `wf resume`
/// runs that compiled form instead of parsing the YAML again, unless it is
/// missing, damaged or from another version of wf.
#[test]
fn resume_runs_the_compiled_definition_else_the_pinned_yaml() {
    type Tamper = fn(String) -> Option<String>;
    let cases: [(&str, Tamper, &str); 4] = [
        // Changed behind wf's back, to show which form the resume ran.
        (
            "used",
            |c| Some(c.replace("from-yaml", "from-compiled")),
            "from-compiled",
        ),
        ("damaged", |_| Some("{\"format\": ".into()), "from-yaml"),
        (
            "other version",
            |c| Some(c.replace("\"format\":\"wf ", "\"format\":\"wf 0.0.0-older ")),
            "from-yaml",
        ),
        ("missing", |_| None, "from-yaml"),
    ];
    for (case, tamper, ran) in cases {
        let t = Test::new();
        let (id, run) = t.run_yaml(
            "wf.yaml",
            "name: pinned\nsteps:\n  - id: gate\n    wait_for_event: { name: go }\n  \
             - id: after\n    run: echo from-yaml >> after.txt\n",
            &[],
        );
        run.code(3);
        let compiled = if t.on_pg() {
            Some(t.psql("SELECT compiled FROM definitions")).filter(|c| !c.is_empty())
        } else {
            let db = rusqlite::Connection::open(&t.db).expect("open the database");
            db.query_row("SELECT compiled FROM definitions", [], |r| r.get(0))
                .expect("one definition")
        };
        let compiled = compiled.expect("wf run stores the compiled form");
        let changed = tamper(compiled.clone());
        assert_ne!(
            changed.as_deref(),
            Some(compiled.as_str()),
            "{case}: tampered"
        );
        if t.on_pg() {
            let value = changed.map_or("NULL".to_string(), |c| format!("$wf${c}$wf$"));
            t.psql(&format!("UPDATE definitions SET compiled = {value}"));
        } else {
            let db = rusqlite::Connection::open(&t.db).expect("open the database");
            db.execute("UPDATE definitions SET compiled = ?1", [changed])
                .expect("update");
        }
        t.wf(&["signal", &id, "go"]).code(0);
        t.wf(&["resume", &id]).code(0);
        assert_eq!(t.read("after.txt").trim(), ran, "{case}");
    }
}

/// docs/execution.md: every attempt is recorded before it starts. While another
/// process holds the database's write lock (SQLite) or the instance's row
/// (PostgreSQL), the commit that records the `probe` attempt waits; the
/// probe's first act is to read its own attempt from another process, and it
/// finds it committed, not ended — so nothing of it ran before the record was
/// in (a process started before the commit would have run inside the window).
#[test]
fn an_attempt_is_committed_before_its_command_runs() {
    let t = Test::new();
    let query = "SELECT attempt, outcome IS NULL FROM attempts WHERE instance_id = '$WF_INSTANCE_ID' \
                 AND step_key = 'probe' ORDER BY attempt";
    let psql = || crate::pg_tool("psql");
    let read = match &t.pg {
        Some((url, schema)) => format!(
            "PGOPTIONS=-csearch_path={schema} {} '{url}' -qAtc \"{query}\"",
            psql()
        ),
        None => format!(
            "python3 -c \"import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); \
             print('\\n'.join('|'.join(str(v) for v in r) for r in c.execute(sys.argv[2])))\" '{}' \"{query}\"",
            t.db.display()
        ),
    };
    // `before` waits until the lock is held, then ends: the commit of its
    // end and of `probe`'s start waits for the lock.
    let yaml = format!(
        "name: probe\nsteps:\n  - id: before\n    \
         run: echo $WF_INSTANCE_ID > id.txt; while [ ! -f locked ]; do sleep 0.01; done\n  \
         - id: probe\n    retry: {{ max_attempts: 2, interval: 10ms }}\n    \
         run: |\n      {read} > seen-$WF_ATTEMPT.txt\n      [ \"$WF_ATTEMPT\" = 2 ]\n"
    );
    let path = t.write("probe.yaml", &yaml);
    let run = spawn(&t, &["run", path.to_str().unwrap()]);
    eventually("step `before` to start", || {
        t.path().join("id.txt").exists()
    });
    let id = t.read("id.txt").trim().to_string();
    // Holds the lock for a second, saying so on stdout first.
    let mut holder = match &t.pg {
        Some((url, schema)) => Command::new(psql())
            .arg(url)
            .args(["-qAt", "-c"])
            .arg(format!(
                "BEGIN; SET search_path TO {schema}; \
                 SELECT 'locked' FROM instances WHERE id = '{id}' FOR UPDATE; \
                 SELECT pg_sleep(1); COMMIT;"
            ))
            .stdout(Stdio::piped())
            .spawn()
            .expect("psql"),
        None => Command::new("python3")
            .args([
                "-c",
                "import sqlite3, sys, time\n\
                 c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
                 c.execute('BEGIN IMMEDIATE')\n\
                 print('locked', flush=True)\n\
                 time.sleep(1)\n\
                 c.execute('COMMIT')\n",
            ])
            .arg(&t.db)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3"),
    };
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "locked");
    std::fs::write(t.path().join("locked"), "").unwrap();
    let ran = run.finish();
    assert!(holder.wait().unwrap().success());
    ran.code(0);
    // Attempt 1 saw itself open; attempt 2 saw attempt 1 ended and itself open.
    let open = if t.pg.is_some() { "t" } else { "1" };
    let ended = if t.pg.is_some() { "f" } else { "0" };
    assert_eq!(
        t.read("seen-1.txt").trim(),
        format!("1|{open}"),
        "{}",
        ran.stderr
    );
    let second = t.read("seen-2.txt");
    let lines: Vec<&str> = second.lines().collect();
    assert_eq!(
        lines,
        [format!("1|{ended}"), format!("2|{open}")],
        "{second}"
    );
}
