//! `wf run --detach` (docs/commands.md): the instance is recorded, due at
//! once, and its id printed (`{id, status, exit_code}` with `--json`);
//! nothing runs until a worker takes it; an `--id` that exists follows the
//! rules of `wf run --id`; the secrets are looked for where it runs.

use crate::Test;

const FLOW: &str = "name: later\ninputs:\n  who: { default: ana }\nsteps:\n  - id: greet\n    \
                    run: echo hello ${{ inputs.who }} > greeted\n";

#[test]
fn a_detached_instance_is_recorded_for_a_worker_and_its_id_printed() {
    let t = Test::new();
    let path = t.write("later.yaml", FLOW);
    let ran = t.wf(&["run", "--detach", path.to_str().unwrap(), "--id", "d1"]);
    ran.code(0);
    assert_eq!(ran.stdout, "d1\n", "the id alone on stdout");
    assert!(ran.stderr.contains("wf worker"), "{}", ran.stderr);
    // Recorded, due, and nothing ran.
    let list = t.wf(&["list", "--json"]).code(0).json();
    assert_eq!(list[0]["id"], "d1");
    // Nobody started it: `pending`, never `sleeping`.
    assert_eq!(list[0]["status"], "pending");
    assert_eq!(t.inspect("d1")["status"], "pending");
    let listed = t
        .wf(&["list", "--status", "pending", "--json"])
        .code(0)
        .json();
    assert_eq!(listed[0]["id"], "d1", "{listed}");
    let shown = t.wf(&["list"]).code(0).stdout.clone();
    assert!(shown.contains("pending"), "{shown}");
    t.wf(&["result", "d1"]).code(3);
    assert!(!t.path().join("greeted").exists());
    assert!(t.inspect("d1")["runs"].as_array().unwrap().is_empty());
    // A worker runs it.
    t.wf(&["worker", "--once"]).code(0);
    assert_eq!(t.inspect("d1")["status"], "completed");
    assert_eq!(t.read("greeted"), "hello ana\n");
}

#[test]
fn detach_json_and_an_id_that_exists() {
    let t = Test::new();
    let path = t.write("later.yaml", FLOW);
    let file = path.to_str().unwrap();
    let v = t
        .wf(&["run", "--detach", file, "--id", "d2", "--json"])
        .code(0)
        .json();
    assert_eq!(v["id"], "d2");
    assert_eq!(v["status"], "pending");
    assert_eq!(v["exit_code"], 0);
    // The same definition and inputs: nothing new, its status named.
    let again = t.wf(&["run", "--detach", file, "--id", "d2"]);
    again.code(3);
    assert!(again.stdout.contains("exists already"), "{}", again.stdout);
    // Other inputs: refused, nothing written.
    let before = t.dump();
    let other = t.wf(&["run", "--detach", file, "--id", "d2", "--input", "who=bo"]);
    other.code(2);
    assert!(other.stderr.contains("already exists"), "{}", other.stderr);
    assert_eq!(t.dump(), before);
    // A random id when none is given, printed.
    let ran = t.wf(&["run", "--detach", file]);
    ran.code(0);
    let id = ran.stdout.trim();
    assert_eq!(id.len(), 32, "{id}");
    assert_eq!(t.inspect(id)["status"], "pending");
}

#[test]
fn the_secrets_of_a_detached_instance_are_looked_for_where_it_runs() {
    let t = Test::new();
    let path = t.write(
        "secret.yaml",
        "name: secret\nsecrets: [WF_TEST_DETACH_TOKEN]\nsteps:\n  - id: use\n    \
         env: { T: \"${{ secrets.WF_TEST_DETACH_TOKEN }}\" }\n    run: test -n \"$T\" && touch used\n",
    );
    let file = path.to_str().unwrap();
    // `wf run` refuses at once where the secret is not set; `--detach`
    // records it for a worker that has it.
    t.wf(&["run", file]).code(2);
    let id = t
        .wf(&["run", "--detach", file])
        .code(0)
        .stdout
        .trim()
        .to_string();
    let out = t
        .cmd()
        .env("WF_TEST_DETACH_TOKEN", "s3cret")
        .args(["worker", "--once"])
        .output()
        .expect("run wf");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(t.inspect(&id)["status"], "completed");
    assert!(t.path().join("used").exists());
}
