//! The parser: tokens into an [`Expr`], one function per precedence level,
//! lowest first, with nesting capped at [`MAX_DEPTH`].

use super::lexer::{Tok, Token, lex};
use super::*;

/// Parses the text between `${{` and `}}` (surrounding whitespace allowed).
pub fn parse(src: &str) -> Result<Expr, ExprError> {
    let toks = lex(src)?;
    let mut p = Parser {
        src,
        toks,
        i: 0,
        depth: 0,
    };
    let e = p.parse_or()?;
    match p.peek() {
        None => Ok(e),
        Some(t) if matches!(t.tok, Tok::RParen | Tok::RBracket) => {
            let text = p.text(t);
            Err(ExprError::syntax(
                t.pos,
                format!("unexpected `{text}` with nothing to close"),
            ))
        }
        Some(t) => {
            let rest = src.get(t.pos..).unwrap_or_default().trim_end();
            let shown: String = rest.chars().take(32).collect();
            let ellipsis = if shown.len() < rest.len() { "…" } else { "" };
            Err(ExprError::syntax(
                t.pos,
                format!("trailing input `{shown}{ellipsis}`"),
            ))
        }
    }
}

struct Parser<'a> {
    src: &'a str,
    toks: Vec<Token>,
    i: usize,
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.toks.get(self.i)
    }

    fn peek_tok(&self) -> Option<&Tok> {
        self.peek().map(|t| &t.tok)
    }

    fn bump(&mut self) -> Option<Token> {
        let t = self.toks.get(self.i).cloned();
        if t.is_some() {
            self.i += 1;
        }
        t
    }

    fn text(&self, t: &Token) -> &str {
        self.src.get(t.pos..t.end).unwrap_or_default()
    }

    /// Offset of the next token, or the end of the input.
    fn here(&self) -> usize {
        self.peek().map_or(self.src.len(), |t| t.pos)
    }

    fn enter(&mut self, pos: usize) -> Result<(), ExprError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ExprError::TooDeep { pos });
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    fn parse_or(&mut self) -> Result<Expr, ExprError> {
        let mut items = vec![self.parse_and()?];
        while self.peek_tok() == Some(&Tok::Or) {
            self.bump();
            items.push(self.parse_and()?);
        }
        Ok(flatten(items, Expr::Or))
    }

    fn parse_and(&mut self) -> Result<Expr, ExprError> {
        let mut items = vec![self.parse_equality()?];
        while self.peek_tok() == Some(&Tok::And) {
            self.bump();
            items.push(self.parse_equality()?);
        }
        Ok(flatten(items, Expr::And))
    }

    fn parse_equality(&mut self) -> Result<Expr, ExprError> {
        self.parse_chain(true)
    }

    fn parse_comparison(&mut self) -> Result<Expr, ExprError> {
        self.parse_chain(false)
    }

    /// `operand (op operand)*` for the equality or the comparison level.
    fn parse_chain(&mut self, equality: bool) -> Result<Expr, ExprError> {
        let operand = |p: &mut Self| {
            if equality {
                p.parse_comparison()
            } else {
                p.parse_unary()
            }
        };
        let first = operand(self)?;
        let mut rest = Vec::new();
        while let Some(&Tok::Op(op)) = self.peek_tok() {
            if op.is_equality() != equality {
                break;
            }
            self.bump();
            rest.push((op, operand(self)?));
        }
        Ok(if rest.is_empty() {
            first
        } else {
            Expr::Chain {
                first: Box::new(first),
                rest,
            }
        })
    }

    fn parse_unary(&mut self) -> Result<Expr, ExprError> {
        if self.peek_tok() == Some(&Tok::Bang) {
            let pos = self.here();
            self.bump();
            self.enter(pos)?;
            let inner = self.parse_unary()?;
            self.leave();
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.parse_postfix()
    }

    fn parse_postfix(&mut self) -> Result<Expr, ExprError> {
        let base = self.parse_primary()?;
        let mut path = Vec::new();
        loop {
            match self.peek_tok() {
                Some(Tok::Dot) => {
                    self.bump();
                    match self.peek_tok() {
                        Some(Tok::Ident(name)) => {
                            path.push(Accessor::Field(name.clone()));
                            self.bump();
                        }
                        _ => return Err(self.expected("a property name after `.`")),
                    }
                }
                Some(Tok::LBracket) => {
                    let open = self.here();
                    self.bump();
                    self.enter(open)?;
                    let idx = self.parse_or()?;
                    self.close(&Tok::RBracket, "]", "[", open)?;
                    self.leave();
                    path.push(Accessor::Index(idx));
                }
                _ => break,
            }
        }
        Ok(if path.is_empty() {
            base
        } else {
            Expr::Access {
                base: Box::new(base),
                path,
            }
        })
    }

    fn parse_primary(&mut self) -> Result<Expr, ExprError> {
        let Some(t) = self.peek().cloned() else {
            return Err(self.missing_operand());
        };
        let e = match t.tok {
            Tok::Ident(name)
                if matches!(self.toks.get(self.i + 1).map(|t| &t.tok), Some(Tok::LParen)) =>
            {
                return self.parse_call(name, t.pos);
            }
            Tok::Ident(name) => match name.as_str() {
                "null" => Expr::Literal(Value::Null),
                "true" => Expr::Literal(Value::Bool(true)),
                "false" => Expr::Literal(Value::Bool(false)),
                _ => Expr::Ident(name),
            },
            Tok::LBracket => {
                self.bump();
                self.enter(t.pos)?;
                let items = self.parse_list(&Tok::RBracket, "]", "[", t.pos)?;
                self.leave();
                return Ok(Expr::Array(items));
            }
            Tok::Num(n) => Expr::Literal(Value::Number(n)),
            Tok::Str(s) => Expr::Literal(Value::String(s)),
            Tok::LParen => {
                self.bump();
                self.enter(t.pos)?;
                let inner = self.parse_or()?;
                self.close(&Tok::RParen, ")", "(", t.pos)?;
                self.leave();
                return Ok(inner);
            }
            _ => return Err(self.missing_operand()),
        };
        self.bump();
        Ok(e)
    }

    /// `name(args)`: a known function with the right number of arguments.
    fn parse_call(&mut self, name: String, pos: usize) -> Result<Expr, ExprError> {
        let Some(&(_, min, max)) = FUNCTIONS.iter().find(|(f, _, _)| *f == name) else {
            let known: Vec<&str> = FUNCTIONS.iter().map(|(f, _, _)| *f).collect();
            let near = crate::workflow::nearest(&name, known.iter().copied())
                .map(|n| format!("; did you mean `{n}`?"))
                .unwrap_or_default();
            return Err(ExprError::syntax(
                pos,
                format!(
                    "unknown function `{name}`{near} (functions: {})",
                    known.join(", ")
                ),
            ));
        };
        self.bump(); // name
        let open = self.here();
        self.bump(); // (
        self.enter(open)?;
        let args = self.parse_list(&Tok::RParen, ")", "(", open)?;
        self.leave();
        if args.len() < min || args.len() > max {
            let wants = match (min, max) {
                (a, b) if a == b => format!("{a}"),
                (a, usize::MAX) => format!("at least {a}"),
                (a, b) => format!("{a} or {b}"),
            };
            return Err(ExprError::syntax(
                pos,
                format!("`{name}` takes {wants} argument(s), not {}", args.len()),
            ));
        }
        Ok(Expr::Call { name, args })
    }

    /// Comma-separated expressions up to the closing token (empty allowed).
    fn parse_list(
        &mut self,
        tok: &Tok,
        close: &str,
        opener: &str,
        open: usize,
    ) -> Result<Vec<Expr>, ExprError> {
        let mut items = Vec::new();
        if self.peek_tok() == Some(tok) {
            self.bump();
            return Ok(items);
        }
        loop {
            items.push(self.parse_or()?);
            if self.peek_tok() == Some(&Tok::Comma) {
                self.bump();
                continue;
            }
            self.close(tok, close, opener, open)?;
            return Ok(items);
        }
    }

    /// Consumes the closing token of a group opened at `open`.
    fn close(
        &mut self,
        tok: &Tok,
        close: &str,
        opener: &str,
        open: usize,
    ) -> Result<(), ExprError> {
        if self.peek_tok() == Some(tok) {
            self.bump();
            return Ok(());
        }
        Err(self.expected(&format!(
            "`{close}` to close the `{opener}` at offset {open}"
        )))
    }

    /// "expected X" at the next token (naming it) or at the end of input.
    fn expected(&self, what: &str) -> ExprError {
        match self.peek() {
            Some(t) => {
                ExprError::syntax(t.pos, format!("expected {what}, found `{}`", self.text(t)))
            }
            None => ExprError::syntax(
                self.src.len(),
                format!("expected {what}, found end of expression"),
            ),
        }
    }

    /// An operand was expected at the current token; name the operator before it.
    fn missing_operand(&self) -> ExprError {
        let prev = self.i.checked_sub(1).and_then(|j| self.toks.get(j));
        match (prev, self.peek()) {
            (None, None) => ExprError::syntax(0, "empty expression"),
            (None, Some(t)) => ExprError::syntax(t.pos, format!("unexpected `{}`", self.text(t))),
            (Some(p), _) => self.expected(&format!("an expression after `{}`", self.text(p))),
        }
    }
}

/// A one-element operator list is just its element.
fn flatten(mut items: Vec<Expr>, wrap: fn(Vec<Expr>) -> Expr) -> Expr {
    if items.len() == 1
        && let Some(only) = items.pop()
    {
        return only;
    }
    wrap(items)
}
