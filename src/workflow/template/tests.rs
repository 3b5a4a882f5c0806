//! The templates' unit tests: parsing, quoting, rendering.

use super::*;
use serde_json::json;

fn ctx() -> Value {
    json!({
        "inputs": { "order_id": "A-1", "amount": 100, "flag": true, "nothing": null },
        "output": { "json": { "id": 42, "tags": ["a", "b"], "meta": { "k": "v" } } },
        "env": { "API": "http://127.0.0.1:8080" },
        "steps": { "evil": { "output": { "stdout": "\"; touch pwned #", "sub": "$(touch pwned)" } } },
        "item": { "sku": "X-9" }
    })
}

fn tpl(s: &str) -> Template {
    match Template::parse(s) {
        Ok(t) => t,
        Err(e) => panic!("{s:?}: {e}"),
    }
}

fn value(s: &str) -> Value {
    match tpl(s).render_value(&ctx()) {
        Ok(v) => v,
        Err(e) => panic!("{s:?}: {e}"),
    }
}

fn text(s: &str) -> String {
    match tpl(s).render_text(&ctx()) {
        Ok(v) => v,
        Err(e) => panic!("{s:?}: {e}"),
    }
}

fn err(s: &str) -> (usize, String) {
    match Template::parse(s) {
        Err(e) => (e.offset, e.message),
        Ok(t) => panic!("expected an error for {s:?}, got {t:?}"),
    }
}

#[test]
fn literal_templates() {
    for s in ["", "plain", "echo $HOME ${HOME} $ {{ }} }}", "${ {", "$${"] {
        let t = tpl(s);
        assert!(t.is_literal(), "{s:?}");
        assert_eq!(t.exprs().count(), 0);
        assert_eq!(t.render_value(&ctx()), Ok(json!(s)));
        assert_eq!(t.render_text(&ctx()).as_deref(), Ok(s));
        assert_eq!(t.source(), s);
        assert!(!contains_expr(s));
    }
}

#[test]
fn whole_value_keeps_its_type() {
    assert_eq!(value("${{ output.json.id }}"), json!(42));
    assert_eq!(value("  ${{ output.json.tags }}\n"), json!(["a", "b"]));
    assert_eq!(value("${{output.json.meta}}"), json!({ "k": "v" }));
    assert_eq!(value("${{ inputs.flag }}"), json!(true));
    assert_eq!(value("${{ inputs.nothing }}"), Value::Null);
    assert_eq!(
        value("${{ inputs.missing || 'fallback' }}"),
        json!("fallback")
    );
}

#[test]
fn mixed_templates_render_as_text() {
    assert_eq!(value("id=${{ output.json.id }}"), json!("id=42"));
    assert_eq!(
        value("${{ output.json.id }}${{ output.json.id }}"),
        json!("4242")
    );
    assert_eq!(
        value("${{ env.API }}/charge"),
        json!("http://127.0.0.1:8080/charge")
    );
    assert_eq!(value("[${{ inputs.nothing }}]"), json!("[]"));
    assert_eq!(
        value("${{ output.json.tags }} ${{ output.json.meta }}"),
        json!("Array Object")
    );
    assert_eq!(text("${{ output.json.id }}"), "42");
    assert_eq!(text("Bearer ${{ inputs.order_id }}"), "Bearer A-1");
    assert_eq!(
        text("${{ inputs.flag }}/${{ 1.5 }}/${{ -2 }}"),
        "true/1.5/-2"
    );
    assert_eq!(text("${{ 'a' }}b${{ 'c' }}"), "abc");
    assert_eq!(text("x ${{ '}}' }} y"), "x }} y");
}

#[test]
fn value_text() {
    assert_eq!(value_to_text(&json!("s \"q\"")), "s \"q\"");
    assert_eq!(value_to_text(&Value::Null), "");
    assert_eq!(value_to_text(&json!(1)), "1");
    assert_eq!(value_to_text(&json!(2.5)), "2.5");
    assert_eq!(value_to_text(&json!(false)), "false");
    assert_eq!(value_to_text(&json!(120.0)), "120");
    assert_eq!(value_to_text(&json!([1, "a", null])), "Array");
    assert_eq!(value_to_text(&json!({ "a": { "b": [] } })), "Object");
}

#[test]
fn close_inside_string_literal() {
    let t = tpl("${{ 'a}}b' }}");
    assert_eq!(t.render_value(&ctx()), Ok(json!("a}}b")));
    let t = tpl("pre ${{ 'x}}' == 'y}}' }} post");
    assert_eq!(t.render_text(&ctx()).as_deref(), Ok("pre false post"));
    // `''` is a quote inside the literal; backslashes are literal.
    let t = tpl("${{ 'it''s }}' }}");
    assert_eq!(t.render_value(&ctx()), Ok(json!("it's }}")));
    let t = tpl(r"${{ 'C:\temp\' }}}");
    assert_eq!(t.render_text(&ctx()).as_deref(), Ok(r"C:\temp\}"));
}

#[test]
fn parse_errors_point_into_the_string() {
    assert_eq!(
        err("${{ a"),
        (0, "unterminated `${{`: no closing `}}`".into())
    );
    assert_eq!(
        err("abc ${{ a } "),
        (4, "unterminated `${{`: no closing `}}`".into())
    );
    assert_eq!(
        err("ok ${{ a }} then ${{ b"),
        (17, "unterminated `${{`: no closing `}}`".into())
    );
    assert_eq!(err("x ${{ 'abc }}"), (6, "unterminated string".into()));
    assert_eq!(err("x ${{ }}"), (5, "An expression was expected".into()));
    //                0123456789012
    assert_eq!(
        err("id ${{ a && }}"),
        (
            9,
            "Unexpected end of expression: '&&' (a value is missing at the end)".into()
        )
    );
    assert_eq!(
        err("${{ a ) }}"),
        (6, "Unexpected symbol: ')' (it has nothing to close)".into())
    );
    assert_eq!(
        err("é${{ a b }}"),
        (
            8,
            "Unexpected symbol: 'b' (an operator is missing before it)".into()
        )
    );
    assert_eq!(err("${{ ${{ a }} }}").1, "Unexpected symbol: '${{'");
    let deep = format!("${{{{ {}a }}}}", "!".repeat(100));
    assert!(
        err(&deep).1.starts_with("Exceeded max expression depth 50"),
        "{deep}"
    );
    assert_eq!(
        Template::parse("${{ a").map_err(|e| e.to_string()),
        Err("unterminated `${{`: no closing `}}` at offset 0".into())
    );
}

#[test]
fn exprs_and_flags() {
    let t = tpl("a ${{ inputs.order_id }} b ${{ steps.x.output }}");
    assert!(!t.is_literal());
    let refs: Vec<_> = t.exprs().flat_map(Expr::references).collect();
    assert_eq!(
        refs,
        vec![vec!["inputs", "order_id"], vec!["steps", "x", "output"]]
    );
    assert!(contains_expr("a ${{ b }}"));
    assert!(contains_expr("${{"));
    assert_eq!(
        t.to_string(),
        "a ${{ inputs.order_id }} b ${{ steps.x.output }}"
    );
}

#[test]
fn eval_errors_surface() {
    let t = tpl("n=${{ format('{0}') }}");
    assert_eq!(
        t.render_text(&ctx()),
        Err(ExprError::Eval {
            message:
                "The following format string references more arguments than were supplied: {0}"
                    .into()
        })
    );
    assert!(t.render_value(&ctx()).is_err());
}

#[test]
fn a_quoted_heredoc_gets_the_value_and_cannot_be_ended_early() {
    let mut env = Vec::new();
    let t = tpl("cat <<'EOF' > f\nid=${{ inputs.order_id }} $HOME\nEOF\necho ${{ item.sku }}");
    assert_eq!(
        t.render_shell(&ctx(), &mut env).as_deref(),
        Ok("cat <<'EOF' > f\nid=A-1 $HOME\nEOF\necho \"${WF_EXPR_0}\"")
    );
    assert_eq!(env, vec![("WF_EXPR_0".to_string(), "X-9".to_string())]);
    // A value holding the delimiter line would end the document early.
    let evil = json!({ "v": "x\nEOF\ntouch pwned" });
    for text in [
        "cat <<'EOF'\n${{ v }}\nEOF",
        "cat <<\"EOF\"\n${{ v }}\nEOF",
        "cat <<\\EOF\n${{ v }}\nEOF",
        "cat <<-'EOF'\n\t${{ v }}\nEOF",
    ] {
        let err = tpl(text).render_shell(&evil, &mut Vec::new()).unwrap_err();
        assert!(
            err.to_string().contains("would end it early"),
            "{text}: {err}"
        );
    }
    // …and so would one that completes the delimiter on its line.
    let half = json!({ "v": "OF" });
    assert!(
        tpl("cat <<'EOF'\nE${{ v }}\nEOF")
            .render_shell(&half, &mut Vec::new())
            .is_err()
    );
    // An unquoted here-document expands the variable, as before.
    let mut env = Vec::new();
    assert_eq!(
        tpl("cat <<EOF\n${{ v }}\nEOF")
            .render_shell(&evil, &mut env)
            .as_deref(),
        Ok("cat <<EOF\n${WF_EXPR_0}\nEOF")
    );
}

#[test]
fn render_shell_uses_env_vars() {
    let t = tpl(r#"echo "${{ steps.evil.output.stdout }}" && ./ship.sh ${{ item.sku }} '$HOME'"#);
    let mut env = vec![("PATH".to_string(), "/bin".to_string())];
    let cmd = t.render_shell(&ctx(), &mut env);
    assert_eq!(
        cmd.as_deref(),
        Ok(r#"echo "${WF_EXPR_0}" && ./ship.sh "${WF_EXPR_1}" '$HOME'"#)
    );
    assert_eq!(
        env,
        vec![
            ("PATH".to_string(), "/bin".to_string()),
            ("WF_EXPR_0".to_string(), "\"; touch pwned #".to_string()),
            ("WF_EXPR_1".to_string(), "X-9".to_string()),
        ]
    );

    // Numbering continues across calls sharing one env vector.
    let t2 = tpl("${{ steps.evil.output.sub }}${{ output.json.tags }}");
    let cmd = t2.render_shell(&ctx(), &mut env);
    assert_eq!(cmd.as_deref(), Ok(r#""${WF_EXPR_2}""${WF_EXPR_3}""#));

    // Inside single quotes the reference steps out of them to expand.
    let t3 = tpl("echo 'refund ${{ item.sku }}' \"in ${{ item.sku }}\"");
    let cmd = t3.render_shell(&ctx(), &mut env);
    assert_eq!(
        cmd.as_deref(),
        Ok(r#"echo 'refund '"${WF_EXPR_4}"'' "in ${WF_EXPR_5}""#)
    );
    assert_eq!(
        env.get(3),
        Some(&("WF_EXPR_2".to_string(), "$(touch pwned)".to_string()))
    );
    assert_eq!(
        env.get(4),
        Some(&("WF_EXPR_3".to_string(), "Array".to_string()))
    );
}

#[test]
fn render_shell_keeps_literal_text_verbatim() {
    let src = r#"set -e; x='${{ not an expr' "#;
    assert!(Template::parse(src).is_err());
    let src = "for f in *.txt; do echo \"$f\" `date` $((1+2)); done # ${HOME} $${ {{ }}";
    let t = tpl(src);
    let mut env = Vec::new();
    assert_eq!(t.render_shell(&ctx(), &mut env).as_deref(), Ok(src));
    assert!(env.is_empty());
}

#[test]
fn render_shell_leaves_env_alone_on_error() {
    let t = tpl("a ${{ item.sku }} b ${{ fromJSON('x') }}");
    let mut env = vec![("WF_EXPR_0".to_string(), "old".to_string())];
    assert!(t.render_shell(&ctx(), &mut env).is_err());
    assert_eq!(env.len(), 1);
}

#[test]
fn trees() {
    let tree = json!({
        "charged": true,
        "charge_id": "${{ output.json.id }}",
        "label": "order ${{ inputs.order_id }}",
        "${{ not.a.template.key }}": ["${{ output.json.tags }}", 3, null, { "deep": "${{ item.sku }}" }],
    });
    assert_eq!(
        render_tree(&tree, &ctx()),
        Ok(json!({
            "charged": true,
            "charge_id": 42,
            "label": "order A-1",
            "${{ not.a.template.key }}": [["a", "b"], 3, null, { "deep": "X-9" }],
        }))
    );

    let bad = json!({ "ok": "fine", "list": [1, { "x": "v=${{ a && }}" }] });
    assert!(matches!(
        render_tree(&bad, &ctx()),
        Err(ExprError::Syntax { pos: 8, .. })
    ));
}

#[test]
fn random_templates_never_panic() {
    const ALPHABET: &[u8] = b"${}${{}}'\"\\ a.b[0]!=&|()\xc3\xa9x-";
    let c = ctx();
    for s in super::super::expr::random_strings(ALPHABET, 0x2545_F491_4F6C_DD1D, 48) {
        match Template::parse(&s) {
            Ok(t) => {
                let _ = t.render_value(&c);
                let mut env = Vec::new();
                let _ = t.render_shell(&c, &mut env);
            }
            Err(e) => assert!(e.offset <= s.len(), "{s:?}: {e}"),
        }
        let _ = render_tree(&json!([s.as_str()]), &c);
    }
}
