//! Who did what (issue 57, item 1): every action that changes an instance
//! is recorded with its actor in the commit of its change, and shown by
//! `wf inspect` (ACTION / BY / AT / DETAIL, `--json` `actions`), the
//! trace (each run's root span's `wf.actor`), the API and the inspector's
//! instance page. One test per kind of actor: a person at the command
//! line, a worker, a schedule, a token of `wf serve` and a webhook.

use crate::Test;
use crate::serve::Server;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

/// `cli:USER@HOST` as this test's process would be named: the user of its
/// uid (as `id -un` says) and the host name.
fn cli_actor() -> String {
    let user = std::process::Command::new("id")
        .arg("-un")
        .output()
        .expect("id -un");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    format!(
        "cli:{}@{}",
        String::from_utf8_lossy(&user.stdout).trim(),
        host.trim()
    )
}

/// The inspector page's Actions section (what follows `id="actions"`).
fn actions_section(page: &str) -> &str {
    page.split("id=\"actions\"")
        .nth(1)
        .expect("an Actions section")
}

/// `(action, actor, detail)` of each recorded action, oldest first.
fn actions(v: &Value) -> Vec<(String, String, String)> {
    v["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .map(|a| {
            assert!(a["at"].as_str().is_some_and(|t| t.ends_with('Z')), "{a}");
            (
                a["action"].as_str().expect("action").to_string(),
                a["actor"].as_str().expect("actor").to_string(),
                a["detail"].as_str().expect("detail").to_string(),
            )
        })
        .collect()
}

/// The `wf.actor` of each run's root span, in run order.
fn run_actors(t: &Test, id: &str) -> Vec<String> {
    t.run_roots(id)
        .iter()
        .map(|root| {
            root["attributes"]["wf.actor"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

const WAITER: &str = "name: waiter
steps:
  - id: a
    run: echo a
  - id: approve
    needs: [a]
    wait_for_event: { name: approved }
  - id: b
    needs: [approve]
    run: echo b
";

#[test]
fn a_persons_commands_are_recorded_as_cli_user_at_host() {
    let t = Test::new();
    let me = cli_actor();
    let (id, ran) = t.run_yaml("waiter.yaml", WAITER, &[]);
    ran.code(3);
    let wf = t.path().join("waiter.yaml");
    t.wf(&["signal", &id, "approved"]).code(0);
    t.wf(&["resume", &id]).code(0);

    // A second one, canceled with a reason.
    let (other, _) = t.run_yaml("waiter.yaml", WAITER, &[]);
    t.wf(&["cancel", &other, "--reason", "bad deploy"]).code(0);

    let v = t.inspect(&id);
    assert_eq!(v["started_by"], me.as_str());
    assert_eq!(
        actions(&v),
        vec![
            ("start".into(), me.clone(), wf.display().to_string()),
            ("signal".into(), me.clone(), "approved".into()),
            ("resume".into(), me.clone(), String::new()),
        ]
    );
    assert_eq!(run_actors(&t, &id), vec![me.clone(), me.clone()]);
    let canceled = actions(&t.inspect(&other));
    assert_eq!(canceled.len(), 2, "{canceled:?}");
    assert_eq!(
        canceled[1],
        ("cancel".into(), me.clone(), "bad deploy".into())
    );

    // The table a person reads.
    let shown = t.wf(&["inspect", &other]);
    shown.code(0);
    let table = shown
        .stdout
        .split("ACTION")
        .nth(1)
        .expect("an ACTION table");
    assert!(table.contains("BY") && table.contains("AT") && table.contains("DETAIL"));
    assert!(
        table.contains("cancel") && table.contains("bad deploy"),
        "{table}"
    );
    assert!(shown.stdout.contains(&format!("Started by:  {me}")) || shown.stdout.contains(&me));

    // `wf list --json` names who started each.
    let list: Value = serde_json::from_str(&t.wf(&["list", "--json"]).stdout).unwrap();
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .all(|i| i["started_by"] == me.as_str()),
        "{list}"
    );
}

#[test]
fn a_worker_resumes_and_a_schedule_starts_in_their_own_names() {
    let t = Test::new();
    let me = cli_actor();
    // Sleeps past the run's inline wait: the worker takes it up.
    let (id, ran) = t.run_yaml(
        "nap.yaml",
        "name: nap\nsteps:\n  - id: s\n    sleep: 1s\n  - id: after\n    needs: [s]\n    run: echo woke\n",
        &["--inline-wait", "0s"],
    );
    ran.code(3);
    crate::durable::eventually("the timer is due", || {
        t.wf(&["worker", "--once"]).code(0);
        t.inspect(&id)["status"] == "completed"
    });
    let acts = actions(&t.inspect(&id));
    assert_eq!(acts[0].0, "start");
    assert_eq!(acts[0].1, me);
    let resumes: Vec<_> = acts.iter().filter(|a| a.0 == "resume").collect();
    assert!(!resumes.is_empty(), "{acts:?}");
    for r in &resumes {
        assert!(r.1.starts_with("worker:"), "{acts:?}");
    }
    let roots = run_actors(&t, &id);
    assert_eq!(roots[0], me);
    assert!(roots.last().unwrap().starts_with("worker:"), "{roots:?}");

    // A schedule's fire: started by the schedule, its first run too.
    let sched = t.write(
        "tick.yaml",
        "name: tick\non:\n  schedule:\n    - every: 1s\nsteps:\n  - id: one\n    run: echo tick\n",
    );
    t.wf(&["schedule", "add", sched.to_str().unwrap()]).code(0);
    crate::schedules::until_due(&t);
    t.wf(&["worker", "--once"]).code(0);
    let list: Value =
        serde_json::from_str(&t.wf(&["list", "--json", "--workflow", "tick"]).stdout).unwrap();
    let fired = list[0]["id"]
        .as_str()
        .expect("a fired instance")
        .to_string();
    assert_eq!(list[0]["started_by"], "schedule:tick");
    let acts = actions(&t.inspect(&fired));
    assert_eq!(acts[0].0, "start");
    assert_eq!(acts[0].1, "schedule:tick");
    assert!(acts[0].2.starts_with("fire time "), "{acts:?}");
    assert_eq!(run_actors(&t, &fired)[0], "schedule:tick");

    // The inspector's pages name them too.
    let s = Server::start(&t, &[], &[]);
    let page = |id: &str| {
        s.call(
            "GET",
            &format!("/instances/{id}"),
            &[("accept", "text/html")],
            None,
        )
        .text()
    };
    let napped = page(&id);
    let section = actions_section(&napped);
    assert!(
        section.contains("worker:") && section.contains(&me),
        "{section}"
    );
    let ticked = page(&fired);
    let section = actions_section(&ticked);
    assert!(section.contains("schedule:tick"), "{section}");
}

const HOOKED: &str = "name: hooked
on:
  webhook:
    name: push
    secret: HOOK_KEY
steps:
  - id: hold
    wait_for_event: { name: go }
";

#[test]
fn a_token_and_a_webhook_are_named_in_the_api_and_the_inspector() {
    let t = Test::new();
    let wf = t.write("hooked.yaml", HOOKED);
    t.wf(&["workflow", "add", wf.to_str().unwrap()]).code(0);
    let s = Server::start(&t, &[], &[("HOOK_KEY", "k3y")]);
    let body = br#"{"ref": "main"}"#.to_vec();
    let mut mac = Hmac::<Sha256>::new_from_slice(b"k3y").unwrap();
    mac.update(&body);
    let sig: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let r = s.raw(
        "POST",
        "/hooks/push",
        &[
            ("content-type", "application/json".into()),
            ("x-github-delivery", "d-42".into()),
            ("x-hub-signature-256", format!("sha256={sig}")),
        ],
        Some(body),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["id"].as_str().unwrap().to_string();
    let r = s.post(
        &format!("/api/v1/instances/{id}/signal"),
        json!({"event": "go"}),
    );
    assert_eq!(r.status, 200, "{}", r.text());

    let v = s.get(&format!("/api/v1/instances/{id}")).json();
    let acts = actions(&v);
    assert_eq!(
        acts,
        vec![
            ("start".into(), "hook:push".into(), "delivery d-42".into()),
            ("signal".into(), "token:default".into(), "go".into()),
        ]
    );
    assert_eq!(v["started_by"], "hook:push");
    // The CLI reads the same.
    assert_eq!(actions(&t.inspect(&id)), acts);

    // The inspector's instance page: the actions section, each actor.
    let page = s
        .call(
            "GET",
            &format!("/instances/{id}"),
            &[("accept", "text/html")],
            None,
        )
        .text();
    let section = actions_section(&page);
    assert!(
        section.contains("hook:push") && section.contains("delivery d-42"),
        "{section}"
    );
    assert!(section.contains("token:default"), "{section}");
    // And the list names who started it.
    let list = s.call("GET", "/", &[("accept", "text/html")], None).text();
    assert!(
        list.contains("Started by") && list.contains("hook:push"),
        "{list}"
    );
}

#[test]
fn registrations_tokens_and_prunes_are_recorded_on_the_database() {
    let t = Test::new();
    let me = cli_actor();
    let flow = t.write(
        "once.yaml",
        "name: once\nsteps:\n  - id: a\n    run: echo a\n",
    );
    t.wf(&["run", flow.to_str().unwrap()]).code(0);
    t.wf(&["run", flow.to_str().unwrap()]).code(0);
    let tick = t.write(
        "tick.yaml",
        "name: tick\non:\n  schedule:\n    - every: 1h\nsteps:\n  - id: one\n    run: echo tick\n",
    );
    t.wf(&["workflow", "add", tick.to_str().unwrap()]).code(0);
    t.wf(&["schedule", "rm", "tick"]).code(0);
    t.wf(&["serve", "token", "add", "ci", "--scope", "read"])
        .code(0);
    t.wf(&["serve", "token", "revoke", "ci"]).code(0);
    t.wf(&["prune", "--older-than", "0s"]).code(0);
    let listed: Value =
        serde_json::from_str(&t.wf(&["db", "actions", "--json"]).stdout).expect("json");
    let rows: Vec<(String, String, String)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["action"].as_str().unwrap().to_string(),
                a["actor"].as_str().unwrap().to_string(),
                a["detail"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let kinds: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "prune",
            "token-revoke",
            "token-add",
            "schedule-rm",
            "workflow-add"
        ],
        "newest first: {rows:?}"
    );
    assert!(rows.iter().all(|r| r.1 == me), "{rows:?}");
    assert!(rows[0].2.starts_with("2 instances"), "how many: {rows:?}");
    assert_eq!(rows[1].2, "ci");
    // The pruned instances' own actions went with them.
    assert!(t.wf(&["list", "--json"]).stdout.trim() == "[]");

    // The same through the API and on the inspector's Database page.
    let s = Server::start(&t, &[], &[]);
    let api = s.get("/api/v1/db/actions").json();
    assert_eq!(api, listed);
    assert_eq!(
        s.get("/api/v1/db/actions?limit=1")
            .json()
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let page = s
        .call("GET", "/database", &[("accept", "text/html")], None)
        .text();
    let section = actions_section(&page);
    assert!(
        section.contains("prune") && section.contains(&me),
        "{section}"
    );
    // A person reads the table.
    let table = t.wf(&["db", "actions"]);
    assert!(
        table.stdout.contains("ACTION") && table.stdout.contains("token-add"),
        "{}",
        table.stdout
    );
}
