//! An upgrade under stress (issue 58, item 4): `wf upgrade --workflow`
//! killed with SIGKILL in the middle of a mass upgrade of 1,000 waiting
//! instances leaves every
//! instance whole on one definition or the other (its row and its steps'
//! moved in one commit, or not at all), and asked again moves only the
//! rest; a worker running the same instances while they are upgraded
//! never runs one that is half on each.

use crate::Test;
use crate::durable::{eventually, spawn};
use serde_json::Value;

/// Two waits at once; the new definition drops `audit`, whose open row an
/// upgrade ends `canceled` in the commit that moves the instance.
const TWO_WAITS: &str = "name: mass
steps:
  - id: a
    run: 'true'
  - id: approve
    needs: [a]
    wait_for_event: { name: go }
  - id: audit
    needs: [a]
    wait_for_event: { name: audited }
";

const ONE_WAIT: &str = "name: mass
steps:
  - id: a
    run: 'true'
  - id: approve
    needs: [a]
    wait_for_event: { name: go }
  - id: after
    needs: [approve]
    run: 'true'
";

fn step_status(inspect: &Value, step: &str) -> String {
    inspect["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|s| s["id"] == step)
        .map_or("-".into(), |s| s["status"].as_str().unwrap().to_string())
}

fn upgrades_of(inspect: &Value) -> usize {
    inspect["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .filter(|a| a["action"] == "upgrade")
        .count()
}

#[test]
fn a_mass_upgrade_killed_midway_leaves_each_instance_on_one_definition() {
    const N: usize = 1000;
    let t = Test::new();
    let old = t.write("mass.yaml", TWO_WAITS);
    let new = t.write("mass-v2.yaml", ONE_WAIT);
    let (old, new) = (old.to_str().unwrap(), new.to_str().unwrap());
    let ids: Vec<String> = (1..=N).map(|i| format!("w{i:04}")).collect();
    for id in &ids {
        t.wf(&["run", old, "--id", id]).code(3);
    }
    let old_hash = t.inspect("w0001")["definition_hash"].clone();

    // Newest first: w1000, w0999, … Killed once w0900 has moved.
    let mut upgrade = spawn(&t, &["upgrade", "--workflow", "mass", "--to", new]);
    eventually("w0900 upgraded", || {
        t.inspect("w0900")["definition_hash"] != old_hash
    });
    upgrade.kill9();
    eventually("the kill", || upgrade.exited());
    let new_hash = t.inspect("w0900")["definition_hash"].clone();

    let mut moved = 0;
    for id in &ids {
        let i = t.inspect(id);
        let audit = step_status(&i, "audit");
        if i["definition_hash"] == new_hash {
            moved += 1;
            assert_eq!(
                (audit.as_str(), upgrades_of(&i)),
                ("canceled", 1),
                "{id}: on the new definition, with the old one's open step"
            );
        } else {
            assert_eq!(i["definition_hash"], old_hash, "{id}");
            assert_eq!(
                (audit.as_str(), upgrades_of(&i)),
                ("waiting", 0),
                "{id}: on the old definition, with a row the upgrade wrote"
            );
        }
        assert_eq!(step_status(&i, "approve"), "waiting", "{id}");
    }
    assert!(
        (101..N).contains(&moved),
        "the kill landed in the middle: {moved} of {N} moved"
    );

    // Asked again: the rest move (the one the kill left held is taken
    // over from its dead holder), those moved are left as they are.
    let again = t
        .wf(&["upgrade", "--workflow", "mass", "--to", new, "--json"])
        .code(0)
        .json();
    let count = |o: &str| {
        again
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["outcome"] == o)
            .count()
    };
    assert_eq!((count("upgraded"), count("current")), (N - moved, moved));
    for id in &ids {
        let i = t.inspect(id);
        assert_eq!(
            (&i["definition_hash"], upgrades_of(&i)),
            (&new_hash, 1),
            "{id}"
        );
    }
    // Sound: the lease the kill left was taken over and given back.
    t.wf(&["db", "check"]).code(0);
    // And they go on as the new definition says.
    t.wf(&["signal", "w0001", "go"]).code(0);
    t.wf(&["resume", "w0001"]).code(0);
    assert_eq!(step_status(&t.inspect("w0001"), "after"), "completed");
}

const SLOW_OLD: &str = "name: race
steps:
  - id: a
    run: sleep 0.05; echo old-a >> \"$WF_INSTANCE_ID.log\"
  - id: b
    needs: [a]
    run: echo old-b >> \"$WF_INSTANCE_ID.log\"
";

#[test]
fn a_worker_racing_an_upgrade_runs_each_instance_on_one_definition() {
    const N: usize = 40;
    let t = Test::new();
    let old = t.write("race.yaml", SLOW_OLD);
    let new = t.write("race-v2.yaml", &SLOW_OLD.replace("old-", "new-"));
    let (old, new) = (old.to_str().unwrap(), new.to_str().unwrap());
    let ids: Vec<String> = (1..=N).map(|i| format!("r{i:02}")).collect();
    for id in &ids {
        t.wf(&["run", old, "--id", id, "--detach"]).code(0);
    }
    let worker = spawn(&t, &["worker", "--concurrency", "4", "--poll", "50ms"]);
    // Once the worker has finished one (it takes the oldest first), the
    // upgrade goes through them newest first: they meet in the middle.
    let completed = || {
        t.wf(&["list", "--status", "completed", "--json"])
            .code(0)
            .json()
            .as_array()
            .map_or(0, Vec::len)
    };
    eventually("the worker's first", || completed() >= 1);
    let r = t.wf(&["upgrade", "--workflow", "race", "--to", new, "--json"]);
    assert!(matches!(r.code, 0 | 1 | 5), "{}", r.stderr);
    eventually("every instance completed", || completed() == N);
    drop(worker);
    let (mut olds, mut news) = (0, 0);
    for id in &ids {
        let i = t.inspect(id);
        let log = std::fs::read_to_string(t.path().join(format!("{id}.log"))).expect("its log");
        let runs = i["runs"].as_array().expect("runs");
        assert_eq!(runs.len(), 1, "{id}: {i:#}");
        let ran_on = &runs[0]["definition_hash"];
        assert_eq!(ran_on, &i["definition_hash"], "{id}");
        match log.as_str() {
            "old-a\nold-b\n" => olds += 1,
            "new-a\nnew-b\n" => news += 1,
            other => panic!("{id} ran half on each definition: {other:?}"),
        }
    }
    assert_eq!(olds + news, N);
    assert!(
        olds > 0 && news > 0,
        "the worker and the upgrade met: {olds} ran on the old definition, {news} on the new"
    );
}
