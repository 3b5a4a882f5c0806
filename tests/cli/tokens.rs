//! Named tokens and sessions of `wf serve` (issue 57, items 2 and 3):
//! scopes honoured by the API and the inspector, tokens kept as hashes
//! only, a revocation seen by every server of a database on its next
//! request, sessions that are not tokens (a cookie named per port, ended
//! by `POST /signout`, by idling past `--session-ttl` and with their
//! token), and who did what recorded as `token:NAME` / `session:NAME`.

use crate::Test;
use crate::durable::eventually;
use crate::serve::{Server, TOKEN};
use serde_json::{Value, json};

/// `wf serve token add NAME --scope SCOPE --json`: the token's text.
fn add(t: &Test, name: &str, scope: &str) -> String {
    let r = t.wf(&["serve", "token", "add", name, "--scope", scope, "--json"]);
    r.code(0);
    let v: Value = serde_json::from_str(&r.stdout).expect("json");
    assert_eq!(v["name"], name);
    assert_eq!(v["scope"], scope);
    let token = v["token"].as_str().expect("token").to_string();
    assert!(token.starts_with("wft_") && token.len() == 68, "{token}");
    token
}

fn bearer(token: &str) -> (&'static str, String) {
    ("authorization", format!("Bearer {token}"))
}

/// What the database holds, as bytes a grep reads: the SQLite files of
/// the test's folder, or PostgreSQL's tables as text.
fn database_bytes(t: &Test) -> Vec<u8> {
    if t.pg.is_some() {
        let mut out = String::new();
        for table in ["tokens", "sessions", "actions", "instances", "events"] {
            out.push_str(&t.psql(&format!("SELECT t::text FROM {table} t")));
        }
        return out.into_bytes();
    }
    let mut out = Vec::new();
    for e in std::fs::read_dir(t.path()).expect("dir").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("wf.db") {
            out.extend(std::fs::read(e.path()).unwrap_or_default());
        }
    }
    out
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

const GATE: &str = "name: gate\nsteps:\n  - id: g\n    wait_for_event: { name: go }\n";

#[test]
fn scopes_are_honoured_and_tokens_are_kept_only_as_hashes() {
    let t = Test::new();
    let (id, r) = t.run_yaml("gate.yaml", GATE, &[]);
    r.code(3);
    let viewer = add(&t, "viewer", "read");
    let ops = add(&t, "ops", "operate");
    // A name taken, a bad name and the server's own are refused.
    t.wf(&["serve", "token", "add", "ops", "--scope", "read"])
        .code(2);
    t.wf(&["serve", "token", "add", "default", "--scope", "read"])
        .code(2);
    t.wf(&["serve", "token", "add", "a b", "--scope", "read"])
        .code(2);
    t.wf(&["serve", "token", "add", "x", "--scope", "root"])
        .code(2);
    let s = Server::start(&t, &[], &[]);

    // `read` sees, and changes nothing: 403 naming the scope needed.
    let r = s.raw("GET", "/api/v1/instances", &[bearer(&viewer)], None);
    assert_eq!(r.status, 200, "{}", r.text());
    let r = s.raw(
        "POST",
        &format!("/api/v1/instances/{id}/signal"),
        &[bearer(&viewer), ("content-type", "application/json".into())],
        Some(json!({"event": "go"}).to_string().into_bytes()),
    );
    assert_eq!((r.status, r.code().as_str()), (403, "forbidden"));
    let said = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        said.contains("`operate`") && said.contains("`viewer`"),
        "{said}"
    );
    assert!(t.inspect(&id)["events"].as_array().unwrap().is_empty());
    // Its pages have no action buttons; the default token's do.
    let page = |token: &str| {
        s.raw(
            "GET",
            &format!("/instances/{id}"),
            &[bearer(token), ("accept", "text/html".into())],
            None,
        )
        .text()
    };
    assert!(!page(&viewer).contains("/act/cancel"));
    assert!(page(TOKEN).contains("/act/cancel"));

    // `operate` acts, recorded as its name; it manages no tokens.
    let r = s.raw(
        "POST",
        &format!("/api/v1/instances/{id}/signal"),
        &[bearer(&ops), ("content-type", "application/json".into())],
        Some(json!({"event": "go"}).to_string().into_bytes()),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let acts = t.inspect(&id)["actions"].clone();
    assert_eq!(acts[1]["action"], "signal");
    assert_eq!(acts[1]["actor"], "token:ops");
    assert!(
        page(TOKEN).contains("token:ops"),
        "the inspector names the token"
    );
    let r = s.raw(
        "POST",
        "/api/v1/tokens",
        &[bearer(&ops), ("content-type", "application/json".into())],
        Some(
            json!({"name": "more", "scope": "admin"})
                .to_string()
                .into_bytes(),
        ),
    );
    assert_eq!((r.status, r.code().as_str()), (403, "forbidden"));
    // `admin` (the server's own) does.
    let r = s.post("/api/v1/tokens", json!({"name": "bot", "scope": "operate"}));
    assert_eq!(r.status, 201, "{}", r.text());
    let bot = r.json()["token"].as_str().unwrap().to_string();
    let listed = s.get("/api/v1/tokens").json();
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bot", "ops", "viewer"]);
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v.get("hash").is_none())
    );

    // When a token was last used is kept (written apart from the request).
    eventually("ops' last use is kept", || {
        let v: Value =
            serde_json::from_str(&t.wf(&["serve", "token", "list", "--json"]).stdout).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "ops" && t["last_used_at"].is_string())
    });
    let shown = t.wf(&["serve", "token", "list"]);
    assert!(
        shown.stdout.contains("LAST USED") && shown.stdout.contains("viewer"),
        "{}",
        shown.stdout
    );

    // No token is anywhere on disk or in a log: only hashes.
    let db = database_bytes(&t);
    let log = s.log();
    for token in [&viewer, &ops, &bot] {
        assert!(!contains(&db, token), "a token is in the database");
        assert!(
            !log.contains(token.as_str()),
            "a token is in the server's log"
        );
    }

    // Revoked: refused from the next request.
    t.wf(&["serve", "token", "revoke", "ops"]).code(0);
    let r = s.raw("GET", "/api/v1/instances", &[bearer(&ops)], None);
    assert_eq!(r.status, 401);
    t.wf(&["serve", "token", "revoke", "ops"]).code(2);
    let r = s.raw("DELETE", "/api/v1/tokens/bot", &[bearer(TOKEN)], None);
    assert_eq!(r.status, 204, "{}", r.text());
    assert_eq!(
        s.raw("GET", "/api/v1/instances", &[bearer(&bot)], None)
            .status,
        401
    );
}

#[test]
fn sessions_are_per_port_and_end_with_signout_idleness_and_their_token() {
    let t = Test::new();
    let (id, r) = t.run_yaml("gate.yaml", GATE, &[]);
    r.code(3);
    let ana = add(&t, "ana", "operate");
    // Two servers of one database (and host).
    let a = Server::start(&t, &[], &[]);
    let b = Server::start(&t, &[], &[]);
    let port = |s: &Server| s.base.rsplit(':').next().unwrap().to_string();
    let on_a = a.sign_in(&ana);
    let on_b = b.sign_in(&ana);
    let (name_a, id_a) = on_a.split_once('=').unwrap();
    let (name_b, _) = on_b.split_once('=').unwrap();
    assert_eq!(name_a, format!("wf_session_{}", port(&a)));
    assert_eq!(name_b, format!("wf_session_{}", port(&b)));
    assert!(
        !id_a.contains(&ana[4..]) && id_a.len() == 64,
        "the cookie is not the token"
    );
    // A browser sends both cookies to both servers (one host): each
    // server reads its own.
    let both = format!("{on_a}; {on_b}");
    let get = |s: &Server, cookie: &str| {
        s.raw(
            "GET",
            "/api/v1/instances",
            &[("cookie", cookie.to_string())],
            None,
        )
        .status
    };
    assert_eq!(get(&a, &both), 200);
    assert_eq!(get(&b, &both), 200);
    // What a session does is recorded as `session:NAME`.
    let r = a.raw(
        "POST",
        &format!("/instances/{id}/act/signal"),
        &[
            ("cookie", both.clone()),
            ("origin", a.base.clone()),
            ("content-type", "application/x-www-form-urlencoded".into()),
        ],
        Some(b"event=go".to_vec()),
    );
    assert_eq!(r.status, 303, "{}", r.text());
    assert_eq!(t.inspect(&id)["actions"][1]["actor"], "session:ana");

    // Signing out on one ends that session only.
    let r = a.raw(
        "POST",
        "/signout",
        &[("cookie", on_a.clone()), ("origin", a.base.clone())],
        None,
    );
    assert_eq!(r.status, 303);
    assert!(r.header("set-cookie").unwrap().contains("Max-Age=0"));
    assert_eq!(get(&a, &on_a), 401);
    assert_eq!(get(&b, &on_b), 200);

    // Revoking the token ends it, and its sessions, on every server.
    let again = a.sign_in(&ana);
    let with_token = |s: &Server| {
        s.raw("GET", "/api/v1/instances", &[bearer(&ana)], None)
            .status
    };
    assert_eq!((with_token(&a), with_token(&b)), (200, 200));
    t.wf(&["serve", "token", "revoke", "ana"]).code(0);
    assert_eq!(get(&a, &again), 401);
    assert_eq!(get(&b, &on_b), 401);
    assert_eq!((with_token(&a), with_token(&b)), (401, 401));

    // A session idle past --session-ttl is over.
    let c = Server::start(&t, &["--session-ttl", "1s"], &[]);
    let mine = c.sign_in(TOKEN);
    assert_eq!(get(&c, &mine), 200);
    std::thread::sleep(std::time::Duration::from_millis(1_100));
    assert_eq!(get(&c, &mine), 401);
}
