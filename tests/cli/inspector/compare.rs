//! Two runs side by side in the real browser (issue 59, item 2): the
//! instance page's *Compare* form opens the comparison of its last two
//! runs, each step's row saying what each run did of it; it fits a 360 px
//! screen.

use super::Browser;
use crate::Test;
use crate::serve::{Server, TOKEN};

#[test]
fn the_last_two_runs_compare_from_the_instance_page() {
    let t = Test::new();
    crate::inspect::two_runs(&t);
    let s = Server::start(&t, &[], &[]);
    let b = Browser::start();
    b.goto(&format!("{}/instances/r?token={TOKEN}", s.base));
    b.click("form.compare-form button");
    b.wait_text("Runs 1 and 2 of r");
    let table = b.text("table.compare");
    assert!(table.contains("flaky"), "{table}");
    assert_eq!(b.count("table.compare tbody tr"), 3);
    assert_eq!(b.count("table.compare tbody tr.differs"), 3);
    let flaky = b.text("table.compare tbody tr:nth-child(2)");
    assert!(
        flaky.contains("failed") && flaky.contains("exit.1") && flaky.contains("ok"),
        "{flaky}"
    );
    // The API answers the same document.
    let api = s.get("/api/v1/instances/r/compare?a=1&b=2");
    assert_eq!(api.status, 200, "{}", api.text());
    assert_eq!(api.json()["steps"][1]["a"]["error_type"], "exit.1");
    assert_eq!(s.get("/api/v1/instances/r/compare?a=1").status, 400);
    assert_eq!(s.get("/api/v1/instances/r/compare?a=1&b=9").status, 404);
    // A run that does not exist is a 404 page, not a panic.
    let missing = s.raw(
        "GET",
        "/instances/r/compare?a=1&b=9",
        &[("cookie", s.sign_in(TOKEN))],
        None,
    );
    assert_eq!(missing.status, 404);
    let wide = b.too_wide_at(&format!("{}/instances/r/compare?a=1&b=2", s.base));
    assert!(
        wide.is_empty(),
        "the comparison is wider than the window at {wide:?} px"
    );
}
