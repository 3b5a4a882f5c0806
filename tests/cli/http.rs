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

#[test]
fn a_503_is_retried_then_succeeds() {
    let t = Test::new();
    let server = Server::sequence(vec![
        Reply::text(503, "busy"),
        Reply::json(200, &json!({"ok": true})),
    ]);
    let ran = run_with_base(
        &t,
        r#"
name: http-retry
inputs:
  base: { required: true }
steps:
  - id: call
    http: { url: "${{ inputs.base }}/flaky" }
    retry: { max_attempts: 3, interval: 10ms }
"#,
        &server.url(),
        "retry1",
    );
    ran.code(0);
    let inspect = t.inspect("retry1");
    let step = Test::step(&inspect, "call");
    assert_eq!(step["status"], "completed");
    assert_eq!(step["attempts"], 2);
    assert_eq!(
        attempt_field(step, "outcome"),
        vec![json!("retry"), json!("ok")]
    );
    assert_eq!(attempt_field(step, "error_type")[0], "http.503");
    assert_eq!(step["output"]["json"]["ok"], true);
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn default_retryability_by_status() {
    // 5xx and 429 are retried; other 4xx are not.
    for (status, attempts) in [
        (500, 3),
        (502, 3),
        (503, 3),
        (429, 3),
        (400, 1),
        (404, 1),
        (402, 1),
    ] {
        let t = Test::new();
        let server = Server::always(Reply::text(status, "no"));
        let id = format!("st{status}");
        let ran = run_with_base(
            &t,
            r#"
name: http-status
inputs:
  base: { required: true }
steps:
  - id: call
    http: { url: "${{ inputs.base }}/x" }
    retry: { max_attempts: 3, interval: 10ms }
"#,
            &server.url(),
            &id,
        );
        ran.code(1);
        let inspect = t.inspect(&id);
        let step = Test::step(&inspect, "call");
        assert_eq!(step["status"], "failed", "status {status}");
        assert_eq!(
            step["error_type"],
            format!("http.{status}"),
            "status {status}"
        );
        assert_eq!(step["attempts"], attempts, "status {status}: {step:#}");
        assert_eq!(server.requests().len(), attempts, "status {status}");
        let last = attempt_field(step, "outcome");
        assert_eq!(last.last().unwrap(), "failed", "status {status}: {last:?}");
    }
}

#[test]
fn non_retryable_402_fails_at_once_with_its_error_type() {
    let t = Test::new();
    let server = Server::always(Reply::json(402, &json!({"error": "card_declined"})));
    let ran = run_with_base(
        &t,
        r#"
name: http-402
inputs:
  base: { required: true }
steps:
  - id: charge
    http: { method: POST, url: "${{ inputs.base }}/charge", json: { amount: 5 } }
    retry: { max_attempts: 3, interval: 10ms, non_retryable: [http.402] }
  - id: ship
    run: echo shipped > shipped.txt
"#,
        &server.url(),
        "pay1",
    );
    ran.code(1);
    let inspect = t.inspect("pay1");
    assert_eq!(inspect["status"], "failed");
    let step = Test::step(&inspect, "charge");
    assert_eq!(step["status"], "failed");
    assert_eq!(step["error_type"], "http.402");
    assert_eq!(step["attempts"], 1);
    assert_eq!(attempt_field(step, "outcome"), vec![json!("failed")]);
    assert_eq!(server.requests().len(), 1);
    assert_eq!(t.read("shipped.txt"), "", "the next step did not run");
    let text = t.wf(&["inspect", "pay1"]);
    assert!(text.stdout.contains("http.402"), "{}", text.stdout);
}

#[test]
fn retryable_makes_a_4xx_retryable() {
    let t = Test::new();
    let server = Server::sequence(vec![
        Reply::text(404, "not yet"),
        Reply::text(404, "not yet"),
        Reply::json(200, &json!({"ready": true})),
    ]);
    let ran = run_with_base(
        &t,
        r#"
name: http-404-retry
inputs:
  base: { required: true }
steps:
  - id: poll
    http: { url: "${{ inputs.base }}/report" }
    retry: { max_attempts: 3, interval: 10ms, retryable: [http.404] }
"#,
        &server.url(),
        "poll1",
    );
    ran.code(0);
    let inspect = t.inspect("poll1");
    let step = Test::step(&inspect, "poll");
    assert_eq!(step["attempts"], 3);
    assert_eq!(
        attempt_field(step, "error_type"),
        vec![json!("http.404"), json!("http.404"), Value::Null]
    );
    assert_eq!(step["output"]["json"]["ready"], true);
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn non_retryable_makes_a_5xx_final() {
    let t = Test::new();
    let server = Server::always(Reply::text(503, "down"));
    let ran = run_with_base(
        &t,
        r#"
name: http-503-final
inputs:
  base: { required: true }
steps:
  - id: call
    http: { url: "${{ inputs.base }}/x" }
    retry: { max_attempts: 3, interval: 10ms, non_retryable: [http.503] }
"#,
        &server.url(),
        "final1",
    );
    ran.code(1);
    let inspect = t.inspect("final1");
    let step = Test::step(&inspect, "call");
    assert_eq!(step["error_type"], "http.503");
    assert_eq!(step["attempts"], 1);
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn connection_refused_is_http_connect_and_retryable() {
    let t = Test::new();
    let port = closed_port();
    let ran = run_with_base(
        &t,
        r#"
name: http-refused
inputs:
  base: { required: true }
steps:
  - id: call
    http: { url: "${{ inputs.base }}/x" }
    retry: { max_attempts: 2, interval: 10ms }
"#,
        &format!("http://127.0.0.1:{port}"),
        "refused1",
    );
    ran.code(1);
    let inspect = t.inspect("refused1");
    assert_eq!(inspect["status"], "failed");
    let step = Test::step(&inspect, "call");
    assert_eq!(step["error_type"], "http.connect");
    assert_eq!(step["attempts"], 2, "connection errors are retryable");
    assert_eq!(
        attempt_field(step, "error_type"),
        vec![json!("http.connect"), json!("http.connect")]
    );
}

#[test]
fn a_slow_server_times_out() {
    let t = Test::new();
    let server = Server::always(Reply::text(200, "late").delay(Duration::from_secs(2)));
    let ran = run_with_base(
        &t,
        r#"
name: http-timeout
inputs:
  base: { required: true }
steps:
  - id: call
    http: { url: "${{ inputs.base }}/slow" }
    timeout: 300ms
"#,
        &server.url(),
        "slow1",
    );
    ran.code(1);
    let inspect = t.inspect("slow1");
    let step = Test::step(&inspect, "call");
    assert_eq!(step["status"], "failed");
    assert_eq!(step["error_type"], "timeout");
    assert_eq!(step["outcome"], "timeout");
    assert_eq!(step["attempts"], 1);
    assert_eq!(server.requests().len(), 1, "the request was sent");
}

#[test]
fn retry_after_is_honoured_when_longer_than_the_backoff() {
    for status in [503, 429] {
        let t = Test::new();
        let server = Server::sequence(vec![
            Reply::text(status, "later").header("Retry-After", "1"),
            Reply::json(200, &json!({"ok": true})),
        ]);
        let id = format!("ra{status}");
        let ran = run_with_base(
            &t,
            r#"
name: http-retry-after
inputs:
  base: { required: true }
steps:
  - id: call
    http: { url: "${{ inputs.base }}/x" }
    retry: { max_attempts: 2, interval: 10ms }
"#,
            &server.url(),
            &id,
        );
        ran.code(0);
        let inspect = t.inspect(&id);
        let step = Test::step(&inspect, "call");
        let attempts = attempt_list(step);
        assert_eq!(attempts.len(), 2, "{step:#}");
        let first_end = epoch_secs(attempts[0]["finished_at"].as_str().unwrap());
        let second_start = epoch_secs(attempts[1]["started_at"].as_str().unwrap());
        assert!(
            second_start - first_end >= 0.95,
            "status {status}: the retry started {:.3}s after the failure, Retry-After asked for 1s",
            second_start - first_end
        );
        let reqs = server.requests();
        assert_eq!(reqs.len(), 2);
        let gap = reqs[1].at.duration_since(reqs[0].at);
        assert!(
            gap >= Duration::from_millis(950),
            "status {status}: requests {gap:?} apart"
        );
    }
}

#[test]
fn a_short_retry_after_does_not_shorten_the_backoff() {
    let t = Test::new();
    let server = Server::sequence(vec![
        Reply::text(503, "later").header("Retry-After", "0"),
        Reply::json(200, &json!({"ok": true})),
    ]);
    let ran = run_with_base(
        &t,
        r#"
name: http-retry-after-short
inputs:
  base: { required: true }
steps:
  - id: call
    http: { url: "${{ inputs.base }}/x" }
    retry: { max_attempts: 2, interval: 1s }
"#,
        &server.url(),
        "ra0",
    );
    ran.code(0);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let gap = reqs[1].at.duration_since(reqs[0].at);
    assert!(
        gap >= Duration::from_millis(950),
        "the configured 1s backoff was cut short: requests {gap:?} apart"
    );
}

#[test]
fn a_retry_after_beyond_the_inline_wait_suspends_the_instance() {
    let t = Test::new();
    let server = Server::sequence(vec![
        Reply::text(429, "slow down").header("Retry-After", "3600"),
        Reply::json(200, &json!({"ok": true})),
    ]);
    let (id, ran) = t.run_yaml(
        "suspend.yaml",
        r#"
name: http-retry-after-long
inputs:
  base: { required: true }
steps:
  - id: call
    http: { url: "${{ inputs.base }}/x", idempotency_key: true }
    retry: { max_attempts: 2, interval: 10ms }
"#,
        &[
            "--input",
            &format!("base={}", server.url()),
            "--id",
            "ra-long",
            "--inline-wait",
            "1s",
        ],
    );
    assert_eq!(id, "ra-long");
    ran.code(3);
    assert_eq!(ran.json()["status"], "sleeping");
    let inspect = t.inspect("ra-long");
    assert_eq!(inspect["status"], "sleeping");
    let step = Test::step(&inspect, "call");
    assert_eq!(step["attempts"], 1);
    assert_eq!(step["error_type"], "http.429");
    assert_eq!(server.requests().len(), 1, "no early retry");

    t.wf(&["resume", "ra-long", "--now"]).code(0);
    let inspect = t.inspect("ra-long");
    assert_eq!(inspect["status"], "completed");
    let step = Test::step(&inspect, "call");
    assert_eq!(step["attempts"], 2);
    assert_eq!(step["output"]["json"]["ok"], true);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        reqs[0].header("idempotency-key"),
        reqs[1].header("idempotency-key")
    );
}

#[test]
fn response_data_is_never_shell_code() {
    let t = Test::new();
    let server = Server::always(Reply::json(
        200,
        &json!({
            "name": "\"; touch pwned1; echo \"",
            "cmd": "$(touch pwned2)`touch pwned3`",
        }),
    ));
    let ran = run_with_base(
        &t,
        r#"
name: http-injection
inputs:
  base: { required: true }
steps:
  - id: fetch
    http: { url: "${{ inputs.base }}/evil" }
  - id: use
    run: echo "${{ steps.fetch.output.json.name }}|${{ steps.fetch.output.json.cmd }}|${{ steps.fetch.output.body }}"
"#,
        &server.url(),
        "inj1",
    );
    ran.code(0);
    for f in ["pwned1", "pwned2", "pwned3"] {
        assert!(
            !t.path().join(f).exists(),
            "{f} was created: data ran as code"
        );
    }
    let inspect = t.inspect("inj1");
    let stdout = Test::step(&inspect, "use")["output"]["stdout"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        stdout.starts_with("\"; touch pwned1; echo \"|$(touch pwned2)`touch pwned3`|{"),
        "{stdout}"
    );
}

#[test]
fn sigterm_mid_request_interrupts_and_resume_completes() {
    let t = Test::new();
    let server = Server::sequence(vec![
        Reply::hang(),
        Reply::json(200, &json!({"id": "ch_1"})),
    ]);
    let path = t.write(
        "term.yaml",
        r#"
name: http-term
inputs:
  base: { required: true }
steps:
  - id: charge
    http:
      method: POST
      url: "${{ inputs.base }}/charge"
      json: { amount: 5 }
      idempotency_key: true
"#,
    );
    let mut child = t
        .cmd()
        .args(["run", path.to_str().unwrap(), "--id", "term1"])
        .args(["--input", &format!("base={}", server.url())])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn wf run");
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.requests().is_empty() {
        if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
            let _ = child.kill();
            panic!("wf never sent the request");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = child.id().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill -TERM");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130), "interrupted exit code");
    let inspect = t.inspect("term1");
    let step = Test::step(&inspect, "charge");
    assert_eq!(
        attempt_field(step, "outcome"),
        vec![json!("interrupted")],
        "{step:#}"
    );

    t.wf(&["resume", "term1"]).code(0);
    let inspect = t.inspect("term1");
    assert_eq!(inspect["status"], "completed");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].header("idempotency-key"), Some("term1/charge"));
    assert_eq!(
        reqs[0].header("idempotency-key"),
        reqs[1].header("idempotency-key")
    );
}

// ---------------------------------------------------------------------------
// Idempotency key and trace context
// ---------------------------------------------------------------------------

#[test]
fn idempotency_key_is_the_same_on_every_attempt() {
    let t = Test::new();
    let server = Server::sequence(vec![
        Reply::text(503, "busy"),
        Reply::text(500, "oops"),
        Reply::json(200, &json!({"id": "ch_1"})),
    ]);
    let ran = run_with_base(
        &t,
        r#"
name: http-idem
inputs:
  base: { required: true }
steps:
  - id: charge
    http:
      method: POST
      url: "${{ inputs.base }}/charge"
      json: { amount: 5 }
      idempotency_key: true
    retry: { max_attempts: 3, interval: 10ms }
"#,
        &server.url(),
        "idem1",
    );
    ran.code(0);
    let keys: Vec<Option<String>> = server
        .requests()
        .iter()
        .map(|r| r.header("idempotency-key").map(String::from))
        .collect();
    assert_eq!(
        keys,
        vec![Some("idem1/charge".to_string()); 3],
        "Idempotency-Key: <instance>/<step> on every attempt"
    );
}

#[test]
fn idempotency_key_survives_a_crash_and_resume() {
    use std::os::unix::process::ExitStatusExt;
    let t = Test::new();
    let server = Server::sequence(vec![
        Reply::hang(),
        Reply::json(200, &json!({"id": "ch_1"})),
    ]);
    let path = t.write(
        "crash.yaml",
        r#"
name: http-crash
inputs:
  base: { required: true }
steps:
  - id: charge
    http:
      method: POST
      url: "${{ inputs.base }}/charge"
      json: { amount: 5 }
      idempotency_key: true
    retry: { max_attempts: 3, interval: 10ms }
"#,
    );
    let mut child = t
        .cmd()
        .args(["run", path.to_str().unwrap(), "--id", "crash-idem"])
        .args(["--input", &format!("base={}", server.url())])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn wf run");
    // wf is mid-request once the server has the (hanging) request.
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.requests().is_empty() {
        if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
            let _ = child.kill();
            panic!("wf never sent the request");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL wf run");
    let status = child.wait().expect("wait");
    assert_eq!(status.signal(), Some(9), "wf run was killed by SIGKILL");

    t.wf(&["resume", "crash-idem"]).code(0);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2, "{reqs:#?}");
    assert_eq!(reqs[0].header("idempotency-key"), Some("crash-idem/charge"));
    assert_eq!(
        reqs[0].header("idempotency-key"),
        reqs[1].header("idempotency-key"),
        "the key is the same after the crash"
    );
    let inspect = t.inspect("crash-idem");
    assert_eq!(inspect["status"], "completed");
    let step = Test::step(&inspect, "charge");
    assert_eq!(step["attempts"], 2);
    assert_eq!(
        attempt_field(step, "outcome"),
        vec![json!("crashed"), json!("ok")]
    );
}

#[test]
fn traceparent_header_is_sent_for_each_attempt() {
    let t = Test::new();
    let server = Server::sequence(vec![Reply::text(503, "busy"), Reply::json(200, &json!({}))]);
    let ran = run_with_base(
        &t,
        r#"
name: http-trace
inputs:
  base: { required: true }
steps:
  - id: call
    http: { url: "${{ inputs.base }}/x" }
    retry: { max_attempts: 2, interval: 10ms }
"#,
        &server.url(),
        "tp1",
    );
    ran.code(0);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let sent: Vec<(String, String)> = reqs
        .iter()
        .map(|r| {
            parse_traceparent(
                r.header("traceparent")
                    .unwrap_or_else(|| panic!("no traceparent header: {:?}", r.headers)),
            )
        })
        .collect();
    assert_eq!(sent[0].0, sent[1].0, "one run, one trace");
    assert_ne!(sent[0].1, sent[1].1, "each attempt has its own span");

    // The header points into the run's recorded trace.
    let trace = t.wf(&["trace", "tp1", "--format", "json"]);
    if t.wf(&["trace", "--help"]).code == 0 {
        trace.code(0);
        let runs = trace.json();
        let run = &runs.as_array().expect("array of runs")[0];
        assert_eq!(run["trace_id"], sent[0].0.as_str());
        let spans = run["spans"].as_array().expect("spans");
        for (_, parent) in &sent {
            assert!(
                spans.iter().any(|s| s["span_id"] == parent.as_str()),
                "the traceparent's span {parent} is not in the trace: {spans:#?}"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Secrets
// ---------------------------------------------------------------------------

/// With characters a URL or a form percent-encodes.
const SECRET: &str = "sekr1t+Tok3n/9f3=KzQ";

/// The forms SECRET takes once encoded: as `query:` parameters and form
/// bodies encode it (upper- and lower-case hex).
const SECRET_FORMS: [&str; 3] = [
    SECRET,
    "sekr1t%2BTok3n%2F9f3%3DKzQ",
    "sekr1t%2bTok3n%2f9f3%3dKzQ",
];

/// Every byte `wf` stored: the database and its WAL and shm files (on
/// PostgreSQL: a dump of the test's schema, every row of every table).
pub(crate) fn database_bytes(t: &Test) -> Vec<(String, Vec<u8>)> {
    if let Some((url, schema)) = &t.pg {
        let exists = t.psql(&format!(
            "SELECT count(*) FROM pg_namespace WHERE nspname = '{schema}'"
        ));
        if exists == "0" {
            return Vec::new();
        }
        let out = std::process::Command::new(crate::pg_tool("pg_dump"))
            .arg(url)
            .args(["--data-only", "--schema", schema])
            .output()
            .expect("pg_dump");
        assert!(
            out.status.success(),
            "pg_dump: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let has_rows = String::from_utf8_lossy(&out.stdout).contains("COPY");
        return if has_rows {
            vec![(format!("pg_dump of schema {schema}"), out.stdout)]
        } else {
            Vec::new()
        };
    }
    let mut files = Vec::new();
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let path = format!("{}{suffix}", t.db.display());
        if let Ok(bytes) = std::fs::read(&path) {
            files.push((path, bytes));
        }
    }
    files
}

pub(crate) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn secrets_are_used_but_never_written() {
    let otlp = Server::always(Reply::status(200).header("Content-Type", "application/x-protobuf"));
    let t = Test::new()
        .env("WF_TEST_API_TOKEN", SECRET)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp.url());
    // The API echoes the secret back: in an error body, a header and JSON.
    let api = Server::start(|n, req| {
        let auth = req.header("authorization").unwrap_or("").to_string();
        if n == 0 {
            Reply::text(503, &format!("overloaded, retry with {auth}"))
        } else {
            Reply::json(200, &json!({"echo": SECRET, "auth": auth})).header("X-Echo", SECRET)
        }
    });
    let path = t.write(
        "secret.yaml",
        r#"
name: secret-flow
inputs:
  base: { required: true }
secrets: [WF_TEST_API_TOKEN]
env: { TOKEN_URL: "${{ inputs.base }}/t?token=${{ secrets.WF_TEST_API_TOKEN }}" }
steps:
  - id: call
    http:
      method: POST
      url: "${{ inputs.base }}/charge?token=${{ secrets.WF_TEST_API_TOKEN }}"
      query: { t: "${{ secrets.WF_TEST_API_TOKEN }}" }
      headers: { Authorization: "Bearer ${{ secrets.WF_TEST_API_TOKEN }}" }
      json: { token: "${{ secrets.WF_TEST_API_TOKEN }}" }
    retry: { max_attempts: 2, interval: 10ms }
    set_state: { echoed: "${{ output.json.echo }}" }
  - id: shell
    run: echo "token is ${{ secrets.WF_TEST_API_TOKEN }}"; echo "err $TOKEN_URL" >&2; echo "key=${{ secrets.WF_TEST_API_TOKEN }}" >> "$WF_OUTPUT"
  - id: argv
    run: ["echo", "${{ secrets.WF_TEST_API_TOKEN }}"]
  - id: as-key
    run: |
      printf '{"%s": {"%s": 1}}' "${{ secrets.WF_TEST_API_TOKEN }}" "${{ secrets.WF_TEST_API_TOKEN }}"
    set_state: { keyed: "${{ output.json }}" }
  - id: fails
    run: echo "failing with ${{ secrets.WF_TEST_API_TOKEN }}" >&2; exit 7
    retry: { max_attempts: 2, interval: 10ms }
"#,
    );
    let run = t.wf(&[
        "run",
        path.to_str().unwrap(),
        "--id",
        "sec1",
        "--input",
        &format!("base={}", api.url()),
    ]);
    run.code(1);

    // The secret was really used.
    let reqs = api.requests();
    assert_eq!(reqs.len(), 2, "{reqs:#?}");
    for r in &reqs {
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {SECRET}").as_str())
        );
        // Sent as given in `url`, and form-encoded from `query`.
        assert!(
            r.target.contains(&format!("token={SECRET}&")),
            "{}",
            r.target
        );
        assert!(
            r.target.ends_with(&format!("&t={}", SECRET_FORMS[1])),
            "{}",
            r.target
        );
        assert_eq!(
            serde_json::from_slice::<Value>(&r.body).unwrap(),
            json!({"token": SECRET})
        );
    }
    let logs = t.wf(&["logs", "sec1", "shell"]);
    logs.code(0);
    assert!(
        logs.stdout.contains("token is ***"),
        "the shell step got the secret, masked in its log:\n{}{}",
        logs.stdout,
        logs.stderr
    );
    let inspect = t.inspect("sec1");
    assert_eq!(inspect["state"]["echoed"], "***");
    assert_eq!(Test::step(&inspect, "shell")["output"]["key"], "***");
    assert_eq!(Test::step(&inspect, "argv")["output"]["stdout"], "***");
    assert_eq!(inspect["state"]["keyed"], json!({"***": {"***": 1}}));
    let call = Test::step(&inspect, "call");
    assert_eq!(call["attempts"], 2);
    assert_eq!(call["output"]["headers"]["x-echo"], "***");
    assert_eq!(call["output"]["json"]["auth"], "Bearer ***");

    // A second instance, run with `--json` (the API now answers 200 at once).
    let run_json = t.wf(&[
        "run",
        path.to_str().unwrap(),
        "--json",
        "--id",
        "sec2",
        "--input",
        &format!("base={}", api.url()),
    ]);
    run_json.code(1);
    assert_eq!(run_json.json()["status"], "failed");

    // ...and is nowhere in what wf printed.
    let mut outputs: Vec<(String, Ran)> =
        vec![("run".into(), run), ("run --json".into(), run_json)];
    let commands: Vec<Vec<&str>> = vec![
        vec!["inspect", "sec1"],
        vec!["inspect", "sec1", "--attempts"],
        vec!["inspect", "sec1", "--json"],
        vec!["inspect", "sec1", "--json", "--attempts"],
        vec!["logs", "sec1"],
        vec!["logs", "sec1", "call"],
        vec!["logs", "sec1", "call", "--attempt", "1"],
        vec!["logs", "sec1", "shell"],
        vec!["logs", "sec1", "argv"],
        vec!["logs", "sec1", "fails"],
        vec!["logs", "sec1", "fails", "--attempt", "1"],
        vec!["list"],
        vec!["list", "--json"],
    ];
    for args in &commands {
        let ran = t.wf(args);
        ran.code(0);
        outputs.push((args.join(" "), ran));
    }
    // `wf trace` in every format; asserted whenever the command exists.
    let has_trace = t.wf(&["trace", "--help"]).code == 0;
    if has_trace {
        for args in [
            vec!["trace", "sec1"],
            vec!["trace", "sec1", "--format", "tree"],
            vec!["trace", "sec1", "--format", "otlp"],
            vec!["trace", "sec1", "--format", "json"],
            vec!["trace", "--all", "--format", "otlp"],
        ] {
            let ran = t.wf(&args);
            ran.code(0);
            outputs.push((args.join(" "), ran));
        }
    }
    for (what, ran) in &outputs {
        for form in SECRET_FORMS {
            assert!(
                !ran.stdout.contains(form) && !ran.stderr.contains(form),
                "`wf {what}` shows the secret as {form}:\n--- stdout\n{}\n--- stderr\n{}",
                ran.stdout,
                ran.stderr
            );
        }
    }
    // The trace did record the HTTP call (with the URL masked).
    if has_trace {
        let json = &outputs
            .iter()
            .find(|(w, _)| w == "trace sec1 --format json")
            .unwrap()
            .1
            .stdout;
        assert!(
            json.contains("token=***") && json.contains("t=***"),
            "{json}"
        );
    }

    // Live OTLP export got the spans, masked.
    let exported = otlp.requests();
    assert!(
        exported
            .iter()
            .any(|r| r.path() == "/v1/traces" && contains(&r.body, b"secret-flow")),
        "no spans were exported live: {exported:#?}"
    );
    for r in &exported {
        for form in SECRET_FORMS {
            assert!(
                !contains(&r.body, form.as_bytes()),
                "the OTLP export carries the secret as {form}"
            );
        }
    }

    // The database, byte for byte, after wf exited.
    let files = database_bytes(&t);
    assert!(!files.is_empty(), "no database at {}", t.db.display());
    for (path, bytes) in &files {
        for form in SECRET_FORMS {
            assert!(
                !contains(bytes, form.as_bytes()),
                "{path} holds the secret as {form}"
            );
        }
    }
}

#[test]
fn a_secret_echoed_inside_a_json_body_is_masked_too() {
    // A secret with characters JSON escapes: an API that echoes it back in a
    // JSON document puts it in the raw `body` in its escaped form.
    const ODD: &str = r#"odd"se\cr3t-x7Q"#;
    let t = Test::new().env("WF_TEST_ODD_TOKEN", ODD);
    let server = Server::start(|_, req| {
        let sent: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        Reply::json(200, &json!({"echo": sent["token"]}))
    });
    let ran = run_with_base(
        &t,
        r#"
name: secret-json
inputs:
  base: { required: true }
secrets: [WF_TEST_ODD_TOKEN]
steps:
  - id: call
    http:
      method: POST
      url: "${{ inputs.base }}/echo"
      json: { token: "${{ secrets.WF_TEST_ODD_TOKEN }}" }
"#,
        &server.url(),
        "odd1",
    );
    ran.code(0);
    let reqs = server.requests();
    assert_eq!(
        serde_json::from_slice::<Value>(&reqs[0].body).unwrap()["token"],
        ODD,
        "the secret was sent"
    );
    let escaped = serde_json::to_string(ODD).unwrap();
    let escaped = &escaped[1..escaped.len() - 1];
    let inspect = t.inspect("odd1");
    let out = &Test::step(&inspect, "call")["output"];
    assert_eq!(out["json"]["echo"], "***");
    let body = out["body"].as_str().unwrap();
    assert!(
        !body.contains(ODD) && !body.contains(escaped),
        "the raw body shows the secret: {body}"
    );
    let files = database_bytes(&t);
    for (path, bytes) in &files {
        for needle in [ODD, escaped] {
            assert!(
                !contains(bytes, needle.as_bytes()),
                "{path} holds the secret as {needle}"
            );
        }
    }
}

#[test]
fn a_missing_secret_is_an_error_before_anything_runs() {
    let t = Test::new();
    let server = Server::always(Reply::text(200, "ok"));
    let path = t.write(
        "secret.yaml",
        r#"
name: secret-missing
inputs:
  base: { required: true }
secrets: [WF_TEST_MISSING_SECRET]
steps:
  - id: first
    http: { url: "${{ inputs.base }}/first" }
  - id: call
    http:
      url: "${{ inputs.base }}/x"
      headers: { Authorization: "Bearer ${{ secrets.WF_TEST_MISSING_SECRET }}" }
"#,
    );
    let out = t
        .cmd()
        .env_remove("WF_TEST_MISSING_SECRET")
        .args(["run", path.to_str().unwrap()])
        .args(["--input", &format!("base={}", server.url())])
        .output()
        .expect("run wf");
    let ran = Ran::from(out);
    ran.code(2);
    assert!(
        ran.stderr.contains("WF_TEST_MISSING_SECRET"),
        "the error names the variable:\n{}",
        ran.stderr
    );
    assert_eq!(
        ran.stderr.trim_end().lines().count(),
        1,
        "one clear line:\n{}",
        ran.stderr
    );
    assert!(database_bytes(&t).is_empty(), "a database was written");
    assert!(server.requests().is_empty(), "a step ran");
}

// ---------------------------------------------------------------------------
// The README example
// ---------------------------------------------------------------------------

#[test]
fn the_http_example_runs_against_a_server() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("workflows");
    let example = dir.join("http.yaml");
    let document =
        std::fs::read(dir.join("http-example.json")).expect("workflows/http-example.json");
    let doc: Value = serde_json::from_slice(&document).expect("the example document is JSON");
    let server = Server::start(move |_, req| match req.path() {
        "/http-example.json" => Reply::status(200)
            .header("Content-Type", "application/json")
            .body(document.clone()),
        _ => Reply::text(404, "not found"),
    });
    let t = Test::new();
    t.wf(&["validate", example.to_str().unwrap()]).code(0);
    let ran = t.wf(&[
        "run",
        example.to_str().unwrap(),
        "--json",
        "--input",
        &format!("base_url={}", server.url()),
    ]);
    ran.code(0);
    let id = ran.json()["id"].as_str().expect("id").to_string();
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1, "{reqs:#?}");
    assert_eq!(reqs[0].method, "GET");
    assert_eq!(reqs[0].path(), "/http-example.json");

    let inspect = t.inspect(&id);
    assert_eq!(inspect["status"], "completed");
    let fetch = Test::step(&inspect, "fetch");
    assert_eq!(fetch["output"]["status"], 200);
    assert_eq!(fetch["output"]["json"], doc);
    let version = doc["release"]["version"].as_str().expect("release.version");
    let announce = Test::step(&inspect, "announce");
    assert!(
        announce["output"]["stdout"]
            .as_str()
            .is_some_and(|s| s.contains(version)),
        "the JSON field reached the shell step: {announce:#}"
    );
    assert_eq!(inspect["state"]["release"], version);
}
