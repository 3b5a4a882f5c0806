//! Who is signed in, in the real browser (issue 57, items 3 and 4): a
//! `read` token's session shows the history and no button that would
//! change it; the instance page lists who did what, the list who started
//! each instance; *Sign out* ends the session.

use super::{Browser, Scene, scene};

#[test]
fn a_read_session_sees_everything_and_no_action_and_signs_out() {
    let Scene {
        t, s, b, waiting, ..
    } = scene();
    // The default token's session (the scene's): buttons, and the
    // actions recorded on the instance.
    b.goto(&format!("{}/instances/{waiting}", s.base));
    assert!(b.count("a[href$='/act/cancel']") == 1);
    let actions = b.text("table.actions");
    assert!(
        actions.contains("start") && actions.contains("cli:"),
        "{actions}"
    );
    let list_page = |b: &Browser| {
        b.goto(&format!("{}/", s.base));
        b.text("table")
    };
    assert!(
        list_page(&b).contains("cli:"),
        "the list names who started each"
    );

    // A `read` token, signed in in another browser.
    let r = t.wf(&[
        "serve", "token", "add", "viewer", "--scope", "read", "--json",
    ]);
    r.code(0);
    let token = serde_json::from_str::<serde_json::Value>(&r.stdout).unwrap()["token"]
        .as_str()
        .unwrap()
        .to_string();
    let reader = Browser::start();
    reader.goto(&format!("{}/?token={token}", s.base));
    assert_eq!(reader.url(), format!("{}/", s.base));
    reader.goto(&format!("{}/instances/{waiting}", s.base));
    assert!(reader.text("h1").contains(&waiting[..12]));
    for act in ["signal", "cancel", "terminate", "resume", "retry"] {
        assert_eq!(
            reader.count(&format!("a[href$='/act/{act}']")),
            0,
            "a read session has no {act} button"
        );
    }
    assert_eq!(reader.count("form[action$='/act/restart']"), 0);
    reader.goto(&format!("{}/workflows", s.base));
    assert_eq!(reader.count("a[href$='/start']"), 0, "no Start… button");
    // Going to an action's address anyway: refused, naming the scope.
    reader.goto(&format!("{}/instances/{waiting}/act/cancel", s.base));
    reader.click("button[type=submit]");
    reader.wait_text("needs the `operate` scope");
    assert_eq!(t.inspect(&waiting)["status"], "waiting");

    // Sign out: the session is over, the next page asks for a token.
    reader.goto(&format!("{}/", s.base));
    reader.click("form.signout button");
    reader.wait_text("Sign in");
    reader.goto(&format!("{}/instances/{waiting}", s.base));
    reader.wait_text("Sign in");
    // The other browser's session goes on.
    b.goto(&format!("{}/instances/{waiting}", s.base));
    assert!(b.count("a[href$='/act/cancel']") == 1);
}

#[test]
fn an_admin_brings_an_archive_back_from_the_database_page() {
    let Scene { t, s, b, done, .. } = scene();
    let archive = t.path().join("kept.jsonl.zst");
    t.wf(&[
        "prune",
        "--older-than",
        "0s",
        "--status",
        "completed",
        "--archive",
        archive.to_str().unwrap(),
    ])
    .code(0);
    assert_ne!(t.wf(&["inspect", &done, "--json"]).code, 0, "pruned");
    b.goto(&format!("{}/database", s.base));
    assert_eq!(b.count("a[href='/api/v1/db/backup']"), 1);
    b.rt.block_on(async {
        let input = b
            .c()
            .find(fantoccini::Locator::Css(
                "form[data-upload] input[type=file]",
            ))
            .await?;
        input.send_keys(archive.to_str().unwrap()).await
    })
    .expect("choose the archive");
    b.click("form[data-upload] button[type=submit]");
    b.wait_text("Imported 1 of 1 archived instance(s)");
    assert_eq!(t.inspect(&done)["status"], "completed");
    // The page lists who pruned.
    b.goto(&format!("{}/database", s.base));
    assert!(b.text("table.actions").contains("prune"));
}
