//! Free text as PostgreSQL can hold it. A `TEXT` column takes every
//! character but NUL (`invalid byte sequence for encoding "UTF8": 0x00`),
//! and a step's error can hold one: the last line of its stderr, a
//! `$WF_OUTPUT` line it quotes, a server's reply. SQLite stores such text as
//! it is, so the columns that hold free text here (error messages, span
//! names and status messages) hold it escaped: NUL as U+FFFE `0`, and
//! U+FFFE (a noncharacter, which no text is meant to hold) doubled. Reads
//! give the text back, so every command prints on PostgreSQL what it prints
//! on SQLite. JSON columns need nothing: JSON text writes NUL as `\u0000`.

/// The escape: a Unicode noncharacter, which PostgreSQL stores like any
/// other character.
const ESC: char = '\u{FFFE}';

/// `text` as a `TEXT` column can hold it.
pub(super) fn escape(text: &str) -> String {
    if !text.contains(['\0', ESC]) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\0' => {
                out.push(ESC);
                out.push('0');
            }
            ESC => {
                out.push(ESC);
                out.push(ESC);
            }
            c => out.push(c),
        }
    }
    out
}

/// [`escape`] of an optional text.
pub(super) fn escape_opt(text: &Option<String>) -> Option<String> {
    text.as_deref().map(escape)
}

/// The text [`escape`] was given. A lone escape (which `escape` never
/// writes) is kept as it is.
pub(super) fn unescape(text: String) -> String {
    if !text.contains(ESC) {
        return text;
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != ESC {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some('0') => {
                chars.next();
                out.push('\0');
            }
            Some(&ESC) => {
                chars.next();
                out.push(ESC);
            }
            _ => out.push(ESC),
        }
    }
    out
}

/// [`unescape`] of an optional text.
pub(super) fn unescape_opt(text: Option<String>) -> Option<String> {
    text.map(unescape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_text_comes_back_and_no_nul_is_stored() {
        for text in [
            "",
            "plain",
            "a\0b",
            "\0",
            "\0\0",
            "x\u{FFFE}y",
            "\u{FFFE}0",
            "\u{FFFE}\0\u{FFFE}",
            "end\u{FFFE}",
            "é\0ü",
        ] {
            let stored = escape(text);
            assert!(!stored.contains('\0'), "{text:?} -> {stored:?}");
            assert_eq!(unescape(stored), text);
        }
        assert_eq!(escape("plain"), "plain");
        assert_eq!(unescape("lone\u{FFFE}".into()), "lone\u{FFFE}");
    }
}
