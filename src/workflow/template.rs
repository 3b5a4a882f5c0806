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
mod tests;
