//! `shell:` and `defaults.run` (docs/workflow-file.md#shell-and-defaultsrun):
//! a `run` string written to a script file and run as GitHub Actions runs
//! its shells (`bash` with pipefail, `sh -e`, `python`, a command with
//! `{0}`), `working_directory`, expressions kept out of the code, and the
//! file's errors at their line and column.

use crate::Test;

/// The stdout `wf logs ID STEP` prints.
fn logs(t: &Test, id: &str, step: &str) -> String {
    t.wf(&["logs", id, step]).code(0).stdout.clone()
}

#[test]
fn bash_runs_a_script_file_with_errexit_and_pipefail_then_removes_it() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: bash
steps:
  - id: where
    shell: bash
    run: |
      echo "$0"
      echo "${BASH_VERSION:+bash}" "$-" "$(set -o | grep pipefail | tr -s ' \t' ' ')"
  - id: pipe
    shell: bash
    run: |
      false | true
      echo not reached
"#,
        &[],
    );
    ran.code(1);
    let out = logs(&t, &id, "where");
    let mut lines = out.lines();
    let script = lines.next().expect("the script's path");
    assert!(script.ends_with(".sh"), "{script}");
    assert!(
        std::path::Path::new(script)
            .file_name()
            .is_some_and(|f| f.to_string_lossy().starts_with("wf-script-")),
        "{script}"
    );
    assert!(
        !std::path::Path::new(script).exists(),
        "the script file outlived its attempt: {script}"
    );
    let flags = lines.next().expect("the flags");
    assert!(flags.starts_with("bash "), "{flags}");
    assert!(
        flags.split(' ').nth(1).is_some_and(|f| f.contains('e')),
        "{flags}"
    );
    assert!(flags.ends_with("pipefail on"), "{flags}");
    let i = t.inspect(&id);
    assert_eq!(Test::step(&i, "pipe")["error_type"], "exit.1");
    assert!(!logs(&t, &id, "pipe").contains("not reached"));
}

#[test]
fn sh_runs_with_errexit_unlike_the_default_sh_c() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: sh
steps:
  - id: default
    run: |
      false
      echo went on
  - id: strict
    shell: sh
    run: |
      false
      echo went on
"#,
        &[],
    );
    ran.code(1);
    assert_eq!(logs(&t, &id, "default"), "went on\n");
    let i = t.inspect(&id);
    assert_eq!(Test::step(&i, "default")["status"], "completed");
    assert_eq!(Test::step(&i, "strict")["error_type"], "exit.1");
    assert_eq!(logs(&t, &id, "strict"), "");
}

#[test]
fn python_and_a_command_with_0_run_their_scripts_and_read_values_from_env() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: py
inputs:
  who: { default: "x'); import os; os.system('touch pwned'); print('" }
steps:
  - id: py
    shell: python
    env: { WHO: "${{ inputs.who }}" }
    run: |
      import os, sys
      print(sys.argv[0].endswith(".py"), os.environ["WHO"] == """x'); import os; os.system('touch pwned'); print('""")
      with open(os.environ["WF_OUTPUT"], "a") as f:
          f.write("answer=42\n")
  - id: custom
    shell: python3 -c "import sys; print(open(sys.argv[1]).read().upper(), end='')" {0}
    run: shout
  - id: read
    run: echo "${{ steps.py.output.answer }}"
"#,
        &[],
    );
    ran.code(0);
    assert_eq!(logs(&t, &id, "py"), "True True\n");
    assert_eq!(logs(&t, &id, "custom"), "SHOUT");
    assert_eq!(logs(&t, &id, "read"), "42\n");
    assert!(!t.path().join("pwned").exists());
}

#[test]
fn a_posix_shell_gets_each_value_as_a_variable_never_as_code() {
    let t = Test::new();
    let big = "y".repeat(100 * 1024);
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        &format!(
            r#"
name: inject
inputs:
  evil: {{ default: '$(touch pwned) `touch pwned2`; touch pwned3' }}
  big: {{ default: "{big}" }}
steps:
  - id: a
    shell: bash
    run: |
      echo "${{{{ inputs.evil }}}}" ${{{{ inputs.evil }}}}
      echo '${{{{ inputs.evil }}}}'
  - id: b
    shell: /bin/sh -e {{0}}
    run: printf '%s' "${{{{ inputs.big }}}}" | wc -c
"#
        ),
        &[],
    );
    ran.code(0);
    let evil = "$(touch pwned) `touch pwned2`; touch pwned3";
    assert_eq!(logs(&t, &id, "a"), format!("{evil} {evil}\n{evil}\n"));
    assert_eq!(logs(&t, &id, "b").trim(), (100 * 1024).to_string());
    for f in ["pwned", "pwned2", "pwned3"] {
        assert!(!t.path().join(f).exists(), "{f}");
    }
}

#[test]
fn defaults_run_gives_shell_and_working_directory_to_run_strings_and_compensations() {
    let t = Test::new();
    std::fs::create_dir_all(t.path().join("flows/scripts")).unwrap();
    let wf = t.write(
        "flows/wf.yaml",
        r#"
name: defaults
defaults:
  run: { shell: bash, working_directory: scripts }
steps:
  - id: string
    run: echo "$(basename "$PWD") ${BASH_VERSION:+bash}" > out.txt
    compensate:
      run: echo "$(basename "$PWD") ${BASH_VERSION:+bash}" > undo.txt
  - id: argv
    run: ["sh", "-c", "echo \"$(basename \"$PWD\") ${BASH_VERSION:-sh}\" > argv.txt"]
  - id: own
    dir: .
    shell: sh
    run: echo "$(basename "$PWD") ${BASH_VERSION:-sh}" > own.txt
  - id: fail
    run: exit 3
"#,
    );
    t.wf(&["run", wf.to_str().unwrap()]).code(1);
    assert_eq!(t.read("flows/scripts/out.txt"), "scripts bash\n");
    assert_eq!(t.read("flows/scripts/undo.txt"), "scripts bash\n");
    assert_eq!(t.read("flows/scripts/argv.txt"), "scripts sh\n");
    assert_eq!(t.read("flows/own.txt"), "flows sh\n");
}

#[test]
fn a_shell_that_is_not_installed_fails_the_attempt_as_spawn() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "wf.yaml",
        r#"
name: missing
steps:
  - id: a
    shell: wf-no-such-shell {0}
    run: hello
"#,
        &[],
    );
    ran.code(1);
    let a = Test::step(&t.inspect(&id), "a").clone();
    assert_eq!(a["error_type"], "spawn");
    assert!(
        a["error_message"]
            .as_str()
            .is_some_and(|e| e.contains("wf-no-such-shell")),
        "{a}"
    );
}

#[test]
fn a_shell_the_file_cannot_use_is_an_error_at_its_line_and_column() {
    let t = Test::new();
    t.refuses(&[
        (
            "name: s\nsteps:\n  - id: a\n    shell: zsh\n    run: echo\n",
            "wf.yaml:4:12",
            "unknown shell `zsh`",
        ),
        (
            "name: s\nsteps:\n  - id: a\n    shell: bash\n    run: [echo, hi]\n",
            "wf.yaml:4:12",
            "a `run` list runs its program without a shell",
        ),
        (
            "name: s\nsteps:\n  - id: a\n    shell: python\n    run: print('${{ inputs.x }}')\ninputs: { x: {} }\n",
            "wf.yaml:5:10",
            "cannot quote for shell `python`",
        ),
        (
            "name: s\nsteps:\n  - id: a\n    shell: bash\n    sleep: 1s\n",
            "wf.yaml:4:12",
            "`shell` only applies to `run` steps",
        ),
        (
            "name: s\ndefaults:\n  run: { shell: 'perl' }\nsteps:\n  - id: a\n    run: echo\n",
            "wf.yaml:3:17",
            "unknown shell `perl`",
        ),
    ]);
}
