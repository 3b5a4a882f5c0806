//! Execution of `run:` steps and of the step graph (docs/workflow-file.md, docs/execution.md): the shell
//! string and argv forms, the working directory, workflow and step `env:`,
//! `needs` ordering, parallelism and `concurrency`, failure stopping the
//! graph, and how inputs are given, defaulted and rejected.
//!
//! Its tests by topic, beside the ones here: `inputs.rs` and `shells.rs` (in `run/`).

mod inputs;
mod shells;

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
