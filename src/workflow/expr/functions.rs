//! The functions expressions can call (`contains`, `format`, `toJSON`, the
//! status functions, …): how many arguments each takes, and what it returns.

use super::*;

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
pub(super) const STATUS_FUNCTIONS: &[&str] = &["success", "failure", "always", "cancelled"];

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

pub(super) fn call(name: &str, args: &[Value], ctx: &Value) -> Result<Value, ExprError> {
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
