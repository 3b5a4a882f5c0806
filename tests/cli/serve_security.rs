//! What `wf serve` refuses, through a real client: requests without the
//! token (the same answer whether or not what they ask for exists), a wrong
//! one or another server's, the token kept 0600 and never printed again,
//! ids that could be paths, SQL or very long, a 10 MiB signal, 1,000
//! requests at once, cross-site requests with the session cookie, CORS, and
//! random requests (none may crash it). Secrets never reach an answer.

use crate::Test;
use crate::serve::{PATIENCE, Server, TOKEN};
use serde_json::{Value, json};
use std::time::Instant;

/// A completed instance of a one-step workflow `one` (`one.yaml`); its id.
fn completed_one(t: &Test) -> String {
    let (id, ran) = t.run_yaml(
        "one.yaml",
        "name: one\nsteps:\n  - id: a\n    run: 'true'\n",
        &[],
    );
    ran.code(0);
    id
}

fn no_token(s: &Server, method: &str, path: &str) -> crate::serve::Resp {
    s.raw(method, path, &[], None)
}

#[test]
fn every_route_but_health_and_hooks_needs_the_token() {
    let t = Test::new();
    let id = completed_one(&t);
    let s = Server::start(&t, &[], &[]);
    let refused = no_token(&s, "GET", "/api/v1/instances");
    assert_eq!(refused.status, 401);
    assert_eq!(
        refused.header("www-authenticate").as_deref(),
        Some("Bearer")
    );
    let body = refused.body.clone();
    // The same answer for what exists, what does not, and what is no route.
    for (method, path) in [
        ("GET", format!("/api/v1/instances/{id}")),
        ("GET", "/api/v1/instances/doesnotexist".to_string()),
        ("GET", "/api/v1/nosuchroute".to_string()),
        ("GET", "/".to_string()),
        ("POST", format!("/api/v1/instances/{id}/cancel")),
        ("DELETE", "/api/v1/instances".to_string()),
        ("GET", "/metrics".to_string()),
        ("GET", "/api/v1/openapi.json".to_string()),
    ] {
        let r = no_token(&s, method, &path);
        assert_eq!((r.status, &r.body), (401, &body), "{method} {path}");
    }
    // Wrong tokens: a prefix, a longer one, another scheme.
    for auth in [
        format!("Bearer {}", &TOKEN[..TOKEN.len() - 1]),
        format!("Bearer {TOKEN}x"),
        format!("Basic {TOKEN}"),
        TOKEN.to_string(),
    ] {
        let r = s.raw(
            "GET",
            "/api/v1/instances",
            &[("authorization", auth.clone())],
            None,
        );
        assert_eq!(r.status, 401, "{auth}");
    }
    assert_eq!(no_token(&s, "GET", "/healthz").status, 200);
    // The token is never in the log.
    assert!(!s.log().contains(TOKEN), "{}", s.log());
    // Nothing was written by the refused requests.
    assert_eq!(t.inspect(&id)["status"], "completed");
}

#[test]
fn a_generated_token_is_kept_0600_printed_once_and_no_other_servers_token_works() {
    use std::os::unix::fs::PermissionsExt as _;
    let t = Test::new();
    let other = Test::new();
    let start = |t: &Test| {
        let mut cmd = t.cmd();
        cmd.args(["serve", "--listen", "127.0.0.1:0"])
            .env_remove("WF_SERVE_TOKEN")
            .env("XDG_STATE_HOME", t.path().join("state"));
        Server::spawn(cmd, String::new())
    };
    let first = start(&t);
    let file = t.path().join("state/wf/serve-token");
    let token = std::fs::read_to_string(&file).unwrap();
    assert_eq!(token.len(), 64);
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let log = first.log();
    assert!(log.contains(&format!("?token={token}")), "{log}");
    // The sign-in link sets the session cookie and drops the token from the address.
    let r = first.raw(
        "GET",
        &format!("/api/v1/queues?token={token}&x=1"),
        &[],
        None,
    );
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location").as_deref(), Some("/api/v1/queues?x=1"));
    let cookie = r.header("set-cookie").unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let session = cookie.split(';').next().unwrap().to_string();
    let r = first.raw(
        "GET",
        "/api/v1/queues",
        &[("cookie", session.clone())],
        None,
    );
    assert_eq!(r.status, 200);
    // A cookie-authenticated change must come from this site.
    let r = first.raw(
        "POST",
        "/api/v1/instances/x/cancel",
        &[
            ("cookie", session.clone()),
            ("origin", "https://evil.example".into()),
        ],
        None,
    );
    assert_eq!((r.status, r.code().as_str()), (403, "cross_site"));
    let r = first.raw(
        "POST",
        "/api/v1/instances/x/cancel",
        &[("cookie", session), ("sec-fetch-site", "cross-site".into())],
        None,
    );
    assert_eq!(r.status, 403);
    // A wrong sign-in token is refused.
    assert_eq!(first.raw("GET", "/?token=nope", &[], None).status, 401);
    let log = first.log();
    let access: Vec<&str> = log.lines().filter(|l| l.starts_with("access ")).collect();
    assert!(!access.is_empty());
    assert!(
        access.iter().all(|l| !l.contains(token.trim())),
        "{access:?}"
    );
    drop(first);
    // Started again: the same token, not printed.
    let again = start(&t);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), token);
    assert!(!again.log().contains(&token), "{}", again.log());
    assert!(again.log().contains("serve-token"), "{}", again.log());
    // Another server's token opens nothing here.
    let elsewhere = start(&other);
    let their = std::fs::read_to_string(other.path().join("state/wf/serve-token")).unwrap();
    assert_ne!(their, token);
    let r = again.raw(
        "GET",
        "/api/v1/instances",
        &[("authorization", format!("Bearer {their}"))],
        None,
    );
    assert_eq!(r.status, 401);
    let r = again.raw(
        "GET",
        "/api/v1/instances",
        &[("authorization", format!("Bearer {token}"))],
        None,
    );
    assert_eq!(r.status, 200);
    drop(elsewhere);
}

#[test]
fn hostile_ids_and_bodies_are_refused_cleanly() {
    let t = Test::new();
    let (id, ran) = t.run_yaml(
        "gate.yaml",
        "name: gate\nsteps:\n  - id: g\n    wait_for_event: { name: go }\n",
        &[],
    );
    ran.code(3);
    let s = Server::start(&t, &[], &[]);
    let before = t.dump();
    let long = "a".repeat(10_000);
    for path in [
        "/api/v1/instances/..%2F..%2Fetc%2Fpasswd".to_string(),
        "/api/v1/instances/%2e%2e".to_string(),
        format!("/api/v1/instances/{long}"),
        "/api/v1/instances/1'%20OR%20'1'='1".to_string(),
        "/api/v1/instances/%27%3B%20DROP%20TABLE%20instances%3B--".to_string(),
        "/api/v1/instances/%E2%98%83".to_string(),
        "/api/v1/instances/%00".to_string(),
        "/api/v1/instances/%ff%fe".to_string(),
        "/api/v1/workflows/..%2F..".to_string(),
        format!("/api/v1/workflows/{long}"),
    ] {
        let r = s.get(&path);
        assert!(
            matches!(r.status, 400 | 404),
            "{path}: {} {}",
            r.status,
            r.text()
        );
        let _ = r.code();
    }
    let r = s.call("POST", "/hooks/..%2F..%2Fetc", &[], Some(b"{}".to_vec()));
    assert_eq!((r.status, r.code().as_str()), (404, "not_found"));
    // A 10 MiB signal payload: refused whole.
    let big = json!({ "event": "go", "data": "x".repeat(10 * 1024 * 1024) }).to_string();
    let r = s.call(
        "POST",
        &format!("/api/v1/instances/{id}/signal"),
        &[("content-type", "application/json")],
        Some(big.into_bytes()),
    );
    assert_eq!((r.status, r.code().as_str()), (413, "too_large"));
    assert_eq!(t.dump(), before, "a refused request wrote something");
    assert_eq!(t.inspect(&id)["status"], "waiting");
}

#[test]
fn a_thousand_requests_at_once_are_all_answered() {
    let t = Test::new();
    let id = completed_one(&t);
    let s = Server::start(&t, &[], &[]);
    let auth = vec![("authorization", format!("Bearer {TOKEN}"))];
    let futures: Vec<_> = (0..1000)
        .map(|i| {
            let path = match i % 4 {
                0 => "/api/v1/instances".to_string(),
                1 => format!("/api/v1/instances/{id}"),
                2 => "/metrics".to_string(),
                _ => format!("/api/v1/instances/{id}/logs"),
            };
            s.request("GET", &path, &auth, None)
        })
        .collect();
    let started = Instant::now();
    let answers = s.all(futures);
    assert!(started.elapsed() < PATIENCE);
    let bad: Vec<_> = answers
        .iter()
        .filter(|r| r.status != 200)
        .map(|r| (r.status, r.text()))
        .collect();
    assert!(
        bad.is_empty(),
        "{} of 1000 failed: {:?}",
        bad.len(),
        &bad[..bad.len().min(3)]
    );
}

#[test]
fn secrets_never_reach_an_answer_in_any_encoding() {
    let t = Test::new().env("API_SECRET", "hunter2-sekrit/+=");
    let yaml = "name: leaky
secrets: [API_SECRET]
steps:
  - id: say
    run: |
      echo \"the secret is $TOKEN\"
      echo \"again: ${{ secrets.API_SECRET }}\" >&2
      echo \"value=$TOKEN\" >> \"$WF_OUTPUT\"
    env: { TOKEN: \"${{ secrets.API_SECRET }}\" }
  - id: wait
    needs: [say]
    wait_for_event: { name: go }
";
    let (id, ran) = t.run_yaml("leaky.yaml", yaml, &[]);
    ran.code(3);
    let s = Server::start(&t, &[], &[("API_SECRET", "hunter2-sekrit/+=")]);
    // The secret in a signal payload is masked as it is stored.
    let r = s.post(
        &format!("/api/v1/instances/{id}/signal"),
        json!({ "event": "nothing", "data": { "k": "hunter2-sekrit/+=" } }),
    );
    assert_eq!(r.status, 200);
    let secret = "hunter2-sekrit/+=";
    let forms = [
        secret.to_string(),
        serde_json::to_string(secret)
            .unwrap()
            .trim_matches('"')
            .to_string(),
        "hunter2-sekrit%2F%2B%3D".to_string(),
        "hunter2".to_string(),
        base64(secret.as_bytes()),
    ];
    for path in [
        format!("/api/v1/instances/{id}"),
        format!("/api/v1/instances/{id}?attempts=1"),
        format!("/api/v1/instances/{id}/attempts"),
        format!("/api/v1/instances/{id}/logs"),
        format!("/api/v1/instances/{id}/logs/say"),
        format!("/api/v1/instances/{id}/trace"),
        format!("/api/v1/instances/{id}/events"),
        format!("/api/v1/instances/{id}/result"),
        "/api/v1/instances".to_string(),
        "/metrics".to_string(),
    ] {
        let r = s.get(&path);
        assert_eq!(r.status, 200, "{path}");
        let text = r.text();
        for f in &forms {
            assert!(
                !text.contains(f.as_str()),
                "{path} shows the secret as {f}: {text}"
            );
        }
    }
    assert!(
        s.get(&format!("/api/v1/instances/{id}/logs/say"))
            .text()
            .contains("***")
    );
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            }
        }
    }
    out
}

#[test]
fn cors_is_off_and_a_non_loopback_address_without_tls_warns() {
    let t = Test::new();
    let s = Server::start(&t, &[], &[]);
    let r = s.raw(
        "OPTIONS",
        "/api/v1/instances",
        &[
            ("origin", "https://elsewhere.example".into()),
            ("access-control-request-method", "GET".into()),
        ],
        None,
    );
    assert!(r.header("access-control-allow-origin").is_none());
    let r = s.call(
        "GET",
        "/api/v1/instances",
        &[("origin", "https://elsewhere.example")],
        None,
    );
    assert_eq!(r.status, 200);
    assert!(r.header("access-control-allow-origin").is_none());
    drop(s);
    let mut cmd = t.cmd();
    cmd.args(["serve", "--listen", "0.0.0.0:0"])
        .env("WF_SERVE_TOKEN", TOKEN);
    let open = Server::spawn(cmd, TOKEN.into());
    assert!(open.log().contains("without TLS"), "{}", open.log());
}

#[test]
fn https_with_the_given_certificate() {
    let t = Test::new();
    let cert = t.path().join("cert.pem");
    let key = t.path().join("key.pem");
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl (Debian: apt-get install openssl)");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let s = Server::start(
        &t,
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
        &[],
    );
    assert!(s.base.starts_with("https://"), "{}", s.base);
    let r = s.get("/api/v1/instances");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json(), json!([]));
    // Under TLS the session cookie is Secure.
    let r = s.raw("GET", &format!("/?token={}", s.token), &[], None);
    assert_eq!(r.status, 303);
    let cookie = r.header("set-cookie").expect("a session cookie");
    assert!(
        cookie.contains("; Secure") && cookie.contains("HttpOnly"),
        "{cookie}"
    );
    // A bad key file: a one-line error, exit 2… or 1; never a panic.
    let r = t.wf(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        cert.to_str().unwrap(),
    ]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("--tls-key"), "{}", r.stderr);
    assert!(!r.stderr.contains("panicked"));
}

#[test]
fn random_requests_never_crash_the_server() {
    let t = Test::new();
    let id = completed_one(&t);
    let s = Server::start(&t, &[], &[]);
    let mut rng = crate::XorShift(0x5eed_f00d_cafe_0001);
    let methods = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"];
    let pieces = [
        "api",
        "v1",
        "instances",
        "workflows",
        "hooks",
        "metrics",
        "healthz",
        "logs",
        "trace",
        "result",
        "signal",
        "cancel",
        "resume",
        "retry",
        "restart",
        "attempts",
        "events",
        "openapi.json",
        "queues",
        "schedules",
        &id,
        "..",
        "%2e%2e",
        "%00",
        "%ff",
        "☃",
        "",
        "a?b=c",
        "{id}",
        "*",
    ];
    let queries = [
        "",
        "?limit=-1",
        "?wait=1ms",
        "?follow=1&attempt=x",
        "?cursor=%00",
        "?label=a=b&label",
        "?since=1y",
    ];
    let bodies: [&[u8]; 6] = [
        b"",
        b"{}",
        b"[]",
        b"{\"event\": 3}",
        b"\xff\xfe\x00",
        b"{\"inputs\": {\"a\": [1, {\"b\": null}]}}",
    ];
    let mut futures = Vec::new();
    for _ in 0..600 {
        let n = 1 + rng.below(5) as usize;
        let path: Vec<&str> = (0..n)
            .map(|_| pieces[rng.below(pieces.len() as u64) as usize])
            .collect();
        let path = format!(
            "/{}{}",
            path.join("/"),
            queries[rng.below(queries.len() as u64) as usize]
        );
        let method = methods[rng.below(methods.len() as u64) as usize];
        let mut headers = vec![("authorization", format!("Bearer {TOKEN}"))];
        if rng.below(3) == 0 {
            headers.push(("content-type", "application/json".into()));
        }
        if rng.below(5) == 0 {
            headers.push(("x-hub-signature-256", "sha256=zz".into()));
        }
        if rng.below(7) == 0 {
            headers.push(("idempotency-key", "k".repeat(rng.below(400) as usize)));
        }
        let body = bodies[rng.below(bodies.len() as u64) as usize].to_vec();
        futures.push(s.request(method, &path, &headers, Some(body)));
    }
    for r in s.all(futures) {
        assert!(
            r.status < 500 || r.status == 503,
            "{} {}",
            r.status,
            r.text()
        );
        if r.status >= 400 && !r.body.is_empty() {
            // The API's errors are JSON; the inspector's pages' are pages.
            if r.header("content-type")
                .is_some_and(|c| c.starts_with("text/html"))
            {
                assert!(r.text().starts_with("<!DOCTYPE html>"), "{}", r.text());
            } else {
                let v: Value = serde_json::from_slice(&r.body).expect("an error is JSON");
                assert!(v["error"]["code"].is_string());
            }
        }
    }
    // Still serving, and nothing panicked.
    assert_eq!(s.get("/healthz").status, 200);
    assert!(!s.log().contains("panicked"), "{}", s.log());
}

#[test]
fn a_client_that_never_finishes_its_headers_is_dropped_and_others_are_served() {
    use std::io::{Read as _, Write as _};
    let t = Test::new();
    let s = Server::start(&t, &[], &[]);
    let addr = s.base.trim_start_matches("http://").to_string();
    let mut slow = std::net::TcpStream::connect(&addr).unwrap();
    slow.write_all(b"GET /api/v1/instances HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    // Others are served meanwhile. (Not on a kept-alive connection: an idle
    // one is closed after the same 10 s, and a request sent on it just then
    // would race its closing.)
    let fresh = || {
        s.raw("GET", "/healthz", &[("connection", "close".into())], None)
            .status
    };
    assert_eq!(fresh(), 200);
    let started = Instant::now();
    slow.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut buf = Vec::new();
    let _ = slow.read_to_end(&mut buf);
    let waited = started.elapsed();
    assert!(waited < PATIENCE, "the connection was held for {waited:?}");
    // Closed, with at most a 408 said.
    let text = String::from_utf8_lossy(&buf);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "{text}"
    );
    assert_eq!(s.get("/healthz").status, 200);
}

/// Every answer carries the security headers (SPEC §8; issue 54, item 3),
/// whatever made it: a page, the API, an asset, the metrics, a refusal
/// without the token (HTML or JSON), an unknown path, a method not allowed,
/// a body too large, a webhook refused, the health check. The pages work
/// under that policy: the browser tests (`inspector::`) find no console
/// error on any page, and a violation of it is one.
#[test]
fn every_answer_carries_the_security_headers() {
    let t = Test::new();
    let id = completed_one(&t);
    let s = Server::start(&t, &[], &[]);
    let html = || vec![("accept", "text/html".to_string())];
    let answers = vec![
        ("page", s.get("/")),
        ("instance page", s.get(&format!("/instances/{id}"))),
        ("api", s.get("/api/v1/instances")),
        ("asset", s.get("/assets/wf.js")),
        ("metrics", s.get("/metrics")),
        ("openapi", s.get("/api/v1/openapi.json")),
        ("no token, api", no_token(&s, "GET", "/api/v1/instances")),
        ("no token, page", s.raw("GET", "/workflows", &html(), None)),
        ("unknown path", s.get("/api/v1/nosuchroute")),
        (
            "method not allowed",
            s.call("DELETE", "/api/v1/instances", &[], None),
        ),
        (
            "too large",
            s.call(
                "POST",
                &format!("/api/v1/instances/{id}/signal"),
                &[("content-type", "application/json")],
                Some(vec![b' '; 10 << 20]),
            ),
        ),
        ("unknown hook", no_token(&s, "POST", "/hooks/nope")),
        ("health", no_token(&s, "GET", "/healthz")),
    ];
    for (what, r) in &answers {
        let csp = r.header("content-security-policy").unwrap_or_default();
        for directive in [
            "default-src 'self'",
            "script-src 'self'",
            "frame-ancestors 'none'",
            "object-src 'none'",
            "base-uri 'none'",
        ] {
            assert!(
                csp.contains(directive),
                "{what} ({}): CSP `{csp}`",
                r.status
            );
        }
        // No inline script, and nothing from another origin.
        assert!(
            !csp.contains("unsafe-eval") && !csp.contains("script-src 'self' 'unsafe-inline'"),
            "{what}: {csp}"
        );
        assert!(!csp.contains("http"), "{what}: {csp}");
        assert_eq!(
            r.header("x-content-type-options").as_deref(),
            Some("nosniff"),
            "{what} ({})",
            r.status
        );
        assert_eq!(
            r.header("referrer-policy").as_deref(),
            Some("same-origin"),
            "{what} ({})",
            r.status
        );
        assert_eq!(
            r.header("x-frame-options").as_deref(),
            Some("DENY"),
            "{what}"
        );
        if r.status == 401 {
            assert!(
                r.header("www-authenticate").is_some(),
                "{what}: a 401 says how to authenticate"
            );
        }
    }
    let statuses: Vec<u16> = answers.iter().map(|(_, r)| r.status).collect();
    assert!(
        statuses.contains(&401) && statuses.contains(&404) && statuses.contains(&413),
        "{statuses:?}"
    );
}

/// What a link can make a page say, and ask of the server (issue 54, item
/// 2): an instance page's notice is one of a fixed set named by a code (an
/// address with any text says nothing), an unknown page is an HTML page
/// for a browser (JSON for a client), and the reserved `wf.` labels (the
/// hook that started an instance) cannot be set by a start, a run or a
/// workflow file.
#[test]
fn notices_are_a_fixed_set_unknown_pages_are_pages_and_wf_labels_are_reserved() {
    let t = Test::new();
    let id = completed_one(&t);
    t.wf(&["workflow", "add", "one.yaml"]).code(0);
    let s = Server::start(&t, &[], &[]);
    let forged = s.get(&format!(
        "/instances/{id}?notice=Your+account+is+locked%2C+call+555-0100"
    ));
    assert_eq!(forged.status, 200);
    assert!(!forged.text().contains("555-0100"), "{}", forged.text());
    let said = s.get(&format!("/instances/{id}?notice=canceling")).text();
    assert!(said.contains("Asked to cancel."), "{said}");
    // An unknown page: HTML for a browser, JSON for a client.
    let page = s.call("GET", "/no/such/page", &[("accept", "text/html")], None);
    assert_eq!(page.status, 404);
    assert!(
        page.header("content-type")
            .unwrap_or_default()
            .starts_with("text/html"),
        "{:?}",
        page.header("content-type")
    );
    assert!(page.text().contains("Error 404"), "{}", page.text());
    let api = s.get("/no/such/page");
    assert_eq!((api.status, api.code().as_str()), (404, "not_found"));
    // `wf.` labels are wf's own.
    let before = t.wf(&["list", "--json"]).code(0).stdout.clone();
    let r = s.post(
        "/api/v1/workflows/one/instances",
        json!({ "labels": { "wf.webhook": "forged" } }),
    );
    assert_eq!(
        (r.status, r.code().as_str()),
        (400, "invalid"),
        "{}",
        r.text()
    );
    assert!(r.text().contains("wf."), "{}", r.text());
    let ran = t.wf(&["run", "one.yaml", "--label", "wf.webhook=forged"]);
    ran.code(2);
    assert!(ran.stderr.contains("wf's own"), "{}", ran.stderr);
    t.write(
        "labeled.yaml",
        "name: labeled\nlabels: { wf.origin: x }\nsteps:\n  - id: a\n    run: 'true'\n",
    );
    let ran = t.wf(&["validate", "labeled.yaml"]);
    ran.code(2);
    assert!(ran.stderr.contains("wf's own"), "{}", ran.stderr);
    assert_eq!(
        t.wf(&["list", "--json"]).code(0).stdout,
        before,
        "nothing started"
    );
}
