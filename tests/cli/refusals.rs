//! What `wf serve` refuses, and how (issue 54, item 2): a request body or
//! query with a field its route does not take (400 naming it, nothing
//! done), a sign-in's `next` that is not a path of this site (the one
//! check: home instead, never a 500 or another host), a database locked by
//! another process or unreachable (503 `unavailable`, nothing recorded),
//! and a SQLite file deleted or replaced under the server (`/healthz`
//! fails; writes refused rather than made to a file nobody reads).

use crate::Test;
use crate::serve::{Server, TOKEN, until};
use serde_json::json;

const SLEEPER: &str =
    "name: nap\ninputs:\n  n: { default: 1 }\nsteps:\n  - id: nap\n    sleep: 1h\n";

/// A server with workflow `nap` registered, and one instance of it asleep.
fn with_sleeper(t: &Test) -> (Server, String) {
    let path = t.write("nap.yaml", SLEEPER);
    t.wf(&["workflow", "add", path.to_str().unwrap()]).code(0);
    let (id, ran) = t.run_yaml("nap.yaml", SLEEPER, &[]);
    ran.code(3);
    (Server::start(t, &[], &[]), id)
}

#[test]
fn bodies_and_queries_with_what_a_route_does_not_take_are_refused_naming_it() {
    let t = Test::new();
    let (s, id) = with_sleeper(&t);
    let refused = |r: crate::serve::Resp, names: &str| {
        assert_eq!(r.status, 400, "{}", r.text());
        assert_eq!(r.code(), "invalid", "{}", r.text());
        let message = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(
            message.contains(names),
            "{message:?} does not name {names:?}"
        );
    };
    let post_raw = |path: &str, body: &str| {
        s.call(
            "POST",
            path,
            &[("content-type", "application/json")],
            Some(body.as_bytes().to_vec()),
        )
    };
    // Routes that take no body.
    for action in ["cancel", "terminate", "retry"] {
        let path = format!("/api/v1/instances/{id}/{action}");
        refused(s.post(&path, json!({"reason": "x"})), "`reason`");
        refused(post_raw(&path, "garbage"), "not JSON");
        refused(post_raw(&path, "[]"), "a JSON object");
    }
    // Wrong types and misspelt fields of the routes that take one.
    refused(
        s.post(
            &format!("/api/v1/instances/{id}/resume"),
            json!({"now": "yes"}),
        ),
        "`now`",
    );
    refused(
        s.post(
            &format!("/api/v1/instances/{id}/signal"),
            json!({"event": "go", "payload": {}}),
        ),
        "`payload`",
    );
    refused(
        s.post(
            &format!("/api/v1/instances/{id}/signal"),
            json!({"event": 3}),
        ),
        "`event`",
    );
    refused(
        s.post(
            &format!("/api/v1/instances/{id}/restart"),
            json!({"from": "nap", "as": 7}),
        ),
        "`as`",
    );
    refused(
        s.post(
            "/api/v1/workflows/nap/instances",
            json!({"input": {"n": 2}}),
        ),
        "`input`",
    );
    refused(
        s.post(
            "/api/v1/workflows/nap/instances",
            json!({"labels": {"team": 7}}),
        ),
        "`labels.team`",
    );
    refused(
        s.post(
            "/api/v1/workflows/nap/instances",
            json!({"labels": {"wf.webhook": "forged"}}),
        ),
        "`wf.webhook`",
    );
    // Query parameters, by route; a page's answer is a page.
    let page = s.call("GET", "/?stauts=failed", &[("accept", "text/html")], None);
    assert_eq!(page.status, 400);
    assert!(
        page.text().contains("unknown query parameter `stauts`"),
        "{}",
        page.text()
    );
    assert!(
        page.text().starts_with("<!DOCTYPE html>"),
        "{}",
        page.text()
    );
    assert_eq!(
        s.call(
            "GET",
            "/?status=sleeping&queue=k",
            &[("accept", "text/html")],
            None
        )
        .status,
        200
    );
    // A form's fields other than its own.
    let form = s.call(
        "POST",
        &format!("/instances/{id}/act/cancel"),
        &[
            ("content-type", "application/x-www-form-urlencoded"),
            ("accept", "text/html"),
        ],
        Some(b"reason=x".to_vec()),
    );
    assert_eq!(form.status, 400, "{}", form.text());
    assert!(
        form.text().contains("unknown form field `reason`"),
        "{}",
        form.text()
    );
    refused(s.get("/api/v1/instances?stauts=failed"), "`stauts`");
    refused(s.get("/api/v1/queues?key=k"), "`key`");
    refused(
        s.get(&format!("/api/v1/instances/{id}?attempt=1")),
        "`attempt`",
    );
    assert_eq!(
        s.get("/api/v1/instances?status=sleeping&limit=5").status,
        200
    );
    assert_eq!(
        s.get(&format!("/api/v1/instances/{id}?attempts=1")).status,
        200
    );
    // Nothing refused was done: one instance, still asleep, uncanceled.
    let list = t.wf(&["list", "--json"]).json();
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
    assert_eq!(t.inspect(&id)["status"], "sleeping");
    // What the routes do take still works.
    assert_eq!(
        s.post(&format!("/api/v1/instances/{id}/cancel"), json!({}))
            .status,
        202
    );
}

#[test]
fn a_sign_in_goes_only_to_a_path_of_this_site() {
    let t = Test::new();
    let s = Server::start(&t, &[], &[]);
    let sign_in = |token: &str, next: &str| {
        let body = form_urlencoded::Serializer::new(String::new())
            .append_pair("token", token)
            .append_pair("next", next)
            .finish();
        s.raw(
            "POST",
            "/signin",
            &[(
                "content-type",
                "application/x-www-form-urlencoded".to_string(),
            )],
            Some(body.into_bytes()),
        )
    };
    let cases = [
        ("/queues?x=1", "/queues?x=1"),
        ("/\t/evil.example", "/"),
        ("/\n/evil.example", "/"),
        ("/a\r\nSet-Cookie: forged=1", "/"),
        ("//evil.example", "/"),
        ("/\\evil.example", "/"),
        ("https://evil.example/", "/"),
    ];
    for (next, to) in cases {
        let r = sign_in(TOKEN, next);
        assert!(
            matches!(r.status, 302 | 303 | 307),
            "{next:?}: {} {}",
            r.status,
            r.text()
        );
        assert_eq!(r.header("location").as_deref(), Some(to), "{next:?}");
        assert!(
            r.header("set-cookie")
                .is_some_and(|c| !c.contains("forged"))
        );
        // A wrong token: the form again, carrying the same checked `next`.
        let r = sign_in("wrong", next);
        assert_eq!(r.status, 401, "{next:?}");
        let page = r.text();
        assert!(
            page.contains(&format!(
                "name=\"next\" value=\"{}\"",
                to.replace('&', "&amp;")
            )),
            "{next:?}: {page}"
        );
    }
}

/// SQLite: another process holds the database's lock past the server's
/// busy timeout: a start answers 503 `unavailable` and records nothing.
#[test]
fn a_locked_database_answers_503_and_records_nothing() {
    let t = Test::new();
    if t.sqlite_only("a database lock is SQLite's") {
        return;
    }
    let path = t.write("nap.yaml", SLEEPER);
    t.wf(&["workflow", "add", path.to_str().unwrap()]).code(0);
    let s = Server::start(&t, &[], &[("WF_BUSY_TIMEOUT_MS", "300")]);
    let db = t.path().join("wf.db");
    // A writer holding the lock until told to let go.
    let mut holder = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys\n\
             c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
             c.execute('BEGIN EXCLUSIVE')\n\
             print('locked', flush=True)\n\
             sys.stdin.read()\n\
             c.execute('ROLLBACK')\n",
            db.to_str().unwrap(),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "locked");
    let r = s.post("/api/v1/workflows/nap/instances", json!({}));
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.code(), "unavailable");
    assert!(r.text().contains("locked"), "{}", r.text());
    drop(holder.stdin.take());
    holder.wait().unwrap();
    assert_eq!(
        t.wf(&["list", "--json"]).json().as_array().map(Vec::len),
        Some(0)
    );
    // Free again: the same start goes through.
    assert_eq!(
        s.post("/api/v1/workflows/nap/instances", json!({})).status,
        201
    );
}

/// PostgreSQL: the server unreachable (every connection cut, none made
/// again within `WF_DB_RETRY`): `/healthz` and a start answer 503
/// `unavailable`, and nothing is recorded.
#[test]
fn an_unreachable_database_answers_503() {
    let Some(mut t) = crate::pg::pg_test() else {
        return;
    };
    let path = t.write("nap.yaml", SLEEPER);
    t.wf(&["workflow", "add", path.to_str().unwrap()]).code(0);
    let (url, schema) = t.pg.clone().expect("a PostgreSQL run");
    let proxy = crate::proxy::Proxy::start(crate::pg::host_port(&url));
    t.pg = Some((proxy.url(&url), schema.clone()));
    let s = Server::start(&t, &[], &[("WF_DB_RETRY", "500ms")]);
    assert_eq!(s.get("/healthz").status, 200);
    proxy.down();
    let r = s.get("/healthz");
    assert_eq!(
        (r.status, r.code()),
        (503, "unavailable".to_string()),
        "{}",
        r.text()
    );
    let r = s.post("/api/v1/workflows/nap/instances", json!({}));
    assert_eq!(
        (r.status, r.code()),
        (503, "unavailable".to_string()),
        "{}",
        r.text()
    );
    t.pg = Some((url, schema));
    assert_eq!(
        t.wf(&["list", "--json"]).json().as_array().map(Vec::len),
        Some(0)
    );
}

/// SQLite: the file deleted, then another put in its place, while the
/// server runs: `/healthz` fails with what became of it, and a start is
/// refused (503) rather than written to the deleted file and lost.
#[test]
fn healthz_fails_and_writes_are_refused_when_the_database_file_is_gone_or_replaced() {
    let t = Test::new();
    if t.sqlite_only("a database file is SQLite's") {
        return;
    }
    let path = t.write("nap.yaml", SLEEPER);
    t.wf(&["workflow", "add", path.to_str().unwrap()]).code(0);
    let s = Server::start(&t, &["--worker", "--poll", "50ms"], &[]);
    assert_eq!(s.get("/healthz").status, 200);
    let db = t.path().join("wf.db");
    let moved = t.path().join("moved.db");
    std::fs::rename(&db, &moved).unwrap();
    let r = s.get("/healthz");
    assert_eq!((r.status, r.code()), (503, "unavailable".to_string()));
    assert!(r.text().contains("is gone"), "{}", r.text());
    let r = s.post("/api/v1/workflows/nap/instances", json!({}));
    assert_eq!(r.status, 503, "{}", r.text());
    // The in-process worker claims nothing more either, and says why.
    until("the worker to say the file is gone", || {
        s.log().contains("is gone")
    });
    // Another database in its place: still refused, as replaced.
    std::fs::copy(&moved, &db).unwrap();
    let r = s.get("/healthz");
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.text().contains("replaced"), "{}", r.text());
    assert_eq!(
        s.post("/api/v1/workflows/nap/instances", json!({})).status,
        503
    );
    // Nothing was written anywhere: no instance in either file.
    for file in [&db, &moved] {
        let n = crate::python_sqlite(
            file,
            "import sqlite3, sys\nprint(sqlite3.connect(sys.argv[1]).execute('SELECT count(*) FROM instances').fetchone()[0])",
        );
        assert_eq!(n.trim(), "0", "{}", file.display());
    }
}
