//! HTTP steps (docs/workflow-file.md `http:`, docs/expressions.md outputs, docs/execution.md retries, docs/secrets.md secrets), driven
//! through the real binary against a real HTTP/1.1 server on 127.0.0.1 that
//! records every request it gets (method, target, headers, body, time).
//!
//! Covered: method, url, headers, query, `json` and `body`, `expect_status`,
//! the `{status, headers, body, json}` output and its cap (`WF_OUTPUT_LIMIT`),
//! error types `http.<status>`, `http.connect` and `timeout`, the default
//! retryability (5xx, 429, connection errors) and its overrides, `Retry-After`,
//! `Idempotency-Key` across retries and across a crash, `traceparent`, secrets
//! masked everywhere `wf` writes, and the `workflows/http.yaml` example.
//!
//! Its tests by topic, beside the ones here: `attempts.rs`, `retries.rs`, `secrets.rs` (in `http/`).

mod attempts;
mod retries;
mod secrets;

pub(crate) use secrets::{contains, database_bytes};

use crate::{Ran, Test};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------
// A small recording HTTP/1.1 server
// ---------------------------------------------------------------------------

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: String,
    /// The request target as sent: path and query.
    pub target: String,
    /// Header names lower-cased, in the order received.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// When the request was fully read.
    pub at: Instant,
}

impl Req {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    /// The query's pairs, percent-decoded (`+` is a space).
    pub fn query(&self) -> Vec<(String, String)> {
        let Some((_, q)) = self.target.split_once('?') else {
            return Vec::new();
        };
        q.split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (decode(k), decode(v))
            })
            .collect()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(v) => {
                        out.push(v);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What the server answers to one request.
#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Wait this long before answering.
    delay: Duration,
    /// Never answer (until the server is dropped).
    hang: bool,
}

impl Reply {
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Vec::new(),
            delay: Duration::ZERO,
            hang: false,
        }
    }

    pub fn json(status: u16, v: &Value) -> Reply {
        Reply::status(status)
            .header("Content-Type", "application/json")
            .body(v.to_string())
    }

    pub fn text(status: u16, text: &str) -> Reply {
        Reply::status(status)
            .header("Content-Type", "text/plain")
            .body(text)
    }

    pub fn hang() -> Reply {
        Reply {
            hang: true,
            ..Reply::status(200)
        }
    }

    pub fn header(mut self, k: &str, v: &str) -> Reply {
        self.headers.push((k.into(), v.into()));
        self
    }

    pub fn body(mut self, b: impl Into<Vec<u8>>) -> Reply {
        self.body = b.into();
        self
    }

    pub fn delay(mut self, d: Duration) -> Reply {
        self.delay = d;
        self
    }
}

type Handler = dyn Fn(usize, &Req) -> Reply + Send + Sync;

/// A real HTTP/1.1 server on 127.0.0.1 (one thread per connection, one
/// request per connection) that records what it receives.
pub struct Server {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Req>>>,
    stop: Arc<AtomicBool>,
}

impl Server {
    /// Starts a server answering request number `n` (from 0) with `handler(n, req)`.
    pub fn start(handler: impl Fn(usize, &Req) -> Reply + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        {
            let requests = requests.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let requests = requests.clone();
                    let stop = stop.clone();
                    let handler = handler.clone();
                    std::thread::spawn(move || serve(conn, &requests, &stop, &*handler));
                }
            });
        }
        Server {
            addr,
            requests,
            stop,
        }
    }

    /// Answers every request with `reply`.
    pub fn always(reply: Reply) -> Server {
        Server::start(move |_, _| reply.clone())
    }

    /// Answers request `n` with `replies[n]`, and later ones with the last.
    pub fn sequence(replies: Vec<Reply>) -> Server {
        Server::start(move |n, _| replies[n.min(replies.len() - 1)].clone())
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Req> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

fn serve(conn: TcpStream, requests: &Mutex<Vec<Req>>, stop: &AtomicBool, handler: &Handler) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let Some(req) = read_request(&conn) else {
        return;
    };
    let n = {
        let mut all = requests.lock().unwrap();
        all.push(req.clone());
        all.len() - 1
    };
    let reply = handler(n, &req);
    if reply.hang {
        let until = Instant::now() + Duration::from_secs(120);
        while !stop.load(Ordering::SeqCst) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        return;
    }
    if !reply.delay.is_zero() {
        std::thread::sleep(reply.delay);
    }
    let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reason(reply.status));
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        reply.body.len()
    ));
    let mut conn = conn;
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(&reply.body);
    let _ = conn.flush();
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        402 => "Payment Required",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

fn read_request(conn: &TcpStream) -> Option<Req> {
    let mut r = BufReader::new(conn);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end_matches(['\r', '\n']);
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; size + 2];
            r.read_exact(&mut chunk).ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(len) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body = vec![0; len];
        r.read_exact(&mut body).ok()?;
    }
    Some(Req {
        method,
        target,
        headers,
        body,
        at: Instant::now(),
    })
}

/// A port on 127.0.0.1 nothing listens on: bound, then released.
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().unwrap().port();
    drop(l);
    port
}

// ---------------------------------------------------------------------------
// Helpers over `wf`
// ---------------------------------------------------------------------------

/// Writes `yaml` and runs it with `--input base=<server url>` and `--id id`.
fn run_with_base(t: &Test, yaml: &str, base: &str, id: &str) -> Ran {
    let (got, ran) = t.run_yaml(
        &format!("{id}.yaml"),
        yaml,
        &["--input", &format!("base={base}"), "--id", id],
    );
    assert!(
        got == id || ran.code == 2,
        "unexpected id {got:?}\n--- stdout\n{}\n--- stderr\n{}",
        ran.stdout,
        ran.stderr
    );
    ran
}

fn attempt_list(step: &Value) -> &Vec<Value> {
    step["attempt_list"]
        .as_array()
        .unwrap_or_else(|| panic!("no attempt_list: {step:#}"))
}

fn attempt_field(step: &Value, field: &str) -> Vec<Value> {
    attempt_list(step)
        .iter()
        .map(|a| a[field].clone())
        .collect()
}

/// Seconds since the epoch of an RFC 3339 UTC time `YYYY-MM-DDTHH:MM:SS[.fff]Z`.
fn epoch_secs(t: &str) -> f64 {
    fn bad(t: &str) -> ! {
        panic!("not an RFC 3339 UTC time: {t:?}")
    }
    let (date, time) = t
        .strip_suffix('Z')
        .and_then(|t| t.split_once('T'))
        .unwrap_or_else(|| bad(t));
    let d: Vec<i64> = date.split('-').map(|p| p.parse().unwrap()).collect();
    let hms: Vec<f64> = time.split(':').map(|p| p.parse().unwrap()).collect();
    // Days from civil (Howard Hinnant's algorithm).
    let (y, m, day) = (if d[1] <= 2 { d[0] - 1 } else { d[0] }, d[1], d[2]);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    days as f64 * 86400.0 + hms[0] * 3600.0 + hms[1] * 60.0 + hms[2]
}

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `(trace_id, parent_id)` of a W3C `traceparent` value.
#[track_caller]
fn parse_traceparent(v: &str) -> (String, String) {
    let parts: Vec<&str> = v.split('-').collect();
    assert!(
        parts.len() == 4
            && parts[0] == "00"
            && is_lower_hex(parts[1], 32)
            && is_lower_hex(parts[2], 16)
            && is_lower_hex(parts[3], 2)
            && parts[1].bytes().any(|b| b != b'0')
            && parts[2].bytes().any(|b| b != b'0'),
        "not a W3C traceparent: {v:?}"
    );
    (parts[1].to_string(), parts[2].to_string())
}

// ---------------------------------------------------------------------------
// Requests and outputs
// ---------------------------------------------------------------------------

#[test]
fn get_sends_url_headers_and_query_and_outputs_the_response() {
    let t = Test::new();
    let server = Server::always(
        Reply::json(
            200,
            &json!({"id": 42, "tags": ["a", "b"], "owner": {"name": "ada"}}),
        )
        .header("X-Served-By", "test-server"),
    );
    let ran = run_with_base(
        &t,
        r#"
name: http-get
inputs:
  base: { required: true }
  who: { default: "ada lovelace & co" }
steps:
  - id: fetch
    http:
      url: "${{ inputs.base }}/items/42"
      headers: { X-Who: "${{ inputs.who }}", Accept: application/json }
      query: { q: "${{ inputs.who }}", page: "2" }
"#,
        &server.url(),
        "get1",
    );
    ran.code(0);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1, "{reqs:#?}");
    let r = &reqs[0];
    assert_eq!(r.method, "GET");
    assert_eq!(r.path(), "/items/42");
    let mut query = r.query();
    query.sort();
    assert_eq!(
        query,
        vec![
            ("page".to_string(), "2".to_string()),
            ("q".to_string(), "ada lovelace & co".to_string()),
        ],
        "target {}",
        r.target
    );
    assert_eq!(r.header("x-who"), Some("ada lovelace & co"));
    assert_eq!(r.header("accept"), Some("application/json"));
    assert!(r.body.is_empty(), "a GET without body sent {:?}", r.text());
    assert_eq!(r.header("idempotency-key"), None, "not asked for");

    let inspect = t.inspect("get1");
    assert_eq!(inspect["status"], "completed");
    let step = Test::step(&inspect, "fetch");
    assert_eq!(step["status"], "completed");
    assert_eq!(step["attempts"], 1);
    let out = &step["output"];
    assert_eq!(out["status"], 200, "{out:#}");
    assert_eq!(out["headers"]["x-served-by"], "test-server", "{out:#}");
    assert_eq!(
        out["headers"]["content-type"], "application/json",
        "{out:#}"
    );
    let body = out["body"].as_str().expect("body is text");
    assert_eq!(
        serde_json::from_str::<Value>(body).unwrap(),
        json!({"id": 42, "tags": ["a", "b"], "owner": {"name": "ada"}})
    );
    assert_eq!(
        out["json"],
        json!({"id": 42, "tags": ["a", "b"], "owner": {"name": "ada"}})
    );

    // The HTTP client span names the URL as sent, query included.
    let trace = t.wf(&["trace", "get1", "--format", "json"]).code(0).json();
    let urls: Vec<String> = trace
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|run| run["spans"].as_array().cloned().unwrap_or_default())
        .filter_map(|s| s["attributes"]["url.full"].as_str().map(String::from))
        .collect();
    assert_eq!(
        urls,
        vec![format!("{}{}", server.url(), r.target)],
        "{trace:#}"
    );
}

#[test]
fn post_json_sends_a_typed_json_body() {
    let t = Test::new();
    let server = Server::always(Reply::json(201, &json!({"id": "ch_1"})));
    let ran = run_with_base(
        &t,
        r#"
name: http-post
inputs:
  base: { required: true }
  order: { default: "A-17" }
  amount: { default: 100 }
steps:
  - id: charge
    http:
      method: POST
      url: "${{ inputs.base }}/charge"
      json:
        order: "${{ inputs.order }}"
        amount: "${{ inputs.amount }}"
        label: "order ${{ inputs.order }}"
        lines: [1, "two", { sku: x }]
        gift: false
"#,
        &server.url(),
        "post1",
    );
    ran.code(0);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path(), "/charge");
    assert!(
        r.header("content-type")
            .is_some_and(|v| v.starts_with("application/json")),
        "{:?}",
        r.headers
    );
    let sent: Value = serde_json::from_slice(&r.body)
        .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", r.text()));
    assert_eq!(
        sent,
        json!({
            "order": "A-17",
            "amount": 100,
            "label": "order A-17",
            "lines": [1, "two", {"sku": "x"}],
            "gift": false
        })
    );
    let inspect = t.inspect("post1");
    let out = &Test::step(&inspect, "charge")["output"];
    assert_eq!(out["status"], 201);
    assert_eq!(out["json"]["id"], "ch_1");
}

#[test]
fn every_method_is_sent_as_named_and_a_given_content_type_is_kept() {
    let t = Test::new();
    let server = Server::always(Reply::json(200, &json!({"ok": true})));
    let ran = run_with_base(
        &t,
        r#"
name: http-methods
inputs:
  base: { required: true }
steps:
  - id: patch
    http:
      method: patch
      url: "${{ inputs.base }}/p"
      headers: { Content-Type: application/merge-patch+json }
      json: { a: 1 }
  - id: delete
    http: { method: delete, url: "${{ inputs.base }}/d" }
  - id: head
    http: { method: HEAD, url: "${{ inputs.base }}/h" }
  - id: options
    http: { method: OPTIONS, url: "${{ inputs.base }}/o" }
"#,
        &server.url(),
        "methods1",
    );
    ran.code(0);
    let reqs = server.requests();
    let seen: Vec<(&str, &str)> = reqs.iter().map(|r| (r.method.as_str(), r.path())).collect();
    assert_eq!(
        seen,
        vec![
            ("PATCH", "/p"),
            ("DELETE", "/d"),
            ("HEAD", "/h"),
            ("OPTIONS", "/o")
        ]
    );
    let patch = &reqs[0];
    let types: Vec<&str> = patch
        .headers
        .iter()
        .filter(|(k, _)| k == "content-type")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(types, vec!["application/merge-patch+json"]);
    assert_eq!(
        serde_json::from_slice::<Value>(&patch.body).unwrap(),
        json!({"a": 1})
    );
    let inspect = t.inspect("methods1");
    let head = Test::step(&inspect, "head");
    assert_eq!(head["output"]["status"], 200);
    assert_eq!(head["output"]["body"], "", "a HEAD answer has no body");
}

#[test]
fn body_is_sent_as_text_and_a_non_json_answer_has_null_json() {
    let t = Test::new();
    let server = Server::always(Reply::text(200, "plain answer, not json"));
    let ran = run_with_base(
        &t,
        r#"
name: http-body
inputs:
  base: { required: true }
  who: { default: world }
steps:
  - id: put
    http:
      method: PUT
      url: "${{ inputs.base }}/note"
      headers: { Content-Type: text/plain }
      body: "hello ${{ inputs.who }}; {not: json}"
"#,
        &server.url(),
        "body1",
    );
    ran.code(0);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].method, "PUT");
    assert_eq!(reqs[0].text(), "hello world; {not: json}");
    assert_eq!(reqs[0].header("content-type"), Some("text/plain"));
    let inspect = t.inspect("body1");
    let out = &Test::step(&inspect, "put")["output"];
    assert_eq!(out["status"], 200);
    assert_eq!(out["body"], "plain answer, not json");
    assert_eq!(out["json"], Value::Null);
}

#[test]
fn json_output_feeds_a_later_shell_step_and_state() {
    let t = Test::new();
    let server = Server::always(Reply::json(
        200,
        &json!({"user": {"name": "Ada", "langs": ["en", "fr"]}, "n": 3}),
    ));
    let ran = run_with_base(
        &t,
        r#"
name: http-feed
inputs:
  base: { required: true }
steps:
  - id: fetch
    http: { url: "${{ inputs.base }}/user" }
    set_state: { user: "${{ output.json.user.name }}", n: "${{ output.json.n }}" }
  - id: use
    run: echo "name=${{ steps.fetch.output.json.user.name }} lang=${{ steps.fetch.output.json.user.langs[1] }} status=${{ steps.fetch.output.status }}"
"#,
        &server.url(),
        "feed1",
    );
    ran.code(0);
    let inspect = t.inspect("feed1");
    assert_eq!(
        Test::step(&inspect, "use")["output"]["stdout"],
        "name=Ada lang=fr status=200"
    );
    assert_eq!(inspect["state"]["user"], "Ada");
    assert_eq!(
        inspect["state"]["n"], 3,
        "a whole-value expression keeps its type"
    );
}

#[test]
fn expect_status_decides_what_succeeds() {
    let t = Test::new();
    let server = Server::start(|_, req| match req.path() {
        "/gone" => Reply::text(404, "nope"),
        _ => Reply::text(200, "fine"),
    });
    let ran = run_with_base(
        &t,
        r#"
name: http-expect
inputs:
  base: { required: true }
steps:
  - id: want-404
    http: { url: "${{ inputs.base }}/gone", expect_status: [404] }
  - id: want-201
    http: { url: "${{ inputs.base }}/ok", expect_status: [201] }
    retry: { max_attempts: 3, interval: 10ms }
  - id: after
    run: echo never
"#,
        &server.url(),
        "expect1",
    );
    ran.code(1);
    let inspect = t.inspect("expect1");
    assert_eq!(inspect["status"], "failed");
    let a = Test::step(&inspect, "want-404");
    assert_eq!(a["status"], "completed");
    assert_eq!(a["output"]["status"], 404);
    let b = Test::step(&inspect, "want-201");
    assert_eq!(b["status"], "failed");
    assert_eq!(b["error_type"], "http.200");
    assert_eq!(b["attempts"], 1, "a 2xx is not retryable by default");
    assert_ne!(Test::step(&inspect, "after")["status"], "completed");
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn a_body_over_the_output_limit_fails_with_output_limit() {
    let t = Test::new().env("WF_OUTPUT_LIMIT", "1000");
    let server = Server::start(|_, req| match req.path() {
        "/small" => Reply::text(200, &"s".repeat(500)),
        _ => Reply::text(200, &"x".repeat(5000)),
    });
    let ran = run_with_base(
        &t,
        r#"
name: http-limit
inputs:
  base: { required: true }
steps:
  - id: small
    http: { url: "${{ inputs.base }}/small" }
  - id: big
    http: { url: "${{ inputs.base }}/big" }
"#,
        &server.url(),
        "limit1",
    );
    ran.code(1);
    let inspect = t.inspect("limit1");
    let small = Test::step(&inspect, "small");
    assert_eq!(small["status"], "completed");
    assert_eq!(small["output"]["body"], "s".repeat(500));
    let big = Test::step(&inspect, "big");
    assert_eq!(big["status"], "failed");
    assert_eq!(big["error_type"], "output.limit");
    assert!(
        !big["output"].to_string().contains("xxxxxxxxxx"),
        "no truncated body is kept as the output: {:#}",
        big["output"]
    );
    let text = t.wf(&["inspect", "limit1"]);
    text.code(0);
    assert!(
        text.stdout.contains("output.limit"),
        "inspect shows the error type:\n{}",
        text.stdout
    );
}

// ---------------------------------------------------------------------------
// Errors and retries
// ---------------------------------------------------------------------------
