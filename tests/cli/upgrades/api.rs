//! Upgrades through `wf serve` and onto the registered definition: the
//! API's two routes, the CLI without `--to`, and an instance that runs in
//! another process, refused by both (exit 5, 409 `held`) naming its holder.

use super::{NEW, OLD, fates, pairs};
use crate::Test;
use crate::durable::{eventually, spawn};
use crate::serve::Server;
use serde_json::json;

#[test]
fn the_api_moves_instances_onto_the_registered_definition() {
    let t = Test::new();
    let old = t.write("trial.yaml", OLD);
    let new = t.write("trial-v2.yaml", NEW);
    let old = old.to_str().expect("utf-8");
    for id in ["a1", "a2", "a3"] {
        t.wf(&["run", old, "--id", id]).code(3);
    }
    let before = t.inspect("a1")["definition_hash"].clone();
    let s = Server::start(&t, &[], &[]);

    // Nothing registered under the name: nothing to move onto.
    let r = s.post("/api/v1/instances/a1/upgrade", json!({}));
    assert_eq!(
        (r.status, r.code()),
        (404, "not_found".to_string()),
        "{}",
        r.text()
    );
    t.wf(&["workflow", "add", new.to_str().expect("utf-8")])
        .code(0);

    // A dry run answers the plan and writes nothing.
    let r = s.post("/api/v1/instances/a1/upgrade", json!({"dry_run": true}));
    assert_eq!(r.status, 200, "{}", r.text());
    let dry = r.json();
    assert_eq!(dry["outcome"], "planned");
    assert_eq!(
        fates(&dry["plan"]),
        pairs(&[
            ("a", "kept"),
            ("approve", "unchanged"),
            ("b", "changed"),
            ("c", "new")
        ])
    );
    assert_eq!(t.inspect("a1")["definition_hash"], before);

    // A bad body is refused, naming the field, with nothing done.
    let r = s.post("/api/v1/instances/a1/upgrade", json!({"map": 3}));
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("map"), "{}", r.text());
    let r = s.post(
        "/api/v1/instances/a1/upgrade",
        json!({"map": {"nope": "b"}}),
    );
    assert_eq!(
        (r.status, r.code()),
        (409, "conflict".to_string()),
        "{}",
        r.text()
    );
    // In the body's words (`map`), not the CLI's (`--map`).
    assert!(
        r.text().contains("`map`'s `nope`") && !r.text().contains("--map"),
        "{}",
        r.text()
    );
    assert_eq!(t.inspect("a1")["definition_hash"], before);

    // The upgrade: recorded as the token's.
    let r = s.post("/api/v1/instances/a1/upgrade", json!({}));
    assert_eq!(r.status, 200, "{}", r.text());
    let done = r.json();
    assert_eq!(done["outcome"], "upgraded");
    let after = done["plan"]["to"].clone();
    let a1 = t.inspect("a1");
    assert_eq!(a1["definition_hash"], after);
    let upgrade = a1["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .find(|a| a["action"] == "upgrade")
        .cloned()
        .expect("the upgrade is recorded");
    assert_eq!(upgrade["actor"], "token:default", "{upgrade:#}");

    // Its definitions, with what changed.
    let r = s.get("/api/v1/instances/a1/definitions");
    assert_eq!(r.status, 200, "{}", r.text());
    let defs = r.json();
    assert_eq!(defs[0]["hash"], before);
    assert_eq!(defs[1]["hash"], after);
    assert!(
        defs[1]["diff"]
            .as_str()
            .unwrap()
            .contains("+    run: echo b >> ran.log"),
        "{defs:#}"
    );
    assert_eq!(s.get("/api/v1/instances/nope/definitions").status, 404);

    // The workflow's route: every instance's outcome.
    let r = s.post("/api/v1/workflows/trial/upgrade", json!({}));
    assert_eq!(r.status, 200, "{}", r.text());
    let all = r.json();
    let mut outcomes: Vec<(String, String)> = all
        .as_array()
        .expect("an array")
        .iter()
        .map(|d| {
            (
                d["id"].as_str().unwrap().to_string(),
                d["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    outcomes.sort();
    assert_eq!(
        outcomes,
        pairs(&[("a1", "current"), ("a2", "upgraded"), ("a3", "upgraded")])
    );
    for id in ["a2", "a3"] {
        assert_eq!(t.inspect(id)["definition_hash"], after, "{id}");
    }
    let r = s.post("/api/v1/workflows/nope/upgrade", json!({}));
    assert_eq!(r.status, 404, "{}", r.text());

    // An ended instance is not moved: 409 naming its status.
    t.wf(&["signal", "a2", "go"]).code(0);
    t.wf(&["resume", "a2"]).code(0);
    let r = s.post("/api/v1/instances/a2/upgrade", json!({}));
    assert_eq!(
        (r.status, r.code()),
        (409, "conflict".to_string()),
        "{}",
        r.text()
    );
    assert!(r.text().contains("is completed"), "{}", r.text());
}

#[test]
fn without_to_the_cli_moves_onto_the_registered_definition() {
    let t = Test::new();
    let old = t.write("trial.yaml", OLD);
    let new = t.write("trial-v2.yaml", NEW);
    t.wf(&["run", old.to_str().unwrap(), "--id", "c1"]).code(3);
    let unregistered = t.wf(&["upgrade", "c1"]);
    unregistered.code(2);
    assert!(
        unregistered.stderr.contains("trial"),
        "{}",
        unregistered.stderr
    );
    t.wf(&["workflow", "add", new.to_str().unwrap()]).code(0);
    let registered = t.wf(&["workflow", "list", "--json"]).code(0).json();
    let hash = registered[0]["definition_hash"].clone();
    let done = t
        .wf(&["upgrade", "--workflow", "trial", "--json"])
        .code(0)
        .json();
    assert_eq!(done[0]["outcome"], "upgraded", "{done:#}");
    assert_eq!(t.inspect("c1")["definition_hash"], hash);
}

const HELD: &str = "name: held
steps:
  - id: hold
    run: while [ ! -f go ]; do sleep 0.02; done
  - id: after
    run: echo after
";

#[test]
fn a_running_instance_is_refused_naming_its_holder() {
    let t = Test::new();
    let old = t.write("held.yaml", HELD);
    let new = t.write("held-v2.yaml", &HELD.replace("echo after", "echo fixed"));
    let run = spawn(&t, &["run", old.to_str().unwrap(), "--id", "h1"]);
    eventually("the run holds h1", || {
        t.wf(&["inspect", "h1", "--json"]).code == 0 && t.inspect("h1")["status"] == "running"
    });
    let before = t.inspect("h1")["definition_hash"].clone();
    let refused = t.wf(&["upgrade", "h1", "--to", new.to_str().unwrap()]);
    refused.code(5);
    assert!(
        refused.stderr.contains("running in another process ("),
        "{}",
        refused.stderr
    );
    t.wf(&["workflow", "add", new.to_str().unwrap()]).code(0);
    let s = Server::start(&t, &[], &[]);
    let r = s.post("/api/v1/instances/h1/upgrade", json!({}));
    assert_eq!(
        (r.status, r.code()),
        (409, "held".to_string()),
        "{}",
        r.text()
    );
    assert!(
        r.text().contains("running in another process ("),
        "{}",
        r.text()
    );
    assert_eq!(t.inspect("h1")["definition_hash"], before, "nothing moved");

    std::fs::write(t.path().join("go"), "").unwrap();
    let ran = run.finish();
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(t.inspect("h1")["definition_hash"], before);
}
