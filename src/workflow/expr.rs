//! The `${{ … }}` expression language (SPEC §2).
//!
//! Workflow files compute values from the run's context (`inputs`, `state`,
//! `steps.<id>.output`, …) with small GitHub-Actions-style expressions. This
//! module parses the text inside the delimiters into an [`Expr`], evaluates it
//! against a JSON context, and lists the static access paths it uses so the
//! validator can reject unknown names before anything runs.
//!
//! Parsing never panics, whatever the input: positions are byte offsets into
//! the expression text, nesting is capped at [`MAX_DEPTH`], and operator chains
//! are stored flat, so neither parsing, evaluation nor dropping a tree can
//! recurse deeper than that cap.

use serde_json::{Number, Value};
use std::borrow::Cow;
use std::cmp::Ordering;

/// Most levels of nesting (parentheses, `[…]` indexes and `!`) an expression may have.
pub const MAX_DEPTH: usize = 64;

/// A parse or evaluation error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExprError {
    /// The expression text is malformed; `pos` is a byte offset into it.
    #[error("{message} at offset {pos}")]
    Syntax { pos: usize, message: String },
    /// The expression nests more than [`MAX_DEPTH`] levels deep.
    #[error("expression nests more than {MAX_DEPTH} levels deep at offset {pos}")]
    TooDeep { pos: usize },
    /// The expression is well-formed but cannot be evaluated on this context.
    #[error("{message}")]
    Eval { message: String },
}

impl ExprError {
    /// Byte offset of a parse error inside the expression text.
    pub fn pos(&self) -> Option<usize> {
        match self {
            ExprError::Syntax { pos, .. } | ExprError::TooDeep { pos } => Some(*pos),
            ExprError::Eval { .. } => None,
        }
    }

    /// The message without the "at offset N" suffix.
    pub fn message(&self) -> String {
        match self {
            ExprError::Syntax { message, .. } | ExprError::Eval { message } => message.clone(),
            ExprError::TooDeep { .. } => {
                format!("expression nests more than {MAX_DEPTH} levels deep")
            }
        }
    }

    fn syntax(pos: usize, message: impl Into<String>) -> Self {
        ExprError::Syntax {
            pos,
            message: message.into(),
        }
    }

    fn eval(message: impl Into<String>) -> Self {
        ExprError::Eval {
            message: message.into(),
        }
    }
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Expr {
    /// `null`, `true`, `false`, a number or a string.
    Literal(Value),
    /// A root name such as `inputs` or `steps`.
    Ident(String),
    /// `base.name`, `base[expr]`, … applied left to right.
    Access {
        base: Box<Expr>,
        path: Vec<Accessor>,
    },
    /// `!expr`, always a boolean.
    Not(Box<Expr>),
    /// A left-associative chain of operators of one precedence level
    /// (`a < b <= c` or `a == b != c`).
    Chain {
        first: Box<Expr>,
        rest: Vec<(BinOp, Expr)>,
    },
    /// `a && b && …`: the first falsy operand, or the last one.
    And(Vec<Expr>),
    /// `a || b || …`: the first truthy operand, or the last one.
    Or(Vec<Expr>),
    /// `[a, b, …]`
    Array(Vec<Expr>),
    /// `name(a, b, …)`, one of [`FUNCTIONS`].
    Call { name: String, args: Vec<Expr> },
}

/// The functions expressions can call (as in GitHub Actions), with how many
/// arguments each takes (at least, at most).
pub const FUNCTIONS: &[(&str, usize, usize)] = &[
    ("contains", 2, 2),
    ("startsWith", 2, 2),
    ("endsWith", 2, 2),
    ("format", 1, usize::MAX),
    ("join", 1, 2),
    ("toJSON", 1, 1),
    ("fromJSON", 1, 1),
    ("success", 0, 0),
    ("failure", 0, 0),
    ("always", 0, 0),
    ("cancelled", 0, 0),
];

/// The status functions: what they see of the run is the context's
/// `__status` (`{failure, cancelled}`), set by the scheduler for an `if:`.
const STATUS_FUNCTIONS: &[&str] = &["success", "failure", "always", "cancelled"];

/// A value as text, the way functions and `${{ }}` inside a string see it:
/// strings as they are, `null` empty, everything else as JSON.
fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Loose equality for `contains` on arrays: strings case-insensitively.
fn loosely_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(x), Value::String(y)) => x.to_lowercase() == y.to_lowercase(),
        _ => a == b,
    }
}

fn call(name: &str, args: &[Value], ctx: &Value) -> Result<Value, ExprError> {
    let text = |i: usize| args.get(i).map(as_text).unwrap_or_default();
    let status = |k: &str| {
        ctx.get("__status")
            .and_then(|s| s.get(k))
            .is_some_and(truthy)
    };
    Ok(match name {
        "success" => Value::Bool(!status("failure") && !status("cancelled")),
        "failure" => Value::Bool(status("failure")),
        "always" => Value::Bool(true),
        "cancelled" => Value::Bool(status("cancelled")),
        "contains" => Value::Bool(match &args[0] {
            Value::Array(items) => items.iter().any(|i| loosely_equal(i, &args[1])),
            other => as_text(other)
                .to_lowercase()
                .contains(&text(1).to_lowercase()),
        }),
        "startsWith" => Value::Bool(text(0).to_lowercase().starts_with(&text(1).to_lowercase())),
        "endsWith" => Value::Bool(text(0).to_lowercase().ends_with(&text(1).to_lowercase())),
        "format" => Value::String(format_braces(&text(0), &args[1..])?),
        "join" => {
            let sep = if args.len() > 1 { text(1) } else { ",".into() };
            Value::String(match &args[0] {
                Value::Array(items) => items.iter().map(as_text).collect::<Vec<_>>().join(&sep),
                other => as_text(other),
            })
        }
        "toJSON" => Value::String(
            serde_json::to_string_pretty(&args[0]).map_err(|e| ExprError::eval(e.to_string()))?,
        ),
        "fromJSON" => {
            let t = text(0);
            serde_json::from_str(&t)
                .map_err(|e| ExprError::eval(format!("fromJSON: the text is not JSON ({e})")))?
        }
        other => return Err(ExprError::eval(format!("unknown function `{other}`"))),
    })
}

/// `format('{0} and {1}', a, b)`; `{{` and `}}` are literal braces.
fn format_braces(template: &str, args: &[Value]) -> Result<String, ExprError> {
    let mut out = String::with_capacity(template.len());
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                let mut n = String::new();
                for d in chars.by_ref() {
                    if d == '}' {
                        break;
                    }
                    n.push(d);
                }
                let i: usize = n.trim().parse().map_err(|_| {
                    ExprError::eval(format!("format: `{{{n}}}` is not an argument number"))
                })?;
                let v = args.get(i).ok_or_else(|| {
                    ExprError::eval(format!(
                        "format: `{{{i}}}` but only {} argument(s) follow the format",
                        args.len()
                    ))
                })?;
                out.push_str(&as_text(v));
            }
            '}' => return Err(ExprError::eval("format: a lone `}` (write `}}`)")),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// One step of an access path.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Accessor {
    /// `.name`
    Field(String),
    /// `[expr]`
    Index(Expr),
}

/// Comparison and equality operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum BinOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl BinOp {
    fn symbol(self) -> &'static str {
        match self {
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
        }
    }

    fn is_equality(self) -> bool {
        matches!(self, BinOp::Eq | BinOp::Ne)
    }
}

/// Parses the text between `${{` and `}}` (surrounding whitespace allowed).
pub fn parse(src: &str) -> Result<Expr, ExprError> {
    let toks = lex(src)?;
    let mut p = Parser {
        src,
        toks,
        i: 0,
        depth: 0,
    };
    let e = p.parse_or()?;
    match p.peek() {
        None => Ok(e),
        Some(t) if matches!(t.tok, Tok::RParen | Tok::RBracket) => {
            let text = p.text(t);
            Err(ExprError::syntax(
                t.pos,
                format!("unexpected `{text}` with nothing to close"),
            ))
        }
        Some(t) => {
            let rest = src.get(t.pos..).unwrap_or_default().trim_end();
            let shown: String = rest.chars().take(32).collect();
            let ellipsis = if shown.len() < rest.len() { "…" } else { "" };
            Err(ExprError::syntax(
                t.pos,
                format!("trailing input `{shown}{ellipsis}`"),
            ))
        }
    }
}

/// GitHub-Actions truthiness: `false`, `null`, `0` and `""` are falsy,
/// everything else (empty arrays and objects too) is truthy.
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

static NULL: Value = Value::Null;

impl Expr {
    /// Evaluates against `ctx`, a JSON object keyed by context name.
    pub fn eval(&self, ctx: &Value) -> Result<Value, ExprError> {
        self.eval_cow(ctx).map(Cow::into_owned)
    }

    /// Evaluation borrowing from the context (and the tree) where it can, so
    /// `steps.a.output.json.id` does not copy the whole `steps` object.
    fn eval_cow<'a>(&'a self, ctx: &'a Value) -> Result<Cow<'a, Value>, ExprError> {
        Ok(match self {
            Expr::Literal(v) => Cow::Borrowed(v),
            Expr::Ident(name) => Cow::Borrowed(ctx.get(name.as_str()).unwrap_or(&NULL)),
            Expr::Access { base, path } => {
                let mut cur = base.eval_cow(ctx)?;
                for acc in path {
                    cur = match acc {
                        Accessor::Field(name) => descend(cur, |v| field(v, name)),
                        Accessor::Index(e) => {
                            let key = e.eval_cow(ctx)?;
                            descend(cur, |v| index(v, &key))
                        }
                    };
                }
                cur
            }
            Expr::Not(e) => Cow::Owned(Value::Bool(!truthy(e.eval_cow(ctx)?.as_ref()))),
            Expr::Chain { first, rest } => {
                let mut acc = first.eval_cow(ctx)?;
                for (op, e) in rest {
                    let rhs = e.eval_cow(ctx)?;
                    acc = Cow::Owned(Value::Bool(apply(*op, &acc, &rhs)?));
                }
                acc
            }
            Expr::And(items) => {
                let mut last = Cow::Borrowed(&NULL);
                for e in items {
                    last = e.eval_cow(ctx)?;
                    if !truthy(&last) {
                        break;
                    }
                }
                last
            }
            Expr::Or(items) => {
                let mut last = Cow::Borrowed(&NULL);
                for e in items {
                    last = e.eval_cow(ctx)?;
                    if truthy(&last) {
                        break;
                    }
                }
                last
            }
            Expr::Array(items) => Cow::Owned(Value::Array(
                items
                    .iter()
                    .map(|e| e.eval(ctx))
                    .collect::<Result<_, _>>()?,
            )),
            Expr::Call { name, args } => {
                let values: Vec<Value> =
                    args.iter().map(|e| e.eval(ctx)).collect::<Result<_, _>>()?;
                Cow::Owned(call(name, &values, ctx)?)
            }
        })
    }

    /// Whether the expression calls a status function other than
    /// `success()`: it makes its step a handler, which runs after a failure.
    pub fn calls_handler_function(&self) -> bool {
        match self {
            Expr::Call { name, args } => {
                (STATUS_FUNCTIONS.contains(&name.as_str()) && name != "success")
                    || args.iter().any(Expr::calls_handler_function)
            }
            Expr::Access { base, path } => {
                base.calls_handler_function()
                    || path
                        .iter()
                        .any(|a| matches!(a, Accessor::Index(e) if e.calls_handler_function()))
            }
            Expr::Not(e) => e.calls_handler_function(),
            Expr::Chain { first, rest } => {
                first.calls_handler_function()
                    || rest.iter().any(|(_, e)| e.calls_handler_function())
            }
            Expr::And(items) | Expr::Or(items) | Expr::Array(items) => {
                items.iter().any(Expr::calls_handler_function)
            }
            Expr::Literal(_) | Expr::Ident(_) => false,
        }
    }

    /// Every static access path starting at a root name, e.g.
    /// `steps.charge-card.output.json.id` gives
    /// `["steps", "charge-card", "output", "json", "id"]`. A dynamic index ends
    /// the path there; the index expression's own paths are listed too.
    pub fn references(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        self.collect_refs(&mut out);
        out
    }

    fn collect_refs(&self, out: &mut Vec<Vec<String>>) {
        match self {
            Expr::Literal(_) => {}
            Expr::Ident(name) => out.push(vec![name.clone()]),
            Expr::Access { base, path } => {
                let mut stat = match base.as_ref() {
                    Expr::Ident(name) => Some(vec![name.clone()]),
                    other => {
                        other.collect_refs(out);
                        None
                    }
                };
                for acc in path {
                    let key = match acc {
                        Accessor::Field(name) => Some(name.clone()),
                        Accessor::Index(Expr::Literal(Value::String(s))) => Some(s.clone()),
                        Accessor::Index(Expr::Literal(Value::Number(n))) => Some(n.to_string()),
                        Accessor::Index(_) => None,
                    };
                    match (key, stat.as_mut()) {
                        (Some(k), Some(p)) => p.push(k),
                        (Some(_), None) => {}
                        (None, _) => {
                            out.extend(stat.take());
                            if let Accessor::Index(e) = acc {
                                e.collect_refs(out);
                            }
                        }
                    }
                }
                out.extend(stat);
            }
            Expr::Not(e) => e.collect_refs(out),
            Expr::Chain { first, rest } => {
                first.collect_refs(out);
                for (_, e) in rest {
                    e.collect_refs(out);
                }
            }
            Expr::And(items) | Expr::Or(items) | Expr::Array(items) => {
                for e in items {
                    e.collect_refs(out);
                }
            }
            Expr::Call { args, .. } => {
                for e in args {
                    e.collect_refs(out);
                }
            }
        }
    }
}

/// Steps from `cur` to the child `pick` selects, or to `null`.
fn descend<'a>(
    cur: Cow<'a, Value>,
    pick: impl for<'v> Fn(&'v Value) -> Option<&'v Value>,
) -> Cow<'a, Value> {
    match cur {
        Cow::Borrowed(v) => Cow::Borrowed(pick(v).unwrap_or(&NULL)),
        Cow::Owned(v) => Cow::Owned(pick(&v).cloned().unwrap_or(Value::Null)),
    }
}

fn field<'v>(v: &'v Value, name: &str) -> Option<&'v Value> {
    match v {
        Value::Object(m) => m.get(name),
        _ => None,
    }
}

fn index<'v>(v: &'v Value, key: &Value) -> Option<&'v Value> {
    match (v, key) {
        (Value::Object(m), Value::String(k)) => m.get(k.as_str()),
        (Value::Object(m), Value::Number(n)) => m.get(n.to_string().as_str()),
        (Value::Array(items), Value::Number(n)) => array_index(n).and_then(|i| items.get(i)),
        _ => None,
    }
}

/// A non-negative whole number as an array index (`2` and `2.0` alike).
fn array_index(n: &Number) -> Option<usize> {
    if let Some(u) = n.as_u64() {
        return usize::try_from(u).ok();
    }
    let f = n.as_f64()?;
    // Float-to-int `as` saturates, so the bound check keeps it exact.
    (f >= 0.0 && f.fract() == 0.0 && f < u32::MAX as f64).then_some(f as usize)
}

fn apply(op: BinOp, a: &Value, b: &Value) -> Result<bool, ExprError> {
    if op.is_equality() {
        let eq = loose_eq(a, b);
        return Ok(if op == BinOp::Eq { eq } else { !eq });
    }
    let ord = match (a, b) {
        (Value::Number(x), Value::Number(y)) => num_cmp(x, y),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        _ => None,
    };
    let Some(ord) = ord else {
        return Err(ExprError::eval(format!(
            "cannot compare {} with {} using `{}`",
            type_name(a),
            type_name(b),
            op.symbol()
        )));
    };
    Ok(match op {
        BinOp::Lt => ord == Ordering::Less,
        BinOp::Le => ord != Ordering::Greater,
        BinOp::Gt => ord == Ordering::Greater,
        BinOp::Ge => ord != Ordering::Less,
        BinOp::Eq | BinOp::Ne => false,
    })
}

/// JSON equality in which numbers compare by value (`1 == 1.0`).
fn loose_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => num_cmp(x, y) == Some(Ordering::Equal),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| loose_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| loose_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Numeric ordering, exact for integers and by `f64` otherwise.
fn num_cmp(a: &Number, b: &Number) -> Option<Ordering> {
    match (a.as_i64(), b.as_i64(), a.as_u64(), b.as_u64()) {
        (Some(x), Some(y), _, _) => Some(x.cmp(&y)),
        (_, _, Some(x), Some(y)) => Some(x.cmp(&y)),
        // One fits in i64, the other is a u64 above i64::MAX.
        (Some(_), None, _, Some(_)) => Some(Ordering::Less),
        (None, Some(_), Some(_), _) => Some(Ordering::Greater),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

// ---------------------------------------------------------------------------
// Lexer

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Num(Number),
    Str(String),
    LParen,
    RParen,
    LBracket,
    RBracket,
    Dot,
    Comma,
    Bang,
    Op(BinOp),
    And,
    Or,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    pos: usize,
    end: usize,
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

fn lex(src: &str) -> Result<Vec<Token>, ExprError> {
    let bytes = src.as_bytes();
    let at = |i: usize| bytes.get(i).copied();
    let mut toks = Vec::new();
    let mut i = 0;
    while let Some(b) = at(i) {
        let pos = i;
        let next = at(i + 1);
        let (tok, len) = match b {
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                continue;
            }
            b'(' => (Tok::LParen, 1),
            b')' => (Tok::RParen, 1),
            b'[' => (Tok::LBracket, 1),
            b']' => (Tok::RBracket, 1),
            b'.' => (Tok::Dot, 1),
            b',' => (Tok::Comma, 1),
            b'!' if next == Some(b'=') => (Tok::Op(BinOp::Ne), 2),
            b'!' => (Tok::Bang, 1),
            b'=' if next == Some(b'=') => (Tok::Op(BinOp::Eq), 2),
            b'<' if next == Some(b'=') => (Tok::Op(BinOp::Le), 2),
            b'<' => (Tok::Op(BinOp::Lt), 1),
            b'>' if next == Some(b'=') => (Tok::Op(BinOp::Ge), 2),
            b'>' => (Tok::Op(BinOp::Gt), 1),
            b'&' if next == Some(b'&') => (Tok::And, 2),
            b'|' if next == Some(b'|') => (Tok::Or, 2),
            b'=' | b'&' | b'|' => {
                let c = char::from(b);
                return Err(ExprError::syntax(
                    pos,
                    format!("unexpected `{c}` (did you mean `{c}{c}`?)"),
                ));
            }
            b'\'' | b'"' => {
                let (s, end) = lex_string(src, pos)?;
                toks.push(Token {
                    tok: Tok::Str(s),
                    pos,
                    end,
                });
                i = end;
                continue;
            }
            b'-' if !next.is_some_and(|n| n.is_ascii_digit()) => {
                return Err(ExprError::syntax(pos, "unexpected `-`"));
            }
            b'-' | b'0'..=b'9' => {
                let end = scan_number(bytes, pos);
                let text = src.get(pos..end).unwrap_or_default();
                let n: Number = text
                    .parse()
                    .map_err(|_| ExprError::syntax(pos, format!("invalid number `{text}`")))?;
                (Tok::Num(n), end - pos)
            }
            b if is_ident_start(b) => {
                let mut end = pos + 1;
                while at(end).is_some_and(is_ident_char) {
                    end += 1;
                }
                let name = src.get(pos..end).unwrap_or_default().to_string();
                (Tok::Ident(name), end - pos)
            }
            _ => {
                let c = src.get(pos..).and_then(|s| s.chars().next()).unwrap_or('?');
                return Err(ExprError::syntax(
                    pos,
                    format!("unexpected character `{c}`"),
                ));
            }
        };
        i = pos + len;
        toks.push(Token { tok, pos, end: i });
    }
    Ok(toks)
}

/// End of the number starting at `start`: `-?digits(.digits)?([eE][+-]?digits)?`.
fn scan_number(bytes: &[u8], start: usize) -> usize {
    let digit = |i: usize| bytes.get(i).is_some_and(u8::is_ascii_digit);
    let digits = |mut i: usize| {
        while digit(i) {
            i += 1;
        }
        i
    };
    let mut i = start;
    if bytes.get(i) == Some(&b'-') {
        i += 1;
    }
    i = digits(i);
    if bytes.get(i) == Some(&b'.') && digit(i + 1) {
        i = digits(i + 1);
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(bytes.get(i + 1), Some(b'+' | b'-')));
        if digit(i + 1 + sign) {
            i = digits(i + 1 + sign);
        }
    }
    i
}

/// A quoted string starting at `start`; returns its value and the end offset.
fn lex_string(src: &str, start: usize) -> Result<(String, usize), ExprError> {
    let bytes = src.as_bytes();
    let quote = bytes.get(start).copied().unwrap_or(b'"');
    let mut out = String::new();
    let mut seg = start + 1;
    let mut i = seg;
    loop {
        match bytes.get(i) {
            None => return Err(ExprError::syntax(start, "unterminated string")),
            Some(&b) if b == quote => {
                out.push_str(src.get(seg..i).unwrap_or_default());
                return Ok((out, i + 1));
            }
            Some(b'\\') => {
                out.push_str(src.get(seg..i).unwrap_or_default());
                let c = match bytes.get(i + 1) {
                    Some(b'\\') => '\\',
                    Some(b'\'') => '\'',
                    Some(b'"') => '"',
                    Some(b'n') => '\n',
                    Some(b't') => '\t',
                    Some(b'r') => '\r',
                    None => return Err(ExprError::syntax(start, "unterminated string")),
                    Some(_) => {
                        let shown: String =
                            src.get(i..).unwrap_or_default().chars().take(2).collect();
                        return Err(ExprError::syntax(
                            i,
                            format!(
                                "unknown escape `{shown}` (use \\\\, \\', \\\", \\n, \\t or \\r)"
                            ),
                        ));
                    }
                };
                out.push(c);
                i += 2;
                seg = i;
            }
            Some(_) => i += 1,
        }
    }
}

// ---------------------------------------------------------------------------
// Parser: one function per precedence level, lowest first.

struct Parser<'a> {
    src: &'a str,
    toks: Vec<Token>,
    i: usize,
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.toks.get(self.i)
    }

    fn peek_tok(&self) -> Option<&Tok> {
        self.peek().map(|t| &t.tok)
    }

    fn bump(&mut self) -> Option<Token> {
        let t = self.toks.get(self.i).cloned();
        if t.is_some() {
            self.i += 1;
        }
        t
    }

    fn text(&self, t: &Token) -> &str {
        self.src.get(t.pos..t.end).unwrap_or_default()
    }

    /// Offset of the next token, or the end of the input.
    fn here(&self) -> usize {
        self.peek().map_or(self.src.len(), |t| t.pos)
    }

    fn enter(&mut self, pos: usize) -> Result<(), ExprError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ExprError::TooDeep { pos });
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    fn parse_or(&mut self) -> Result<Expr, ExprError> {
        let mut items = vec![self.parse_and()?];
        while self.peek_tok() == Some(&Tok::Or) {
            self.bump();
            items.push(self.parse_and()?);
        }
        Ok(flatten(items, Expr::Or))
    }

    fn parse_and(&mut self) -> Result<Expr, ExprError> {
        let mut items = vec![self.parse_equality()?];
        while self.peek_tok() == Some(&Tok::And) {
            self.bump();
            items.push(self.parse_equality()?);
        }
        Ok(flatten(items, Expr::And))
    }

    fn parse_equality(&mut self) -> Result<Expr, ExprError> {
        self.parse_chain(true)
    }

    fn parse_comparison(&mut self) -> Result<Expr, ExprError> {
        self.parse_chain(false)
    }

    /// `operand (op operand)*` for the equality or the comparison level.
    fn parse_chain(&mut self, equality: bool) -> Result<Expr, ExprError> {
        let operand = |p: &mut Self| {
            if equality {
                p.parse_comparison()
            } else {
                p.parse_unary()
            }
        };
        let first = operand(self)?;
        let mut rest = Vec::new();
        while let Some(&Tok::Op(op)) = self.peek_tok() {
            if op.is_equality() != equality {
                break;
            }
            self.bump();
            rest.push((op, operand(self)?));
        }
        Ok(if rest.is_empty() {
            first
        } else {
            Expr::Chain {
                first: Box::new(first),
                rest,
            }
        })
    }

    fn parse_unary(&mut self) -> Result<Expr, ExprError> {
        if self.peek_tok() == Some(&Tok::Bang) {
            let pos = self.here();
            self.bump();
            self.enter(pos)?;
            let inner = self.parse_unary()?;
            self.leave();
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.parse_postfix()
    }

    fn parse_postfix(&mut self) -> Result<Expr, ExprError> {
        let base = self.parse_primary()?;
        let mut path = Vec::new();
        loop {
            match self.peek_tok() {
                Some(Tok::Dot) => {
                    self.bump();
                    match self.peek_tok() {
                        Some(Tok::Ident(name)) => {
                            path.push(Accessor::Field(name.clone()));
                            self.bump();
                        }
                        _ => return Err(self.expected("a property name after `.`")),
                    }
                }
                Some(Tok::LBracket) => {
                    let open = self.here();
                    self.bump();
                    self.enter(open)?;
                    let idx = self.parse_or()?;
                    self.close(&Tok::RBracket, "]", "[", open)?;
                    self.leave();
                    path.push(Accessor::Index(idx));
                }
                _ => break,
            }
        }
        Ok(if path.is_empty() {
            base
        } else {
            Expr::Access {
                base: Box::new(base),
                path,
            }
        })
    }

    fn parse_primary(&mut self) -> Result<Expr, ExprError> {
        let Some(t) = self.peek().cloned() else {
            return Err(self.missing_operand());
        };
        let e = match t.tok {
            Tok::Ident(name)
                if matches!(self.toks.get(self.i + 1).map(|t| &t.tok), Some(Tok::LParen)) =>
            {
                return self.parse_call(name, t.pos);
            }
            Tok::Ident(name) => match name.as_str() {
                "null" => Expr::Literal(Value::Null),
                "true" => Expr::Literal(Value::Bool(true)),
                "false" => Expr::Literal(Value::Bool(false)),
                _ => Expr::Ident(name),
            },
            Tok::LBracket => {
                self.bump();
                self.enter(t.pos)?;
                let items = self.parse_list(&Tok::RBracket, "]", "[", t.pos)?;
                self.leave();
                return Ok(Expr::Array(items));
            }
            Tok::Num(n) => Expr::Literal(Value::Number(n)),
            Tok::Str(s) => Expr::Literal(Value::String(s)),
            Tok::LParen => {
                self.bump();
                self.enter(t.pos)?;
                let inner = self.parse_or()?;
                self.close(&Tok::RParen, ")", "(", t.pos)?;
                self.leave();
                return Ok(inner);
            }
            _ => return Err(self.missing_operand()),
        };
        self.bump();
        Ok(e)
    }

    /// `name(args)`: a known function with the right number of arguments.
    fn parse_call(&mut self, name: String, pos: usize) -> Result<Expr, ExprError> {
        let Some(&(_, min, max)) = FUNCTIONS.iter().find(|(f, _, _)| *f == name) else {
            let known: Vec<&str> = FUNCTIONS.iter().map(|(f, _, _)| *f).collect();
            let near = crate::workflow::nearest(&name, known.iter().copied())
                .map(|n| format!("; did you mean `{n}`?"))
                .unwrap_or_default();
            return Err(ExprError::syntax(
                pos,
                format!(
                    "unknown function `{name}`{near} (functions: {})",
                    known.join(", ")
                ),
            ));
        };
        self.bump(); // name
        let open = self.here();
        self.bump(); // (
        self.enter(open)?;
        let args = self.parse_list(&Tok::RParen, ")", "(", open)?;
        self.leave();
        if args.len() < min || args.len() > max {
            let wants = match (min, max) {
                (a, b) if a == b => format!("{a}"),
                (a, usize::MAX) => format!("at least {a}"),
                (a, b) => format!("{a} or {b}"),
            };
            return Err(ExprError::syntax(
                pos,
                format!("`{name}` takes {wants} argument(s), not {}", args.len()),
            ));
        }
        Ok(Expr::Call { name, args })
    }

    /// Comma-separated expressions up to the closing token (empty allowed).
    fn parse_list(
        &mut self,
        tok: &Tok,
        close: &str,
        opener: &str,
        open: usize,
    ) -> Result<Vec<Expr>, ExprError> {
        let mut items = Vec::new();
        if self.peek_tok() == Some(tok) {
            self.bump();
            return Ok(items);
        }
        loop {
            items.push(self.parse_or()?);
            if self.peek_tok() == Some(&Tok::Comma) {
                self.bump();
                continue;
            }
            self.close(tok, close, opener, open)?;
            return Ok(items);
        }
    }

    /// Consumes the closing token of a group opened at `open`.
    fn close(
        &mut self,
        tok: &Tok,
        close: &str,
        opener: &str,
        open: usize,
    ) -> Result<(), ExprError> {
        if self.peek_tok() == Some(tok) {
            self.bump();
            return Ok(());
        }
        Err(self.expected(&format!(
            "`{close}` to close the `{opener}` at offset {open}"
        )))
    }

    /// "expected X" at the next token (naming it) or at the end of input.
    fn expected(&self, what: &str) -> ExprError {
        match self.peek() {
            Some(t) => {
                ExprError::syntax(t.pos, format!("expected {what}, found `{}`", self.text(t)))
            }
            None => ExprError::syntax(
                self.src.len(),
                format!("expected {what}, found end of expression"),
            ),
        }
    }

    /// An operand was expected at the current token; name the operator before it.
    fn missing_operand(&self) -> ExprError {
        let prev = self.i.checked_sub(1).and_then(|j| self.toks.get(j));
        match (prev, self.peek()) {
            (None, None) => ExprError::syntax(0, "empty expression"),
            (None, Some(t)) => ExprError::syntax(t.pos, format!("unexpected `{}`", self.text(t))),
            (Some(p), _) => self.expected(&format!("an expression after `{}`", self.text(p))),
        }
    }
}

/// A one-element operator list is just its element.
fn flatten(mut items: Vec<Expr>, wrap: fn(Vec<Expr>) -> Expr) -> Expr {
    if items.len() == 1
        && let Some(only) = items.pop()
    {
        return only;
    }
    wrap(items)
}

/// Pseudo-random inputs for the no-panic tests of this module and `template`.
#[cfg(test)]
pub(crate) fn random_strings(alphabet: &[u8], mut seed: u64, max_len: u64) -> Vec<String> {
    // xorshift64*: deterministic pseudo-random numbers without extra crates.
    let mut next = move || {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        seed.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    (0..6000)
        .map(|round| {
            let len = (next() % max_len) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    let r = next();
                    // Half the rounds from the alphabet, half arbitrary bytes.
                    if round % 2 == 0 {
                        alphabet
                            .get((r as usize) % alphabet.len())
                            .copied()
                            .unwrap_or(b'a')
                    } else {
                        (r & 0xff) as u8
                    }
                })
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        })
        .collect()
}

#[cfg(test)]
mod tests {
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
}
