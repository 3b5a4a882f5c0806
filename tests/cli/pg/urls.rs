//! Database URLs: never printed (help, man page, completions, errors), passwords holding URL characters, parameters passed on, sslmode over a socket, schema names.

use super::*;

/// `wf --db URL ARGS…` in schema `schema`.
fn wf_in(t: &Test, url: &str, schema: &str, args: &[&str]) -> crate::Ran {
    crate::Ran::from(
        bare(t)
            .env("WF_PG_SCHEMA", schema)
            .args(["--db", url])
            .args(args)
            .output()
            .expect("run wf"),
    )
}

/// Every piece of `password` of 3 characters or more, split at the
/// characters a URL gives a meaning to: none may be printed.
fn pieces(password: &str) -> Vec<&str> {
    password
        .split(['?', '@', '/', '%', ':'])
        .filter(|p| p.len() >= 3)
        .collect()
}

#[track_caller]
fn never_printed(ran: &crate::Ran, password: &str) {
    for piece in pieces(password).into_iter().chain([password]) {
        assert!(
            !ran.stdout.contains(piece) && !ran.stderr.contains(piece),
            "`{piece}` of the password is printed:\n{}\n{}",
            ran.stdout,
            ran.stderr
        );
    }
}

/// Not PostgreSQL only: `--help` shows no `WF_DB` on either pass.
#[test]
fn help_man_and_completions_never_show_the_database_url() {
    let url = "postgres://wf:hunter2-k3y%3Fzzq@db.internal:5432/wf";
    for args in [
        &["--help"][..],
        &["-h"],
        &["run", "--help"],
        &["help", "worker"],
        &["schedule", "add", "--help"],
        &["man"],
        &["completions", "bash"],
    ] {
        let ran = crate::Ran::from(
            Command::new(assert_cmd::cargo::cargo_bin("wf"))
                .env("WF_DB", url)
                .args(args)
                .output()
                .expect("run wf"),
        );
        ran.code(0);
        never_printed(&ran, "hunter2-k3y?zzq");
        assert!(
            !ran.stdout.contains("db.internal"),
            "{args:?}: {}",
            ran.stdout
        );
        if args == ["--help"] {
            // The variable is named, its value never shown.
            assert!(ran.stdout.contains("$WF_DB"), "{}", ran.stdout);
        }
    }
}

#[test]
fn passwords_holding_url_characters_authenticate_and_are_never_printed() {
    let Some(t) = pg_test() else { return };
    t.write("hello.yaml", HELLO);
    let base = schema(&t);
    // Each role with its own schema (which it creates), a password holding
    // what a URL gives a meaning to, written percent-encoded.
    for (n, (password, encoded)) in [
        ("s3cr?t", "s3cr%3Ft"),
        ("p@ss", "p%40ss"),
        ("p%25w", "p%2525w"),
        ("k3y/zz:q", "k3y%2Fzz%3Aq"),
        // `?` needs no escape in a password (libpq's rule).
        ("k3y?zzq", "k3y?zzq"),
    ]
    .into_iter()
    .enumerate()
    {
        let role = format!("{base}_{n}");
        t.psql(&format!(
            "CREATE ROLE {role} LOGIN PASSWORD '{password}'; GRANT CREATE ON DATABASE postgres TO {role}"
        ));
        let url = url_with(
            &t,
            &format!("{role}:{encoded}"),
            "postgres",
            "sslmode=disable",
        );
        let ran = wf_in(&t, &url, &role, &["run", "hello.yaml", "--id", &role]);
        ran.code(0);
        never_printed(&ran, password);
        for args in [
            &["list"][..],
            &["inspect", &role],
            &["trace", &role],
            &["trace", &role, "--format", "otlp"],
        ] {
            let ran = wf_in(&t, &url, &role, args);
            ran.code(0);
            never_printed(&ran, password);
        }
        assert_eq!(
            t.psql(&format!(
                "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = '{role}'"
            )),
            role
        );
        // A wrong password of the same kind: one line naming the database,
        // not the password.
        let wrong = format!("{encoded}x");
        let url = url_with(
            &t,
            &format!("{role}:{wrong}"),
            "postgres",
            "sslmode=disable",
        );
        let ran = wf_in(&t, &url, &role, &["list"]);
        one_line_error(
            &ran,
            &[&format!("{role}@"), "password authentication failed"],
            password,
        );
        never_printed(&ran, password);
    }
    // Written without the escapes a URL needs: refused, naming nothing of
    // the URL but its scheme (any part of it may hold a piece of the
    // password).
    for userinfo in ["wf:k3y@zzq", "wf:k3y/zzq", "wf:1234/k3yzzq", "wf:k3y%zzq"] {
        let url = url_with(&t, userinfo, "postgres", "sslmode=disable");
        let ran = wf_in(&t, &url, &base, &["list"]);
        one_line_error(&ran, &["postgres://…", "not a valid PostgreSQL URL"], "k3y");
        never_printed(&ran, "k3y@zzq");
    }
}

#[test]
fn url_parameters_are_passed_on_as_given() {
    let Some(t) = pg_test() else { return };
    t.write("hello.yaml", HELLO);
    let s = schema(&t);
    // `options`, percent-encoded as it must be, takes effect: read-only
    // transactions refuse wf's first write.
    let url = url_with(
        &t,
        "wf",
        "postgres",
        "sslmode=disable&options=-c%20default_transaction_read_only%3Don",
    );
    let ran = wf_in(&t, &url, &s, &["run", "hello.yaml"]);
    ran.code(1);
    assert!(
        ran.stderr.contains("read-only transaction"),
        "{}",
        ran.stderr
    );
    assert!(!t.path().join("ran.log").exists());
    // A `+` is a plus, `%20` a space: the application name as given, seen
    // by the server while a worker waits for work.
    let url = url_with(
        &t,
        "wf",
        "postgres",
        "sslmode=disable&application_name=wf%2Bx+y%20z",
    );
    wf_in(&t, &url, &s, &["run", "hello.yaml"]).code(0);
    let worker = Bg::from_child(
        bare(&t)
            .env("WF_PG_SCHEMA", &s)
            .args(["--db", &url, "worker", "--poll", "1h"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn wf"),
    );
    eventually("the worker's session", || {
        t.psql(&format!(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'wf+x+y z' \
             AND query = 'LISTEN \"wf_{s}\"'"
        )) != "0"
    });
    worker.signal("TERM");
    worker.finish();
}

#[test]
fn sslmode_is_ignored_over_a_unix_socket_as_libpq_does() {
    let Some(t) = pg_test() else { return };
    let Some(dir) = std::env::var_os("WF_TEST_PG_DIR") else {
        eprintln!("the test server's socket folder is unknown (WF_TEST_PG_DIR): not run");
        return;
    };
    let (url, _) = t.pg.as_ref().unwrap();
    let port = host_port(url).split(':').nth(1).expect("a port in the URL");
    let dir = dir.to_string_lossy().replace('/', "%2F");
    t.write("hello.yaml", HELLO);
    for mode in ["require", "verify-ca", "verify-full"] {
        for url in [
            format!("postgres://wf@{dir}:{port}/postgres?sslmode={mode}"),
            format!(
                "postgres://wf@/postgres?host={dir}&port={port}&sslmode={mode}&sslrootcert=/no/such.pem"
            ),
        ] {
            let ran = wf_at(&t, &url, &["run", "hello.yaml"]);
            assert_eq!(ran.code, 0, "{url}: {}", ran.stderr);
        }
    }
    assert_eq!(t.read("ran.log"), "ran\n".repeat(6));
}

#[test]
fn keyword_and_longest_schema_names_work_and_others_are_refused() {
    if pg_test().is_none() {
        return;
    }
    // SQL keywords, and the longest name whose channel (`wf_<schema>`)
    // fits PostgreSQL's 63 bytes: every command works, and a signal wakes
    // an idle worker.
    let long = {
        let t = Test::new();
        let base = schema(&t);
        format!("{base}_{}", "x".repeat(60 - base.len() - 1))
    };
    for name in ["select", "user", long.as_str()] {
        let t = Test::new().env("WF_PG_SCHEMA", name);
        t.psql(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"));
        signal_wakes_an_idle_worker(&t, name);
        let list = t.wf(&["list", "--json"]).code(0).json();
        assert_eq!(list.as_array().map(Vec::len), Some(1), "{name}");
        assert_eq!(
            t.psql(&format!(
                "SELECT count(*) FROM pg_tables WHERE schemaname = '{name}' AND tablename = 'instances'"
            )),
            "1"
        );
        t.psql(&format!("DROP SCHEMA \"{name}\" CASCADE"));
    }
    // One byte more, PostgreSQL's own schemas and a name wf does not take:
    // one line naming WF_PG_SCHEMA, before anything is created.
    let too_long = format!("{long}x");
    for name in [
        too_long.as_str(),
        "pg_catalog",
        "pg_toast",
        "pg_wf",
        "information_schema",
        "Select",
    ] {
        let t = Test::new().env("WF_PG_SCHEMA", name);
        t.write("hello.yaml", HELLO);
        let ran = t.wf(&["run", "hello.yaml"]);
        ran.code(1);
        assert!(
            ran.stderr.contains("WF_PG_SCHEMA") && ran.stderr.lines().count() == 1,
            "{name}: {}",
            ran.stderr
        );
        assert!(!t.path().join("ran.log").exists(), "{name}");
    }
    let t = Test::new();
    assert_eq!(
        t.psql(&format!(
            "SELECT count(*) FROM pg_namespace WHERE nspname IN ('{too_long}', 'pg_wf', 'Select')"
        )),
        "0"
    );
}
