//! `wf trace` on a terminal (`Test::on_terminal`, a pty 80 columns wide):
//! the tree fits the terminal, spans named relative to their workflow;
//! with `--wide`, and piped, it is whole.

use super::{trace_json, wf};
use crate::Test;

const LONG: &str = r#"
name: order-fulfilment-pipeline
steps:
  - id: reserve-inventory-in-every-warehouse
    run: echo reserved
  - id: notify-the-shipping-partner-of-the-parcel
    run: echo notified
  - id: charge-the-customers-card-on-file
    run: exit 3
    errors: { 3: the_card_issuer_declined_the_charge_for_insufficient_funds }
    retry: { max_attempts: 2, interval: 10ms }
"#;

const STEPS: [&str; 3] = [
    "reserve-inventory-in-every-warehouse",
    "notify-the-shipping-partner-of-the-parcel",
    "charge-the-customers-card-on-file",
];

/// `text` without ANSI escape sequences (`ESC [ … letter`).
fn plain(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn the_tree_fits_80_columns_on_a_terminal_and_is_whole_with_wide_or_piped() {
    let t = Test::new();
    let path = t.write("flow.yaml", LONG);
    wf(&t, &["run", path.to_str().expect("utf-8"), "--id", "long1"]).code(1);
    let trace_id = trace_json(&t, "long1")[0]["trace_id"]
        .as_str()
        .expect("trace id")
        .to_string();
    let error_type = "error.type=user.the_card_issuer_declined_the_charge_for_insufficient_funds";

    // Piped: whole lines, whole names, every detail on its span's line.
    let piped = wf(&t, &["trace", "long1"]).code(0).stdout.clone();
    for step in STEPS {
        let full = format!("order-fulfilment-pipeline/{step}");
        assert!(piped.lines().any(|l| l.contains(&full)), "{piped}");
    }
    assert!(
        piped
            .lines()
            .any(|l| l.contains("outcome=retry  ERROR  ") && l.ends_with(error_type)),
        "{piped}"
    );
    assert!(piped.lines().any(|l| l.chars().count() > 80), "{piped}");

    // `--wide` on the terminal: the same.
    let wide = t.on_terminal(80, &["trace", "long1", "--wide"]);
    wide.code(0);
    assert_eq!(plain(&wide.stdout), piped);

    // On the terminal: every line fits.
    let shown = t.on_terminal(80, &["trace", "long1"]);
    shown.code(0);
    let shown = plain(&shown.stdout);
    for line in shown.lines() {
        assert!(
            line.chars().count() <= 80,
            "a line of {} columns:\n{line}\n{shown}",
            line.chars().count()
        );
    }
    // The root keeps its name, the steps are named relative to it, whole.
    let first = shown.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("order-fulfilment-pipeline/workflow "),
        "{shown}"
    );
    assert!(!shown.contains("order-fulfilment-pipeline/r"), "{shown}");
    assert!(!shown.contains("order-fulfilment-pipeline/n"), "{shown}");
    assert!(!shown.contains("order-fulfilment-pipeline/c"), "{shown}");
    for step in STEPS {
        assert!(
            shown.lines().any(|l| l.starts_with(&format!("├── {step} "))
                || l.starts_with(&format!("└── {step} "))),
            "{step}: {shown}"
        );
    }
    // Two attempts of the card step, each with its outcome.
    assert_eq!(
        shown.matches("charge-the-customers-card-on-file ").count(),
        2
    );
    assert!(shown.contains("outcome=failed"), "{shown}");
    // Ids are whole, on lines beneath their span's when they do not fit
    // beside it; a detail longer than a line is cut.
    assert!(shown.contains(&format!("trace={trace_id}")), "{shown}");
    let errors = piped.matches(error_type).count();
    assert!(errors >= 2, "{piped}");
    let cut = "error.type=user.the_card_issuer_declined_the_charge";
    assert_eq!(shown.matches(cut).count(), errors, "{shown}");
    assert!(shown.lines().count() > piped.lines().count(), "{shown}");
}
