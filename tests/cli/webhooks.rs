//! Webhooks (`on.webhook`, `POST /hooks/NAME`) through a real client: GitHub
//! push payloads signed as GitHub signs them (HMAC-SHA256 of the body,
//! `X-Hub-Signature-256: sha256=HEX`), redeliveries that start one
//! instance however many arrive at once, and refusals that record nothing.

use crate::Test;
use crate::serve::{Server, TOKEN};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

const KEY: &str = "It's a Secret to Everybody";

const RELEASE: &str = "name: release
inputs:
  ref: { required: true }
  pusher: { default: nobody }
  repo: { default: none }
on:
  webhook:
    name: github-push
    secret: HOOK_KEY
    inputs:
      ref: \"${{ body.ref }}\"
      pusher: \"${{ body.pusher.name }}\"
      repo: \"${{ body.repository.full_name }}\"
    dedupe: \"${{ headers['X-GitHub-Delivery'] }}\"
steps:
  - id: build
    run: echo building ${{ inputs.ref }} for ${{ inputs.pusher }}
";

/// GitHub's signature of `body` under `key`.
fn sign(key: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).unwrap();
    mac.update(body);
    format!("sha256={}", hex_lower(&mac.finalize().into_bytes()))
}

fn hex_lower(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A push event as GitHub sends it (its fields as documented, trimmed of
/// the repository's many URLs).
fn push_payload(reference: &str) -> Vec<u8> {
    let v = json!({
        "ref": reference,
        "before": "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
        "after": "0000000000000000000000000000000000000000",
        "repository": {
            "id": 186853002,
            "node_id": "MDEwOlJlcG9zaXRvcnkxODY4NTMwMDI=",
            "name": "Hello-World",
            "full_name": "Codertocat/Hello-World",
            "private": false,
            "owner": { "name": "Codertocat", "email": "21031067+Codertocat@users.noreply.github.com", "login": "Codertocat", "id": 21031067 },
            "html_url": "https://github.com/Codertocat/Hello-World",
            "default_branch": "main"
        },
        "pusher": { "name": "Codertocat", "email": "21031067+Codertocat@users.noreply.github.com" },
        "sender": { "login": "Codertocat", "id": 21031067, "type": "User" },
        "created": false,
        "deleted": false,
        "forced": false,
        "base_ref": null,
        "compare": "https://github.com/Codertocat/Hello-World/compare/6113728f27ae...000000000000",
        "commits": [
            { "id": "0000000000000000000000000000000000000000", "message": "Update README.md", "timestamp": "2019-05-15T15:20:30-04:00",
              "author": { "name": "Codertocat", "email": "21031067+Codertocat@users.noreply.github.com", "username": "Codertocat" },
              "added": [], "removed": [], "modified": ["README.md"] }
        ],
        "head_commit": null
    });
    serde_json::to_vec_pretty(&v).unwrap()
}

fn deliver(
    s: &Server,
    hook: &str,
    body: &[u8],
    delivery: &str,
    signature: &str,
) -> crate::serve::Resp {
    s.raw(
        "POST",
        &format!("/hooks/{hook}"),
        &headers(delivery, signature),
        Some(body.to_vec()),
    )
}

fn headers(delivery: &str, signature: &str) -> Vec<(&'static str, String)> {
    vec![
        ("content-type", "application/json".into()),
        ("user-agent", "GitHub-Hookshot/044aadd".into()),
        ("x-github-event", "push".into()),
        ("x-github-delivery", delivery.into()),
        ("x-github-hook-id", "292430182".into()),
        ("x-hub-signature-256", signature.into()),
    ]
}

fn count(t: &Test) -> usize {
    let r = t.wf(&["list", "--json", "--limit", "0"]);
    serde_json::from_str::<Value>(&r.stdout)
        .map(|v| v.as_array().map_or(0, Vec::len))
        .unwrap_or(0)
}

/// Registers `release` and serves it (`worker`: with a worker, which
/// writes its heartbeat).
fn setup(t: &Test, worker: bool) -> Server {
    let path = t.write("release.yaml", RELEASE);
    t.wf(&["workflow", "add", path.to_str().unwrap()]).code(0);
    let extra: &[&str] = if worker {
        &["--worker", "--poll", "50ms"]
    } else {
        &[]
    };
    Server::start(t, extra, &[("HOOK_KEY", KEY)])
}

#[test]
fn a_signed_github_push_starts_the_workflow_with_inputs_from_the_payload() {
    let t = Test::new();
    let s = setup(&t, true);
    let body = push_payload("refs/heads/main");
    let r = deliver(
        &s,
        "github-push",
        &body,
        "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        &sign(KEY, &body),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["id"].as_str().unwrap().to_string();
    assert_eq!(r.json()["workflow"], "release");
    let done = s
        .get(&format!("/api/v1/instances/{id}/result?wait=30s"))
        .json();
    assert_eq!(done["status"], "completed", "{done}");
    let inspect = t.inspect(&id);
    assert_eq!(
        inspect["inputs"],
        json!({ "ref": "refs/heads/main", "pusher": "Codertocat", "repo": "Codertocat/Hello-World" })
    );
    let logs = t.wf(&["logs", &id, "build"]);
    assert_eq!(logs.stdout, "building refs/heads/main for Codertocat\n");
    // No token is needed (the signature is the proof), and none is logged.
    assert!(!s.log().contains(KEY));
    let _ = TOKEN;
}

#[test]
fn a_redelivery_sent_three_times_at_once_starts_one_instance() {
    let t = Test::new();
    let s = setup(&t, false);
    let body = push_payload("refs/heads/release");
    let sig = sign(KEY, &body);
    let futures: Vec<_> = (0..3)
        .map(|_| {
            s.request(
                "POST",
                "/hooks/github-push",
                &headers("delivery-same", &sig),
                Some(body.clone()),
            )
        })
        .collect();
    let answers = s.all(futures);
    let ids: std::collections::BTreeSet<String> = answers
        .iter()
        .map(|r| r.json()["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 1, "{answers:?}");
    let mut statuses: Vec<u16> = answers.iter().map(|r| r.status).collect();
    statuses.sort_unstable();
    assert_eq!(statuses, vec![200, 200, 201]);
    // Sent again later, one by one: the same instance still.
    for _ in 0..3 {
        let r = deliver(&s, "github-push", &body, "delivery-same", &sig);
        assert_eq!(r.status, 200);
        assert_eq!(r.json()["created"], false);
    }
    assert_eq!(count(&t), 1);
    // Another delivery id is another instance.
    let r = deliver(&s, "github-push", &body, "delivery-other", &sig);
    assert_eq!(r.status, 201);
    assert_eq!(count(&t), 2);
}

#[test]
fn refused_deliveries_record_nothing() {
    let t = Test::new();
    let s = setup(&t, false);
    let body = push_payload("refs/heads/main");
    let before = t.dump();
    // A wrong signature, none, one under another key, one of another body.
    for sig in [
        String::new(),
        "sha256=00".into(),
        "sha1=0123".into(),
        sign("another key", &body),
        sign(KEY, b"{}"),
    ] {
        let r = deliver(&s, "github-push", &body, "d1", &sig);
        assert_eq!(
            (r.status, r.code().as_str()),
            (401, "bad_signature"),
            "{sig}"
        );
    }
    // No such hook (checked before the signature: nothing to sign with).
    let r = deliver(&s, "nope", &body, "d2", &sign(KEY, &body));
    assert_eq!((r.status, r.code().as_str()), (404, "not_found"));
    // Not JSON (signed).
    let junk = b"ref=refs/heads/main".to_vec();
    let r = deliver(&s, "github-push", &junk, "d3", &sign(KEY, &junk));
    assert_eq!((r.status, r.code().as_str()), (400, "invalid"));
    // JSON the inputs cannot come from: `ref` is required.
    let empty = b"{}".to_vec();
    let r = deliver(&s, "github-push", &empty, "d4", &sign(KEY, &empty));
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("ref"), "{}", r.text());
    // Over 1 MiB.
    let big = format!("{{\"ref\": \"{}\"}}", "x".repeat(1024 * 1024)).into_bytes();
    let r = deliver(&s, "github-push", &big, "d5", &sign(KEY, &big));
    assert_eq!((r.status, r.code().as_str()), (413, "too_large"));
    // GitHub's ping when the hook is made: answered, nothing started.
    let ping = br#"{"zen": "Keep it logically awesome.", "hook_id": 292430182}"#.to_vec();
    let mut h = headers("d6", &sign(KEY, &ping));
    h[2].1 = "ping".into();
    let r = s.raw("POST", "/hooks/github-push", &h, Some(ping));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(t.dump(), before, "a refused delivery wrote something");
    assert_eq!(count(&t), 0);
}

#[test]
fn a_hook_whose_key_is_not_set_refuses_every_delivery() {
    let t = Test::new();
    let path = t.write("release.yaml", RELEASE);
    t.wf(&["workflow", "add", path.to_str().unwrap()]).code(0);
    let s = Server::start(&t, &[], &[("HOOK_KEY", "")]);
    let body = push_payload("refs/heads/main");
    let r = deliver(&s, "github-push", &body, "d1", &sign("", &body));
    assert_eq!((r.status, r.code().as_str()), (503, "unavailable"));
    assert!(r.text().contains("HOOK_KEY"), "{}", r.text());
    assert_eq!(count(&t), 0);
}
