//! Many instances at once in the real browser (issue 59, item 5): rows
//! checked in the list, or every instance its filters match, canceled or
//! retried after one confirmation that lists each one's plan; each is
//! reported, and the history changes as the CLI's would. At 360 px the
//! confirmation fits.

use super::Browser;
use crate::bulk::{history, status};
use crate::serve::{Server, TOKEN, until};

#[test]
fn checked_rows_and_a_filters_matches_are_acted_on_after_one_confirmation() {
    let t = crate::Test::new();
    let (_waiting, failed, _done) = history(&t);
    let s = Server::start(&t, &[], &[]);
    let b = Browser::start();
    b.goto(&format!("{}/?token={TOKEN}", s.base));
    // Two rows checked, then Cancel…: the confirmation lists their plans.
    b.click("input[name=pick][value=g1]");
    b.click("input[name=pick][value=g2]");
    b.click("form.bulk button[value=cancel]");
    b.wait_text("Cancel instances");
    assert_eq!(b.count("table.bulk tbody tr"), 2);
    let plans = b.text("table.bulk tbody");
    assert!(plans.contains("canceled; compensates `prep`"), "{plans}");
    let here = b.url();
    let wide = b.too_wide_at(&here);
    assert!(
        wide.is_empty(),
        "the confirmation is wider than the window at {wide:?} px"
    );
    b.resize(1280, 900);
    b.fill("input[name=reason]", "from the page");
    b.click("form.stack button[type=submit]");
    b.wait_text("Cancel instances: done");
    let report = b.text("table.bulk tbody");
    assert!(report.contains("canceling"), "{report}");
    until("both canceled", || {
        status(&t, "g1") == "canceled" && status(&t, "g2") == "canceled"
    });
    assert_eq!(status(&t, "g3"), "waiting");
    // Every failed one, by the list's filter, retried once fixed.
    t.write("fixed", "");
    b.goto(&format!("{}/?status=failed", s.base));
    b.js("document.querySelector('form.bulk select[name=which]').value = 'matching';");
    b.click("form.bulk button[value=retry]");
    b.wait_text("Retry failed instances");
    assert_eq!(b.count("table.bulk tbody tr"), 2);
    assert!(b.text("table.bulk tbody").contains("retries `once`"));
    b.click("form.stack button[type=submit]");
    b.wait_text("Retry failed instances: done");
    for id in &failed {
        until("the retried instance completed", || {
            status(&t, id) == "completed"
        });
    }
    let errors = b.console_errors();
    assert!(errors.is_empty(), "console errors: {errors:?}");
    // Nothing checked: said (a 400 page), nothing done.
    b.goto(&format!("{}/", s.base));
    b.click("form.bulk button[value=resume]");
    b.wait_text("no instance is checked");
    assert_eq!(status(&t, "g3"), "waiting");
}
