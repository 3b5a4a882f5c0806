//! The functions expressions can call: GitHub's (`funcs/*.ts`: `contains`,
//! `startsWith`, `endsWith`, `format`, `join`, `toJSON`, `fromJSON`,
//! `case`, `hashFiles` in a `cache.key`), names in any case, with their coercions and errors; and wf's
//! status functions for `if:` (`success`, `failure`, `always`,
//! `cancelled`).

use super::value::{Kind, Val, equals, upper};
use super::*;
use std::borrow::Cow;

/// The functions expressions can call, as documented, with how many
/// arguments each takes (at least, at most).
pub const FUNCTIONS: &[(&str, usize, usize)] = &[
    ("contains", 2, 2),
    ("startsWith", 2, 2),
    ("endsWith", 2, 2),
    ("format", 1, 255),
    ("join", 1, 2),
    ("toJSON", 1, 1),
    ("fromJSON", 1, 1),
    ("case", 3, usize::MAX),
    ("hashFiles", 1, 255),
    ("success", 0, 0),
    ("failure", 0, 0),
    ("always", 0, 0),
    ("cancelled", 0, 0),
];

/// The status functions: what they see of the run is the context's
/// `__status` (`{failure, cancelled}`), set by the scheduler for an `if:`.
pub(super) const STATUS_FUNCTIONS: &[&str] = &["success", "failure", "always", "cancelled"];

/// Whether `name(…)` with `n` arguments may be called; else GitHub's
/// message and wf's hint.
pub(super) fn signature(name: &str, n: usize) -> Result<(), (String, Option<String>)> {
    let Some(&(canonical, min, max)) = FUNCTIONS
        .iter()
        .find(|(f, _, _)| f.eq_ignore_ascii_case(name))
    else {
        let known: Vec<&str> = FUNCTIONS.iter().map(|(f, _, _)| *f).collect();
        let near = crate::workflow::nearest(name, known.iter().copied())
            .map(|n| format!("did you mean `{n}`? "))
            .unwrap_or_default();
        return Err((
            format!("Unrecognized function: '{name}'"),
            Some(format!("{near}functions: {}", known.join(", "))),
        ));
    };
    let wants = || match (min, max) {
        (a, b) if a == b => format!("`{canonical}` takes {a}"),
        (a, usize::MAX) => format!("`{canonical}` takes at least {a}"),
        (a, b) => format!("`{canonical}` takes {a} to {b}"),
    };
    if n < min {
        return Err((
            format!("Too few parameters supplied: '{name}'"),
            Some(wants()),
        ));
    }
    if n > max {
        return Err((
            format!("Too many parameters supplied: '{name}'"),
            Some(wants()),
        ));
    }
    if canonical == "case" && n.is_multiple_of(2) {
        return Err((
            format!(
                "Even number of parameters supplied, requires an odd number of parameters: '{name}'"
            ),
            Some("pairs of a condition and a value, then the default".into()),
        ));
    }
    Ok(())
}

pub(super) fn call<'a>(
    name: &str,
    mut args: Vec<Val<'a>>,
    ctx: &Value,
) -> Result<Val<'a>, ExprError> {
    let status = |k: &str| {
        ctx.get("__status")
            .and_then(|s| s.get(k))
            .is_some_and(truthy)
    };
    let name = name.to_ascii_lowercase();
    Ok(match name.as_str() {
        "success" => Val::Bool(!status("failure") && !status("cancelled")),
        "failure" => Val::Bool(status("failure")),
        "always" => Val::Bool(true),
        "cancelled" => Val::Bool(status("cancelled")),
        "contains" => Val::Bool(contains(&args[0], &args[1])),
        "startswith" | "endswith" => {
            let (l, r) = (&args[0], &args[1]);
            if !l.primitive() || !r.primitive() {
                return Ok(Val::Bool(false));
            }
            let (l, r) = (l.text(), r.text());
            let (l, r) = (upper(&l), upper(&r));
            Val::Bool(if name == "startswith" {
                l.starts_with(r.as_ref())
            } else {
                l.ends_with(r.as_ref())
            })
        }
        "format" => Val::Str(Cow::Owned(format(&args)?)),
        "join" => {
            let first = &args[0];
            if first.primitive() {
                return Ok(Val::Str(Cow::Owned(first.text().into_owned())));
            }
            if first.kind() != Kind::Array {
                return Ok(Val::Str(Cow::Borrowed("")));
            }
            let sep = match args.get(1) {
                Some(s) if s.primitive() => s.text().into_owned(),
                _ => ",".to_string(),
            };
            let items: Vec<String> = first
                .elements()
                .iter()
                .map(|i| i.text().into_owned())
                .collect();
            Val::Str(Cow::Owned(items.join(&sep)))
        }
        // The driver hashed the files of each call before the key was
        // rendered (`engine::hash_files`); anywhere else it is not known.
        "hashfiles" => {
            let patterns: Vec<String> = args.iter().map(|a| a.text().into_owned()).collect();
            let hash = ctx
                .get("__files")
                .and_then(|f| f.get(patterns.join("\n")))
                .and_then(Value::as_str)
                .ok_or_else(|| ExprError::eval("hashFiles() is only available in `cache.key`"))?;
            Val::Str(Cow::Owned(hash.to_string()))
        }
        "tojson" => Val::Str(Cow::Owned(args[0].to_json_text())),
        "fromjson" => {
            let text = args[0].text();
            if text.trim().is_empty() {
                return Err(ExprError::eval("empty input"));
            }
            let v: Value = serde_json::from_str(&text).map_err(|e| {
                ExprError::eval(format!("Error parsing JSON when evaluating fromJson: {e}"))
            })?;
            Val::owned(v)
        }
        "case" => {
            let default = args.len() - 1;
            let mut i = 0;
            while i < default {
                match &args[i] {
                    Val::Bool(true) => return Ok(args.swap_remove(i + 1)),
                    Val::Bool(false) => i += 2,
                    _ => {
                        return Err(ExprError::eval(
                            "case predicate must evaluate to a boolean value",
                        ));
                    }
                }
            }
            args.swap_remove(default)
        }
        other => return Err(ExprError::eval(format!("Unrecognized function: '{other}'"))),
    })
}

/// `contains(search, item)`: a substring ignoring case when both are
/// primitives, an element equal to `item` when `search` is an array.
fn contains(search: &Val<'_>, item: &Val<'_>) -> bool {
    if search.primitive() {
        return item.primitive()
            && search
                .text()
                .to_lowercase()
                .contains(&item.text().to_lowercase());
    }
    search.kind() == Kind::Array && search.elements().iter().any(|e| equals(item, e))
}

/// `format('{0} and {1}', a, b)`: `{{` and `}}` are braces; GitHub's
/// errors for anything else.
fn format(args: &[Val<'_>]) -> Result<String, ExprError> {
    let fs = args[0].text();
    let invalid = || ExprError::eval(format!("The following format string is invalid: {fs}"));
    let b = fs.as_bytes();
    let mut out = String::new();
    let mut index = 0;
    while index < b.len() {
        let lbrace = fs[index..].find('{').map(|i| i + index);
        let rbrace = fs[index..].find('}').map(|i| i + index);
        match (lbrace, rbrace) {
            (Some(l), r) if r.is_none_or(|r| r > l) => {
                if b.get(l + 1) == Some(&b'{') {
                    out.push_str(&fs[index..=l]);
                    index = l + 2;
                    continue;
                }
                if let Some(r) = r
                    && r > l + 1
                {
                    let digits = b[l + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
                    if digits > 0 {
                        let n: usize = fs[l + 1..l + 1 + digits].parse().unwrap_or(usize::MAX);
                        if n.saturating_add(1) > args.len() - 1 {
                            return Err(ExprError::eval(format!(
                                "The following format string references more arguments than were supplied: {fs}"
                            )));
                        }
                        out.push_str(&fs[index..l]);
                        out.push_str(&args[1 + n].text());
                        index = r + 1;
                        continue;
                    }
                }
                return Err(invalid());
            }
            (_, Some(r)) => {
                if b.get(r + 1) == Some(&b'}') {
                    out.push_str(&fs[index..=r]);
                    index = r + 2;
                } else {
                    return Err(invalid());
                }
            }
            _ => {
                out.push_str(&fs[index..]);
                break;
            }
        }
    }
    Ok(out)
}
