//! The waterfall (issue 59, item 2) in the real browser: a time axis over
//! each run, every bar labelled with its duration, and the critical path
//! marked: the slow branch that `last` waited for, not the fast one beside
//! it. It fits a 360 px screen.

use super::Browser;
use crate::Test;
use crate::serve::{Server, TOKEN};

const BRANCHES: &str = "name: branches
steps:
  - id: slow
    run: sleep 0.4
  - id: fast
    needs: []
    run: 'true'
  - id: last
    needs: [slow, fast]
    run: 'true'
";

#[test]
fn the_waterfall_has_a_time_axis_labels_and_its_critical_path() {
    let t = Test::new();
    let (id, r) = t.run_yaml("branches.yaml", BRANCHES, &[]);
    r.code(0);
    let s = Server::start(&t, &[], &[]);
    let b = Browser::start();
    b.goto(&format!("{}/instances/{id}?token={TOKEN}", s.base));
    b.wait_text("Run 1");
    assert_eq!(
        b.count(".waterfall .axis .tick"),
        5,
        "ticks at each quarter"
    );
    let axis = b.text(".waterfall .axis");
    assert!(axis.contains("ms") || axis.contains('s'), "{axis}");
    let bars = b.count(".waterfall .lane .bar");
    assert_eq!(
        b.count(".waterfall .lane .dur"),
        bars,
        "every bar has its duration"
    );
    let crit: Vec<String> = b
        .js("return [...document.querySelectorAll('.waterfall .name.crit')].map(e => e.textContent.trim());")
        .as_array()
        .expect("names")
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(crit, ["branches/slow", "branches/last"], "{crit:?}");
    let wide = b.too_wide_at(&format!("{}/instances/{id}", s.base));
    assert!(
        wide.is_empty(),
        "the instance page is wider than the window at {wide:?} px"
    );
}
