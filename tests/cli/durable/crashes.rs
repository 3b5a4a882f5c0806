//! Crashes and signals: crashed attempts counted, durable timers, random kills, SIGINT and SIGTERM leaving a run resumable.

use super::*;

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
