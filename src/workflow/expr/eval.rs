//! Evaluation: an [`Expr`] against a JSON context, with GitHub-Actions
//! truthiness, `null` for missing fields and comparisons by value.

use super::functions::call;
use super::*;
use serde_json::Number;
use std::borrow::Cow;
use std::cmp::Ordering;

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
pub(super) fn loose_eq(a: &Value, b: &Value) -> bool {
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
