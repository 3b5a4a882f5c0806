//! Secret redaction: every value named in `secrets:` is replaced by `***` in
//! whatever `wf` writes — captured logs, outputs, state, event payloads, span
//! attributes, error messages — before it reaches the database (and so
//! `inspect`, `logs`, traces and OTLP, which all read from there).
//!
//! A secret is masked in every form it takes in what wf writes (docs/secrets.md):
//! raw; JSON-escaped (as serde writes it, and with non-ASCII as `\uXXXX`, as
//! Python's `json.dumps` does); percent-encoded as a URL path, a query, user
//! info or a form body encode it (upper- and lower-case hex); and in object
//! keys at any depth. All forms go into one Aho-Corasick automaton, so a text
//! is scanned once whatever the number of secrets and forms.

use aho_corasick::{AhoCorasick, MatchKind};
use percent_encoding::{AsciiSet, CONTROLS, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Map, Value};

pub const MASK: &str = "***";

/// What the `url` crate (and so reqwest) percent-encodes in a query.
const QUERY: &AsciiSet = &CONTROLS.add(b' ').add(b'"').add(b'#').add(b'<').add(b'>');
/// …in a query of a special scheme (http, https): `'` too.
const SPECIAL_QUERY: &AsciiSet = &QUERY.add(b'\'');
/// …in a path.
const PATH: &AsciiSet = &QUERY.add(b'?').add(b'`').add(b'{').add(b'}');
/// …in one path segment (`PathSegmentsMut::push`).
const PATH_SEGMENT: &AsciiSet = &PATH.add(b'/').add(b'%');
/// …in user info.
const USERINFO: &AsciiSet = &PATH
    .add(b'/')
    .add(b':')
    .add(b';')
    .add(b'=')
    .add(b'@')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'|');

#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Every form of every secret, for [`Redactor::contains`].
    forms: Vec<String>,
    /// The same forms, leftmost-longest, so a secret that contains another
    /// is masked whole.
    matcher: Option<AhoCorasick>,
}

/// The forms a secret's value takes in what wf writes.
fn forms_of(secret: &str) -> Vec<String> {
    let mut forms = vec![secret.to_string()];
    if let Ok(quoted) = serde_json::to_string(secret) {
        let inner = &quoted[1..quoted.len() - 1];
        forms.push(inner.to_string());
        // Non-ASCII as \uXXXX (UTF-16 units), with lower- and upper-case hex.
        for upper in [false, true] {
            let mut ascii = String::with_capacity(inner.len());
            for c in inner.chars() {
                if c.is_ascii() {
                    ascii.push(c);
                } else {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        ascii.push_str(&if upper {
                            format!("\\u{u:04X}")
                        } else {
                            format!("\\u{u:04x}")
                        });
                    }
                }
            }
            forms.push(ascii);
        }
    }
    let mut encoded: Vec<String> = [
        NON_ALPHANUMERIC,
        QUERY,
        SPECIAL_QUERY,
        PATH,
        PATH_SEGMENT,
        USERINFO,
    ]
    .iter()
    .map(|set| utf8_percent_encode(secret, set).to_string())
    .collect();
    encoded.push(form_urlencoded::byte_serialize(secret.as_bytes()).collect());
    for e in encoded {
        // The same with lower-case hex digits (`%2f`), as some encoders write.
        let lower = lower_hex(&e);
        forms.push(e);
        forms.push(lower);
    }
    forms.retain(|f| !f.is_empty());
    forms.sort();
    forms.dedup();
    forms
}

/// `%2F` -> `%2f`, leaving everything else as it is.
fn lower_hex(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '%' {
            for h in chars.by_ref().take(2) {
                out.push(h.to_ascii_lowercase());
            }
        }
    }
    out
}

impl Redactor {
    /// The redactor of a workflow's secrets, with the values this process's
    /// environment gives them (names not set here are not known, and so not masked).
    pub fn for_secrets(names: &[String]) -> Redactor {
        Redactor::new(names.iter().filter_map(|n| std::env::var(n).ok()))
    }

    pub fn new(values: impl IntoIterator<Item = String>) -> Redactor {
        let mut forms: Vec<String> = values
            .into_iter()
            .filter(|s| !s.is_empty())
            .flat_map(|s| forms_of(&s))
            .collect();
        forms.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        forms.dedup();
        let matcher = (!forms.is_empty())
            .then(|| {
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(&forms)
                    .ok()
            })
            .flatten();
        Redactor { forms, matcher }
    }

    pub fn is_empty(&self) -> bool {
        self.forms.is_empty()
    }

    /// Where secrets (in any form) stand in `bytes`: (start, end) pairs.
    pub fn spans(&self, bytes: &[u8]) -> Vec<(usize, usize)> {
        match &self.matcher {
            Some(m) => m.find_iter(bytes).map(|f| (f.start(), f.end())).collect(),
            None => Vec::new(),
        }
    }

    /// The length of the longest form of a secret (0 without secrets).
    pub fn longest(&self) -> usize {
        self.forms.iter().map(String::len).max().unwrap_or(0)
    }

    /// Whether `s` holds a secret in any of its forms.
    pub fn contains(&self, s: &str) -> bool {
        self.matcher.as_ref().is_some_and(|m| m.is_match(s))
    }

    pub fn text(&self, s: &str) -> String {
        match &self.matcher {
            Some(m) if m.is_match(s) => m.replace_all(s, &vec![MASK; self.forms.len()]),
            _ => s.to_string(),
        }
    }

    pub fn bytes(&self, b: Vec<u8>) -> Vec<u8> {
        match &self.matcher {
            Some(m) if m.is_match(&b) => {
                m.replace_all_bytes(&b, &vec![MASK.as_bytes(); self.forms.len()])
            }
            _ => b,
        }
    }

    /// Masks strings and object keys at any depth.
    pub fn value(&self, v: &mut Value) {
        if self.forms.is_empty() {
            return;
        }
        match v {
            Value::String(s) if self.contains(s) => *s = self.text(s),
            Value::Array(items) => items.iter_mut().for_each(|i| self.value(i)),
            Value::Object(m) => {
                if m.keys().any(|k| self.contains(k)) {
                    let old = std::mem::take(m);
                    let mut renamed = Map::with_capacity(old.len());
                    for (k, v) in old {
                        let k = self.text(&k);
                        // Two keys may mask to one: keep them apart.
                        let mut key = k.clone();
                        let mut n = 2;
                        while renamed.contains_key(&key) {
                            key = format!("{k}#{n}");
                            n += 1;
                        }
                        renamed.insert(key, v);
                    }
                    *m = renamed;
                }
                m.values_mut().for_each(|i| self.value(i));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn masks_text_bytes_and_json() {
        let r = Redactor::new(vec!["s3cr3t".to_string(), "s3cr3t-long".to_string()]);
        assert_eq!(r.text("a s3cr3t-long b s3cr3t"), "a *** b ***");
        assert_eq!(r.bytes(b"xs3cr3tx".to_vec()), b"x***x".to_vec());
        let mut v = json!({"a": ["s3cr3t"], "b": {"c": "token=s3cr3t"}});
        r.value(&mut v);
        assert_eq!(v, json!({"a": ["***"], "b": {"c": "token=***"}}));
    }

    #[test]
    fn masks_the_json_escaped_form_too() {
        let r = Redactor::new(vec![r#"a"b\c"#.to_string()]);
        assert_eq!(
            r.text(r#"{"t":"a\"b\\c"} and a"b\c"#),
            r#"{"t":"***"} and ***"#
        );
        let r = Redactor::new(vec!["pässwörd".to_string()]);
        assert_eq!(r.text(r#"{"p": "p\u00e4ssw\u00f6rd"}"#), r#"{"p": "***"}"#);
        assert_eq!(r.text(r#"{"p": "p\u00E4ssw\u00F6rd"}"#), r#"{"p": "***"}"#);
    }

    #[test]
    fn masks_percent_encoded_forms() {
        let secret = "ab+c/d== é";
        let r = Redactor::new(vec![secret.to_string()]);
        // As reqwest sends it in `query:` (form encoding) and in a URL.
        let mut url = reqwest::Url::parse("http://h/p").unwrap();
        url.query_pairs_mut().append_pair("t", secret);
        assert!(!r.text(url.as_str()).contains("ab"), "{}", url);
        let mut in_url = reqwest::Url::parse(&format!("http://h/x/{secret}?q={secret}")).unwrap();
        in_url.set_password(Some(secret)).unwrap();
        let in_url = in_url.to_string();
        assert_eq!(
            r.text(&in_url).matches(MASK).count(),
            3,
            "{in_url} -> {}",
            r.text(&in_url)
        );
        let mut seg = reqwest::Url::parse("http://h/").unwrap();
        seg.path_segments_mut().unwrap().push(secret);
        assert_eq!(r.text(seg.as_str()), "http://h/***");
        assert_eq!(r.text("x=ab%2bc%2fd%3d%3d%20%c3%a9"), "x=***");
    }

    #[test]
    fn masks_object_keys_at_any_depth() {
        let r = Redactor::new(vec!["k3y".to_string()]);
        let mut v = json!({"k3y": 1, "a": [{"x-k3y": {"k3y": 2}}], "***": 3});
        r.value(&mut v);
        assert_eq!(
            v,
            json!({"***": 1, "a": [{"x-***": {"***": 2}}], "***#2": 3})
        );
        assert!(r.contains("a k3y") && !r.contains("nothing"));
    }
}
