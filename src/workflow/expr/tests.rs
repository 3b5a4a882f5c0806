//! Tests of what wf adds to GitHub's expression language and of the promise
//! never to panic. GitHub's semantics themselves are checked against its
//! conformance data (`tests/expressions`).

use super::*;
use serde_json::json;

fn ctx() -> Value {
    json!({
        "inputs": { "order_id": "A-1", "amount": 100, "list": [10, 20, 30], "Env": "Production" },
        "state": { "charged": true, "count": 2.0 },
        "steps": {
            "charge-card": { "status": "ok", "output": { "json": { "id": "ch_1", "n": 7 } } },
            "scan": { "output": { "json": {} } }
        },
        "__status": { "failure": true, "cancelled": false }
    })
}

fn ev(src: &str) -> Value {
    match parse(src) {
        Ok(e) => match e.eval(&ctx()) {
            Ok(v) => v,
            Err(err) => panic!("eval of {src:?} failed: {err}"),
        },
        Err(err) => panic!("parse of {src:?} failed: {err}"),
    }
}

fn text(src: &str) -> String {
    parse(src)
        .and_then(|e| e.eval_text(&ctx()))
        .unwrap_or_else(|e| panic!("{src:?}: {e}"))
}

fn parse_err(src: &str) -> (usize, String) {
    match parse(src) {
        Err(e) => (e.pos().unwrap_or(usize::MAX), e.message()),
        Ok(e) => panic!("expected a parse error for {src:?}, got {e:?}"),
    }
}

#[test]
fn array_literals_and_status_functions() {
    assert_eq!(ev("[1, 'a', inputs.amount]"), json!([1, "a", 100]));
    assert_eq!(ev("[]"), json!([]));
    assert_eq!(
        ev("contains(['production', 'staging'], inputs.env)"),
        json!(true)
    );
    assert_eq!(ev("failure()"), json!(true));
    assert_eq!(ev("cancelled()"), json!(false));
    assert_eq!(ev("success()"), json!(false));
    assert_eq!(ev("always()"), json!(true));
    // Function names in any case.
    assert_eq!(ev("ALWAYS()"), json!(true));
    assert_eq!(ev("fromJson('[1]')[0]"), json!(1));
    assert!(parse("always()").unwrap().calls_handler_function());
    assert!(parse("Failure() || x").unwrap().calls_handler_function());
    assert!(!parse("success()").unwrap().calls_handler_function());
}

#[test]
fn values_keep_their_json_type_and_render_as_github_does() {
    // Whole numbers stay integers; NaN (not JSON) is null, infinities text.
    assert_eq!(ev("inputs.amount"), json!(100));
    assert_eq!(ev("1.2e2"), json!(120));
    assert_eq!(ev("0.5"), json!(0.5));
    assert_eq!(ev("NaN"), Value::Null);
    assert_eq!(ev("-Infinity"), json!("-Infinity"));
    assert_eq!(ev("inputs.list"), json!([10, 20, 30]));
    // In a string: GitHub's text.
    assert_eq!(text("inputs.list"), "Array");
    assert_eq!(text("steps.charge-card.output.json"), "Object");
    assert_eq!(text("1.2e2"), "120");
    assert_eq!(text("-0"), "0");
    assert_eq!(text("null"), "");
    assert_eq!(text("0.1 == 0.1"), "true");
    assert_eq!(text("format('{0}', 1e21)"), "1e+21");
    // Truthiness of the value itself: NaN is falsy though it renders "NaN".
    assert!(!parse("NaN").unwrap().eval_truthy(&ctx()).unwrap());
    assert!(parse("'false'").unwrap().eval_truthy(&ctx()).unwrap());
}

#[test]
fn lookups_and_comparisons_ignore_case_and_coerce() {
    assert_eq!(ev("INPUTS.ORDER_ID"), json!("A-1"));
    assert_eq!(ev("inputs.env == 'production'"), json!(true));
    assert_eq!(ev("steps.scan.output.json.findings > 0"), json!(false));
    assert_eq!(ev("'3' == 3"), json!(true));
    assert_eq!(ev("null == 0"), json!(true));
    assert_eq!(ev("'C:\\temp\\new'"), json!("C:\\temp\\new"));
    assert_eq!(ev("'it''s'"), json!("it's"));
    assert_eq!(ev("inputs.list.*"), json!([10, 20, 30]));
    assert_eq!(ev("inputs.nope.x[3]"), Value::Null);
}

#[test]
fn references_are_static_paths() {
    let refs = |src: &str| parse(src).unwrap().references();
    assert_eq!(
        refs("steps.charge-card.output.json.id"),
        vec![vec!["steps", "charge-card", "output", "json", "id"]]
    );
    assert_eq!(
        refs("steps['charge-card'].output"),
        vec![vec!["steps", "charge-card", "output"]]
    );
    // A dynamic index or a `*` ends the path; the index's own paths count.
    assert_eq!(
        refs("state[inputs.key].x"),
        vec![vec!["state"], vec!["inputs", "key"]]
    );
    assert_eq!(refs("steps.*.output"), vec![vec!["steps"]]);
    assert_eq!(
        refs("format('{0}', Inputs.Who)"),
        vec![vec!["Inputs", "Who"]]
    );
}

#[test]
fn errors_name_what_and_where() {
    assert_eq!(
        parse_err("a && b )"),
        (7, "Unexpected symbol: ')' (it has nothing to close)".into())
    );
    assert_eq!(
        parse_err("inputs.x == \"y\""),
        (
            12,
            "Unexpected symbol: '\"y\"' (strings are in single quotes, with '' for a quote)".into()
        )
    );
    assert_eq!(
        parse_err("a = b"),
        (2, "Unexpected symbol: '=' (compare with `==`)".into())
    );
    let (pos, msg) = parse_err("upper(inputs.x)");
    assert_eq!(pos, 0);
    assert!(msg.starts_with("Unrecognized function: 'upper' ("), "{msg}");
    assert_eq!(
        parse_err("contains(1)"),
        (
            0,
            "Too few parameters supplied: 'contains' (`contains` takes 2)".into()
        )
    );
    assert_eq!(parse_err("").1, "An expression was expected");
    assert_eq!(
        parse_err("'open").1,
        "Unexpected symbol: ''open' (unterminated string)"
    );
}

#[test]
fn nesting_is_capped_as_github_caps_it() {
    let ok = format!(
        "{}1{}",
        "(".repeat(MAX_DEPTH - 1),
        ")".repeat(MAX_DEPTH - 1)
    );
    assert_eq!(parse(&ok).map(|e| e.eval(&ctx())), Ok(Ok(json!(1))));
    let deep = format!("{}1{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH));
    assert!(
        parse(&deep)
            .unwrap_err()
            .message()
            .starts_with(&format!("Exceeded max expression depth {MAX_DEPTH}"))
    );
    for huge in ["(".repeat(20_000), "!".repeat(20_000), "a[".repeat(10_000)] {
        assert!(parse(&huge).is_err());
    }
    assert!(
        parse(&"a".repeat(MAX_LENGTH + 1))
            .unwrap_err()
            .message()
            .starts_with("Exceeded max expression length")
    );
}

#[test]
fn long_flat_chains_do_not_nest() {
    // As long as an expression may be (MAX_LENGTH).
    let ors = vec!["0"; 4_000].join(" || ") + " || 5";
    assert_eq!(ev(&ors), json!(5));
    let eqs = vec!["true"; 2_500].join(" == ");
    assert_eq!(ev(&eqs), json!(true));
}

#[test]
fn made_values_are_capped_in_memory() {
    let big =
        "format('{0}{0}{0}{0}{0}{0}{0}{0}{0}{0}', '0123456789012345678901234567890123456789')";
    let bigger = format!("format('{{0}}{{0}}{{0}}{{0}}{{0}}{{0}}{{0}}{{0}}{{0}}{{0}}', {big})");
    let biggest = format!("format('{{0}}{{0}}{{0}}{{0}}{{0}}{{0}}{{0}}{{0}}{{0}}{{0}}', {bigger})");
    // 40 kB of text (80 kB as counted), then 400 kB (800 kB): allowed.
    let huge = format!("format('{{0}}{{0}}{{0}}{{0}}{{0}}{{0}}{{0}}{{0}}{{0}}{{0}}', {biggest})");
    assert!(parse(&huge).unwrap().eval(&ctx()).is_ok());
    // Twice that, over the 1 MiB budget: refused, not made.
    let over = format!("format('{{0}}{{0}}', {huge})");
    match parse(&over).unwrap().eval(&ctx()) {
        Err(e) => assert_eq!(e.message(), "The maximum allowed memory size was exceeded"),
        Ok(v) => panic!("made {} bytes", v.as_str().map_or(0, str::len)),
    }
}

#[test]
fn compiled_form_round_trips_non_json_numbers() {
    for src in ["NaN", "Infinity", "-0", "0xff", "[1, 'a']", "a.*.b[*]"] {
        let e = parse(src).unwrap();
        let text = serde_json::to_string(&e).unwrap();
        let back: Expr = serde_json::from_str(&text).unwrap();
        assert_eq!(format!("{back:?}"), format!("{e:?}"), "{src}: {text}");
    }
}

#[test]
fn random_input_never_panics() {
    const ALPHABET: &[u8] = b"ab-_.[]()!=<>&|'\"\\ 019eExX+-ntNaI*,\xc3\xa9\xc4\xb1$}{";
    let c = ctx();
    for src in random_strings(ALPHABET, 0x9E37_79B9_7F4A_7C15, 40) {
        match parse(&src) {
            Ok(e) => {
                let _ = e.eval(&c);
                let _ = e.eval_text(&c);
                let _ = e.references();
            }
            Err(e) => assert!(e.pos().is_some_and(|p| p <= src.len()), "{src:?}: {e}"),
        }
    }
}
