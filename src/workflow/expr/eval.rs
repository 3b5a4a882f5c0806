//! Evaluation: an [`Expr`] against a JSON context, as GitHub's evaluator
//! (`evaluator.ts`) does it: missing properties are `null`, `&&`/`||`
//! return an operand, comparisons coerce, `*` makes filtered arrays that
//! later accesses apply to element-wise.

use super::functions::call;
use super::value::{Kind, Val, equals, ordered};
use super::*;
use std::borrow::Cow;

/// GitHub's truthiness of a JSON value: `false`, `null`, `0` and `""` are
/// falsy; everything else (empty arrays and objects too) is truthy.
pub fn truthy(v: &Value) -> bool {
    Val::of(v).truthy()
}

/// The most memory the values one evaluation makes may take, counted as
/// GitHub's runner counts it (text in UTF-16, 2 bytes a unit): a
/// `format` of a `toJSON` of a `format`… cannot grow without bound.
const MEMORY: usize = 1 << 20;

/// What a made value costs besides its contents.
const STRING_OVERHEAD: usize = 26;

impl Expr {
    /// Evaluates against `ctx`, a JSON object keyed by context name. `NaN`
    /// (which JSON cannot hold) comes out as null, the infinities as text.
    pub fn eval(&self, ctx: &Value) -> Result<Value, ExprError> {
        Ok(self.eval_val(ctx)?.into_json())
    }

    /// Evaluates to text, as a value inside a longer string is rendered:
    /// null as nothing, numbers as GitHub writes them, arrays `Array` and
    /// objects `Object`.
    pub fn eval_text(&self, ctx: &Value) -> Result<String, ExprError> {
        Ok(self.eval_val(ctx)?.text().into_owned())
    }

    /// Evaluates to its truthiness (what `if:` decides by).
    pub fn eval_truthy(&self, ctx: &Value) -> Result<bool, ExprError> {
        Ok(self.eval_val(ctx)?.truthy())
    }

    /// The value's kind as GitHub names it (`Null`, `Boolean`, `Number`,
    /// `String`, `Array`, `Object`) and the value as JavaScript's
    /// `JSON.stringify` sees it (non-finite numbers are null): what GitHub's
    /// conformance data states results as (`tests/expressions/main.rs`).
    #[doc(hidden)]
    pub fn eval_for_conformance(&self, ctx: &Value) -> Result<(&'static str, Value), ExprError> {
        fn plain(v: Val<'_>) -> Value {
            match v {
                Val::Num(n) if !n.is_finite() => Value::Null,
                Val::List { items, .. } => Value::Array(items.into_iter().map(plain).collect()),
                other => other.into_json(),
            }
        }
        let v = self.eval_val(ctx)?;
        let kind = match v.kind() {
            Kind::Null => "Null",
            Kind::Boolean => "Boolean",
            Kind::Number => "Number",
            Kind::String => "String",
            Kind::Array => "Array",
            Kind::Object => "Object",
        };
        Ok((kind, plain(v)))
    }

    fn eval_val<'a>(&'a self, ctx: &'a Value) -> Result<Val<'a>, ExprError> {
        let mut e = Evaluator { ctx, made: 0 };
        e.eval(self)
    }
}

struct Evaluator<'a> {
    ctx: &'a Value,
    /// Bytes of text and elements made so far ([`MEMORY`]).
    made: usize,
}

impl<'a> Evaluator<'a> {
    fn eval(&mut self, e: &'a Expr) -> Result<Val<'a>, ExprError> {
        Ok(match e {
            Expr::Literal(l) => match l {
                Literal::Null => Val::Null,
                Literal::Bool(b) => Val::Bool(*b),
                Literal::Number(bits) => Val::Num(f64::from_bits(*bits)),
                Literal::String(s) => Val::Str(Cow::Borrowed(s)),
            },
            Expr::Context(name) => Val::of(self.context(name)),
            Expr::Access { base, path } => {
                let mut cur = self.eval(base)?;
                for acc in path {
                    cur = match acc {
                        Accessor::Field(name) => access(cur, &Index::key(name)),
                        Accessor::Star => access(cur, &Index::Star),
                        Accessor::Index(i) => {
                            let i = self.eval(i)?;
                            access(cur, &Index::of(&i))
                        }
                    };
                }
                cur
            }
            Expr::Not(e) => Val::Bool(!self.eval(e)?.truthy()),
            Expr::Chain { first, rest } => {
                let mut acc = self.eval(first)?;
                for (op, e) in rest {
                    let r = self.eval(e)?;
                    acc = Val::Bool(match op {
                        BinOp::Eq => equals(&acc, &r),
                        BinOp::Ne => !equals(&acc, &r),
                        BinOp::Gt => ordered(&acc, &r, false),
                        BinOp::Ge => equals(&acc, &r) || ordered(&acc, &r, false),
                        BinOp::Lt => ordered(&acc, &r, true),
                        BinOp::Le => equals(&acc, &r) || ordered(&acc, &r, true),
                    });
                }
                acc
            }
            Expr::And(items) => {
                let mut last = Val::Null;
                for e in items {
                    last = self.eval(e)?;
                    if !last.truthy() {
                        break;
                    }
                }
                last
            }
            Expr::Or(items) => {
                let mut last = Val::Null;
                for e in items {
                    last = self.eval(e)?;
                    if last.truthy() {
                        break;
                    }
                }
                last
            }
            Expr::Array(items) => {
                let items = items
                    .iter()
                    .map(|e| self.eval(e))
                    .collect::<Result<Vec<_>, _>>()?;
                self.count(8 * items.len() + STRING_OVERHEAD)?;
                Val::List {
                    items,
                    filtered: false,
                }
            }
            Expr::Call { name, args } => {
                let args = args
                    .iter()
                    .map(|e| self.eval(e))
                    .collect::<Result<Vec<_>, _>>()?;
                let out = call(name, args, self.ctx)?;
                match &out {
                    // As GitHub's runner counts: UTF-16, and an overhead.
                    Val::Str(Cow::Owned(s)) => {
                        self.count(2 * s.encode_utf16().count() + STRING_OVERHEAD)?;
                    }
                    Val::Json(Cow::Owned(_)) | Val::List { .. } => self.count(STRING_OVERHEAD)?,
                    _ => {}
                }
                out
            }
        })
    }

    /// A context by name, ignoring case (`Inputs` is `inputs`).
    fn context(&self, name: &str) -> &'a Value {
        static NULL: Value = Value::Null;
        let Some(m) = self.ctx.as_object() else {
            return &NULL;
        };
        m.get(name)
            .or_else(|| {
                m.iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v)
            })
            .unwrap_or(&NULL)
    }

    fn count(&mut self, bytes: usize) -> Result<(), ExprError> {
        self.made = self.made.saturating_add(bytes);
        if self.made > MEMORY {
            return Err(ExprError::eval(
                "The maximum allowed memory size was exceeded",
            ));
        }
        Ok(())
    }
}

/// What an access asks for (GitHub's `idxHelper`): every element, or a
/// key (a primitive's text) and, for arrays, a whole non-negative index.
enum Index {
    Star,
    At {
        key: Option<String>,
        int: Option<usize>,
    },
}

impl Index {
    fn key(name: &str) -> Index {
        Index::At {
            key: Some(name.to_string()),
            int: None,
        }
    }

    fn of(v: &Val<'_>) -> Index {
        let f = v.number();
        Index::At {
            key: v.primitive().then(|| v.text().into_owned()),
            int: (f.is_finite() && f >= 0.0).then(|| {
                // Saturates: an index past any array is as good as absent.
                f.floor() as usize
            }),
        }
    }
}

fn access<'a>(base: Val<'a>, idx: &Index) -> Val<'a> {
    if let Val::List {
        items,
        filtered: true,
    } = &base
    {
        // Each element's match, flattened one level for `*`.
        let mut out = Vec::new();
        for item in items {
            match (item.kind(), idx) {
                (Kind::Object | Kind::Array, Index::Star) => out.extend(item.elements()),
                (Kind::Object, Index::At { key: Some(k), .. }) => out.extend(item.property(k)),
                (Kind::Array, Index::At { int: Some(i), .. }) => out.extend(item.element(*i)),
                _ => {}
            }
        }
        return Val::List {
            items: out,
            filtered: true,
        };
    }
    match (base.kind(), idx) {
        (Kind::Array | Kind::Object, Index::Star) => Val::List {
            items: base.elements(),
            filtered: true,
        },
        (_, Index::Star) => Val::List {
            items: Vec::new(),
            filtered: true,
        },
        (Kind::Array, Index::At { int: Some(i), .. }) => base.element(*i).unwrap_or(Val::Null),
        (Kind::Object, Index::At { key: Some(k), .. }) => base.property(k).unwrap_or(Val::Null),
        _ => Val::Null,
    }
}
