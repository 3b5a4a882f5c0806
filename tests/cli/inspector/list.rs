//! The instance list in the real browser (issue 59, item 1): counts by
//! status for the filters, each a link to those; the search box (`/`
//! reaches it) read into the filters in the URL (an error's words, an id
//! prefix, a workflow's name); started, duration and ended columns;
//! children hidden under their parent, whose row opens to them. At 1280
//! and at 360 px, nothing wider than the screen.

use super::Browser;
use crate::serve::{Server, TOKEN, until};
use fantoccini::Locator;
use serde_json::json;

/// The count a status's link says, as shown (`3`, `10,000+`).
fn count_of(b: &Browser, status: &str) -> String {
    b.text(&format!("nav.counts a[data-status='{status}'] .n"))
}

#[test]
fn the_list_counts_searches_and_opens_parents() {
    let t = crate::finding::history();
    let s = Server::start(&t, &[], &[]);
    let b = Browser::start();
    b.goto(&format!("{}/?token={TOKEN}", s.base));
    // Children are hidden: the six roots are listed, and counted.
    assert_eq!(b.count("table.instances tbody tr"), 6);
    assert_eq!(b.text("nav.counts a[aria-current] .n"), "6");
    assert_eq!(count_of(&b, "failed"), "3");
    assert_eq!(count_of(&b, "completed"), "3");
    let heads = b.text("table.instances thead");
    for col in ["Started", "Duration", "Ended"] {
        assert!(heads.contains(col), "{heads}");
    }
    // A count is a link to those instances; its URL can be shared.
    b.click("nav.counts a[data-status='failed']");
    until("the failed ones", || b.url().contains("status=failed"));
    assert_eq!(b.count("table.instances tbody tr"), 3);
    assert_eq!(
        b.text("nav.counts a[aria-current]"),
        b.text("nav.counts a[data-status='failed']")
    );
    // The search box: `/` reaches it; an error's words become the error
    // filter, shown in its field.
    b.goto(&format!("{}/", s.base));
    b.rt.block_on(async {
        let body = b.c().find(Locator::Css("body")).await?;
        body.send_keys("/").await
    })
    .unwrap();
    assert_eq!(b.js("return document.activeElement.id;"), json!("q"));
    b.rt.block_on(async {
        let q = b.c().find(Locator::Css("#q")).await?;
        q.send_keys("refused\u{e007}").await
    })
    .unwrap();
    until("the search's filter", || b.url().contains("error=refused"));
    assert_eq!(b.count("table.instances tbody tr"), 1);
    assert!(b.text("table.instances tbody").contains("f1a2b3"));
    assert_eq!(
        b.js("return document.querySelector('form.filters input[name=error]').value;"),
        json!("refused")
    );
    // An id prefix, and a workflow's name.
    b.fill("#q", "f1a2");
    b.click("form.search button");
    until("the id filter", || b.url().contains("id=f1a2"));
    assert_eq!(b.count("table.instances tbody tr"), 2);
    b.fill("#q", "fleet");
    b.click("form.search button");
    until("the workflow filter", || b.url().contains("workflow=fleet"));
    assert_eq!(b.count("table.instances tbody tr"), 1);
    // The parent's row says how many children it has, and opens to them,
    // each naming the step that made it.
    assert_eq!(b.text("a.kids"), "▸ 2");
    b.click("a.kids");
    until("the children", || b.count("table.instances tr.child") == 2);
    let kids = b.text("table.instances tbody");
    assert!(kids.contains("step regions["), "{kids}");
    assert_eq!(
        b.js("return document.querySelector('a.kids').getAttribute('aria-expanded');"),
        json!("true")
    );
    // …and closes.
    b.click("a.kids");
    until("the children gone", || {
        b.count("table.instances tr.child") == 0
    });
    // Children at the top level when asked.
    b.goto(&format!("{}/?children=1", s.base));
    assert_eq!(b.count("table.instances tbody tr"), 8);
    assert_eq!(b.text("nav.counts a[aria-current] .n"), "8");
    // At 360 px, nothing is wider than the screen.
    for page in ["/", "/?children=1&open=fleet1", "/?status=failed"] {
        for (w, h) in [(1280, 900), (360, 740)] {
            b.resize(w, h);
            b.goto(&format!("{}{page}", s.base));
            assert!(!b.overflows(), "{page} is wider than {w} px");
        }
    }
    b.goto(&format!("{}/?open=fleet1", s.base));
    assert_eq!(b.count("table.instances tr.child"), 2);
    let errors = b.console_errors();
    assert!(errors.is_empty(), "console errors: {errors:?}");
}
