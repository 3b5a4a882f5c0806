//! The lexer: expression text into tokens, as GitHub's (`lexer.ts`) cuts
//! it. A number or a name runs to the next boundary character, so `1.2.3`,
//! `0xZZ` or `a'b` is one bad token, not several good ones; `''` in a
//! string is a quote and backslashes are literal. Positions are byte
//! offsets.

use super::value::{is_js_space, parse_number};
use super::*;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Dot,
    Bang,
    Op(BinOp),
    And,
    Or,
    Star,
    Num(f64),
    Str(String),
    Ident,
    True,
    False,
    Null,
}

#[derive(Debug, Clone)]
pub(super) struct Token {
    pub(super) tok: Tok,
    pub(super) pos: usize,
    pub(super) end: usize,
}

/// Characters that end a number or a name.
fn is_boundary(c: char) -> bool {
    matches!(
        c,
        '(' | '[' | ')' | ']' | ',' | '.' | '!' | '>' | '<' | '=' | '&' | '|'
    ) || is_js_space(c)
}

/// A name: a letter or `_`, then letters, digits, `_` and `-` (ASCII).
fn is_legal_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

pub(super) fn lex(src: &str) -> Result<Vec<Token>, ExprError> {
    if src.encode_utf16().count() > MAX_LENGTH {
        return Err(ExprError::syntax(
            0,
            format!("Exceeded max expression length {MAX_LENGTH}"),
        ));
    }
    let mut lexer = Lexer {
        src,
        offset: 0,
        toks: Vec::new(),
    };
    while let Some(c) = lexer.peek() {
        let start = lexer.offset;
        lexer.offset += c.len_utf8();
        match c {
            '(' => lexer.push(Tok::LParen, start),
            ')' => lexer.push(Tok::RParen, start),
            '[' => lexer.push(Tok::LBracket, start),
            ']' => lexer.push(Tok::RBracket, start),
            ',' => lexer.push(Tok::Comma, start),
            '.' => {
                // After a name, `]`, `)` or `*` it is an access; else a
                // number such as `.5` starts.
                let access = matches!(
                    lexer.previous(),
                    Some(Tok::Ident | Tok::RBracket | Tok::RParen | Tok::Star)
                );
                if access {
                    lexer.push(Tok::Dot, start);
                } else {
                    lexer.number(start)?;
                }
            }
            '-' | '+' => lexer.number(start)?,
            '!' if lexer.eat('=') => lexer.push(Tok::Op(BinOp::Ne), start),
            '!' => lexer.push(Tok::Bang, start),
            '=' if lexer.eat('=') => lexer.push(Tok::Op(BinOp::Eq), start),
            '<' if lexer.eat('=') => lexer.push(Tok::Op(BinOp::Le), start),
            '<' => lexer.push(Tok::Op(BinOp::Lt), start),
            '>' if lexer.eat('=') => lexer.push(Tok::Op(BinOp::Ge), start),
            '>' => lexer.push(Tok::Op(BinOp::Gt), start),
            '&' if lexer.eat('&') => lexer.push(Tok::And, start),
            '|' if lexer.eat('|') => lexer.push(Tok::Or, start),
            '*' => lexer.push(Tok::Star, start),
            ' ' | '\r' | '\t' | '\n' => {}
            '\'' => lexer.string(start)?,
            c if c.is_ascii_digit() => lexer.number(start)?,
            // `=`, `&` or `|` alone, `"`, and anything else: a name, which
            // is refused unless it is a legal one.
            _ => lexer.name(start)?,
        }
    }
    Ok(lexer.toks)
}

struct Lexer<'a> {
    src: &'a str,
    offset: usize,
    toks: Vec<Token>,
}

impl Lexer<'_> {
    fn peek(&self) -> Option<char> {
        self.src.get(self.offset..)?.chars().next()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.offset += c.len_utf8();
            return true;
        }
        false
    }

    fn previous(&self) -> Option<&Tok> {
        self.toks.last().map(|t| &t.tok)
    }

    fn push(&mut self, tok: Tok, pos: usize) {
        self.toks.push(Token {
            tok,
            pos,
            end: self.offset,
        });
    }

    fn lexeme(&self, start: usize) -> &str {
        self.src.get(start..self.offset).unwrap_or_default()
    }

    fn unexpected(&self, start: usize, text: &str) -> ExprError {
        let e = ExprError::syntax(start, format!("Unexpected symbol: '{text}'"));
        match text.chars().next() {
            Some('"') => e.with_hint("strings are in single quotes, with '' for a quote"),
            Some('=') => e.with_hint("compare with `==`"),
            Some('&') => e.with_hint("and is `&&`"),
            Some('|') => e.with_hint("or is `||`"),
            _ => e,
        }
    }

    /// The rest of a number (up to a boundary; a `.` is part of it).
    fn number(&mut self, start: usize) -> Result<(), ExprError> {
        while let Some(c) = self.peek() {
            if is_boundary(c) && c != '.' {
                break;
            }
            self.offset += c.len_utf8();
        }
        let text = self.lexeme(start);
        let n = parse_number(text);
        if n.is_nan() {
            return Err(self.unexpected(start, text));
        }
        self.push(Tok::Num(n), start);
        Ok(())
    }

    /// A string after its opening quote: `''` is a quote, nothing else is
    /// special.
    fn string(&mut self, start: usize) -> Result<(), ExprError> {
        let mut value = String::new();
        loop {
            let Some(c) = self.peek() else {
                let rest = self.src.get(start..).unwrap_or_default();
                return Err(self
                    .unexpected(start, rest)
                    .with_hint("unterminated string"));
            };
            self.offset += c.len_utf8();
            if c == '\'' {
                if self.eat('\'') {
                    value.push('\'');
                    continue;
                }
                break;
            }
            value.push(c);
        }
        self.push(Tok::Str(value), start);
        Ok(())
    }

    /// A name or keyword (up to a boundary).
    fn name(&mut self, start: usize) -> Result<(), ExprError> {
        while let Some(c) = self.peek() {
            if is_boundary(c) {
                break;
            }
            self.offset += c.len_utf8();
        }
        let text = self.lexeme(start);
        let keyword = !matches!(self.previous(), Some(Tok::Dot));
        let tok = match text {
            "true" if keyword => Tok::True,
            "false" if keyword => Tok::False,
            "null" if keyword => Tok::Null,
            "NaN" if keyword => Tok::Num(f64::NAN),
            "Infinity" if keyword => Tok::Num(f64::INFINITY),
            _ => Tok::Ident,
        };
        if !is_legal_name(text) {
            return Err(self.unexpected(start, text));
        }
        self.push(tok, start);
        Ok(())
    }
}
