//! Strings with embedded `${{ … }}` expressions (docs/expressions.md).
//!
//! Almost every string of a workflow file may compute parts of itself from the
//! run's context. A [`Template`] is such a string, parsed once: literal text
//! and expressions. It renders in three ways: as a JSON value (a string that is
//! exactly one expression keeps the expression's type), as plain text, or as
//! shell text in which each expression becomes a reference to an environment
//! variable, so that a value can never become shell code.

use super::expr::{self, Expr, ExprError};
use serde_json::Value;

const OPEN: &str = "${{";
const CLOSE: &str = "}}";

/// Prefix of the environment variables that carry expression values into a shell.
pub const SHELL_VAR_PREFIX: &str = "WF_EXPR_";

/// A malformed template; `offset` is a byte offset into the template string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at offset {offset}")]
pub struct TemplateError {
    pub offset: usize,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
enum Part {
    Text(String),
    Expr(Expr),
}

/// A string made of literal text and `${{ … }}` expressions.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Template {
    source: String,
    parts: Vec<Part>,
    /// Exactly one expression, with nothing but whitespace around it.
    whole: bool,
}

/// Whether `s` contains an expression opener `${{`.
pub fn contains_expr(s: &str) -> bool {
    s.contains(OPEN)
}

/// A JSON value as text, as GitHub renders a value inside a string:
/// strings as themselves, `null` as nothing, numbers as JavaScript writes
/// them, booleans `true`/`false`, arrays `Array` and objects `Object`.
pub fn value_to_text(v: &Value) -> String {
    expr::text_of(v)
}

impl Template {
    /// Splits `s` into literal text and parsed expressions.
    pub fn parse(s: &str) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut rest = 0;
        while let Some(open) = s
            .get(rest..)
            .and_then(|r| r.find(OPEN))
            .map(|rel| rest + rel)
        {
            push_text(&mut parts, s.get(rest..open).unwrap_or_default());
            let inner_start = open + OPEN.len();
            let inner_end = find_close(s, open, inner_start)?;
            let inner = s.get(inner_start..inner_end).unwrap_or_default();
            let e = expr::parse(inner).map_err(|e| TemplateError {
                offset: inner_start + e.pos().unwrap_or(0),
                message: e.message(),
            })?;
            parts.push(Part::Expr(e));
            rest = inner_end + CLOSE.len();
        }
        push_text(&mut parts, s.get(rest..).unwrap_or_default());
        let exprs = parts.iter().filter(|p| matches!(p, Part::Expr(_))).count();
        let blank = parts.iter().all(|p| match p {
            Part::Text(t) => t.trim().is_empty(),
            Part::Expr(_) => true,
        });
        Ok(Template {
            source: s.to_string(),
            parts,
            whole: exprs == 1 && blank,
        })
    }

    /// The text the template was parsed from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the template has no expressions at all.
    pub fn is_literal(&self) -> bool {
        self.exprs().next().is_none()
    }

    /// Whether its expressions are rendered as text (it is not one whole
    /// expression, whose value keeps its type).
    pub fn renders_as_text(&self) -> bool {
        !self.whole
    }

    /// The template's expressions, in order.
    pub fn exprs(&self) -> impl Iterator<Item = &Expr> {
        self.parts.iter().filter_map(|p| match p {
            Part::Expr(e) => Some(e),
            Part::Text(_) => None,
        })
    }

    /// A template that is exactly one expression (whitespace around it
    /// allowed) gives that expression's value with its JSON type; any other
    /// template gives a string.
    pub fn render_value(&self, ctx: &Value) -> Result<Value, ExprError> {
        if self.whole
            && let Some(e) = self.exprs().next()
        {
            return e.eval(ctx);
        }
        self.render_text(ctx).map(Value::String)
    }

    /// Renders to text, each expression's value as text
    /// ([`Expr::eval_text`]).
    pub fn render_text(&self, ctx: &Value) -> Result<String, ExprError> {
        let mut out = String::with_capacity(self.source.len());
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Expr(e) => out.push_str(&e.eval_text(ctx)?),
            }
        }
        Ok(out)
    }

    /// Whether the template is truthy (an `if:`): a whole expression by its
    /// value (so `NaN` is false), anything else by its text.
    pub fn truthy(&self, ctx: &Value) -> Result<bool, ExprError> {
        if self.whole
            && let Some(e) = self.exprs().next()
        {
            return e.eval_truthy(ctx);
        }
        Ok(!self.render_text(ctx)?.is_empty())
    }

    /// Renders a `sh -c` command line without ever splicing a value into it:
    /// each expression becomes a reference to `$WF_EXPR_<n>` and its text value
    /// is pushed onto `env` as `WF_EXPR_<n>`, where `n` continues from the
    /// number of `WF_EXPR_` entries already in `env`. Literal text is kept
    /// verbatim. The reference is quoted to fit where the expression stands, so
    /// the value is always exactly one word of data: `"${WF_EXPR_0}"` outside
    /// quotes, `${WF_EXPR_0}` inside double quotes, and `'"${WF_EXPR_0}"'`
    /// inside single quotes (which expand nothing). On error `env` is left
    /// unchanged.
    pub fn render_shell(
        &self,
        ctx: &Value,
        env: &mut Vec<(String, String)>,
    ) -> Result<String, ExprError> {
        let first = env
            .iter()
            .filter(|(k, _)| k.starts_with(SHELL_VAR_PREFIX))
            .count();
        let mut vars = Vec::new();
        let mut out = String::with_capacity(self.source.len());
        // The command text with each expression replaced by `MARK`, scanned once.
        let skeleton: Vec<char> = self
            .parts
            .iter()
            .flat_map(|p| match p {
                Part::Text(t) => t.chars().collect::<Vec<_>>(),
                Part::Expr(_) => vec![MARK],
            })
            .collect();
        let (quotes, literal) = expr_quotes(&skeleton);
        let values = self
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::Expr(e) => Some(e.eval_text(ctx)),
                Part::Text(_) => None,
            })
            .collect::<Result<Vec<String>, ExprError>>()?;
        for line in &literal {
            let mut rendered = String::new();
            let mut n = line.first;
            for &ch in &line.text {
                if ch == MARK {
                    rendered.push_str(values.get(n).map_or("", String::as_str));
                    n += 1;
                } else {
                    rendered.push(ch);
                }
            }
            let ends = rendered.split('\n').any(|l| {
                let l = if line.strip_tabs {
                    l.trim_start_matches('\t')
                } else {
                    l
                };
                l == line.delim
            });
            if ends {
                return Err(ExprError::Eval {
                    message: format!(
                        "a value in the here-document ending with `{}` holds that line, which would end it early",
                        line.delim
                    ),
                });
            }
        }
        let mut values = values.into_iter();
        let mut quotes = quotes.into_iter();
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Expr(_) => {
                    let value = values.next().unwrap_or_default();
                    let name = format!("{SHELL_VAR_PREFIX}{}", first + vars.len());
                    match quotes.next().unwrap_or(Quote::None) {
                        Quote::None => out.push_str(&format!("\"${{{name}}}\"")),
                        Quote::Double => out.push_str(&format!("${{{name}}}")),
                        Quote::Single => out.push_str(&format!("'\"${{{name}}}\"'")),
                        Quote::Literal => {
                            out.push_str(&value);
                            continue;
                        }
                    }
                    vars.push((name, value));
                }
            }
        }
        env.extend(vars);
        Ok(out)
    }
}

impl std::fmt::Display for Template {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.source)
    }
}

/// How an expression must be quoted where it stands in a `sh` command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    /// Unquoted: the reference needs double quotes.
    None,
    /// Inside `'…'`: close, splice a double-quoted reference, reopen.
    Single,
    /// Inside `"…"`, an unquoted here-document or a comment: the bare reference.
    Double,
    /// Inside a quoted here-document (`<<'EOF'`), which expands nothing:
    /// the value itself, checked never to end the document early.
    Literal,
}

/// A line of a quoted here-document's body that holds expressions: the
/// rendered line must not equal the delimiter (or a value could end the
/// document early and have the rest run as commands).
#[derive(Debug, Clone, PartialEq)]
struct LiteralLine {
    /// The line, expressions as `MARK`.
    text: Vec<char>,
    /// Index (among all expressions) of the first one on this line.
    first: usize,
    delim: String,
    strip_tabs: bool,
}

/// Stands for an expression in the text [`expr_quotes`] scans.
const MARK: char = '\u{0}';

/// The quoting of each expression (`MARK`) in a `sh` command line, by POSIX
/// sh rules: quotes and backslashes, comments, `$(…)` and backticks (a fresh
/// context even inside double quotes), and here-documents.
fn expr_quotes(s: &[char]) -> (Vec<Quote>, Vec<LiteralLine>) {
    enum Frame {
        Single,
        Double,
        /// `$(…)` with its depth of nested parentheses.
        Subst(u32),
        Tick,
    }
    let at = |i: usize| s.get(i).copied().unwrap_or('\n');
    let mut out = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    // Here-documents announced on the current line: delimiter, strip tabs,
    // quoted (a quoted delimiter: the body expands nothing).
    let mut pending: Vec<(String, bool, bool)> = Vec::new();
    let mut literal = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let in_parens = matches!(stack.last(), Some(Frame::Subst(d)) if *d > 0);
        match (stack.last_mut(), c) {
            (Some(Frame::Single), MARK) => out.push(Quote::Single),
            (Some(Frame::Double), MARK) => out.push(Quote::Double),
            (_, MARK) => out.push(Quote::None),
            (Some(Frame::Single), '\'') | (Some(Frame::Double), '"') => {
                stack.pop();
            }
            (Some(Frame::Single), _) => {}
            // A backslash quotes the next character (an expression stays one).
            (Some(Frame::Double), '\\') if at(i + 1) != MARK => i += 1,
            (Some(Frame::Double), '`') => stack.push(Frame::Tick),
            (Some(Frame::Double), '$') if at(i + 1) == '(' => {
                stack.push(Frame::Subst(0));
                i += 1;
            }
            (Some(Frame::Double), _) => {}
            // Unquoted, at the top or inside `$(…)` or backticks.
            (_, '\\') if at(i + 1) != MARK => i += 1,
            (_, '\'') => stack.push(Frame::Single),
            (_, '"') => stack.push(Frame::Double),
            (_, '$') if at(i + 1) == '(' => {
                stack.push(Frame::Subst(0));
                i += 1;
            }
            (Some(Frame::Tick), '`') => {
                stack.pop();
            }
            (_, '`') => stack.push(Frame::Tick),
            (Some(Frame::Subst(depth)), '(') => *depth += 1,
            (Some(Frame::Subst(depth)), ')') => match depth.checked_sub(1) {
                Some(d) => *depth = d,
                None => {
                    stack.pop();
                }
            },
            (_, '#') if i == 0 || " \t\n;&|()<>".contains(s[i - 1]) => {
                // A comment, to the end of the line.
                while i + 1 < s.len() && s[i + 1] != '\n' {
                    i += 1;
                    if s[i] == MARK {
                        out.push(Quote::Double);
                    }
                }
            }
            // `<<` inside `$((…))` is a shift, not a here-document.
            (_, '<') if at(i + 1) == '<' && !in_parens => {
                if at(i + 2) == '<' {
                    i += 2; // a here-string, not a here-document
                } else {
                    i += 2;
                    let strip = at(i) == '-';
                    if strip {
                        i += 1;
                    }
                    while matches!(at(i), ' ' | '\t') && i < s.len() {
                        i += 1;
                    }
                    let mut delim = String::new();
                    let mut quoted = false;
                    while i < s.len() && !" \t\n;&|()<>".contains(s[i]) {
                        match s[i] {
                            '\'' | '"' | '\\' => quoted = true,
                            MARK => out.push(Quote::None),
                            ch => delim.push(ch),
                        }
                        i += 1;
                    }
                    pending.push((delim, strip, quoted));
                    continue;
                }
            }
            (_, '\n') if !pending.is_empty() => {
                // Here-document bodies follow the line that announced them.
                // Their text expands like double quotes (or not at all when
                // the delimiter is quoted); a bare reference is right for both.
                for (delim, strip, quoted) in std::mem::take(&mut pending) {
                    loop {
                        let start = (i + 1).min(s.len());
                        let mut end = start;
                        while end < s.len() && s[end] != '\n' {
                            end += 1;
                        }
                        i = end;
                        let line = &s[start..end];
                        let marks = line.iter().filter(|&&ch| ch == MARK).count();
                        if quoted && marks > 0 {
                            literal.push(LiteralLine {
                                text: line.to_vec(),
                                first: out.len(),
                                delim: delim.clone(),
                                strip_tabs: strip,
                            });
                        }
                        let how = if quoted {
                            Quote::Literal
                        } else {
                            Quote::Double
                        };
                        out.extend(std::iter::repeat_n(how, marks));
                        let line: String = line.iter().collect();
                        let line = if strip {
                            line.trim_start_matches('\t')
                        } else {
                            &line
                        };
                        if line == delim || end >= s.len() {
                            break;
                        }
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    (out, literal)
}

fn push_text(parts: &mut Vec<Part>, text: &str) {
    if !text.is_empty() {
        parts.push(Part::Text(text.to_string()));
    }
}

/// Offset of the `}}` ending the expression opened at `open` whose text starts
/// at `from`; a `}}` inside a quoted string literal does not count.
fn find_close(s: &str, open: usize, from: usize) -> Result<usize, TemplateError> {
    let bytes = s.as_bytes();
    // Strings are in single quotes, `''` being a quote (two strings back
    // to back, as far as finding the end goes); backslashes are literal.
    let mut quote: Option<(u8, usize)> = None;
    let mut i = from;
    while let Some(&b) = bytes.get(i) {
        match quote {
            Some((q, _)) if b == q => quote = None,
            Some(_) => {}
            None if b == b'\'' => quote = Some((b, i)),
            None if b == b'}' && bytes.get(i + 1) == Some(&b'}') => return Ok(i),
            None => {}
        }
        i += 1;
    }
    Err(match quote {
        Some((_, at)) => TemplateError {
            offset: at,
            message: "unterminated string".into(),
        },
        None => TemplateError {
            offset: open,
            message: format!("unterminated `{OPEN}`: no closing `{CLOSE}`"),
        },
    })
}

/// Renders every string inside a JSON value with [`Template::render_value`],
/// so `{"id": "${{ output.json.id }}"}` keeps the id's type. Keys are kept.
pub fn render_tree(v: &Value, ctx: &Value) -> Result<Value, ExprError> {
    Ok(match v {
        Value::String(s) if contains_expr(s) => {
            let t = Template::parse(s).map_err(|e| ExprError::Syntax {
                pos: e.offset,
                message: e.message,
                hint: None,
            })?;
            t.render_value(ctx)?
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|i| render_tree(i, ctx))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, i)| Ok((k.clone(), render_tree(i, ctx)?)))
                .collect::<Result<_, ExprError>>()?,
        ),
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
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
        let t =
            tpl(r#"echo "${{ steps.evil.output.stdout }}" && ./ship.sh ${{ item.sku }} '$HOME'"#);
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
}
