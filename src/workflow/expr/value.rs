//! Values as GitHub Actions' expression language sees them, and its
//! coercions (docs/expressions.md). JSON from the context is read in place (borrowed);
//! what evaluation makes (numbers such as `NaN`, filtered arrays, array
//! literals, `fromJSON` results) is owned.
//!
//! The rules are those of GitHub's own implementation (actions/
//! languageservices, `expressions/src/data` and `result.ts`): numbers are
//! IEEE doubles written the way JavaScript writes them, strings compare and
//! look keys up ignoring case, `null` and booleans become numbers when
//! compared with another kind, arrays and objects are equal only to
//! themselves.

use serde_json::Value;
use std::borrow::Cow;
use std::cmp::Ordering;

/// A value during evaluation.
#[derive(Debug, Clone)]
pub(super) enum Val<'a> {
    Null,
    Bool(bool),
    Num(f64),
    Str(Cow<'a, str>),
    /// A JSON array or object (never a primitive: those are read into the
    /// variants above).
    Json(Cow<'a, Value>),
    /// An array evaluation built; `filtered` when a `*` made it (an index
    /// on it then applies to each element).
    List {
        items: Vec<Val<'a>>,
        filtered: bool,
    },
}

/// The kinds of value, as GitHub names them in errors and `coerceString`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Null,
    Boolean,
    Number,
    String,
    Array,
    Object,
}

impl<'a> Val<'a> {
    /// A JSON value read in place.
    pub(super) fn of(v: &'a Value) -> Val<'a> {
        match v {
            Value::Null => Val::Null,
            Value::Bool(b) => Val::Bool(*b),
            Value::Number(n) => Val::Num(n.as_f64().unwrap_or(f64::NAN)),
            Value::String(s) => Val::Str(Cow::Borrowed(s)),
            Value::Array(_) | Value::Object(_) => Val::Json(Cow::Borrowed(v)),
        }
    }

    /// An owned JSON value.
    pub(super) fn owned(v: Value) -> Val<'static> {
        match v {
            Value::Null => Val::Null,
            Value::Bool(b) => Val::Bool(b),
            Value::Number(n) => Val::Num(n.as_f64().unwrap_or(f64::NAN)),
            Value::String(s) => Val::Str(Cow::Owned(s)),
            other => Val::Json(Cow::Owned(other)),
        }
    }

    /// A child of a value held in a `Cow`: borrowed when the parent is.
    fn child(parent: &Cow<'a, Value>, pick: impl Fn(&Value) -> Option<&Value>) -> Option<Val<'a>> {
        match parent {
            Cow::Borrowed(p) => pick(p).map(Val::of),
            Cow::Owned(p) => pick(p).map(|v| Val::owned(v.clone())),
        }
    }

    pub(super) fn kind(&self) -> Kind {
        match self {
            Val::Null => Kind::Null,
            Val::Bool(_) => Kind::Boolean,
            Val::Num(_) => Kind::Number,
            Val::Str(_) => Kind::String,
            Val::Json(v) if v.is_object() => Kind::Object,
            Val::Json(_) | Val::List { .. } => Kind::Array,
        }
    }

    /// Null, booleans, numbers and strings are primitives.
    pub(super) fn primitive(&self) -> bool {
        !matches!(self.kind(), Kind::Array | Kind::Object)
    }

    /// GitHub's truthiness: `false`, `null`, `0`, `NaN` and `''` are falsy.
    pub(super) fn truthy(&self) -> bool {
        match self {
            Val::Null => false,
            Val::Bool(b) => *b,
            Val::Num(n) => !(*n == 0.0 || n.is_nan()),
            Val::Str(s) => !s.is_empty(),
            Val::Json(_) | Val::List { .. } => true,
        }
    }

    /// The value as a number (`number()`): null 0, booleans 0 and 1,
    /// strings as JavaScript's `Number(…)` reads them, others `NaN`.
    pub(super) fn number(&self) -> f64 {
        match self {
            Val::Null => 0.0,
            Val::Bool(b) => f64::from(u8::from(*b)),
            Val::Num(n) => *n,
            Val::Str(s) => parse_number(s),
            Val::Json(_) | Val::List { .. } => f64::NAN,
        }
    }

    /// The value as text (`coerceString()`): null empty, numbers as
    /// JavaScript writes them (at most 15 decimals), arrays `Array`,
    /// objects `Object`.
    pub(super) fn text(&self) -> Cow<'_, str> {
        match self {
            Val::Null => Cow::Borrowed(""),
            Val::Bool(true) => Cow::Borrowed("true"),
            Val::Bool(false) => Cow::Borrowed("false"),
            Val::Num(n) => Cow::Owned(number_text(*n)),
            Val::Str(s) => Cow::Borrowed(s),
            Val::Json(v) if v.is_object() => Cow::Borrowed("Object"),
            Val::Json(_) | Val::List { .. } => Cow::Borrowed("Array"),
        }
    }

    /// The elements of an array (or the values of an object), in order.
    pub(super) fn elements(&self) -> Vec<Val<'a>> {
        match self {
            Val::List { items, .. } => items.clone(),
            Val::Json(Cow::Borrowed(v)) => match v {
                Value::Array(items) => items.iter().map(Val::of).collect(),
                Value::Object(m) => m.values().map(Val::of).collect(),
                _ => Vec::new(),
            },
            Val::Json(Cow::Owned(v)) => match v {
                Value::Array(items) => items.iter().map(|i| Val::owned(i.clone())).collect(),
                Value::Object(m) => m.values().map(|i| Val::owned(i.clone())).collect(),
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    /// Element `i` of an array.
    pub(super) fn element(&self, i: usize) -> Option<Val<'a>> {
        match self {
            Val::List { items, .. } => items.get(i).cloned(),
            Val::Json(v) => Val::child(v, |v| v.as_array().and_then(|a| a.get(i))),
            _ => None,
        }
    }

    /// Property `key` of an object, looked up ignoring case (the exact
    /// spelling first, then the first key equal to it ignoring case).
    pub(super) fn property(&self, key: &str) -> Option<Val<'a>> {
        let Val::Json(v) = self else {
            return None;
        };
        Val::child(v, |v| {
            let m = v.as_object()?;
            m.get(key).or_else(|| {
                m.iter()
                    .find(|(k, _)| same_ignoring_case(k, key))
                    .map(|(_, v)| v)
            })
        })
    }

    /// The value as JSON, for where wf keeps values: `NaN` (which JSON
    /// cannot hold) becomes null, the infinities their text.
    pub(super) fn into_json(self) -> Value {
        match self {
            Val::Null => Value::Null,
            Val::Bool(b) => Value::Bool(b),
            Val::Num(n) => number_json(n),
            Val::Str(s) => Value::String(s.into_owned()),
            Val::Json(v) => v.into_owned(),
            Val::List { items, .. } => {
                Value::Array(items.into_iter().map(Val::into_json).collect())
            }
        }
    }

    /// `toJSON(…)`: pretty-printed with two spaces, numbers as JavaScript
    /// writes them (`NaN` and the infinities as null), as GitHub prints.
    pub(super) fn to_json_text(&self) -> String {
        let mut out = String::new();
        write_json(self, 0, &mut out);
        out
    }
}

/// A number as JSON: whole ones as integers, `NaN` null, infinities text.
fn number_json(n: f64) -> Value {
    if n.is_nan() {
        return Value::Null;
    }
    if n.is_infinite() {
        return Value::String(if n > 0.0 { "Infinity" } else { "-Infinity" }.into());
    }
    if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        // Exact: |n| < 2^53. (`-0` is 0.)
        return Value::from(n as i64);
    }
    serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
}

fn write_json(v: &Val<'_>, depth: usize, out: &mut String) {
    let pad = |depth: usize, out: &mut String| {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    };
    match v {
        Val::Null => out.push_str("null"),
        Val::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Val::Num(n) if n.is_finite() => out.push_str(&js_number(*n)),
        Val::Num(_) => out.push_str("null"),
        Val::Str(s) => out.push_str(&serde_json::to_string(s.as_ref()).unwrap_or_default()),
        Val::Json(j) if j.is_object() => {
            let Some(m) = j.as_object() else { return };
            if m.is_empty() {
                out.push_str("{}");
                return;
            }
            out.push('{');
            for (i, (k, item)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                pad(depth + 1, out);
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push_str(": ");
                write_json(&Val::of(item), depth + 1, out);
            }
            pad(depth, out);
            out.push('}');
        }
        Val::Json(_) | Val::List { .. } => {
            let items = v.elements();
            if items.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                pad(depth + 1, out);
                write_json(item, depth + 1, out);
            }
            pad(depth, out);
            out.push(']');
        }
    }
}

/// Whether two keys are equal ignoring case, as GitHub's dictionaries
/// compare them (`toLowerCase`).
pub(super) fn same_ignoring_case(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        return a.eq_ignore_ascii_case(b);
    }
    a.to_lowercase() == b.to_lowercase()
}

/// Upper case as GitHub compares strings: every character but the dotless
/// `ı`, which stays as it is (`toUpperSpecial`).
pub(super) fn upper(s: &str) -> Cow<'_, str> {
    if s.is_ascii() {
        if s.bytes().any(|b| b.is_ascii_lowercase()) {
            return Cow::Owned(s.to_ascii_uppercase());
        }
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == 'ı' {
            out.push(c);
        } else {
            out.extend(c.to_uppercase());
        }
    }
    Cow::Owned(out)
}

/// Orders two strings as JavaScript does: by UTF-16 code units.
pub(super) fn utf16_cmp(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// JavaScript's `Number(text)`: whitespace around is ignored, empty text is
/// 0, `0x`/`0o`/`0b` prefixes, `Infinity`, decimals with an optional sign,
/// fraction and exponent; anything else `NaN`.
pub(super) fn parse_number(text: &str) -> f64 {
    let s = text.trim_matches(is_js_space);
    if s.is_empty() {
        return 0.0;
    }
    let radix = match s.get(..2) {
        Some("0x" | "0X") => Some(16),
        Some("0o" | "0O") => Some(8),
        Some("0b" | "0B") => Some(2),
        _ => None,
    };
    if let Some(radix) = radix {
        let digits = &s[2..];
        if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
            return f64::NAN;
        }
        return digits.chars().fold(0.0, |acc, c| {
            acc * f64::from(radix) + f64::from(c.to_digit(radix).unwrap_or(0))
        });
    }
    let (sign, body) = match s.as_bytes()[0] {
        b'-' => (-1.0, &s[1..]),
        b'+' => (1.0, &s[1..]),
        _ => (1.0, s),
    };
    if body == "Infinity" {
        return sign * f64::INFINITY;
    }
    if !is_decimal(body) {
        return f64::NAN;
    }
    body.parse::<f64>().map_or(f64::NAN, |n| sign * n)
}

/// `digits [. digits?] | . digits`, then an optional exponent.
fn is_decimal(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    let mut mantissa = digits(&mut i);
    if b.get(i) == Some(&b'.') {
        i += 1;
        mantissa += digits(&mut i);
    }
    if mantissa == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// JavaScript's white space and line terminators (what `Number(…)` and
/// `trim()` take off).
pub(super) fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{B}' | '\u{C}' | '\r' | ' ' | '\u{A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202F}'
                | '\u{205F}'
                | '\u{3000}'
                | '\u{FEFF}'
    )
}

/// GitHub's number as text: at most 15 decimals, then as JavaScript
/// writes it (`120`, `0.1`, `1e+21`, `-Infinity`).
pub(super) fn number_text(n: f64) -> String {
    if n == 0.0 {
        return "0".into();
    }
    if !n.is_finite() || n.abs() >= 1e21 {
        // `toFixed` leaves these as they are.
        return js_number(n);
    }
    let fixed: f64 = format!("{n:.15}").parse().unwrap_or(n);
    js_number(fixed)
}

/// JavaScript's `Number.prototype.toString()`: the shortest digits that
/// read back as the same number, in plain notation from 1e-6 up to 1e21 and
/// in exponent notation outside.
pub(super) fn js_number(n: f64) -> String {
    if n.is_nan() {
        return "NaN".into();
    }
    if n == 0.0 {
        return "0".into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let sign = if n < 0.0 { "-" } else { "" };
    // Rust's `{:e}` gives the shortest round-trip digits: `1.2345e-7`.
    let e = format!("{:e}", n.abs());
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let k = digits.len() as i32;
    let point = exp + 1;
    let body = if k <= point && point <= 21 {
        format!("{digits}{}", "0".repeat((point - k) as usize))
    } else if 0 < point && point <= 21 {
        format!(
            "{}.{}",
            &digits[..point as usize],
            &digits[point as usize..]
        )
    } else if -6 < point && point <= 0 {
        format!("0.{}{digits}", "0".repeat((-point) as usize))
    } else {
        let sign = if point - 1 < 0 { '-' } else { '+' };
        let e = (point - 1).abs();
        if k == 1 {
            format!("{digits}e{sign}{e}")
        } else {
            format!("{}.{}e{sign}{e}", &digits[..1], &digits[1..])
        }
    };
    format!("{sign}{body}")
}

/// Makes two values comparable as GitHub does: a number and a string
/// compare as numbers; null and booleans become numbers against another
/// kind.
fn coerce<'x>(l: Val<'x>, r: Val<'x>) -> (Val<'x>, Val<'x>) {
    let (lk, rk) = (l.kind(), r.kind());
    if lk == rk {
        return (l, r);
    }
    match (lk, rk) {
        (Kind::Number, Kind::String) => {
            let n = r.number();
            return (l, Val::Num(n));
        }
        (Kind::String, Kind::Number) => return (Val::Num(l.number()), r),
        (Kind::Null | Kind::Boolean, _) => return coerce(Val::Num(l.number()), r),
        _ => {}
    }
    if matches!(rk, Kind::Null | Kind::Boolean) {
        let n = r.number();
        return coerce(l, Val::Num(n));
    }
    (l, r)
}

/// `==`: after [`coerce`], same kinds compare by value (strings ignoring
/// case, `NaN` equal to nothing), arrays and objects only to themselves.
pub(super) fn equals(l: &Val<'_>, r: &Val<'_>) -> bool {
    let (l, r) = coerce(l.clone(), r.clone());
    match (&l, &r) {
        (Val::Null, Val::Null) => true,
        (Val::Num(a), Val::Num(b)) => a == b,
        (Val::Str(a), Val::Str(b)) => upper(a) == upper(b),
        (Val::Bool(a), Val::Bool(b)) => a == b,
        (Val::Json(Cow::Borrowed(a)), Val::Json(Cow::Borrowed(b))) => std::ptr::eq(*a, *b),
        _ => false,
    }
}

/// `>` (`less` false) or `<` (`less` true) after [`coerce`]: numbers,
/// strings ignoring case (by UTF-16 code units) and booleans; anything
/// else is false.
pub(super) fn ordered(l: &Val<'_>, r: &Val<'_>, less: bool) -> bool {
    let (l, r) = coerce(l.clone(), r.clone());
    let ord = match (&l, &r) {
        (Val::Num(a), Val::Num(b)) => a.partial_cmp(b),
        (Val::Str(a), Val::Str(b)) => Some(utf16_cmp(&upper(a), &upper(b))),
        (Val::Bool(a), Val::Bool(b)) => Some(a.cmp(b)),
        _ => None,
    };
    ord == Some(if less {
        Ordering::Less
    } else {
        Ordering::Greater
    })
}
