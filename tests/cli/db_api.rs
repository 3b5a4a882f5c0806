//! The whole history through `wf serve`, for an `admin` token (issue 56
//! beside issue 57's scopes): a backup downloaded while the server runs
//! opens as a history and checks sound; a copy into another database
//! reads the same; an archive of `wf prune --archive` posted back brings
//! its instances back; a `read` token is refused each, and sees no such
//! control on the Database page.

use crate::db::{file, ids, same_reads, second, wf_on};
use crate::serve::{Server, TOKEN};
use crate::{Ran, Test};
use serde_json::{Value, json};
use std::ffi::OsStr;

/// `wf serve` on `db` (a SQLite file of the test's folder).
fn serve_on(t: &Test, db: &OsStr) -> Server {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("wf"));
    cmd.current_dir(t.path())
        .env_remove("WF_DB")
        .env("NO_COLOR", "1")
        .env("TMPDIR", t.tmp_path())
        .env("WF_SERVE_TOKEN", TOKEN)
        .env("XDG_STATE_HOME", t.path().join("state"))
        .arg("--db")
        .arg(db)
        .args(["serve", "--listen", "127.0.0.1:0"]);
    if let Some((_, schema)) = &t.pg {
        cmd.env("WF_PG_SCHEMA", schema);
    }
    Server::spawn(cmd, TOKEN.to_string())
}

fn run_on(t: &Test, db: &OsStr, name: &str, yaml: &str) -> (String, Ran) {
    let path = t.write(name, yaml);
    let ran = wf_on(t, db, &["run", path.to_str().unwrap(), "--json"]);
    let id = serde_json::from_str::<Value>(&ran.stdout).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    (id, ran)
}

fn bearer(token: &str) -> (&'static str, String) {
    ("authorization", format!("Bearer {token}"))
}

#[test]
fn an_admin_backs_up_copies_and_imports_through_the_server() {
    let t = Test::new();
    let source = file(&t, "source.db");
    let (done, r) = run_on(
        &t,
        &source,
        "one.yaml",
        "name: one\nsteps:\n  - id: a\n    run: echo a\n",
    );
    r.code(0);
    let (waiting, r) = run_on(
        &t,
        &source,
        "gate.yaml",
        "name: gate\nsteps:\n  - id: g\n    wait_for_event: { name: go }\n",
    );
    r.code(3);
    let viewer = {
        let r = wf_on(
            &t,
            &source,
            &[
                "serve", "token", "add", "viewer", "--scope", "read", "--json",
            ],
        );
        r.code(0);
        r.json()["token"].as_str().unwrap().to_string()
    };
    let s = serve_on(&t, &source);

    // A read token may do none of it, and sees no control for it.
    for (method, path) in [
        ("GET", "/api/v1/db/backup"),
        ("POST", "/api/v1/db/copy"),
        ("POST", "/api/v1/db/import"),
        ("GET", "/api/v1/tokens"),
    ] {
        let r = s.raw(
            method,
            path,
            &[bearer(&viewer), ("content-type", "application/json".into())],
            Some(b"{}".to_vec()),
        );
        assert_eq!(
            (r.status, r.code().as_str()),
            (403, "forbidden"),
            "{method} {path}"
        );
        assert!(r.text().contains("`admin`"), "{}", r.text());
    }
    let page = |token: &str| {
        s.raw(
            "GET",
            "/database",
            &[bearer(token), ("accept", "text/html".into())],
            None,
        )
        .text()
    };
    assert!(!page(&viewer).contains("/api/v1/db/backup"));
    assert!(page(TOKEN).contains("/api/v1/db/backup") && page(TOKEN).contains("/database/copy"));

    // A backup, downloaded while the server runs: a history that checks
    // sound and holds what the source holds.
    let r = s.get("/api/v1/db/backup");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("application/vnd.sqlite3")
    );
    assert!(
        r.header("content-disposition")
            .unwrap()
            .contains("attachment")
    );
    assert_eq!(r.header("x-wf-instances").as_deref(), Some("2"));
    let backup = t.path().join("downloaded.db");
    std::fs::write(&backup, &r.body).unwrap();
    let backup = backup.into_os_string();
    wf_on(&t, &backup, &["db", "check"]).code(0);
    assert_eq!(ids(&t, &backup), ids(&t, &source));
    let inspect = |db: &OsStr, id: &str| wf_on(&t, db, &["inspect", id, "--json"]).json();
    assert_eq!(inspect(&backup, &waiting), inspect(&source, &waiting));
    // Asked gzipped (as schemathesis asks), it comes whole: the body's end
    // once panicked the server when the compression layer polled it again.
    let r = s.call(
        "GET",
        "/api/v1/db/backup",
        &[("accept-encoding", "gzip")],
        None,
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-encoding").as_deref(), Some("gzip"));
    let gz = t.path().join("downloaded.db.gz");
    std::fs::write(&gz, &r.body).unwrap();
    let unzipped = t.path().join("unzipped.db");
    crate::python(
        "import gzip, sys; open(sys.argv[2], 'wb').write(gzip.decompress(open(sys.argv[1], 'rb').read()))",
        &[gz.as_os_str(), unzipped.as_os_str()],
    );
    let unzipped = unzipped.into_os_string();
    wf_on(&t, &unzipped, &["db", "check"]).code(0);
    assert_eq!(ids(&t, &unzipped), ids(&t, &source));

    // A copy into another database: the same reads there.
    let target = second(&t);
    let r = s.post("/api/v1/db/copy", json!({"to": target.to_str().unwrap()}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"instances": 2, "written": 2, "skipped": 0})
    );
    same_reads(&t, &source, &target);
    // Again: the target holds history now, which refuses a copy not
    // asked to continue (409).
    let r = s.post("/api/v1/db/copy", json!({"to": target.to_str().unwrap()}));
    assert_eq!((r.status, r.code().as_str()), (409, "conflict"));
    assert!(r.text().contains("already holds history"), "{}", r.text());
    assert!(
        r.text().contains(r#"`\"resume\": true`"#) && !r.text().contains("--resume"),
        "{}",
        r.text()
    );
    let r = s.post(
        "/api/v1/db/copy",
        json!({"to": target.to_str().unwrap(), "resume": true}),
    );
    assert_eq!(
        r.json(),
        json!({"instances": 2, "written": 0, "skipped": 2})
    );

    // An archive posted back brings the pruned instance back.
    let archive = t.path().join("pruned.jsonl.zst");
    wf_on(
        &t,
        &source,
        &[
            "prune",
            "--older-than",
            "0s",
            "--archive",
            archive.to_str().unwrap(),
        ],
    )
    .code(0);
    assert_eq!(ids(&t, &source), vec![waiting.clone()]);
    let before = inspect(&backup, &done);
    let r = s.call(
        "POST",
        "/api/v1/db/import",
        &[],
        Some(std::fs::read(&archive).unwrap()),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json(), json!({"records": 1, "written": 1, "skipped": 0}));
    assert_eq!(inspect(&source, &done), before);
    // The Database page's form copies too, and says what it did.
    let third = file(&t, "third.db");
    let body = format!(
        "to={}",
        percent_encoding::utf8_percent_encode(
            third.to_str().unwrap(),
            percent_encoding::NON_ALPHANUMERIC
        )
    );
    let r = s.call(
        "POST",
        "/database/copy",
        &[
            ("content-type", "application/x-www-form-urlencoded"),
            ("accept", "text/html"),
        ],
        Some(body.into_bytes()),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.text().contains("Copied 2 of 2 instance(s)"),
        "{}",
        r.text()
    );
    assert_eq!(ids(&t, &third), ids(&t, &source));
    // A body that is no archive is refused, naming the body.
    let r = s.call(
        "POST",
        "/api/v1/db/import",
        &[],
        Some(b"not json\n".to_vec()),
    );
    assert_eq!((r.status, r.code().as_str()), (400, "invalid"));
    assert!(r.text().contains("the body:1"), "{}", r.text());
}
