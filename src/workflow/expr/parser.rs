//! The parser: tokens into an [`Expr`], as GitHub's (`parser.ts`) builds
//! its tree: one function per precedence level, lowest first (`||`, `&&`,
//! `==`/`!=`, `<`/`<=`/`>`/`>=`, `!`, access), its depth rule, its error
//! messages. Only a context name, a call or a group may be indexed. wf adds
//! array literals `[a, b]` where a value may start.

use super::functions::signature;
use super::lexer::{Tok, Token, lex};
use super::*;

/// Parses the text between `${{` and `}}` (surrounding whitespace allowed).
/// Context names are not checked here (the validator checks them, knowing
/// where the expression stands).
pub fn parse(src: &str) -> Result<Expr, ExprError> {
    Parser::new(src, None)?.parse()
}

/// Parses with the context names that exist (any case), refusing others
/// as GitHub does (`Unrecognized named-value`).
pub fn parse_in(src: &str, contexts: &[&str]) -> Result<Expr, ExprError> {
    let names = contexts.iter().map(|c| c.to_lowercase()).collect();
    Parser::new(src, Some(names))?.parse()
}

/// Why a token is where it cannot be (GitHub's `ErrorType`).
enum Error {
    UnexpectedSymbol,
    UnexpectedEnd,
    MaxDepth,
    UnrecognizedContext,
}

struct Parser<'a> {
    src: &'a str,
    toks: Vec<Token>,
    i: usize,
    depth: usize,
    contexts: Option<Vec<String>>,
}

impl<'a> Parser<'a> {
    fn new(src: &'a str, contexts: Option<Vec<String>>) -> Result<Parser<'a>, ExprError> {
        Ok(Parser {
            src,
            toks: lex(src)?,
            i: 0,
            depth: 0,
            contexts,
        })
    }

    fn parse(mut self) -> Result<Expr, ExprError> {
        if self.toks.is_empty() {
            return Err(ExprError::syntax(0, "An expression was expected"));
        }
        let e = self.expression()?;
        if let Some(t) = self.toks.get(self.i) {
            let hint = match t.tok {
                Tok::RParen | Tok::RBracket => "it has nothing to close",
                _ => "an operator is missing before it",
            };
            return Err(self.error(Error::UnexpectedSymbol, self.i).with_hint(hint));
        }
        Ok(e)
    }

    // ---- tokens ----

    fn check(&self, tok: &Tok) -> bool {
        self.toks.get(self.i).is_some_and(|t| t.tok == *tok)
    }

    fn at_end(&self) -> bool {
        self.i >= self.toks.len()
    }

    fn eat(&mut self, tok: &Tok) -> bool {
        if self.check(tok) {
            self.i += 1;
            return true;
        }
        false
    }

    fn eat_op(&mut self, ops: &[BinOp]) -> Option<BinOp> {
        match self.toks.get(self.i).map(|t| &t.tok) {
            Some(Tok::Op(op)) if ops.contains(op) => {
                let op = *op;
                self.i += 1;
                Some(op)
            }
            _ => None,
        }
    }

    fn consume(&mut self, tok: &Tok) -> Result<(), ExprError> {
        if self.eat(tok) {
            return Ok(());
        }
        Err(self.error(Error::UnexpectedSymbol, self.i))
    }

    fn text(&self, i: usize) -> &str {
        self.toks
            .get(i)
            .and_then(|t| self.src.get(t.pos..t.end))
            .unwrap_or_default()
    }

    /// An error at token `i` (past the end: the end of the expression),
    /// worded as GitHub words it: `Unexpected symbol: ')'`.
    fn error(&self, kind: Error, i: usize) -> ExprError {
        let (shown, pos) = match self.toks.get(i) {
            None => ("EOF".to_string(), self.src.len()),
            Some(t) => (
                match &t.tok {
                    Tok::Str(s) => s.clone(),
                    _ => self.text(i).to_string(),
                },
                t.pos,
            ),
        };
        let what = match kind {
            Error::UnexpectedSymbol => "Unexpected symbol".to_string(),
            Error::UnexpectedEnd => "Unexpected end of expression".to_string(),
            Error::MaxDepth => format!("Exceeded max expression depth {MAX_DEPTH}"),
            Error::UnrecognizedContext => "Unrecognized named-value".to_string(),
        };
        let e = ExprError::syntax(pos, format!("{what}: '{shown}'"));
        match kind {
            Error::UnexpectedEnd => e.with_hint("a value is missing at the end"),
            _ => e,
        }
    }

    fn enter(&mut self) -> Result<(), ExprError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error(Error::MaxDepth, self.i));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    // ---- grammar ----

    fn expression(&mut self) -> Result<Expr, ExprError> {
        self.enter()?;
        let e = self.or();
        self.leave();
        e
    }

    fn or(&mut self) -> Result<Expr, ExprError> {
        let first = self.and()?;
        if !self.check(&Tok::Or) {
            return Ok(first);
        }
        self.enter()?;
        let mut items = vec![first];
        while self.eat(&Tok::Or) {
            items.push(self.and()?);
        }
        self.leave();
        Ok(Expr::Or(items))
    }

    fn and(&mut self) -> Result<Expr, ExprError> {
        let first = self.equality()?;
        if !self.check(&Tok::And) {
            return Ok(first);
        }
        self.enter()?;
        let mut items = vec![first];
        while self.eat(&Tok::And) {
            items.push(self.equality()?);
        }
        self.leave();
        Ok(Expr::And(items))
    }

    fn equality(&mut self) -> Result<Expr, ExprError> {
        let first = self.comparison()?;
        let mut rest = Vec::new();
        while let Some(op) = self.eat_op(&[BinOp::Ne, BinOp::Eq]) {
            rest.push((op, self.comparison()?));
        }
        Ok(chain(first, rest))
    }

    fn comparison(&mut self) -> Result<Expr, ExprError> {
        let first = self.unary()?;
        let mut rest = Vec::new();
        while let Some(op) = self.eat_op(&[BinOp::Gt, BinOp::Ge, BinOp::Lt, BinOp::Le]) {
            rest.push((op, self.unary()?));
        }
        Ok(chain(first, rest))
    }

    fn unary(&mut self) -> Result<Expr, ExprError> {
        if self.eat(&Tok::Bang) {
            self.enter()?;
            let operand = self.unary()?;
            self.leave();
            return Ok(Expr::Not(Box::new(operand)));
        }
        self.access()
    }

    /// Accesses after a context name, a call or a group: `.name`, `.*`,
    /// `[expr]`, `[*]`; each is a level of depth.
    fn access(&mut self) -> Result<Expr, ExprError> {
        let (base, indexable) = self.call()?;
        if !indexable {
            return Ok(base);
        }
        let mut path = Vec::new();
        let mut levels = 0;
        let out = loop {
            if self.eat(&Tok::LBracket) {
                let index = if self.eat(&Tok::Star) {
                    Accessor::Star
                } else {
                    Accessor::Index(self.expression()?)
                };
                self.consume(&Tok::RBracket)?;
                self.enter()?;
                levels += 1;
                path.push(index);
            } else if self.eat(&Tok::Dot) {
                self.enter()?;
                levels += 1;
                if self.eat(&Tok::Ident) {
                    path.push(Accessor::Field(self.text(self.i - 1).to_string()));
                } else if self.eat(&Tok::Star) {
                    path.push(Accessor::Star);
                } else {
                    return Err(self.error(Error::UnexpectedSymbol, self.i));
                }
            } else {
                break if path.is_empty() {
                    base
                } else {
                    Expr::Access {
                        base: Box::new(base),
                        path,
                    }
                };
            }
        };
        for _ in 0..levels {
            self.leave();
        }
        Ok(out)
    }

    /// A context name or a call (indexable), else a primary.
    fn call(&mut self) -> Result<(Expr, bool), ExprError> {
        if !self.check(&Tok::Ident) {
            return self.primary();
        }
        let at = self.i;
        self.i += 1;
        let name = self.text(at).to_string();
        if !self.eat(&Tok::LParen) {
            if let Some(known) = &self.contexts
                && !known.contains(&name.to_lowercase())
            {
                return Err(self.error(Error::UnrecognizedContext, at));
            }
            return Ok((Expr::Context(name), true));
        }
        let mut args = Vec::new();
        while !self.eat(&Tok::RParen) {
            args.push(self.expression()?);
            if !self.check(&Tok::RParen) {
                self.consume(&Tok::Comma)?;
            }
        }
        let pos = self.toks.get(at).map_or(0, |t| t.pos);
        signature(&name, args.len()).map_err(|(message, hint)| ExprError::Syntax {
            pos,
            message,
            hint,
        })?;
        Ok((Expr::Call { name, args }, true))
    }

    fn primary(&mut self) -> Result<(Expr, bool), ExprError> {
        let Some(t) = self.toks.get(self.i) else {
            return Err(self.error(Error::UnexpectedEnd, self.i.saturating_sub(1)));
        };
        let literal = match &t.tok {
            Tok::False => Literal::Bool(false),
            Tok::True => Literal::Bool(true),
            Tok::Null => Literal::Null,
            Tok::Num(n) => Literal::number(*n),
            Tok::Str(s) => Literal::String(s.clone()),
            Tok::LParen => {
                self.i += 1;
                let inner = self.expression()?;
                if self.at_end() {
                    return Err(self.error(Error::UnexpectedEnd, self.i - 1));
                }
                self.consume(&Tok::RParen)?;
                return Ok((inner, true));
            }
            Tok::LBracket => {
                // wf's array literal.
                self.i += 1;
                self.enter()?;
                let mut items = Vec::new();
                if !self.eat(&Tok::RBracket) {
                    loop {
                        items.push(self.expression()?);
                        if self.eat(&Tok::Comma) {
                            continue;
                        }
                        if self.at_end() {
                            return Err(self.error(Error::UnexpectedEnd, self.i - 1));
                        }
                        self.consume(&Tok::RBracket)?;
                        break;
                    }
                }
                self.leave();
                return Ok((Expr::Array(items), false));
            }
            _ => return Err(self.error(Error::UnexpectedSymbol, self.i)),
        };
        self.i += 1;
        Ok((Expr::Literal(literal), false))
    }
}

fn chain(first: Expr, rest: Vec<(BinOp, Expr)>) -> Expr {
    if rest.is_empty() {
        first
    } else {
        Expr::Chain {
            first: Box::new(first),
            rest,
        }
    }
}
