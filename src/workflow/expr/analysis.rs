//! What an expression uses, read without evaluating it: the static access
//! paths the validator checks, and whether it calls a handler's status function.

use super::functions::STATUS_FUNCTIONS;
use super::*;

impl Expr {
    /// Whether the expression calls a status function other than
    /// `success()`: it makes its step a handler, which runs after a failure.
    pub fn calls_handler_function(&self) -> bool {
        match self {
            Expr::Call { name, args } => {
                (STATUS_FUNCTIONS
                    .iter()
                    .any(|f| f.eq_ignore_ascii_case(name))
                    && !name.eq_ignore_ascii_case("success"))
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
            Expr::Literal(_) | Expr::Context(_) => false,
        }
    }

    /// The arguments of each call of function `name` (any case) in this
    /// expression, outermost first.
    pub fn calls_of(&self, name: &str) -> Vec<&[Expr]> {
        let mut out = Vec::new();
        self.collect_calls(name, &mut out);
        out
    }

    fn collect_calls<'a>(&'a self, name: &str, out: &mut Vec<&'a [Expr]>) {
        match self {
            Expr::Call { name: n, args } => {
                if n.eq_ignore_ascii_case(name) {
                    out.push(args);
                }
                args.iter().for_each(|a| a.collect_calls(name, out));
            }
            Expr::Access { base, path } => {
                base.collect_calls(name, out);
                for acc in path {
                    if let Accessor::Index(e) = acc {
                        e.collect_calls(name, out);
                    }
                }
            }
            Expr::Not(e) => e.collect_calls(name, out),
            Expr::Chain { first, rest } => {
                first.collect_calls(name, out);
                rest.iter().for_each(|(_, e)| e.collect_calls(name, out));
            }
            Expr::And(items) | Expr::Or(items) | Expr::Array(items) => {
                items.iter().for_each(|e| e.collect_calls(name, out));
            }
            Expr::Literal(_) | Expr::Context(_) => {}
        }
    }

    /// Every static access path starting at a context name, as written,
    /// e.g. `steps.charge-card.output.json.id` gives
    /// `["steps", "charge-card", "output", "json", "id"]`. A dynamic index or
    /// a `*` ends the path there; the index expression's own paths are
    /// listed too. (Names are looked up ignoring case.)
    pub fn references(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        self.collect_refs(&mut out);
        out
    }

    fn collect_refs(&self, out: &mut Vec<Vec<String>>) {
        match self {
            Expr::Literal(_) => {}
            Expr::Context(name) => out.push(vec![name.clone()]),
            Expr::Access { base, path } => {
                let mut stat = match base.as_ref() {
                    Expr::Context(name) => Some(vec![name.clone()]),
                    other => {
                        other.collect_refs(out);
                        None
                    }
                };
                for acc in path {
                    let key = match acc {
                        Accessor::Field(name) => Some(name.clone()),
                        Accessor::Index(Expr::Literal(Literal::String(s))) => Some(s.clone()),
                        Accessor::Index(Expr::Literal(Literal::Number(bits))) => {
                            Some(super::value::number_text(f64::from_bits(*bits)))
                        }
                        Accessor::Index(_) | Accessor::Star => None,
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

    /// What in this expression means something else than it did before wf
    /// followed GitHub's rules exactly, as far as can be told without
    /// running it (`wf validate` warns of each): a comparison with a string
    /// literal that has capitals (strings compare ignoring case now), and a
    /// string literal with a backslash (backslashes are literal now).
    pub fn meaning_changes(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.collect_changes(&mut out);
        out.dedup();
        out
    }

    fn collect_changes(&self, out: &mut Vec<String>) {
        let mut literal = |l: &Literal| {
            if let Literal::String(s) = l
                && s.contains('\\')
            {
                out.push(format!(
                    "backslashes in strings are literal now (as in GitHub Actions): `'{s}'` keeps each `\\` as it is"
                ));
            }
        };
        match self {
            Expr::Literal(l) => literal(l),
            Expr::Context(_) => {}
            Expr::Access { base, path } => {
                base.collect_changes(out);
                for a in path {
                    if let Accessor::Index(e) = a {
                        e.collect_changes(out);
                    }
                }
            }
            Expr::Not(e) => e.collect_changes(out),
            Expr::Chain { first, rest } => {
                first.collect_changes(out);
                let mut left = first.as_ref();
                for (op, right) in rest {
                    right.collect_changes(out);
                    for (a, b) in [(left, right), (right, left)] {
                        if let Expr::Literal(Literal::String(s)) = a
                            && !matches!(b, Expr::Literal(_))
                            && s.chars().any(char::is_uppercase)
                        {
                            out.push(format!(
                                "`{}` compares strings ignoring case now (as in GitHub Actions): `'{s}'` also matches `'{}'`",
                                op_symbol(*op),
                                s.to_lowercase()
                            ));
                        }
                    }
                    left = right;
                }
            }
            Expr::And(items) | Expr::Or(items) | Expr::Array(items) => {
                for e in items {
                    e.collect_changes(out);
                }
            }
            Expr::Call { args, .. } => {
                for e in args {
                    e.collect_changes(out);
                }
            }
        }
    }

    /// Whether the value is likely an object or an array: a bare context,
    /// or a path ending at a step's `output`, its `json` or `headers`. In
    /// a longer string such a value renders as `Object` or `Array` now.
    pub fn likely_object(&self) -> bool {
        match self {
            Expr::Context(name) => !matches!(name.to_ascii_lowercase().as_str(), "item" | "index"),
            Expr::Access { path, .. } => matches!(
                path.last(),
                Some(Accessor::Field(f)) if matches!(f.to_ascii_lowercase().as_str(), "output" | "json" | "headers")
            ),
            _ => false,
        }
    }
}

fn op_symbol(op: BinOp) -> &'static str {
    match op {
        BinOp::Eq => "==",
        BinOp::Ne => "!=",
        BinOp::Lt => "<",
        BinOp::Le => "<=",
        BinOp::Gt => ">",
        BinOp::Ge => ">=",
    }
}
