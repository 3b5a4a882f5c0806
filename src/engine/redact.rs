//! Secret redaction: every value named in `secrets:` is replaced by `***` in
//! whatever `wf` writes — captured logs, outputs, state, error messages — before
//! it reaches the database (and so `inspect`, `logs`, traces and OTLP, which
//! all read from there).

use serde_json::Value;

pub const MASK: &str = "***";

#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Longest first, so a secret that contains another is masked whole.
    secrets: Vec<String>,
}

impl Redactor {
    pub fn new(values: impl IntoIterator<Item = String>) -> Redactor {
        let mut secrets: Vec<String> = values.into_iter().filter(|s| !s.is_empty()).collect();
        // Inside JSON text (a response body, a tool's JSON output) a secret
        // with `"`, `\` or control characters appears escaped: mask that too.
        let escaped: Vec<String> = secrets
            .iter()
            .filter_map(|s| {
                let quoted = serde_json::to_string(s).ok()?;
                let inner = &quoted[1..quoted.len() - 1];
                (inner != s).then(|| inner.to_string())
            })
            .collect();
        secrets.extend(escaped);
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Redactor { secrets }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    pub fn text(&self, s: &str) -> String {
        let mut out = s.to_string();
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), MASK);
            }
        }
        out
    }

    pub fn bytes(&self, b: Vec<u8>) -> Vec<u8> {
        if self.secrets.is_empty() {
            return b;
        }
        let mut out = b;
        for secret in &self.secrets {
            let needle = secret.as_bytes();
            if out.windows(needle.len()).any(|w| w == needle) {
                let mut replaced = Vec::with_capacity(out.len());
                let mut i = 0;
                while i < out.len() {
                    if out[i..].starts_with(needle) {
                        replaced.extend_from_slice(MASK.as_bytes());
                        i += needle.len();
                    } else {
                        replaced.push(out[i]);
                        i += 1;
                    }
                }
                out = replaced;
            }
        }
        out
    }

    pub fn value(&self, v: &mut Value) {
        if self.secrets.is_empty() {
            return;
        }
        match v {
            Value::String(s) => {
                let r = self.text(s);
                if r != *s {
                    *s = r;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| self.value(i)),
            Value::Object(m) => m.values_mut().for_each(|i| self.value(i)),
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
    }
}
