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
