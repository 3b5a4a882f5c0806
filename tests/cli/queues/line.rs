//! One key's line (issue 59, item 4): `wf queue show KEY`, `GET
//! /api/v1/queues/{key}` and the inspector's queue page list the instances
//! holding the key's slots, then those waiting in the order a worker admits
//! them (priority, then age), with their priority and age.

use crate::Test;
use crate::serve::{Server, TOKEN};
use serde_json::{Value, json};

const HOLDS: &str = "name: holds
queue: { key: deploy, concurrency: 1, hold_while_suspended: true }
steps:
  - id: gate
    wait_for_event: { name: go }
";

const WAITS: &str = "name: waits
inputs:
  p: { default: '5' }
queue: { key: deploy, concurrency: 1, priority: '${{ inputs.p }}', hold_while_suspended: true }
steps:
  - id: gate
    wait_for_event: { name: go }
";

/// `holder` holds `deploy`'s slot; w1, w2 and w3 wait behind it, then
/// `urgent` (priority 0) is made last.
pub(crate) fn line(t: &Test) {
    let holds = t.write("holds.yaml", HOLDS);
    let waits = t.write("waits.yaml", WAITS);
    t.wf(&["run", holds.to_str().unwrap(), "--id", "holder"])
        .code(3);
    for id in ["w1", "w2", "w3"] {
        t.wf(&["run", waits.to_str().unwrap(), "--id", id, "--detach"])
            .code(0);
    }
    t.wf(&[
        "run",
        waits.to_str().unwrap(),
        "--id",
        "urgent",
        "--input",
        "p=0",
        "--detach",
    ])
    .code(0);
}

fn ids(list: &Value) -> Vec<&str> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect()
}

#[test]
fn a_keys_line_is_listed_in_the_order_it_admits() {
    let t = Test::new();
    line(&t);
    let shown = t.wf(&["queue", "show", "deploy", "--json"]).code(0).json();
    assert_eq!(ids(&shown["admitted"]), ["holder"]);
    assert_eq!(ids(&shown["waiting"]), ["urgent", "w1", "w2", "w3"]);
    assert_eq!(
        (
            &shown["admitted_total"],
            &shown["waiting_total"],
            &shown["limit"]
        ),
        (&json!(1), &json!(4), &json!(1))
    );
    assert_eq!(
        (
            &shown["waiting"][0]["position"],
            &shown["waiting"][0]["priority"]
        ),
        (&json!(1), &json!(0))
    );
    // Cut at the limit, with what is left said.
    let cut = t.wf(&["queue", "show", "deploy", "--limit", "2"]);
    cut.code(0);
    assert!(cut.stdout.contains("… and 2 more"), "{}", cut.stdout);
    let text = &cut.stdout;
    let urgent = text.find("urgent").expect("urgent");
    let w1 = text.find("w1").expect("w1");
    assert!(urgent < w1, "{text}");
    // A key nobody uses is empty, not an error.
    let none = t.wf(&["queue", "show", "nobody", "--json"]).code(0).json();
    assert_eq!(
        (&none["admitted_total"], &none["waiting_total"]),
        (&json!(0), &json!(0))
    );

    // The worker admits the head of the line when the slot frees.
    t.wf(&["signal", "holder", "go"]).code(0);
    t.wf(&["resume", "holder"]).code(0);
    t.wf(&["worker", "--once"]).code(0);
    let after = t.wf(&["queue", "show", "deploy", "--json"]).code(0).json();
    assert_eq!(ids(&after["admitted"]), ["urgent"]);
    assert_eq!(ids(&after["waiting"]), ["w1", "w2", "w3"]);

    // The API answers the same document; a bad limit is refused.
    let s = Server::start(&t, &[], &[]);
    let r = s.get("/api/v1/queues/deploy?limit=2");
    assert_eq!(r.status, 200, "{}", r.text());
    let api = r.json();
    assert_eq!(ids(&api["waiting"]), ["w1", "w2"]);
    assert_eq!(api["waiting_total"], 3);
    assert_eq!(s.get("/api/v1/queues/deploy?limit=x").status, 400);
    assert_eq!(s.get("/api/v1/queues/deploy?stauts=x").status, 400);

    // The inspector's page, read as served (no JavaScript needed).
    let page = s
        .raw(
            "GET",
            "/queues/deploy",
            &[("cookie", s.sign_in(TOKEN))],
            None,
        )
        .text();
    let (u, w1, w3) = (
        page.find(">urgent<").expect("urgent on the page"),
        page.find(">w1<").expect("w1"),
        page.find(">w3<").expect("w3"),
    );
    assert!(u < w1 && w1 < w3, "{page}");
    let list = s
        .raw("GET", "/queues", &[("cookie", s.sign_in(TOKEN))], None)
        .text();
    assert!(list.contains("href=\"/queues/deploy\""), "{list}");
}
