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
//!
//! This file holds the syntax tree and its errors; `lexer` and `parser` turn
//! text into an [`Expr`], `eval` evaluates one, `functions` are what it can
//! call, and `analysis` reads what it refers to without running it.

mod analysis;
mod eval;
mod functions;
mod lexer;
mod parser;
#[cfg(test)]
mod tests;

use serde_json::Value;

pub use eval::truthy;
pub use functions::FUNCTIONS;
pub use parser::parse;

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
