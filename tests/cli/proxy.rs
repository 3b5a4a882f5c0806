//! A TCP proxy in front of the test's PostgreSQL server that can lose a
//! reply: armed with a piece of SQL, it lets the next request that runs a
//! statement holding that text reach the server, waits for the server's
//! reply (so the server has applied it), drops that reply and cuts the
//! connection. The client sees a lost connection for a commit that is in:
//! an ambiguous commit, as a network failure makes one.
//!
//! It can also black-hole the traffic ([`Proxy::black_hole`]): connections
//! stay open, new ones are accepted, and nothing passes either way, no RST,
//! no FIN, as when a switch or a firewall drops packets; once it heals
//! ([`Proxy::heal`]) what was sent meanwhile is delivered, as TCP's
//! retransmissions would deliver it.
//!
//! It reads the frontend protocol just enough: `Parse` names a prepared
//! statement and gives its text, `Bind` runs one by name. TLS is not
//! proxied (the tests' URL says `sslmode=disable`).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub struct Proxy {
    pub port: u16,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    /// The SQL whose next run loses its reply (consumed by the cut).
    armed: Mutex<Option<String>>,
    /// Replies dropped so far.
    cuts: AtomicUsize,
    /// Down: every connection cut, new ones closed at once ([`Proxy::down`]).
    down: std::sync::atomic::AtomicBool,
    /// The clients' connections, to cut when it goes down.
    open: Mutex<Vec<TcpStream>>,
    /// Connections accepted and not over yet.
    relaying: AtomicUsize,
    /// Black-holed: nothing passes until it heals.
    held: Mutex<bool>,
    healed: std::sync::Condvar,
}

impl Shared {
    /// Returns once traffic may pass (at once unless black-holed).
    fn pass(&self) {
        let mut held = self.held.lock().expect("lock");
        while *held {
            held = self.healed.wait(held).expect("lock");
        }
    }
}

impl Proxy {
    /// Listens on a loopback port, forwarding to `upstream` (`host:port`).
    pub fn start(upstream: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("its port").port();
        let shared = Arc::new(Shared::default());
        let upstream = upstream.to_string();
        let s = shared.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if s.down.load(Ordering::SeqCst) {
                    continue;
                }
                let s = s.clone();
                let upstream = upstream.clone();
                s.relaying.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || {
                    // Made (and its startup read) only once traffic passes.
                    s.pass();
                    if let Ok(server) = TcpStream::connect(&upstream) {
                        if let Ok(c) = client.try_clone() {
                            s.open.lock().expect("lock").push(c);
                        }
                        relay(client, server, s.clone());
                    }
                    s.relaying.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Proxy { port, shared }
    }

    /// The next run of a statement whose text holds `sql` loses its reply.
    pub fn arm(&self, sql: &str) {
        *self.shared.armed.lock().expect("lock") = Some(sql.to_string());
    }

    /// The server unreachable from now on: every connection through the
    /// proxy is cut, and a new one is closed as soon as it is made.
    pub fn down(&self) {
        self.shared.down.store(true, Ordering::SeqCst);
        for c in self.shared.open.lock().expect("lock").drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    /// Black-holes every connection, open or new, until [`Proxy::heal`].
    pub fn black_hole(&self) {
        *self.shared.held.lock().expect("lock") = true;
    }

    /// Lets traffic pass again, what was held first.
    pub fn heal(&self) {
        *self.shared.held.lock().expect("lock") = false;
        self.shared.healed.notify_all();
    }

    /// How many connections are open through the proxy (or held).
    pub fn relaying(&self) -> usize {
        self.shared.relaying.load(Ordering::SeqCst)
    }

    pub fn cuts(&self) -> usize {
        self.shared.cuts.load(Ordering::SeqCst)
    }

    /// `url` (the test server's) pointing at this proxy instead.
    pub fn url(&self, url: &str) -> String {
        let (head, rest) = url.split_once('@').expect("a URL with a user");
        let (_, tail) = rest.split_once('/').expect("a URL with a database");
        format!("{head}@127.0.0.1:{}/{tail}", self.port)
    }
}

/// One connection: the client's requests go through, read as they pass; the
/// server's replies go back unless a cut is due.
fn relay(mut client: TcpStream, mut server: TcpStream, shared: Arc<Shared>) {
    let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (mut c_read, mut s_write) = (
        client.try_clone().expect("clone"),
        server.try_clone().expect("clone"),
    );
    let up_cut = cut.clone();
    let up_shared = shared.clone();
    let up = std::thread::spawn(move || {
        let mut reader = Frames::default();
        let mut buf = [0u8; 16384];
        loop {
            let n = match c_read.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            up_shared.pass();
            for (kind, body) in reader.push(&buf[..n]) {
                let armed = up_shared.armed.lock().expect("lock").clone();
                if reader.runs(kind, &body, armed.as_deref()) {
                    up_cut.store(true, Ordering::SeqCst);
                }
            }
            if s_write.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = s_write.shutdown(Shutdown::Write);
    });
    let mut buf = [0u8; 16384];
    loop {
        let n = match server.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        shared.pass();
        if cut.load(Ordering::SeqCst) {
            // The server answered: the request is applied. Its reply is lost.
            *shared.armed.lock().expect("lock") = None;
            shared.cuts.fetch_add(1, Ordering::SeqCst);
            let _ = client.shutdown(Shutdown::Both);
            let _ = server.shutdown(Shutdown::Both);
            break;
        }
        if client.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = up.join();
}

/// The client's messages, framed: the first (startup) has no type byte.
#[derive(Default)]
struct Frames {
    pending: Vec<u8>,
    started: bool,
    /// Prepared statements by name: their text.
    statements: HashMap<String, String>,
}

impl Frames {
    fn push(&mut self, bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::new();
        loop {
            let head = if self.started { 5 } else { 4 };
            if self.pending.len() < head {
                break;
            }
            let at = head - 4;
            let len = u32::from_be_bytes(self.pending[at..at + 4].try_into().expect("4")) as usize;
            if self.pending.len() < at + len {
                break;
            }
            let kind = if self.started { self.pending[0] } else { 0 };
            let body = self.pending[head..at + len].to_vec();
            self.pending.drain(..at + len);
            if !self.started {
                // An SSLRequest or GSSENCRequest is answered with one byte
                // and followed by the real startup: still unframed.
                let code = body
                    .get(..4)
                    .map(|c| u32::from_be_bytes(c.try_into().expect("4")));
                self.started = !matches!(code, Some(80877103 | 80877104));
            }
            out.push((kind, body));
        }
        out
    }

    /// Whether message `kind` runs a statement whose text holds `sql`
    /// (recording the statements that `Parse` names as it goes, armed or
    /// not).
    fn runs(&mut self, kind: u8, body: &[u8], sql: Option<&str>) -> bool {
        let holds = |text: &str| sql.is_some_and(|sql| text.contains(sql));
        let cstr = |at: usize| -> (String, usize) {
            let end = body[at..]
                .iter()
                .position(|b| *b == 0)
                .map_or(body.len(), |e| at + e);
            (
                String::from_utf8_lossy(&body[at..end]).into_owned(),
                end + 1,
            )
        };
        match kind {
            b'P' => {
                let (name, at) = cstr(0);
                let (text, _) = cstr(at);
                let hit = name.is_empty() && holds(&text);
                self.statements.insert(name, text);
                hit
            }
            b'B' => {
                let (_portal, at) = cstr(0);
                let (name, _) = cstr(at);
                self.statements.get(&name).is_some_and(|t| holds(t))
            }
            b'Q' => holds(&cstr(0).0),
            _ => false,
        }
    }
}
