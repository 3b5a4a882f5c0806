//! The instance page's pinned definition, shown as YAML with its parts
//! told apart (comments, keys, `${{ }}` expressions, quoted text) and a
//! diff between two definitions with its added and removed lines marked:
//! server-rendered HTML, no script. Written here rather than taken from a
//! highlighting crate: a workflow file needs four kinds of span, and the
//! crates that highlight YAML bring a grammar engine and its themes (MBs
//! in the binary) for it.

use maud::{Markup, PreEscaped, html};

/// `source` as highlighted lines, in a `pre.yaml`.
pub fn highlighted(source: &str) -> Markup {
    html! {
        pre.yaml { code {
            @for line in source.lines() { (line_markup(line)) "\n" }
        } }
    }
}

/// A unified diff (`similar`'s), each line marked added, removed or a hunk
/// header, in a `pre.diff`.
pub fn diff(text: &str) -> Markup {
    html! {
        pre.diff { code {
            @for line in text.lines() {
                @let class = match line.as_bytes().first() {
                    Some(b'+') => "add",
                    Some(b'-') => "del",
                    Some(b'@') => "hunk",
                    _ => "same",
                };
                span class=(class) { (line) } "\n"
            }
        } }
    }
}

/// One line: its comment, its key, then its value with expressions and
/// quoted text marked.
fn line_markup(line: &str) -> Markup {
    let (body, comment) = split_comment(line);
    let (key, rest) = split_key(body);
    html! {
        @if let Some((indent, key)) = key {
            (indent) span.k { (key) } ":"
        }
        (value_markup(rest))
        @if let Some(c) = comment { span.c { (c) } }
    }
}

/// The line and its comment: a `#` at the start or after a space, outside
/// quotes and expressions.
fn split_comment(line: &str) -> (&str, Option<&str>) {
    let (mut single, mut double, mut expr) = (false, false, 0usize);
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'\'' if !double && expr == 0 => single = !single,
            b'"' if !single && expr == 0 => double = !double,
            b'{' if bytes.get(i.wrapping_sub(1)) == Some(&b'$') || expr > 0 => expr += 1,
            b'}' if expr > 0 => expr -= 1,
            b'#' if !single && !double && expr == 0 && (i == 0 || bytes[i - 1] == b' ') => {
                return (&line[..i], Some(&line[i..]));
            }
            _ => {}
        }
    }
    (line, None)
}

/// A mapping key at the start of the line (after its indent and a list
/// item's `- `): `(indent, key)`, and what follows its `:`.
fn split_key(body: &str) -> (Option<(&str, &str)>, &str) {
    let start = body.len() - body.trim_start_matches([' ', '-']).len();
    let rest = &body[start..];
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
        .unwrap_or(rest.len());
    if end > 0
        && rest[end..].starts_with(':')
        && (rest.len() == end + 1 || rest[end + 1..].starts_with(' '))
    {
        (Some((&body[..start], &rest[..end])), &rest[end + 1..])
    } else {
        (None, body)
    }
}

/// A value: `${{ … }}` expressions and quoted text marked, the rest as it is.
fn value_markup(value: &str) -> Markup {
    let mut out = String::new();
    let mut rest = value;
    while let Some(at) = rest.find("${{") {
        out.push_str(&maud::html! { (rest[..at]) }.into_string());
        let end = rest[at..].find("}}").map_or(rest.len(), |e| at + e + 2);
        out.push_str(&maud::html! { span.e { (rest[at..end]) } }.into_string());
        rest = &rest[end..];
    }
    out.push_str(&maud::html! { (rest) }.into_string());
    PreEscaped(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_comments_and_expressions_are_marked_and_text_is_escaped() {
        let html = line_markup("  - id: bill # the <fix>").into_string();
        assert_eq!(
            html,
            "  - <span class=\"k\">id</span>: bill <span class=\"c\"># the &lt;fix&gt;</span>"
        );
        let html = line_markup("    run: echo \"${{ inputs.who }}#1\" # hi").into_string();
        assert!(
            html.contains("&quot;<span class=\"e\">${{ inputs.who }}</span>#1&quot;"),
            "{html}"
        );
        assert!(html.ends_with("<span class=\"c\"># hi</span>"), "{html}");
        // A URL's `#` and a `:` inside a value are not a comment or a key.
        let html = line_markup("url: http://x/#a").into_string();
        assert_eq!(html, "<span class=\"k\">url</span>: http://x/#a");
        assert_eq!(line_markup("echo a:b").into_string(), "echo a:b");
    }

    #[test]
    fn a_diff_marks_added_and_removed_lines() {
        let html = diff("--- a\n+++ b\n@@ -1 +1 @@\n-old\n+new\n same").into_string();
        assert!(html.contains("<span class=\"add\">+new</span>"), "{html}");
        assert!(html.contains("<span class=\"del\">-old</span>"), "{html}");
        assert!(
            html.contains("<span class=\"hunk\">@@ -1 +1 @@</span>"),
            "{html}"
        );
    }
}
