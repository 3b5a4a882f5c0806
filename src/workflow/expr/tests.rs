//! Tests of the expression language: parsing, evaluation, error positions and
//! the promise never to panic.

use super::eval::loose_eq;
use super::*;
use serde_json::json;

fn ctx() -> Value {
    json!({
        "inputs": { "order_id": "A-1", "amount": 100, "list": [10, 20, 30], "zero": 0, "empty": "" },
        "state": { "charged": true, "count": 2.0 },
        "steps": {
            "charge-card": { "status": "ok", "output": { "json": { "id": "ch_1", "n": 7 } } },
            "a": { "status": "skipped", "output": null }
        },
        "item": { "sku": "X" },
        "index": 1,
        "env": { "API": "http://x" }
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

fn eval_err(src: &str) -> String {
    match parse(src).map(|e| e.eval(&ctx())) {
        Ok(Err(e)) => e.to_string(),
        other => panic!("expected an eval error for {src:?}, got {other:?}"),
    }
}

fn parse_err(src: &str) -> (usize, String) {
    match parse(src) {
        Err(e) => (e.pos().unwrap_or(usize::MAX), e.message()),
        Ok(e) => panic!("expected a parse error for {src:?}, got {e:?}"),
    }
}

#[test]
fn functions_and_arrays() {
    assert_eq!(ev("[1, 'a', inputs.amount]"), json!([1, "a", 100]));
    assert_eq!(ev("[]"), json!([]));
    assert_eq!(ev("contains(inputs.list, 20)"), json!(true));
    assert_eq!(ev("contains(['A', 'b'], 'a')"), json!(true));
    assert_eq!(ev("contains('Hello', 'LL')"), json!(true));
    assert_eq!(ev("contains(inputs.list, 21)"), json!(false));
    assert_eq!(ev("startsWith(inputs.order_id, 'a-')"), json!(true));
    assert_eq!(ev("endsWith(env.API, '//X')"), json!(true));
    assert_eq!(
        ev("format('{0}/{1} {{x}} {0}', inputs.order_id, index)"),
        json!("A-1/1 {x} A-1")
    );
    assert_eq!(ev("join(inputs.list)"), json!("10,20,30"));
    assert_eq!(ev("join(inputs.list, ' | ')"), json!("10 | 20 | 30"));
    assert_eq!(ev("join('solo')"), json!("solo"));
    assert_eq!(ev("toJSON(item)"), json!("{\n  \"sku\": \"X\"\n}"));
    assert_eq!(ev("fromJSON('[1, {\"a\": 2}]')[1].a"), json!(2));
    assert_eq!(
        ev("fromJSON(toJSON(steps['charge-card'].output))"),
        json!({ "json": { "id": "ch_1", "n": 7 } })
    );
    assert!(eval_err("fromJSON('nope')").starts_with("fromJSON: the text is not JSON"));
    assert!(eval_err("format('{2}', 1)").contains("only 1 argument(s)"));
    let (pos, msg) = parse_err("a && upper(b)");
    assert_eq!(pos, 5);
    assert!(
        msg.starts_with("unknown function `upper` (functions: contains,"),
        "{msg}"
    );
    let (_, msg) = parse_err("startswith(a, b)");
    assert!(msg.contains("did you mean `startsWith`?"), "{msg}");
    let (_, msg) = parse_err("contains(a)");
    assert_eq!(msg, "`contains` takes 2 argument(s), not 1");
    let (_, msg) = parse_err("join(a, b");
    assert!(msg.starts_with("expected `)` to close"), "{msg}");
    // References inside calls and arrays are seen by the validator.
    let e = parse("contains([inputs.a], steps.x.output)").unwrap();
    assert_eq!(
        e.references(),
        vec![vec!["inputs", "a"], vec!["steps", "x", "output"]]
    );
}

#[test]
fn literals() {
    assert_eq!(ev("null"), Value::Null);
    assert_eq!(ev(" true "), json!(true));
    assert_eq!(ev("false"), json!(false));
    assert_eq!(ev("42"), json!(42));
    assert_eq!(ev("-7"), json!(-7));
    assert_eq!(ev("3.25"), json!(3.25));
    assert_eq!(ev("-0.5"), json!(-0.5));
    assert_eq!(ev("1e3"), json!(1000.0));
    assert_eq!(ev("18446744073709551615"), json!(18446744073709551615u64));
    assert_eq!(ev("'hi'"), json!("hi"));
    assert_eq!(ev("\"hi\""), json!("hi"));
    assert_eq!(ev("''"), json!(""));
    assert_eq!(ev("'héllo ✓'"), json!("héllo ✓"));
}

#[test]
fn string_escapes() {
    assert_eq!(ev(r#"'a\'b'"#), json!("a'b"));
    assert_eq!(ev(r#""a\"b""#), json!("a\"b"));
    assert_eq!(ev(r#"'back\\slash'"#), json!("back\\slash"));
    assert_eq!(ev(r#"'l1\nl2\tx\r'"#), json!("l1\nl2\tx\r"));
    assert_eq!(ev(r#"'say "hi"'"#), json!("say \"hi\""));
    assert_eq!(ev(r#""it's""#), json!("it's"));
    assert_eq!(ev(r#"'}}'"#), json!("}}"));
}

#[test]
fn identifiers_and_hyphens() {
    assert_eq!(ev("steps.charge-card.output.json.id"), json!("ch_1"));
    assert_eq!(ev("steps.charge-card.status"), json!("ok"));
    assert_eq!(ev("inputs.order_id"), json!("A-1"));
    assert_eq!(ev("_unknown"), Value::Null);
    // Keywords are fine as property names.
    assert_eq!(
        parse("a.true.null").map(|e| e.references()),
        Ok(vec![vec!["a".into(), "true".into(), "null".into()]])
    );
}

#[test]
fn null_propagation() {
    assert_eq!(ev("nope"), Value::Null);
    assert_eq!(ev("nope.deeper.still"), Value::Null);
    assert_eq!(ev("inputs.missing"), Value::Null);
    assert_eq!(ev("inputs.missing.x[3]"), Value::Null);
    assert_eq!(ev("inputs.amount.x"), Value::Null);
    assert_eq!(ev("inputs.order_id.length"), Value::Null);
    assert_eq!(ev("steps.a.output.json"), Value::Null);
    assert_eq!(ev("inputs.list[7]"), Value::Null);
    assert_eq!(ev("inputs.list[-1]"), Value::Null);
    assert_eq!(ev("inputs.list['x']"), Value::Null);
    assert_eq!(ev("inputs.list[null]"), Value::Null);
    assert_eq!(ev("null.x"), Value::Null);
    assert_eq!(ev("'abc'[0]"), Value::Null);
    // A context that is not an object has no names.
    assert_eq!(
        parse("inputs.x").and_then(|e| e.eval(&json!(3))),
        Ok(Value::Null)
    );
}

#[test]
fn indexing() {
    assert_eq!(ev("inputs.list[0]"), json!(10));
    assert_eq!(ev("inputs.list[2]"), json!(30));
    assert_eq!(ev("inputs.list[index]"), json!(20));
    assert_eq!(ev("inputs.list[1.0]"), json!(20));
    assert_eq!(ev("inputs.list[1.5]"), Value::Null);
    assert_eq!(ev("steps['charge-card'].output['json'].id"), json!("ch_1"));
    assert_eq!(ev("steps[\"charge-card\"]['output'].json['n']"), json!(7));
    assert_eq!(ev("inputs['list'][inputs.list[0] == 10]"), Value::Null);
    assert_eq!(ev("(inputs.list)[1]"), json!(20));
    assert_eq!(
        parse("m[3]").and_then(|e| e.eval(&json!({"m": {"3": "three"}}))),
        Ok(json!("three"))
    );
}

#[test]
fn precedence() {
    // && binds tighter than ||.
    assert_eq!(ev("true || false && false"), json!(true));
    assert_eq!(ev("(true || false) && false"), json!(false));
    // Comparison binds tighter than equality, which binds tighter than &&.
    assert_eq!(ev("1 < 2 == true"), json!(true));
    assert_eq!(ev("true == 1 < 2"), json!(true));
    assert_eq!(ev("1 == 1 && 2 == 2"), json!(true));
    // ! binds tighter than comparisons, access tighter than !.
    assert_eq!(ev("!inputs.zero"), json!(true));
    assert_eq!(ev("!state.charged == false"), json!(true));
    assert_eq!(ev("!(1 == 2)"), json!(true));
    assert_eq!(ev("!!inputs.amount"), json!(true));
    // Left associativity: (1 == 1) == true.
    assert_eq!(ev("1 == 1 == true"), json!(true));
    assert_eq!(ev("2 == 2 == 2"), json!(false));
}

#[test]
fn chained_comparison_is_an_error() {
    // (1 < 2) < 3 compares a boolean with a number.
    assert_eq!(
        eval_err("1 < 2 < 3"),
        "cannot compare boolean with number using `<`"
    );
}

#[test]
fn equality() {
    assert_eq!(ev("1 == 1.0"), json!(true));
    assert_eq!(ev("state.count == 2"), json!(true));
    assert_eq!(ev("1 != 1.0"), json!(false));
    assert_eq!(ev("'1' == 1"), json!(false));
    assert_eq!(ev("null == nope"), json!(true));
    assert_eq!(ev("steps.a.status == 'skipped'"), json!(true));
    assert_eq!(ev("inputs.list == inputs.list"), json!(true));
    assert_eq!(ev("item == item"), json!(true));
    assert_eq!(ev("false == 0"), json!(false));
    assert_eq!(ev("18446744073709551615 == -1"), json!(false));
    assert!(loose_eq(&json!([1, {"a": 2}]), &json!([1.0, {"a": 2.0}])));
    assert!(!loose_eq(&json!({"a": 1}), &json!({"b": 1})));
    assert!(!loose_eq(&json!([1]), &json!([1, 2])));
}

#[test]
fn comparisons() {
    assert_eq!(ev("1 < 2"), json!(true));
    assert_eq!(ev("2 <= 2.0"), json!(true));
    assert_eq!(ev("3 > 2.5"), json!(true));
    assert_eq!(ev("-3 >= -2"), json!(false));
    assert_eq!(ev("'abc' < 'abd'"), json!(true));
    assert_eq!(ev("'b' > 'abc'"), json!(true));
    assert_eq!(ev("inputs.amount >= 100"), json!(true));
    assert_eq!(ev("18446744073709551615 > 1"), json!(true));
    assert_eq!(ev("-1 < 18446744073709551615"), json!(true));
    assert_eq!(ev("0.5 < 1"), json!(true));
}

#[test]
fn comparison_type_errors() {
    assert_eq!(
        eval_err("'a' < 1"),
        "cannot compare string with number using `<`"
    );
    assert_eq!(
        eval_err("nope > 1"),
        "cannot compare null with number using `>`"
    );
    assert_eq!(
        eval_err("true <= false"),
        "cannot compare boolean with boolean using `<=`"
    );
    assert_eq!(
        eval_err("inputs.list >= inputs"),
        "cannot compare array with object using `>=`"
    );
    // Errors inside short-circuited operands are never reached.
    assert_eq!(ev("false && 'a' < 1"), json!(false));
    assert_eq!(ev("1 || 'a' < 1"), json!(1));
}

#[test]
fn truthiness() {
    for v in [
        json!(false),
        json!(null),
        json!(0),
        json!(0.0),
        json!(-0.0),
        json!(""),
    ] {
        assert!(!truthy(&v), "{v} should be falsy");
    }
    for v in [
        json!(true),
        json!(1),
        json!(-1),
        json!(0.1),
        json!("0"),
        json!("false"),
        json!([]),
        json!({}),
    ] {
        assert!(truthy(&v), "{v} should be truthy");
    }
}

#[test]
fn short_circuit_values() {
    assert_eq!(ev("inputs.missing || 'default'"), json!("default"));
    assert_eq!(ev("inputs.order_id || 'default'"), json!("A-1"));
    assert_eq!(ev("inputs.zero || inputs.empty"), json!(""));
    assert_eq!(ev("inputs.zero || inputs.empty || null"), Value::Null);
    assert_eq!(ev("inputs.amount && inputs.order_id"), json!("A-1"));
    assert_eq!(ev("inputs.zero && inputs.order_id"), json!(0));
    assert_eq!(ev("inputs.empty && nope"), json!(""));
    assert_eq!(
        ev("state.charged && steps.charge-card.output.json"),
        json!({ "id": "ch_1", "n": 7 })
    );
    assert_eq!(ev("!inputs.list"), json!(false));
    assert_eq!(ev("!nope"), json!(true));
}

#[test]
fn references() {
    let refs = |s: &str| match parse(s) {
        Ok(e) => e.references(),
        Err(e) => panic!("{s}: {e}"),
    };
    let p = |parts: &[&str]| parts.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        refs("steps.charge-card.output.json.id"),
        vec![p(&["steps", "charge-card", "output", "json", "id"])]
    );
    assert_eq!(
        refs("steps['a'].status"),
        vec![p(&["steps", "a", "status"])]
    );
    assert_eq!(
        refs("inputs.list[index]"),
        vec![p(&["inputs", "list"]), p(&["index"])]
    );
    assert_eq!(
        refs("inputs.list[index].name"),
        vec![p(&["inputs", "list"]), p(&["index"])]
    );
    assert_eq!(
        refs("inputs.list[0].name"),
        vec![p(&["inputs", "list", "0", "name"])]
    );
    assert_eq!(refs("item"), vec![p(&["item"])]);
    assert_eq!(refs("'x' == null || 3"), Vec::<Vec<String>>::new());
    assert_eq!(
        refs("!state.a && (env.B || secrets.C) == steps.d.status"),
        vec![
            p(&["state", "a"]),
            p(&["env", "B"]),
            p(&["secrets", "C"]),
            p(&["steps", "d", "status"])
        ]
    );
    // Parentheses are transparent; a non-name base still yields its own paths.
    assert_eq!(
        refs("(inputs).x[steps.y]"),
        vec![p(&["inputs", "x"]), p(&["steps", "y"])]
    );
    assert_eq!(refs("(a || b).c"), vec![p(&["a"]), p(&["b"])]);
    assert_eq!(refs("a[b[c]]"), vec![p(&["a"]), p(&["b"]), p(&["c"])]);
}

#[test]
fn parse_error_positions() {
    let cases: &[(&str, usize, &str)] = &[
        ("", 0, "empty expression"),
        ("   ", 0, "empty expression"),
        ("a && b )", 7, "unexpected `)` with nothing to close"),
        (")", 0, "unexpected `)`"),
        (
            "a &&",
            4,
            "expected an expression after `&&`, found end of expression",
        ),
        ("a && )", 5, "expected an expression after `&&`, found `)`"),
        (
            "a || ",
            5,
            "expected an expression after `||`, found end of expression",
        ),
        (
            "1 == ",
            5,
            "expected an expression after `==`, found end of expression",
        ),
        (
            "!",
            1,
            "expected an expression after `!`, found end of expression",
        ),
        ("a foo", 2, "trailing input `foo`"),
        ("a b c", 2, "trailing input `b c`"),
        ("'abc", 0, "unterminated string"),
        ("x == \"ab\\\"", 5, "unterminated string"),
        ("'a\\", 0, "unterminated string"),
        (
            "'a\\q'",
            2,
            "unknown escape `\\q` (use \\\\, \\', \\\", \\n, \\t or \\r)",
        ),
        ("a = b", 2, "unexpected `=` (did you mean `==`?)"),
        ("a & b", 2, "unexpected `&` (did you mean `&&`?)"),
        ("a | b", 2, "unexpected `|` (did you mean `||`?)"),
        (
            "a.",
            2,
            "expected a property name after `.`, found end of expression",
        ),
        ("a.0", 2, "expected a property name after `.`, found `0`"),
        (
            "a.'x'",
            2,
            "expected a property name after `.`, found `'x'`",
        ),
        (
            "(a",
            2,
            "expected `)` to close the `(` at offset 0, found end of expression",
        ),
        (
            "(a b",
            3,
            "expected `)` to close the `(` at offset 0, found `b`",
        ),
        (
            "a[1",
            3,
            "expected `]` to close the `[` at offset 1, found end of expression",
        ),
        ("a[]", 2, "expected an expression after `[`, found `]`"),
        ("()", 1, "expected an expression after `(`, found `)`"),
        ("a - b", 2, "unexpected `-`"),
        ("a # b", 2, "unexpected character `#`"),
        ("a ✓", 2, "unexpected character `✓`"),
        ("1e999", 0, "invalid number `1e999`"),
        ("01", 0, "invalid number `01`"),
        ("${{ a }}", 0, "unexpected character `$`"),
    ];
    for (src, pos, msg) in cases {
        assert_eq!(parse_err(src), (*pos, msg.to_string()), "for {src:?}");
    }
    // Display includes the offset.
    assert_eq!(
        parse("a && b )").map_err(|e| e.to_string()),
        Err("unexpected `)` with nothing to close at offset 7".into())
    );
}

#[test]
fn trailing_input_is_shortened() {
    let (pos, msg) = parse_err(&format!("a {}", "b".repeat(100)));
    assert_eq!(pos, 2);
    assert_eq!(msg, format!("trailing input `{}…`", "b".repeat(32)));
}

#[test]
fn nesting_limit() {
    let ok = format!("{}1{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH));
    assert_eq!(parse(&ok), Ok(Expr::Literal(json!(1))));
    let deep = format!(
        "{}1{}",
        "(".repeat(MAX_DEPTH + 1),
        ")".repeat(MAX_DEPTH + 1)
    );
    assert_eq!(parse(&deep), Err(ExprError::TooDeep { pos: MAX_DEPTH }));
    let huge = "(".repeat(100_000);
    assert!(matches!(parse(&huge), Err(ExprError::TooDeep { .. })));
    assert!(matches!(
        parse(&"!".repeat(100_000)),
        Err(ExprError::TooDeep { .. })
    ));
    assert!(matches!(
        parse(&"a[".repeat(100_000)),
        Err(ExprError::TooDeep { .. })
    ));
    assert_eq!(ev(&("!".repeat(MAX_DEPTH) + "1")), json!(true));
    assert_eq!(
        parse(&deep).map_err(|e| e.to_string()),
        Err(format!(
            "expression nests more than {MAX_DEPTH} levels deep at offset {MAX_DEPTH}"
        ))
    );
}

#[test]
fn long_flat_chains_do_not_nest() {
    let n = 50_000;
    let ors = vec!["nope"; n].join(" || ") + " || 5";
    assert_eq!(ev(&ors), json!(5));
    let eqs = vec!["true"; n].join(" == ");
    assert_eq!(ev(&eqs), json!(true));
    let path = "inputs".to_string() + &".x".repeat(n);
    assert_eq!(ev(&path), Value::Null);
}

#[test]
fn random_input_never_panics() {
    const ALPHABET: &[u8] = b"ab-_.[]()!=<>&|'\"\\ 019eE+-nt\xc3\xa9$}{";
    let c = ctx();
    for src in random_strings(ALPHABET, 0x9E37_79B9_7F4A_7C15, 40) {
        if let Ok(e) = parse(&src) {
            let _ = e.eval(&c);
            let _ = e.references();
        } else if let Err(e) = parse(&src) {
            assert!(e.pos().is_some_and(|p| p <= src.len()), "{src:?}: {e}");
        }
    }
}
