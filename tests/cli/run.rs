//! Execution of `run:` steps and of the step graph (docs/workflow-file.md, docs/execution.md): the shell
//! string and argv forms, the working directory, workflow and step `env:`,
//! `needs` ordering, parallelism and `concurrency`, failure stopping the
//! graph, and how inputs are given, defaulted and rejected.

use crate::Test;
use serde_json::json;

/// Shell snippet: create marker `mine`, then wait (up to ~10 s) for marker
/// `other`; exits non-zero if it never appears.
fn rendezvous(mine: &str, other: &str) -> String {
    format!(
        "touch {mine}; i=0; while [ ! -e {other} ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; [ -e {other} ]"
    )
}

#[test]
fn shell_string_runs_with_sh_c() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: shell
steps:
  - id: a
    run: "for x in 1 2 3; do printf '%s;' $x; done > out.txt && echo piped | tr a-z A-Z >> out.txt"
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(ran.json()["status"], "completed");
    assert_eq!(ran.json()["exit_code"], 0);
    assert_eq!(t.read("out.txt"), "1;2;3;PIPED\n");
    let i = t.inspect(&id);
    assert_eq!(i["status"], "completed");
    assert_eq!(Test::step(&i, "a")["status"], "completed");
}

#[test]
fn argv_form_passes_each_element_as_one_argument_without_a_shell() {
    let t = Test::new();
    t.write(
        "args.sh",
        "#!/bin/sh\nprintf '%s\\n' \"$#\" \"$1\" \"$2\" > args.txt\n",
    );
    let (_, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: argv
steps:
  - id: a
    run: ["./args.sh", "one two; touch pwned", "$(echo x) `echo y` *"]
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(
        t.read("args.txt"),
        "2\none two; touch pwned\n$(echo x) `echo y` *\n"
    );
    assert!(
        !t.path().join("pwned").exists(),
        "argv went through a shell"
    );
}

#[test]
fn argv_relative_program_resolves_against_the_workflow_folder() {
    let t = Test::new();
    t.write(
        "flows/bin/hello.sh",
        "#!/bin/sh\npwd > where.txt\necho \"$1\" >> where.txt\n",
    );
    let wf = t.write(
        "flows/wf.yaml",
        r#"
name: relative
steps:
  - id: a
    run: ["./bin/hello.sh", "hi"]
"#,
    );
    // wf itself runs from the test dir root, not from `flows/`.
    let ran = t.wf(&["run", wf.to_str().unwrap(), "--json"]);
    ran.code(0);
    let flows = t.path().join("flows").canonicalize().unwrap();
    assert_eq!(
        t.read("flows/where.txt"),
        format!("{}\nhi\n", flows.display())
    );
}

#[test]
fn shell_steps_run_in_the_workflow_folder_or_in_dir() {
    let t = Test::new();
    std::fs::create_dir_all(t.path().join("flows/sub/deeper")).unwrap();
    t.write("flows/sub/tool.sh", "#!/bin/sh\necho tool ran > tool.txt\n");
    let wf = t.write(
        "flows/wf.yaml",
        r#"
name: dirs
steps:
  - id: here
    run: pwd > here.txt
  - id: there
    dir: sub/deeper
    run: pwd > there.txt
  - id: script
    dir: sub
    run: ./tool.sh
"#,
    );
    t.wf(&["run", wf.to_str().unwrap()]).code(0);
    let flows = t.path().join("flows").canonicalize().unwrap();
    assert_eq!(t.read("flows/here.txt"), format!("{}\n", flows.display()));
    assert_eq!(
        t.read("flows/sub/deeper/there.txt"),
        format!("{}\n", flows.join("sub/deeper").display())
    );
    assert_eq!(t.read("flows/sub/tool.txt"), "tool ran\n");
}

#[test]
fn a_missing_dir_fails_the_step() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: nodir
steps:
  - id: a
    dir: does-not-exist
    run: "true"
"#,
        &[],
    );
    ran.code(1);
    let a = Test::step(&t.inspect(&id), "a").clone();
    assert_eq!(a["status"], "failed");
    assert_eq!(a["error_type"], "spawn");
}

#[test]
fn step_processes_get_the_wf_variables() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: vars
steps:
  - id: show-vars
    run: |
      printf '%s\n' "$WF_INSTANCE_ID" "$WF_STEP_ID" "$WF_ATTEMPT" "$WF_RUN" > vars.txt
      [ -n "$WF_OUTPUT" ] && [ -f "$WF_OUTPUT" ] && echo has-output-file >> vars.txt
"#,
        &["--id", "inst-42"],
    );
    ran.code(0);
    assert_eq!(id, "inst-42");
    assert_eq!(
        t.read("vars.txt"),
        "inst-42\nshow-vars\n1\n1\nhas-output-file\n"
    );
}

#[test]
fn workflow_env_and_step_env_with_expressions() {
    let t = Test::new();
    let (_, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: envs
inputs:
  who: { default: world }
env:
  GREETING: "hello ${{ inputs.who }}"
  SHARED: workflow
steps:
  - id: first
    env:
      STEP_ONLY: "step-${{ inputs.who }}"
      FROM_ENV: "${{ env.GREETING }}!"
    run: printf '%s|%s|%s|%s\n' "$GREETING" "$SHARED" "$STEP_ONLY" "$FROM_ENV" > env1.txt
  - id: second
    env:
      PREV: "${{ steps.first.output.exit_code }}"
    run: printf '%s|%s|%s\n' "$GREETING" "${STEP_ONLY:-unset}" "$PREV" > env2.txt
"#,
        &["--input", "who=there"],
    );
    ran.code(0);
    assert_eq!(
        t.read("env1.txt"),
        "hello there|workflow|step-there|hello there!\n"
    );
    // Step env belongs to its step only; workflow env reaches every step.
    assert_eq!(t.read("env2.txt"), "hello there|unset|0\n");
}

#[test]
fn step_env_overrides_workflow_env() {
    let t = Test::new();
    let (_, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: override
env: { WHO: workflow }
steps:
  - id: a
    env: { WHO: step }
    run: echo "$WHO" > who.txt
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(t.read("who.txt"), "step\n");
}

#[test]
fn absent_needs_runs_after_the_previous_step() {
    let t = Test::new();
    // Each step checks its predecessor finished (its line is there) before adding its own.
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: sequence
concurrency: 8
steps:
  - id: one
    run: sleep 0.2; echo one >> order.txt
  - id: two
    run: grep -qx one order.txt && sleep 0.1 && echo two >> order.txt
  - id: three
    run: grep -qx two order.txt && echo three >> order.txt
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(t.read("order.txt"), "one\ntwo\nthree\n");
    let i = t.inspect(&id);
    for s in ["one", "two", "three"] {
        assert_eq!(Test::step(&i, s)["status"], "completed");
        assert_eq!(Test::step(&i, s)["attempts"], 1);
    }
}

#[test]
fn explicit_needs_orders_a_later_listed_dependency_first() {
    let t = Test::new();
    let (_, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: needs
steps:
  - id: root
    needs: []
    run: echo root >> order.txt
  - id: last
    needs: [root, middle]
    run: echo last >> order.txt
  - id: middle
    needs: [root]
    run: sleep 0.2; echo middle >> order.txt
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(t.read("order.txt"), "root\nmiddle\nlast\n");
}

#[test]
fn empty_needs_steps_run_in_parallel() {
    let t = Test::new();
    let yaml = format!(
        r#"
name: parallel
steps:
  - id: left
    needs: []
    run: "{}"
  - id: right
    needs: []
    run: "{}"
  - id: join
    needs: [left, right]
    run: echo joined > joined.txt
"#,
        rendezvous("left.ready", "right.ready"),
        rendezvous("right.ready", "left.ready"),
    );
    let (id, ran) = t.run_yaml("wf.yaml", &yaml, &[]);
    // Both can only succeed if each saw the other's marker while it was still running.
    ran.code(0);
    assert_eq!(t.read("joined.txt"), "joined\n");
    let i = t.inspect(&id);
    assert_eq!(Test::step(&i, "left")["status"], "completed");
    assert_eq!(Test::step(&i, "right")["status"], "completed");
}

#[test]
fn steps_depending_on_the_same_step_run_in_parallel() {
    let t = Test::new();
    let yaml = format!(
        r#"
name: fanout
steps:
  - id: start
    run: "true"
  - id: x
    needs: [start]
    run: "{}"
  - id: y
    needs: [start]
    run: "{}"
"#,
        rendezvous("x.ready", "y.ready"),
        rendezvous("y.ready", "x.ready"),
    );
    let (_, ran) = t.run_yaml("wf.yaml", &yaml, &[]);
    ran.code(0);
}

#[test]
fn concurrency_one_serializes_independent_steps() {
    let t = Test::new();
    let step = |name: &str| {
        format!(
            "  - id: {name}\n    needs: []\n    run: echo start {name} >> log.txt; sleep 0.3; echo end {name} >> log.txt\n"
        )
    };
    let yaml = format!(
        "name: serial\nconcurrency: 1\nsteps:\n{}{}{}",
        step("a"),
        step("b"),
        step("c")
    );
    let (_, ran) = t.run_yaml("wf.yaml", &yaml, &[]);
    ran.code(0);
    let log = t.read("log.txt");
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 6, "log:\n{log}");
    // Every start is immediately followed by the end of the same step: no overlap.
    for pair in lines.chunks(2) {
        let started = pair[0].strip_prefix("start ").expect(&log);
        assert_eq!(
            pair[1],
            format!("end {started}"),
            "steps overlapped:\n{log}"
        );
    }
    let mut seen: Vec<&str> = lines.iter().step_by(2).map(|l| &l[6..]).collect();
    seen.sort();
    assert_eq!(seen, ["a", "b", "c"]);
}

#[test]
fn concurrency_two_allows_two_at_once_but_not_three() {
    let t = Test::new();
    // Each step records the most steps it saw running at once: it waits (up to
    // ~10 s) for a partner, or for everyone else to be done, then lingers so
    // that a third step running at the same time would be seen.
    let step = |name: &str| {
        format!(
            r#"  - id: {name}
    needs: []
    run: |
      touch run.{name}; peak=0; i=0
      while [ $i -lt 200 ]; do
        n=$(ls run.* | wc -l); [ $n -gt $peak ] && peak=$n
        d=$(ls done.* 2>/dev/null | wc -l)
        if [ $n -ge 2 ] || [ $((n + d)) -ge 4 ]; then break; fi
        sleep 0.05; i=$((i+1))
      done
      sleep 0.2; n=$(ls run.* | wc -l); [ $n -gt $peak ] && peak=$n
      echo $peak >> peaks.txt; rm run.{name}; touch done.{name}
"#
        )
    };
    let yaml = format!(
        "name: two\nconcurrency: 2\nsteps:\n{}{}{}{}",
        step("a"),
        step("b"),
        step("c"),
        step("d")
    );
    let (_, ran) = t.run_yaml("wf.yaml", &yaml, &[]);
    ran.code(0);
    let seen = t.read("peaks.txt");
    let peaks: Vec<u32> = seen.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(peaks.len(), 4, "peaks:\n{seen}");
    assert!(
        peaks.iter().all(|&n| n <= 2),
        "more than 2 ran at once: {seen}"
    );
    assert_eq!(peaks.iter().max(), Some(&2), "never 2 at once: {seen}");
}

#[test]
fn a_failed_step_fails_the_workflow_and_dependents_never_run() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: failing
steps:
  - id: ok
    run: echo ok >> ran.txt
  - id: boom
    run: echo boom >> ran.txt; exit 7
  - id: after
    run: echo after >> ran.txt
  - id: after-explicit
    needs: [boom]
    run: echo after-explicit >> ran.txt
"#,
        &[],
    );
    ran.code(1);
    assert_eq!(ran.json()["status"], "failed");
    assert_eq!(ran.json()["exit_code"], 1);
    assert_eq!(t.read("ran.txt"), "ok\nboom\n");
    let i = t.inspect(&id);
    assert_eq!(i["status"], "failed");
    assert_eq!(Test::step(&i, "ok")["status"], "completed");
    assert_eq!(Test::step(&i, "boom")["status"], "failed");
    assert_eq!(Test::step(&i, "boom")["error_type"], "exit.7");
    for s in ["after", "after-explicit"] {
        let st = i["steps"].as_array().unwrap().iter().find(|x| x["id"] == s);
        if let Some(st) = st {
            assert_eq!(st["attempts"], 0, "{s} ran: {st:#}");
            assert_ne!(st["status"], "completed");
        }
    }
}

#[test]
fn plain_run_prints_a_line_and_exits_1_on_failure() {
    let t = Test::new();
    let wf = t.write(
        "wf.yaml",
        "name: plain\nsteps:\n  - id: boom\n    run: exit 4\n",
    );
    let ran = t.wf(&["run", wf.to_str().unwrap()]);
    ran.code(1);
    assert!(ran.stdout.contains("failed"), "stdout: {}", ran.stdout);
    assert!(
        format!("{}{}", ran.stdout, ran.stderr).contains("boom"),
        "the failing step is not named:\n{}\n{}",
        ran.stdout,
        ran.stderr
    );
}

const INPUTS_WF: &str = r#"
name: inputs
inputs:
  order_id: { required: true }
  amount: { default: 100 }
  note: { default: "none" }
steps:
  - id: show
    run: printf '%s|%s|%s\n' "${{ inputs.order_id }}" "${{ inputs.amount }}" "${{ inputs.note }}" > inputs.txt
"#;

#[test]
fn inputs_from_flags_with_defaults() {
    let t = Test::new();
    let (id, ran) = t.run_yaml("wf.yaml", INPUTS_WF, &["--input", "order_id=A-1 x=y"]);
    ran.code(0);
    assert_eq!(t.read("inputs.txt"), "A-1 x=y|100|none\n");
    let i = t.inspect(&id);
    assert_eq!(i["inputs"]["order_id"], "A-1 x=y");
    assert_eq!(i["inputs"]["amount"], 100);
    assert_eq!(i["inputs"]["note"], "none");
}

#[test]
fn repeated_input_flags_override_defaults() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        INPUTS_WF,
        &[
            "--input",
            "order_id=7",
            "--input",
            "amount=250",
            "--input",
            "note=rush",
        ],
    );
    ran.code(0);
    assert_eq!(t.read("inputs.txt"), "7|250|rush\n");
    // A number-typed default makes `--input amount=250` a number.
    assert_eq!(t.inspect(&id)["inputs"]["amount"], 250);
}

#[test]
fn inputs_from_a_json_file() {
    let t = Test::new();
    let file = t.write(
        "in.json",
        r#"{"order_id": "J-9", "amount": 12.5, "note": "from file"}"#,
    );
    let (id, ran) = t.run_yaml("wf.yaml", INPUTS_WF, &["--inputs", file.to_str().unwrap()]);
    ran.code(0);
    assert_eq!(t.read("inputs.txt"), "J-9|12.5|from file\n");
    assert_eq!(
        t.inspect(&id)["inputs"],
        json!({"order_id": "J-9", "amount": 12.5, "note": "from file"})
    );
}

#[test]
fn input_flag_wins_over_inputs_file() {
    let t = Test::new();
    let file = t.write("in.json", r#"{"order_id": "file", "note": "file"}"#);
    let (_, ran) = t.run_yaml(
        "wf.yaml",
        INPUTS_WF,
        &[
            "--inputs",
            file.to_str().unwrap(),
            "--input",
            "order_id=flag",
        ],
    );
    ran.code(0);
    assert_eq!(t.read("inputs.txt"), "flag|100|file\n");
}

#[test]
fn missing_required_input_is_exit_2_and_writes_nothing() {
    let t = Test::new();
    let (_, ran) = t.run_yaml("wf.yaml", INPUTS_WF, &["--input", "amount=5"]);
    ran.code(2);
    assert!(
        ran.stderr.contains("order_id"),
        "error does not name the input: {}",
        ran.stderr
    );
    assert!(!t.database_written(), "the database was written");
    assert_eq!(t.read("inputs.txt"), "");
}

#[test]
fn unknown_input_is_exit_2_and_writes_nothing() {
    let t = Test::new();
    let (_, ran) = t.run_yaml(
        "wf.yaml",
        INPUTS_WF,
        &["--input", "order_id=1", "--input", "bogus=1"],
    );
    ran.code(2);
    assert!(
        ran.stderr.contains("bogus"),
        "error does not name the input: {}",
        ran.stderr
    );
    assert!(!t.database_written(), "the database was written");
    assert_eq!(t.read("inputs.txt"), "");
}

#[test]
fn malformed_input_flag_and_bad_inputs_file_are_exit_2() {
    let t = Test::new();
    let (_, ran) = t.run_yaml("wf.yaml", INPUTS_WF, &["--input", "no-equals-sign"]);
    ran.code(2);
    let bad = t.write("bad.json", "[1, 2]");
    let (_, ran) = t.run_yaml("wf.yaml", INPUTS_WF, &["--inputs", bad.to_str().unwrap()]);
    ran.code(2);
    let (_, ran) = t.run_yaml("wf.yaml", INPUTS_WF, &["--inputs", "missing.json"]);
    ran.code(2);
    assert!(!t.database_written(), "the database was written");
}

#[test]
fn a_wrongly_typed_input_is_exit_2() {
    let t = Test::new();
    let (_, ran) = t.run_yaml(
        "wf.yaml",
        INPUTS_WF,
        &["--input", "order_id=1", "--input", "amount=lots"],
    );
    ran.code(2);
    assert!(!t.database_written(), "the database was written");
}

#[test]
fn a_run_ends_with_a_summary_and_shows_each_retry_wait() {
    let t = Test::new();
    let (_, ran) = t.run_yaml(
        "summary.yaml",
        r#"
name: summary
steps:
  - id: flaky
    retry: { max_attempts: 3, interval: 100ms, backoff: fixed }
    run: test "$WF_ATTEMPT" = 2 || exit 1
  - id: skipped
    if: false
    run: echo never
  - id: last
    run: echo done
"#,
        &[],
    );
    ran.code(0);
    assert!(
        ran.stderr
            .contains("flaky: retrying in 100ms (attempt 2/3)"),
        "{}",
        ran.stderr
    );
    let summary = ran
        .stderr
        .lines()
        .find(|l| l.starts_with("run took "))
        .unwrap_or_else(|| panic!("no summary line:\n{}", ran.stderr));
    assert!(
        summary.ends_with(": 2 step(s) ok, 0 failed, 0 canceled, 1 skipped, 0 not run"),
        "{summary}"
    );
}

/// The summary line of a run's stderr.
fn summary_line(stderr: &str) -> &str {
    stderr
        .lines()
        .find(|l| l.starts_with("run took "))
        .unwrap_or_else(|| panic!("no summary line:\n{stderr}"))
}

#[test]
fn the_summary_counts_a_canceled_step_apart_from_failed_ones() {
    let t = Test::new();
    // The workflow's timeout ends the sleeping step `canceled`; none failed.
    let (id, ran) = t.run_yaml(
        "cut.yaml",
        "name: cut\ntimeout: 1s\nsteps:\n  - id: first\n    run: 'true'\n  \
         - id: nap\n    needs: [first]\n    sleep: 1h\n  \
         - id: after\n    needs: [nap]\n    run: 'true'\n",
        &[],
    );
    ran.code(1);
    assert_eq!(Test::step(&t.inspect(&id), "nap")["status"], "canceled");
    let summary = summary_line(&ran.stderr);
    assert!(
        summary.ends_with(": 1 step(s) ok, 0 failed, 1 canceled, 0 skipped, 1 not run"),
        "{summary}"
    );
}

/// `wf run --id ID` of an instance that exists (docs/commands.md): with the same
/// definition and inputs nothing runs again and it says what became of the
/// instance, with the exit code of its status; anything else is refused.
#[test]
fn run_with_an_existing_id_is_a_no_op_for_the_same_definition_and_inputs() {
    let t = Test::new();
    let yaml = "name: once\ninputs:\n  who: { default: ana }\nsteps:\n  - id: a\n    run: echo ${{ inputs.who }} >> side.log\n  - id: b\n    run: exit 3\n";
    let path = t.write("once.yaml", yaml);
    let file = path.to_str().expect("utf-8");
    t.wf(&["run", file, "--id", "x"]).code(1);
    // Again: the same definition and inputs. Nothing runs; it failed.
    let again = t.wf(&["run", file, "--id", "x"]);
    again.code(1);
    assert!(
        again.stdout.contains("instance x exists already") && again.stdout.contains("failed"),
        "{}",
        again.stdout
    );
    let json = t.wf(&["run", file, "--id", "x", "--json"]);
    json.code(1);
    assert_eq!(
        json.json(),
        json!({ "id": "x", "status": "failed", "exit_code": 1 })
    );
    assert_eq!(t.read("side.log"), "ana\n", "nothing ran again");
    assert_eq!(t.inspect("x")["runs"].as_array().map(Vec::len), Some(1));
    // Other inputs, or another definition: refused, nothing written.
    let other = t.wf(&["run", file, "--id", "x", "--input", "who=bo"]);
    other.code(2);
    assert!(other.stderr.contains("already exists"), "{}", other.stderr);
    t.write("once.yaml", &yaml.replace("exit 3", "exit 0"));
    t.wf(&["run", file, "--id", "x"]).code(2);
    assert_eq!(t.read("side.log"), "ana\n");
    // A completed one says so, exit 0.
    t.wf(&["run", file, "--id", "y"]).code(0);
    let done = t.wf(&["run", file, "--id", "y"]);
    done.code(0);
    assert!(done.stdout.contains("completed"), "{}", done.stdout);
    assert_eq!(t.read("side.log"), "ana\nana\n");
}

/// docs/commands.md: `wf run -` reads the workflow from stdin. Its relative `dir:`
/// and commands resolve against the current directory (there is no file
/// folder), the instance records `<stdin>` as its workflow path, and a
/// definition error names `<stdin>` with the line and column.
#[test]
fn run_dash_reads_the_workflow_from_stdin() {
    use std::io::Write as _;
    use std::process::Stdio;
    let t = Test::new();
    t.write(
        "tools/hello.sh",
        "#!/bin/sh\necho \"hello from $(basename \"$PWD\")\"\n",
    );
    let from_stdin = |yaml: &str| {
        let mut child = t
            .cmd()
            .args(["run", "-", "--json"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run wf");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(yaml.as_bytes()).expect("write stdin");
        drop(stdin);
        crate::Ran::from(child.wait_with_output().expect("wait for wf"))
    };
    let ran = from_stdin(
        r#"name: piped
steps:
  - id: here
    run: ./tools/hello.sh
  - id: there
    dir: tools
    run: ./hello.sh
"#,
    );
    ran.code(0);
    let id = ran.json()["id"].as_str().expect("an id").to_string();
    let logs = t.wf(&["logs", &id]);
    let dir = t
        .path()
        .file_name()
        .and_then(|n| n.to_str())
        .expect("a name");
    assert!(
        logs.stdout.contains(&format!("hello from {dir}\n"))
            && logs.stdout.contains("hello from tools\n"),
        "{}",
        logs.stdout
    );
    let base = std::fs::canonicalize(t.path()).expect("canonical test dir");
    let recorded = t.sql(&format!(
        "SELECT workflow_path, base_dir FROM instances WHERE id = '{id}'"
    ));
    let (path, base_dir) = recorded.split_once('|').expect("two columns");
    assert_eq!(path, "<stdin>");
    assert_eq!(
        std::fs::canonicalize(base_dir).expect("base dir exists"),
        base
    );
    // A mistake is named at `<stdin>:line:col`, and nothing is written.
    let bad = from_stdin("name: piped\nsteps:\n  - id: x\n    rnu: echo\n");
    bad.code(2);
    assert!(
        bad.stderr.starts_with("error: <stdin>:4:5: ") && bad.stderr.contains("`rnu`"),
        "{}",
        bad.stderr
    );
}

#[test]
fn every_check_of_wf_run_comes_before_the_database_is_made() {
    // On PostgreSQL: the schema is not made either.
    let t = Test::new();
    t.write(
        "hello.yaml",
        "name: hello\nsteps:\n  - id: a\n    run: 'true'\n",
    );
    t.write(
        "queued.yaml",
        "name: queued
inputs:
  k: { default: a }
  p: { default: 5 }
queue: { key: \"${{ inputs.k }}\", priority: \"${{ inputs.p }}\", concurrency: 1 }
steps:
  - id: a
    run: 'true'
",
    );
    let long_key = "k".repeat(300);
    let long_key_input = format!("k={long_key}");
    for (args, says) in [
        (
            vec!["run", "hello.yaml", "--id", "bad id!"],
            "invalid instance id",
        ),
        (
            vec!["run", "hello.yaml", "--id", ".."],
            "invalid instance id `..`",
        ),
        (
            vec!["run", "hello.yaml", "--id", "."],
            "invalid instance id `.`",
        ),
        (
            vec!["run", "hello.yaml", "--id", "a/b"],
            "invalid instance id",
        ),
        (
            vec!["run", "hello.yaml", "--detach", "--id", ".."],
            "invalid instance id `..`",
        ),
        (vec!["run", "hello.yaml", "--input", "nope=1"], "nope"),
        (vec!["run", "hello.yaml", "--label", "bad label=x"], "label"),
        (vec!["run", "queued.yaml", "--input", "k="], "queue.key"),
        (
            vec!["run", "queued.yaml", "--input", &long_key_input],
            "queue.key",
        ),
        (
            vec!["run", "queued.yaml", "--input", "p=12"],
            "queue.priority",
        ),
        (
            vec!["run", "queued.yaml", "--detach", "--input", "p=-1"],
            "queue.priority",
        ),
    ] {
        let ran = t.wf(&args);
        ran.code(2);
        assert!(
            ran.stderr.contains(says) && ran.stderr.lines().count() == 1,
            "{args:?}: {}",
            ran.stderr
        );
        assert!(!t.db.exists(), "{args:?} created the database");
        if let Some((_, schema)) = &t.pg {
            let made = t.sql(&format!(
                "SELECT count(*) FROM pg_namespace WHERE nspname = '{schema}'"
            ));
            assert_eq!(made, "0", "{args:?} created the schema");
        }
    }
    // Ids with dots that are not a folder's name are ids.
    t.wf(&["run", "hello.yaml", "--id", "..."]).code(0);
    t.wf(&["run", "hello.yaml", "--id", "v1.2"]).code(0);
}
