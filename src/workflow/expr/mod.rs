//! The `${{ … }}` expression language (docs/expressions.md): GitHub Actions'
//! expressions, with their semantics exactly.
//!
//! Workflow files compute values from the run's context (`inputs`, `state`,
//! `steps.<id>.output`, …) with the expressions people copy from their
//! GitHub workflows, so they must mean what they mean there: literals
//! (`0xff`, `.5`, `NaN`, `'it''s'`), case-insensitive string comparison
//! and property lookup, `null`/boolean/string coercions, `.*` filters,
//! function names in any case, JavaScript's number formatting. GitHub's own
//! implementation (actions/languageservices, `expressions/src`) is ported
//! here piece by piece, and its cross-language conformance data is run
//! through this module by `tests/expressions/main.rs`. wf adds array literals
//! `[1, 'a']` and the status functions of `if:`.
//!
//! Parsing never panics, whatever the input: positions are byte offsets into
//! the expression text, nesting is capped at [`MAX_DEPTH`] as GitHub caps
//! it, and operator chains are stored flat, so neither parsing, evaluation
//! nor dropping a tree recurses deeper than that cap.
//!
//! This file holds the syntax tree and its errors; `lexer` and `parser` turn
//! text into an [`Expr`], `value` is what evaluation computes with, `eval`
//! evaluates, `functions` are what it can call, and `analysis` reads what
//! an expression refers to without running it.

mod analysis;
mod eval;
mod functions;
mod lexer;
mod parser;
#[cfg(test)]
mod tests;
mod value;

use serde_json::Value;

pub use eval::truthy;

/// A JSON value as text, as an expression's value inside a string is
/// rendered (see [`Expr::eval_text`]).
pub fn text_of(v: &Value) -> String {
    value::Val::of(v).text().into_owned()
}
pub use functions::FUNCTIONS;
pub use parser::{parse, parse_in};

/// Most levels of nesting an expression may have (GitHub's
/// `MAX_PARSER_DEPTH`): groups, function calls, `!`, `&&`/`||` chains and
/// each property or index access count.
pub const MAX_DEPTH: usize = 50;

/// The longest expression, in UTF-16 code units (GitHub's
/// `MAX_EXPRESSION_LENGTH`).
pub const MAX_LENGTH: usize = 21_000;

/// A parse or evaluation error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExprError {
    /// The expression text is malformed; `pos` is a byte offset into it.
    /// `message` is GitHub's; `hint` what wf adds to help.
    #[error("{message}{} at offset {pos}", .hint.as_deref().map(|h| format!(" ({h})")).unwrap_or_default())]
    Syntax {
        pos: usize,
        message: String,
        hint: Option<String>,
    },
    /// The expression is well-formed but cannot be evaluated on this context.
    #[error("{message}")]
    Eval { message: String },
}

impl ExprError {
    /// Byte offset of a parse error inside the expression text.
    pub fn pos(&self) -> Option<usize> {
        match self {
            ExprError::Syntax { pos, .. } => Some(*pos),
            ExprError::Eval { .. } => None,
        }
    }

    /// The message (with wf's hint) without the "at offset N" suffix.
    pub fn message(&self) -> String {
        match self {
            ExprError::Syntax {
                message,
                hint: Some(h),
                ..
            } => format!("{message} ({h})"),
            ExprError::Syntax { message, .. } | ExprError::Eval { message } => message.clone(),
        }
    }

    /// The message as GitHub words it (no hint), for the conformance test.
    pub fn github_message(&self) -> &str {
        match self {
            ExprError::Syntax { message, .. } | ExprError::Eval { message } => message,
        }
    }

    fn syntax(pos: usize, message: impl Into<String>) -> Self {
        ExprError::Syntax {
            pos,
            message: message.into(),
            hint: None,
        }
    }

    /// The same error with wf's `hint` (a syntax error's; others have none).
    fn with_hint(mut self, text: &str) -> Self {
        if let ExprError::Syntax { hint, .. } = &mut self {
            *hint = Some(text.to_string());
        }
        self
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
    Literal(Literal),
    /// A context name (`inputs`, `steps`, …), as written.
    Context(String),
    /// `base.name`, `base[expr]`, `base.*`, … applied left to right.
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
    /// `[a, b, …]` (wf's addition).
    Array(Vec<Expr>),
    /// `name(a, b, …)`, one of [`FUNCTIONS`] in any case; `name` as written.
    Call {
        name: String,
        args: Vec<Expr>,
    },
}

/// A literal: `null`, `true`, `false`, a number or a string.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Literal {
    Null,
    Bool(bool),
    /// Kept as its bits: JSON has no `NaN` nor `Infinity`.
    Number(u64),
    String(String),
}

impl Literal {
    fn number(n: f64) -> Literal {
        Literal::Number(n.to_bits())
    }
}

/// One step of an access path.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Accessor {
    /// `.name`
    Field(String),
    /// `[expr]`
    Index(Expr),
    /// `.*` or `[*]`: every element (or property value), as a filtered array.
    Star,
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
