//! The workflows page (issue 59, item 3) in the real browser: each
//! workflow's last instance, its success rate and p50/p95 over 7 days, and
//! a chart drawn by the server (a bar a day, a line of its p50); it fits a
//! 360 px screen.

use super::Browser;
use crate::Test;
use crate::serve::{Server, TOKEN};

#[test]
fn the_workflows_page_shows_how_each_has_been_doing() {
    let t = Test::new();
    crate::serve::stats::flaky_history(&t);
    let s = Server::start(&t, &[], &[]);
    let b = Browser::start();
    b.goto(&format!("{}/workflows?token={TOKEN}", s.base));
    b.wait_text("75% ok");
    let row = b.text("tbody tr");
    assert!(row.contains("bad") && row.contains("failed"), "{row}");
    assert_eq!(b.count("svg.trend rect.ok"), 7, "a bar a day");
    let label = b.js("return document.querySelector('svg.trend').getAttribute('aria-label');");
    assert!(
        label
            .as_str()
            .unwrap()
            .starts_with("3 completed, 1 failed in 7 days"),
        "{label}"
    );
    let wide = b.too_wide_at(&format!("{}/workflows", s.base));
    assert!(
        wide.is_empty(),
        "the workflows page is wider than the window at {wide:?} px"
    );
}
