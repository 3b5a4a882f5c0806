//! Step outputs: how a shell step's stdout and `$WF_OUTPUT` file become the
//! `output` object later steps read, the per-step size cap, and the JSON merge
//! patch (RFC 7386) that `set_state` applies.

use serde_json::{Map, Value};

/// Default cap on one step's output (and on each captured stream).
pub const DEFAULT_OUTPUT_LIMIT: usize = 1024 * 1024;

/// The cap in force: `WF_OUTPUT_LIMIT` (bytes) overrides the default.
pub fn output_limit() -> usize {
    std::env::var("WF_OUTPUT_LIMIT")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(DEFAULT_OUTPUT_LIMIT)
}

/// Builds a shell step's output: `{stdout, exit_code, json, ...keys}`.
pub fn shell_output(stdout: &[u8], exit_code: i32, output_file: &str) -> Value {
    let text = String::from_utf8_lossy(stdout);
    let trimmed = text.trim_end_matches(['\n', '\r']);
    let json = if trimmed.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(trimmed).unwrap_or(Value::Null)
    };
    let mut out = Map::new();
    for (k, v) in parse_output_file(output_file) {
        out.insert(k, Value::String(v));
    }
    out.insert("stdout".into(), Value::String(trimmed.to_string()));
    out.insert("exit_code".into(), Value::from(exit_code));
    out.insert("json".into(), json);
    Value::Object(out)
}

/// Parses `key=value` lines, and GitHub-style `key<<DELIM` ... `DELIM` blocks
/// for multi-line values. Lines that are neither are ignored.
pub fn parse_output_file(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some((key, delim)) = line.split_once("<<")
            && !key.contains('=')
            && !key.trim().is_empty()
        {
            let delim = delim.trim();
            let mut value = Vec::new();
            for l in lines.by_ref() {
                if l == delim {
                    break;
                }
                value.push(l);
            }
            out.push((key.trim().to_string(), value.join("\n")));
        } else if let Some((key, value)) = line.split_once('=')
            && !key.trim().is_empty()
        {
            out.push((key.trim().to_string(), value.to_string()));
        }
    }
    out
}

/// RFC 7386 JSON merge patch: objects merge recursively, `null` deletes.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Value::Object(t) = target {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stdout_json_and_output_file_keys() {
        let out = shell_output(b"{\"a\":1}\n", 0, "k=v\nmulti<<EOF\nx\ny\nEOF\n");
        assert_eq!(out["json"], json!({"a": 1}));
        assert_eq!(out["stdout"], json!("{\"a\":1}"));
        assert_eq!(out["k"], json!("v"));
        assert_eq!(out["multi"], json!("x\ny"));
        assert_eq!(out["exit_code"], json!(0));
    }

    #[test]
    fn non_json_stdout_has_null_json() {
        assert_eq!(shell_output(b"hello\n", 0, "")["json"], Value::Null);
    }

    #[test]
    fn merge_patch_rfc7386() {
        let mut t = json!({"a": {"b": 1, "c": 2}, "d": 3});
        merge_patch(&mut t, &json!({"a": {"b": null, "e": 4}, "d": [1]}));
        assert_eq!(t, json!({"a": {"c": 2, "e": 4}, "d": [1]}));
    }
}
