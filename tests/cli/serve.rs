//! `wf serve` through a real HTTP client (reqwest) on loopback: the API's
//! reads give what the CLI's `--json` gives, its actions do what the CLI's
//! do, the registry (`wf workflow add|rm|list`) names what it starts, and
//! the server stops gracefully. The helpers here start a server for a
//! [`Test`] and call it; `webhooks.rs`, `serve_security.rs` and
//! `metrics.rs` use them too.
//!
//! Its tests by topic, beside the ones here: `actions.rs` (in `serve/`).

mod actions;
pub(crate) mod stats;

use crate::{Ran, Test};
use serde_json::{Value, json};
use std::io::BufRead as _;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The token the tests' servers take from `WF_SERVE_TOKEN`.
pub(crate) const TOKEN: &str = "test-token-0123456789abcdef";

/// How long a condition is awaited before a test fails.
pub(crate) const PATIENCE: Duration = Duration::from_secs(60);

/// A running `wf serve`.
pub(crate) struct Server {
    child: Option<Child>,
    pub base: String,
    pub token: String,
    /// Everything it printed on stderr so far.
    pub log: Arc<Mutex<String>>,
    client: reqwest::Client,
    rt: tokio::runtime::Runtime,
}

/// An answer.
#[derive(Debug)]
pub(crate) struct Resp {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {} {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }

    /// The error code of an `{error: {code, message}}` answer.
    pub fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("no error code: {}", self.text()))
            .to_string()
    }
}

impl Server {
    /// `wf serve --listen 127.0.0.1:0 EXTRA…` with the token [`TOKEN`] and
    /// `envs`; waits until it listens.
    pub fn start(t: &Test, extra: &[&str], envs: &[(&str, &str)]) -> Server {
        let mut cmd = t.cmd();
        cmd.args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra)
            .env("WF_SERVE_TOKEN", TOKEN)
            .env("XDG_STATE_HOME", t.path().join("state"))
            .env("WF_LEASE_TTL", "5s");
        for (k, v) in envs {
            if v.is_empty() {
                cmd.env_remove(k);
            } else {
                cmd.env(k, v);
            }
        }
        Server::spawn(cmd, TOKEN.to_string())
    }

    /// Starts `cmd` (a `wf serve`) and waits until it listens.
    pub fn spawn(mut cmd: std::process::Command, token: String) -> Server {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn wf serve");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut l = sink.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        });
        let start = Instant::now();
        let base = loop {
            let text = log.lock().unwrap().clone();
            if let Some(rest) = text.split("serving ").nth(1)
                && let Some(url) = rest.split(" on ").nth(1)
                && let Some(url) = url.split_whitespace().next()
            {
                break url.to_string();
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("wf serve exited ({status}) before it listened:\n{text}");
            }
            assert!(
                start.elapsed() < PATIENCE,
                "wf serve did not listen:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        // Connections idle longer than 5 s are not reused: the server closes
        // one idle for 10 s, and a request sent on it just then would race
        // its closing (as any HTTP client's would).
        let client = reqwest::Client::builder()
            .no_proxy()
            .pool_idle_timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .danger_accept_invalid_certs(true)
            .build()
            .expect("client");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        Server {
            child: Some(child),
            base,
            token,
            log,
            client,
            rt,
        }
    }

    /// Signs in with `token` as a browser does (`/?token=TOKEN`): the
    /// `Cookie` header value of the session it starts.
    pub fn sign_in(&self, token: &str) -> String {
        let r = self.raw("GET", &format!("/?token={token}"), &[], None);
        assert_eq!(r.status, 303, "{}", r.text());
        let set = r.header("set-cookie").expect("a session cookie");
        set.split(';').next().expect("name=value").to_string()
    }

    /// `METHOD PATH` with the token, `headers` and `body`.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Resp {
        let mut all = vec![("authorization", format!("Bearer {}", self.token))];
        all.extend(headers.iter().map(|(k, v)| (*k, v.to_string())));
        self.raw(method, path, &all, body)
    }

    /// `METHOD PATH` with exactly `headers` (no token unless given).
    pub fn raw(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, String)],
        body: Option<Vec<u8>>,
    ) -> Resp {
        let fut = self.request(method, path, headers, body);
        self.rt.block_on(fut)
    }

    /// The request, to await (many at once: [`Server::all`]).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, String)],
        body: Option<Vec<u8>>,
    ) -> impl std::future::Future<Output = Resp> + use<> {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        if let Some(b) = body {
            req = req.body(b);
        }
        async move {
            let r = req.send().await.expect("request answered");
            let status = r.status().as_u16();
            let headers = r.headers().clone();
            let body = r.bytes().await.expect("body").to_vec();
            Resp {
                status,
                headers,
                body,
            }
        }
    }

    /// Runs `futures` at once.
    pub fn all<F: std::future::Future<Output = Resp>>(&self, futures: Vec<F>) -> Vec<Resp> {
        self.rt.block_on(futures_util::future::join_all(futures))
    }

    pub fn get(&self, path: &str) -> Resp {
        self.call("GET", path, &[], None)
    }

    pub fn post(&self, path: &str, body: Value) -> Resp {
        self.call(
            "POST",
            path,
            &[("content-type", "application/json")],
            Some(body.to_string().into_bytes()),
        )
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("child").id()
    }

    /// Sends `sig` and waits (bounded) for the server to exit: its code.
    pub fn stop(mut self, sig: &str) -> i32 {
        let pid = self.pid();
        let ok = std::process::Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(pid.to_string())
            .status()
            .expect("kill");
        assert!(ok.success());
        let mut child = self.child.take().expect("child");
        let start = Instant::now();
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status.code().unwrap_or(-1);
            }
            assert!(start.elapsed() < PATIENCE, "wf serve did not stop");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits (bounded) until `f` holds.
#[track_caller]
pub(crate) fn until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < PATIENCE, "waited too long for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

const GREET: &str = "name: greet
inputs:
  who: { default: world }
outputs:
  said: \"${{ steps.hello.output.said }}\"
steps:
  - id: hello
    run: echo \"said=hello ${{ inputs.who }}\" >> \"$WF_OUTPUT\"; echo out-${{ inputs.who }}; echo err-line >&2
";

/// Registers `greet` and returns its path.
fn register_greet(t: &Test) -> String {
    let path = t.write("greet.yaml", GREET);
    t.wf(&["workflow", "add", path.to_str().unwrap()]).code(0);
    path.to_str().unwrap().to_string()
}

fn wf_json(t: &Test, args: &[&str]) -> Value {
    let r = t.wf(args);
    assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.stdout))
}

#[test]
fn the_api_reads_what_the_cli_prints() {
    let t = Test::new();
    let path = register_greet(&t);
    let (id, ran) = t.run_yaml("greet.yaml", GREET, &["--input", "who=ana"]);
    ran.code(0);
    let _ = path;
    let s = Server::start(&t, &[], &[]);
    // The list, an instance (with and without attempts), logs, the result,
    // the events and the trace: as the CLI's --json has them.
    assert_eq!(
        s.get("/api/v1/instances").json(),
        wf_json(&t, &["list", "--json"])
    );
    let inspect = s.get(&format!("/api/v1/instances/{}", &id[..8]));
    assert_eq!(inspect.status, 200);
    assert_eq!(inspect.json(), wf_json(&t, &["inspect", &id, "--json"]));
    assert_eq!(
        s.get(&format!("/api/v1/instances/{id}?attempts=1")).json(),
        wf_json(&t, &["inspect", &id, "--json", "--attempts"])
    );
    let attempts = s.get(&format!("/api/v1/instances/{id}/attempts")).json();
    assert_eq!(attempts[0]["step"], "hello");
    assert_eq!(attempts[0]["outcome"], "ok");
    assert_eq!(
        s.get(&format!("/api/v1/instances/{id}/logs")).json(),
        wf_json(&t, &["logs", &id, "--json"])
    );
    assert_eq!(
        s.get(&format!("/api/v1/instances/{id}/logs/hello")).json(),
        wf_json(&t, &["logs", &id, "hello", "--json"])
    );
    assert_eq!(
        s.get(&format!("/api/v1/instances/{id}/result")).json(),
        wf_json(&t, &["result", &id, "--json"])
    );
    assert_eq!(
        s.get(&format!("/api/v1/instances/{id}/result")).json()["outputs"]["said"],
        "hello ana"
    );
    let trace = s.get(&format!("/api/v1/instances/{id}/trace"));
    assert_eq!(
        trace.header("content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(
        trace.json(),
        wf_json(&t, &["trace", &id, "--format", "otlp"])
    );
    assert_eq!(
        s.get(&format!("/api/v1/instances/{id}/events")).json(),
        json!([])
    );
    assert_eq!(
        s.get("/api/v1/queues").json(),
        wf_json(&t, &["queue", "list", "--json"])
    );
    assert_eq!(
        s.get("/api/v1/schedules").json(),
        wf_json(&t, &["schedule", "list", "--json"])
    );
    assert_eq!(
        s.get("/api/v1/workflows").json(),
        wf_json(&t, &["workflow", "list", "--json"])
    );
    assert_eq!(s.get("/api/v1/workflows/greet").json()["name"], "greet");
    // Not there: 404 with the error shape.
    let missing = s.get("/api/v1/instances/nosuchinstance");
    assert_eq!(
        (missing.status, missing.code().as_str()),
        (404, "not_found")
    );
    assert_eq!(s.get("/api/v1/workflows/nope").status, 404);
    // Each request is in the access log, without its query.
    let log = s.log();
    assert!(
        log.contains(&format!(
            "method=GET path=\"/api/v1/instances/{id}\" status=200"
        )),
        "{log}"
    );
    assert!(!log.contains("attempts=1"), "{log}");
}

#[test]
fn the_list_filters_and_pages_with_a_cursor() {
    let t = Test::new();
    register_greet(&t);
    for who in ["a", "b", "c", "d", "e"] {
        t.run_yaml(
            "greet.yaml",
            GREET,
            &[
                "--input",
                &format!("who={who}"),
                "--label",
                &format!("who={who}"),
            ],
        )
        .1
        .code(0);
    }
    let s = Server::start(&t, &[], &[]);
    let all = s.get("/api/v1/instances").json();
    assert_eq!(all.as_array().unwrap().len(), 5);
    // Pages of 2, following `Link` / `X-Next-Cursor`, give the list once.
    let mut seen = Vec::new();
    let mut next = Some("/api/v1/instances?limit=2".to_string());
    while let Some(path) = next {
        let r = s.get(&path);
        assert_eq!(r.status, 200, "{}", r.text());
        seen.extend(r.json().as_array().unwrap().iter().map(|i| i["id"].clone()));
        next = r.header("link").map(|l| {
            let cursor = r.header("x-next-cursor").expect("x-next-cursor");
            assert!(l.contains(&format!("cursor={cursor}")), "{l}");
            l.trim_start_matches('<')
                .split('>')
                .next()
                .unwrap()
                .to_string()
        });
    }
    let ids: Vec<Value> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].clone())
        .collect();
    assert_eq!(seen, ids);
    // Filters: as `wf list`'s.
    assert_eq!(
        s.get("/api/v1/instances?label=who=c&status=completed")
            .json(),
        wf_json(
            &t,
            &[
                "list",
                "--label",
                "who=c",
                "--status",
                "completed",
                "--json"
            ]
        )
    );
    assert_eq!(s.get("/api/v1/instances?workflow=nope").json(), json!([]));
    for bad in [
        "status=nope",
        "limit=0",
        "limit=x",
        "since=forever",
        "label=x",
        "roots=maybe",
    ] {
        let r = s.get(&format!("/api/v1/instances?{bad}"));
        assert_eq!(
            (r.status, r.code().as_str()),
            (400, "invalid"),
            "{bad}: {}",
            r.text()
        );
    }
}

#[test]
fn a_start_by_name_is_run_by_the_worker_and_an_idempotency_key_starts_it_once() {
    let t = Test::new();
    register_greet(&t);
    let s = Server::start(&t, &["--worker", "--poll", "50ms"], &[]);
    let start = |who: &str, key: &str| {
        s.call(
            "POST",
            "/api/v1/workflows/greet/instances",
            &[
                ("idempotency-key", key),
                ("content-type", "application/json"),
            ],
            Some(
                json!({ "inputs": { "who": who }, "labels": { "via": "api" } })
                    .to_string()
                    .into_bytes(),
            ),
        )
    };
    let first = start("bo", "k-1");
    assert_eq!(first.status, 201, "{}", first.text());
    let id = first.json()["id"].as_str().unwrap().to_string();
    assert_eq!(first.json()["created"], true);
    let again = start("bo", "k-1");
    assert_eq!(again.status, 200);
    assert_eq!(again.json()["id"], id.as_str());
    assert_eq!(again.json()["created"], false);
    // The same key with other inputs: refused, nothing started.
    let other = start("cy", "k-1");
    assert_eq!((other.status, other.code().as_str()), (409, "conflict"));
    // The worker in the server runs it; `result?wait` waits for it.
    let r = s
        .get(&format!("/api/v1/instances/{id}/result?wait=30s"))
        .json();
    assert_eq!(r["status"], "completed", "{r}");
    assert_eq!(r["outputs"]["said"], "hello bo");
    let list = wf_json(&t, &["list", "--json"]);
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["labels"]["via"], "api");
    // Bad starts: nothing recorded.
    for (body, code) in [
        (json!({ "inputs": { "nope": 1 } }), 400),
        (json!({ "inputs": 3 }), 400),
        (json!({ "extra": 1 }), 400),
        (json!({ "labels": { "bad name": "x" } }), 400),
    ] {
        let r = s.post("/api/v1/workflows/greet/instances", body.clone());
        assert_eq!(r.status, code, "{body}: {}", r.text());
    }
    let r = s.call(
        "POST",
        "/api/v1/workflows/greet/instances",
        &[],
        Some(b"{not json".to_vec()),
    );
    assert_eq!((r.status, r.code().as_str()), (400, "invalid"));
    assert_eq!(
        s.post("/api/v1/workflows/nope/instances", json!({})).status,
        404
    );
    assert_eq!(
        wf_json(&t, &["list", "--json"]).as_array().unwrap().len(),
        1
    );
}

const GATED: &str = "name: gated
steps:
  - id: gate
    wait_for_event: { name: go }
  - id: after
    needs: [gate]
    run: echo got ${{ steps.gate.output.n }}
    compensate:
      run: echo undo
";
