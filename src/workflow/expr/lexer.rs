//! The lexer: expression text into tokens (names, numbers, quoted strings,
//! operators), each with its byte offsets for error positions.

use super::*;
use serde_json::Number;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Ident(String),
    Num(Number),
    Str(String),
    LParen,
    RParen,
    LBracket,
    RBracket,
    Dot,
    Comma,
    Bang,
    Op(BinOp),
    And,
    Or,
}

#[derive(Debug, Clone)]
pub(super) struct Token {
    pub(super) tok: Tok,
    pub(super) pos: usize,
    pub(super) end: usize,
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

pub(super) fn lex(src: &str) -> Result<Vec<Token>, ExprError> {
    let bytes = src.as_bytes();
    let at = |i: usize| bytes.get(i).copied();
    let mut toks = Vec::new();
    let mut i = 0;
    while let Some(b) = at(i) {
        let pos = i;
        let next = at(i + 1);
        let (tok, len) = match b {
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                continue;
            }
            b'(' => (Tok::LParen, 1),
            b')' => (Tok::RParen, 1),
            b'[' => (Tok::LBracket, 1),
            b']' => (Tok::RBracket, 1),
            b'.' => (Tok::Dot, 1),
            b',' => (Tok::Comma, 1),
            b'!' if next == Some(b'=') => (Tok::Op(BinOp::Ne), 2),
            b'!' => (Tok::Bang, 1),
            b'=' if next == Some(b'=') => (Tok::Op(BinOp::Eq), 2),
            b'<' if next == Some(b'=') => (Tok::Op(BinOp::Le), 2),
            b'<' => (Tok::Op(BinOp::Lt), 1),
            b'>' if next == Some(b'=') => (Tok::Op(BinOp::Ge), 2),
            b'>' => (Tok::Op(BinOp::Gt), 1),
            b'&' if next == Some(b'&') => (Tok::And, 2),
            b'|' if next == Some(b'|') => (Tok::Or, 2),
            b'=' | b'&' | b'|' => {
                let c = char::from(b);
                return Err(ExprError::syntax(
                    pos,
                    format!("unexpected `{c}` (did you mean `{c}{c}`?)"),
                ));
            }
            b'\'' | b'"' => {
                let (s, end) = lex_string(src, pos)?;
                toks.push(Token {
                    tok: Tok::Str(s),
                    pos,
                    end,
                });
                i = end;
                continue;
            }
            b'-' if !next.is_some_and(|n| n.is_ascii_digit()) => {
                return Err(ExprError::syntax(pos, "unexpected `-`"));
            }
            b'-' | b'0'..=b'9' => {
                let end = scan_number(bytes, pos);
                let text = src.get(pos..end).unwrap_or_default();
                let n: Number = text
                    .parse()
                    .map_err(|_| ExprError::syntax(pos, format!("invalid number `{text}`")))?;
                (Tok::Num(n), end - pos)
            }
            b if is_ident_start(b) => {
                let mut end = pos + 1;
                while at(end).is_some_and(is_ident_char) {
                    end += 1;
                }
                let name = src.get(pos..end).unwrap_or_default().to_string();
                (Tok::Ident(name), end - pos)
            }
            _ => {
                let c = src.get(pos..).and_then(|s| s.chars().next()).unwrap_or('?');
                return Err(ExprError::syntax(
                    pos,
                    format!("unexpected character `{c}`"),
                ));
            }
        };
        i = pos + len;
        toks.push(Token { tok, pos, end: i });
    }
    Ok(toks)
}

/// End of the number starting at `start`: `-?digits(.digits)?([eE][+-]?digits)?`.
fn scan_number(bytes: &[u8], start: usize) -> usize {
    let digit = |i: usize| bytes.get(i).is_some_and(u8::is_ascii_digit);
    let digits = |mut i: usize| {
        while digit(i) {
            i += 1;
        }
        i
    };
    let mut i = start;
    if bytes.get(i) == Some(&b'-') {
        i += 1;
    }
    i = digits(i);
    if bytes.get(i) == Some(&b'.') && digit(i + 1) {
        i = digits(i + 1);
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(bytes.get(i + 1), Some(b'+' | b'-')));
        if digit(i + 1 + sign) {
            i = digits(i + 1 + sign);
        }
    }
    i
}

/// A quoted string starting at `start`; returns its value and the end offset.
fn lex_string(src: &str, start: usize) -> Result<(String, usize), ExprError> {
    let bytes = src.as_bytes();
    let quote = bytes.get(start).copied().unwrap_or(b'"');
    let mut out = String::new();
    let mut seg = start + 1;
    let mut i = seg;
    loop {
        match bytes.get(i) {
            None => return Err(ExprError::syntax(start, "unterminated string")),
            Some(&b) if b == quote => {
                out.push_str(src.get(seg..i).unwrap_or_default());
                return Ok((out, i + 1));
            }
            Some(b'\\') => {
                out.push_str(src.get(seg..i).unwrap_or_default());
                let c = match bytes.get(i + 1) {
                    Some(b'\\') => '\\',
                    Some(b'\'') => '\'',
                    Some(b'"') => '"',
                    Some(b'n') => '\n',
                    Some(b't') => '\t',
                    Some(b'r') => '\r',
                    None => return Err(ExprError::syntax(start, "unterminated string")),
                    Some(_) => {
                        let shown: String =
                            src.get(i..).unwrap_or_default().chars().take(2).collect();
                        return Err(ExprError::syntax(
                            i,
                            format!(
                                "unknown escape `{shown}` (use \\\\, \\', \\\", \\n, \\t or \\r)"
                            ),
                        ));
                    }
                };
                out.push(c);
                i += 2;
                seg = i;
            }
            Some(_) => i += 1,
        }
    }
}
