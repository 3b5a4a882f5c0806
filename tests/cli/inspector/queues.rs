//! A queue key's page in the real browser (issue 59, item 4): linked from
//! the queues table, it lists the admitted instance and the line in the
//! order the key admits them, each linking to its instance, and fits a
//! 360 px screen.

use super::Browser;
use crate::Test;
use crate::serve::{Server, TOKEN};

#[test]
fn a_keys_page_lists_its_line_in_admission_order() {
    let t = Test::new();
    crate::queues::line::line(&t);
    let s = Server::start(&t, &[], &[]);
    let b = Browser::start();
    b.goto(&format!("{}/queues?token={TOKEN}", s.base));
    b.click("a[href='/queues/deploy']");
    b.wait_text("Waiting, in the order they are admitted");
    let rows = b
        .js("return [...document.querySelectorAll('table.line tbody')].map(e => e.innerText).join('\\n');")
        .as_str()
        .expect("text")
        .to_string();
    let at = |id: &str| rows.find(id).unwrap_or_else(|| panic!("{id} in {rows}"));
    assert!(
        at("urgent") < at("w1") && at("w1") < at("w2") && at("w2") < at("w3"),
        "{rows}"
    );
    assert_eq!(
        b.count("table.line tbody tr"),
        5,
        "one admitted, four waiting"
    );
    b.click("a[href='/instances/urgent']");
    b.wait_text("Instance urgent");
    let wide = b.too_wide_at(&format!("{}/queues/deploy", s.base));
    assert!(
        wide.is_empty(),
        "the queue page is wider than the window at {wide:?} px"
    );
    assert!(b.console_errors().is_empty());
}
