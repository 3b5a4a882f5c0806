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
