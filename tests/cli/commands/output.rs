//! What the commands print: wf run's JSON and exit codes, instance ids, progress on a terminal or not, JSON everywhere, tables that fit 80 columns, logs followed, completions and the man page.

use super::*;

#[test]
fn run_json_of_a_completed_instance() {
    let t = Test::new();
    let (id, ran) = t.run_yaml("orders.yaml", ORDERS, &[]);
    ran.code(0);
    let v = ran.json();
    assert_has_keys(&v, &["id", "status", "exit_code"], "wf run --json");
    assert_eq!(v["status"], "completed");
    assert_eq!(v["exit_code"], 0);
    let listed = t.wf(&["list", "--json"]).code(0).json();
    assert_eq!(listed[0]["id"], id.as_str());
}

#[test]
fn run_json_of_a_failed_instance() {
    let t = Test::new();
    let (id, ran) = t.run_yaml("broken.yaml", BROKEN, &[]);
    ran.code(1);
    let v = ran.json();
    assert_eq!(v["id"], id.as_str());
    assert_eq!(v["status"], "failed");
    assert_eq!(v["exit_code"], 1);
    assert_eq!(t.inspect(&id)["status"], "failed");
}

#[test]
fn run_exit_codes_without_json() {
    let t = Test::new();
    t.write("orders.yaml", ORDERS);
    t.write("broken.yaml", BROKEN);
    t.write("invalid.yaml", "name: invalid\nsteps: []\n");
    assert_eq!(t.wf(&["run", "orders.yaml"]).code, 0);
    assert_eq!(t.wf(&["run", "broken.yaml"]).code, 1);
    assert_eq!(t.wf(&["run", "invalid.yaml"]).code, 2);
}

#[test]
fn run_json_of_a_definition_error() {
    let t = Test::new();
    let (_, ran) = t.run_yaml("invalid.yaml", "name: invalid\nsteps: []\n", &[]);
    ran.code(2);
    assert_eq!(ran.stdout, "", "no instance, so no JSON");
    assert!(ran.stderr.starts_with("error: "), "{}", ran.stderr);
    assert!(!t.database_written());
}

#[test]
fn run_id_sets_the_instance_id() {
    let t = Test::new();
    let (id, ran) = t.run_yaml("orders.yaml", ORDERS, &["--id", "order-42"]);
    ran.code(0);
    assert_eq!(id, "order-42");
    assert_eq!(t.inspect("order-42")["id"], "order-42");
    let listed = t.wf(&["list", "--json"]).code(0).json();
    assert_eq!(listed[0]["id"], "order-42");
}

#[test]
fn run_with_an_existing_id_is_refused() {
    let t = Test::new();
    run_ok(&t, "orders.yaml", ORDERS, &["--id", "order-1"], 0);
    let before = t.inspect("order-1");
    let list_before = t.wf(&["list", "--json"]).code(0).json();

    let other = r#"name: other
steps:
  - id: mark
    run: touch other-ran.txt
"#;
    let (_, ran) = t.run_yaml("other.yaml", other, &["--id", "order-1"]);
    usage_error(&ran, &["order-1"]);
    assert!(
        !t.path().join("other-ran.txt").exists(),
        "the second workflow ran"
    );
    assert_eq!(
        t.inspect("order-1"),
        before,
        "the existing instance changed"
    );
    assert_eq!(t.wf(&["list", "--json"]).code(0).json(), list_before);
}

#[test]
fn run_with_an_invalid_id_is_refused() {
    let t = Test::new();
    t.write("orders.yaml", ORDERS);
    for bad in ["has space", "../escape", ""] {
        let ran = t.wf(&["run", "orders.yaml", "--id", bad]);
        ran.code(2);
        assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
    }
    // Refused before the database is opened: none is made.
    assert!(!t.database_written());
    assert!(!t.db.exists());
}

// ---------------------------------------------------------------- progress

/// Progress on a non-terminal: plain lines, one per step start and finish.
#[track_caller]
fn assert_plain_progress(stderr: &str, finished: &[(&str, &str)]) {
    assert!(
        !stderr.contains('\x1b'),
        "ANSI escapes in progress:\n{stderr:?}"
    );
    assert!(
        !stderr.contains('\r'),
        "carriage returns in progress:\n{stderr:?}"
    );
    for (step, outcome) in finished {
        let lines: Vec<&str> = stderr.lines().filter(|l| l.contains(step)).collect();
        let started = lines.iter().position(|l| l.contains("start"));
        let ended = lines.iter().rposition(|l| l.contains(outcome));
        assert!(
            matches!((started, ended), (Some(s), Some(e)) if s < e),
            "no start line followed by a `{outcome}` line for {step}:\n{stderr}"
        );
    }
}

#[test]
fn progress_is_plain_lines_on_a_non_terminal() {
    let t = Test::new();
    t.write("orders.yaml", ORDERS);
    let ran = t.wf(&["run", "orders.yaml"]);
    ran.code(0);
    assert_plain_progress(
        &ran.stderr,
        &[("hello", "ok"), ("flaky", "ok"), ("remember", "ok")],
    );
    // The retried attempt shows as its own start and finish.
    let flaky_starts = ran
        .stderr
        .lines()
        .filter(|l| l.contains("flaky") && l.contains("start"))
        .count();
    assert_eq!(flaky_starts, 2, "{}", ran.stderr);
}

#[test]
fn progress_has_no_colour_even_without_no_color_when_piped() {
    let t = Test::new();
    t.write("broken.yaml", BROKEN);
    let ran = Ran::from(
        t.cmd()
            .env_remove("NO_COLOR")
            .args(["run", "broken.yaml"])
            .output()
            .expect("run wf"),
    );
    ran.code(1);
    assert_plain_progress(&ran.stderr, &[("boom", "fail")]);
}

#[test]
fn run_json_keeps_progress_off_stdout() {
    let t = Test::new();
    let (_, ran) = t.run_yaml("orders.yaml", ORDERS, &[]);
    ran.code(0);
    // `json()` panics if anything but the JSON document is on stdout.
    assert_eq!(ran.json()["status"], "completed");
    assert_plain_progress(&ran.stderr, &[("hello", "ok")]);
}

#[test]
fn a_postgres_url_is_never_taken_for_a_file_path() {
    let t = Test::new();
    t.write(
        "ok.yaml",
        "name: ok\nsteps:\n  - id: a\n    run: echo ran >> ran.log\n",
    );
    // Nothing listens on port 1: the connection is refused at once.
    for url in [
        "postgres://ana:hunter2@127.0.0.1:1/wf",
        "postgresql://ana:hunter2@127.0.0.1:1/wf?sslmode=disable",
    ] {
        for args in [vec!["list"], vec!["run", "ok.yaml"]] {
            let out = bare_wf(&t)
                .arg("--db")
                .arg(url)
                .args(&args)
                .output()
                .expect("run wf");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(
                stderr.contains("postgres://ana@127.0.0.1:1/wf: cannot connect"),
                "the error names the server and database: {stderr}"
            );
            assert!(
                !stderr.contains("hunter2"),
                "the password is printed: {stderr}"
            );
        }
    }
    assert!(!t.path().join("ran.log").exists(), "a step ran");
    let created: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .filter_map(std::result::Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert!(
        !created
            .iter()
            .any(|n| n.to_string_lossy().starts_with("postgres")),
        "{created:?}"
    );
}

#[test]
fn list_filters_by_workflow_age_and_count() {
    let t = Test::new();
    let ids: Vec<String> = (0..3)
        .map(|_| {
            run_ok(
                &t,
                "a.yaml",
                "name: alpha\nsteps:\n  - id: s\n    run: 'true'\n",
                &[],
                0,
            )
        })
        .collect();
    let beta = run_ok(
        &t,
        "b.yaml",
        "name: beta\nsteps:\n  - id: s\n    run: 'true'\n",
        &[],
        0,
    );
    let listed = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["list", "--json"];
        all.extend_from_slice(args);
        t.wf(&all)
            .code(0)
            .json()
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(listed(&["--workflow", "beta"]), vec![beta.clone()]);
    let alpha: Vec<String> = ids.iter().rev().cloned().collect();
    assert_eq!(listed(&["--workflow", "alpha"]), alpha);
    assert_eq!(listed(&["--limit", "2"]), [beta.clone(), ids[2].clone()]);
    assert_eq!(
        listed(&["--workflow", "alpha", "--limit", "1"]),
        [ids[2].clone()]
    );
    assert_eq!(listed(&["--since", "1h"]).len(), 4);
    assert_eq!(listed(&["--status", "completed", "--limit", "3"]).len(), 3);
    usage_error(&t.wf(&["list", "--since", "soon"]), &["--since"]);
}

#[test]
fn completions_and_the_man_page_come_from_the_command_definitions() {
    let t = Test::new();
    for shell in ["bash", "zsh", "fish"] {
        let ran = t.wf(&["completions", shell]);
        ran.code(0);
        for sub in ["run", "resume", "inspect", "trace", "worker"] {
            assert!(ran.stdout.contains(sub), "{shell} completions lack {sub}");
        }
    }
    // bash accepts what it generated.
    let path = t.write("wf.bash", &t.wf(&["completions", "bash"]).stdout);
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && complete -p wf", path.display()))
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let man = t.wf(&["man"]);
    man.code(0);
    assert!(
        man.stdout.starts_with(".ie") && man.stdout.contains(".TH wf 1"),
        "{}",
        &man.stdout[..200.min(man.stdout.len())]
    );
    assert!(man.stdout.contains("resume"));
    usage_error(&t.wf(&["completions", "tcsh"]), &["tcsh"]);
    // --help carries the exit codes.
    assert!(
        t.wf(&["--help"])
            .code(0)
            .stdout
            .contains("5 held by another process")
    );
}

#[test]
fn processes_that_open_a_new_database_at_once_all_succeed() {
    // Switching a new file to WAL needs it alone for a moment: four runs
    // (and readers) starting on the same new database must not fail busy.
    for round in 0..12 {
        let t = Test::new();
        let path = t.write("ok.yaml", "name: ok\nsteps:\n  - id: a\n    run: 'true'\n");
        let children: Vec<_> = (0..4)
            .map(|_| {
                t.cmd()
                    .args(["run", path.to_str().unwrap(), "-q"])
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("spawn wf")
            })
            .collect();
        for _ in 0..4 {
            let _ = t.wf(&["list"]);
        }
        for child in children {
            let out = child.wait_with_output().expect("wait");
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert_eq!(
            t.wf(&["list", "--json"]).json().as_array().map(Vec::len),
            Some(4)
        );
    }
}

#[test]
fn json_on_every_command_that_prints_data() {
    let t = Test::new();
    // validate
    let good = t.write("good.yaml", "name: gate\nsteps:\n  - id: say\n    run: echo hi; echo oops >&2\n  - id: wait\n    wait_for_event: { name: go }\n");
    let v = t
        .wf(&["validate", "--json", good.to_str().unwrap()])
        .code(0)
        .json();
    assert_eq!(v["valid"], true);
    assert_eq!(v["steps"], 2);
    let bad = t.write("bad.yaml", "name: x\nstepz: []\n");
    let ran = t.wf(&["validate", "--json", bad.to_str().unwrap()]);
    ran.code(2);
    let v = ran.json();
    assert_eq!(
        (v["valid"].clone(), v["error"]["line"].clone()),
        (json!(false), json!(2))
    );
    // signal, worker, logs
    let id = run_ok(
        &t,
        "good.yaml",
        &std::fs::read_to_string(&good).unwrap(),
        &[],
        3,
    );
    let v = t.wf(&["signal", &id, "go", "--json"]).code(0).json();
    assert_eq!(v, json!({ "id": id, "event": "go", "delivered": true }));
    let ran = t.wf(&["worker", "--once", "--json"]);
    ran.code(0);
    let lines: Vec<Value> = ran
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect();
    assert_eq!(
        lines,
        vec![json!({ "id": id, "outcome": "completed", "reason": null })]
    );
    let v = t.wf(&["logs", &id, "say", "--json"]).code(0).json();
    assert_eq!(v["logs"][0]["stdout"], "hi\n");
    assert_eq!(v["logs"][0]["stderr"], "oops\n");
    assert_eq!(v["logs"][0]["outcome"], "ok");
    let v = t.wf(&["logs", &id, "--json"]).code(0).json();
    assert_eq!(v["logs"].as_array().map(Vec::len), Some(2));
}

#[test]
fn tables_fit_80_columns_without_breaking_names_ids_or_times() {
    let t = Test::new();
    let long_error =
        "this step failed with a message long enough to need cutting on a narrow terminal";
    let (id, ran) = t.run_yaml(
        "wide.yaml",
        &format!(
            "name: a-workflow-with-a-long-name\nsteps:\n  - id: reserve-stock\n    run: 'true'\n    compensate: {{ run: 'true' }}\n  - id: charge-customer-card\n    run: echo '{long_error}' >&2; exit 9\n"
        ),
        &[],
    );
    ran.code(1);
    for args in [
        vec!["list"],
        vec!["inspect", &id],
        vec!["inspect", &id, "--attempts"],
    ] {
        let out = t.on_terminal(80, &args).stdout;
        for line in out.lines() {
            assert!(
                line.chars().count() <= 80,
                "{args:?}: a line of {} columns:\n{out}",
                line.chars().count()
            );
        }
        assert!(out.contains(&id[..12]), "{args:?} lacks the id:\n{out}");
        if args.len() != 2 {
            assert!(out.contains(" ago "), "{args:?} lacks the times:\n{out}");
        }
        if args[0] == "inspect" {
            for name in ["reserve-stock:compensate", "charge-customer-card"] {
                assert!(out.contains(name), "{args:?} broke {name}:\n{out}");
            }
        }
    }
}

#[test]
fn logs_follow_streams_a_running_attempt_masked_and_ends_with_it() {
    let t = Test::new().env("WF_TEST_FOLLOW_SECRET", "f0ll0w-s3cret");
    let path = t.write(
        "follow.yaml",
        "name: follow\nsecrets: [WF_TEST_FOLLOW_SECRET]\nsteps:\n  - id: talk\n    run: |\n      echo \"first ${{ secrets.WF_TEST_FOLLOW_SECRET }}\"\n      echo oops >&2\n      i=0; while [ ! -f go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done\n      echo second\n",
    );
    let mut run = t
        .cmd()
        .args(["run", path.to_str().unwrap(), "--id", "fol1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn wf run");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while t.wf(&["inspect", "fol1", "--json"]).code != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the run never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out_path = t.path().join("follow.out");
    let mut follow = t
        .cmd()
        .args(["logs", "fol1", "talk", "--follow"])
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(t.path().join("follow.err")).unwrap())
        .spawn()
        .expect("spawn wf logs --follow");
    // The first line arrives while the step is still running.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !t.read("follow.out").contains("first") {
        assert!(std::time::Instant::now() < deadline, "nothing streamed");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        follow.try_wait().unwrap().is_none(),
        "--follow ended before the attempt"
    );
    t.write("go", "");
    assert!(follow.wait().unwrap().success());
    assert!(run.wait().unwrap().success());
    assert_eq!(t.read("follow.out"), "first ***\nsecond\n");
    assert_eq!(t.read("follow.err"), "oops\n");
    // Nothing is left beside the database.
    assert!(!t.path().join("wf.db.live").exists());
}

/// A terminal of 80 columns (tmux), for what only shows on one: the live
/// progress display. None (the test says so and passes) where tmux is not
/// installed; `.ci/run` installs it.
struct Tmux {
    session: String,
}

impl Tmux {
    fn start(t: &Test, command: &str) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            eprintln!(
                "tmux is not installed: the terminal test is not run (.ci/run installs tmux)"
            );
            return None;
        }
        let session = format!("wf-test-{}", std::process::id());
        let ok = Command::new("tmux")
            .args(["new-session", "-d", "-x", "80", "-y", "30", "-s", &session])
            .arg(format!(
                "cd {} && {command}; echo EXITED $?; sleep 600",
                t.path().display()
            ))
            .status()
            .expect("tmux")
            .success();
        assert!(ok, "tmux could not start");
        Some(Tmux { session })
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.session])
            .output()
            .expect("tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &str) {
        Command::new("tmux")
            .args(["send-keys", "-t", &self.session, keys])
            .status()
            .expect("tmux");
    }

    #[track_caller]
    fn wait_for(&self, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let screen = self.screen();
            if cond(&screen) {
                return screen;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no {what} on the screen:\n{screen}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.session])
            .status();
    }
}

#[test]
fn ctrl_c_on_a_terminal_leaves_no_progress_display_behind() {
    let t = Test::new();
    t.write(
        "long.yaml",
        "name: long\nsteps:\n  - id: first\n    run: 'true'\n  - id: slow-step\n    run: touch started; sleep 30\n",
    );
    let wf = assert_cmd::cargo::cargo_bin("wf");
    let Some(term) = Tmux::start(&t, &format!("{} run long.yaml", t.shell_wf(&wf))) else {
        return;
    };
    // The live display: a counter of done steps, a line for the running one.
    term.wait_for("progress display", |s| {
        s.contains("steps done") && t.path().join("started").exists()
    });
    term.keys("C-c");
    let screen = term.wait_for("exit", |s| s.contains("EXITED 130"));
    assert!(
        !screen.contains("steps done"),
        "the counter stayed:\n{screen}"
    );
    assert!(
        !screen
            .lines()
            .any(|l| l.contains("slow-step") && !l.contains(':')),
        "a spinner line stayed:\n{screen}"
    );
    assert!(
        screen.contains("interrupted; continue with `wf resume"),
        "{screen}"
    );
}
