//! Step outputs: how a shell step's stdout and `$WF_OUTPUT` file become the
//! `output` object later steps read, the per-step size cap, and the JSON merge
//! patch (RFC 7386) that `set_state` applies.

use super::Failure;
use crate::vocab::ErrorType;
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
pub fn shell_output(stdout: &[u8], exit_code: i32, keys: Vec<(String, String)>) -> Value {
    let text = String::from_utf8_lossy(stdout);
    let trimmed = text.trim_end_matches(['\n', '\r']);
    let json = if trimmed.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(trimmed).unwrap_or(Value::Null)
    };
    let mut out = Map::new();
    for (k, v) in keys {
        out.insert(k, Value::String(v));
    }
    out.insert("stdout".into(), Value::String(trimmed.to_string()));
    out.insert("exit_code".into(), Value::from(exit_code));
    out.insert("json".into(), json);
    Value::Object(out)
}

/// Reads a `$WF_OUTPUT` file: `key=value` lines, and GitHub-style
/// `key<<DELIM` ... `DELIM` blocks for multi-line values (blank lines are
/// skipped). Anything else, text that is not UTF-8, or a block left open
/// fails with `output.invalid` naming the line; more than `limit` bytes fail
/// with `output.limit` as soon as they are read, so memory stays near the cap
/// whatever the file's size.
pub fn read_output_file(
    reader: impl std::io::Read,
    limit: usize,
) -> Result<Vec<(String, String)>, Failure> {
    use std::io::{BufRead, Read};
    let invalid = |n: usize, what: String| {
        Failure::new(
            ErrorType::OutputInvalid,
            format!("$WF_OUTPUT line {n}: {what}"),
        )
    };
    let mut reader = std::io::BufReader::new(reader);
    let mut out = Vec::new();
    let mut read = 0usize;
    let mut n = 0usize;
    let mut buf = Vec::new();
    // (key, delimiter, value so far, line the block started on)
    let mut block: Option<(String, String, String, usize)> = None;
    loop {
        buf.clear();
        // At most the rest of the budget, plus one byte to see it exceeded.
        let room = (limit - read.min(limit)) as u64 + 1;
        let got = (&mut reader)
            .take(room)
            .read_until(b'\n', &mut buf)
            .map_err(|e| {
                Failure::new(
                    ErrorType::OutputInvalid,
                    format!("cannot read $WF_OUTPUT: {e}"),
                )
            })?;
        if got == 0 {
            break;
        }
        read += got;
        if read > limit {
            return Err(Failure::new(
                ErrorType::OutputLimit,
                format!("$WF_OUTPUT holds over {limit} bytes, the output limit"),
            ));
        }
        n += 1;
        let text = std::str::from_utf8(&buf).map_err(|_| invalid(n, "not UTF-8 text".into()))?;
        let line = text.strip_suffix('\n').unwrap_or(text);
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some((_, delim, value, _)) = &mut block {
            if line == delim {
                let (key, _, value, _) = block.take().unwrap_or_default();
                out.push((key, value));
            } else {
                if !value.is_empty() {
                    value.push('\n');
                }
                value.push_str(line);
            }
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        if let Some((key, delim)) = line.split_once("<<")
            && !key.contains('=')
        {
            let (key, delim) = (key.trim(), delim.trim());
            if key.is_empty() || delim.is_empty() {
                return Err(invalid(
                    n,
                    format!("`{}` needs a key and a delimiter (KEY<<DELIM)", shown(line)),
                ));
            }
            block = Some((key.to_string(), delim.to_string(), String::new(), n));
        } else if let Some((key, value)) = line.split_once('=')
            && !key.trim().is_empty()
        {
            out.push((key.trim().to_string(), value.to_string()));
        } else {
            return Err(invalid(
                n,
                format!(
                    "expected KEY=VALUE or KEY<<DELIMITER, got `{}`",
                    shown(line)
                ),
            ));
        }
    }
    if let Some((key, delim, _, start)) = block {
        return Err(invalid(
            start,
            format!("`{key}<<{delim}` is never closed by a `{delim}` line"),
        ));
    }
    Ok(out)
}

/// A line as shown in an error: at most 80 characters.
fn shown(line: &str) -> String {
    let mut s: String = line.chars().take(80).collect();
    if s.len() < line.len() {
        s.push('…');
    }
    s
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
        let keys = read_output_file(&b"k=v\n\nmulti<<EOF\nx\ny\nEOF\n"[..], 1000).unwrap();
        let out = shell_output(b"{\"a\":1}\n", 0, keys);
        assert_eq!(out["json"], json!({"a": 1}));
        assert_eq!(out["stdout"], json!("{\"a\":1}"));
        assert_eq!(out["k"], json!("v"));
        assert_eq!(out["multi"], json!("x\ny"));
        assert_eq!(out["exit_code"], json!(0));
    }

    #[test]
    fn non_json_stdout_has_null_json() {
        assert_eq!(shell_output(b"hello\n", 0, Vec::new())["json"], Value::Null);
    }

    #[test]
    fn bad_output_files_fail_with_the_line() {
        let err = |text: &[u8]| read_output_file(text, 1000).unwrap_err();
        let e = err(b"a=1\nb=\xff\n");
        assert_eq!(
            (e.error_type.to_string().as_str(), e.message.as_str()),
            ("output.invalid", "$WF_OUTPUT line 2: not UTF-8 text")
        );
        let e = err(b"a=1\njust words\n");
        assert!(
            e.message
                .starts_with("$WF_OUTPUT line 2: expected KEY=VALUE"),
            "{}",
            e.message
        );
        let e = err(b"a=1\nm<<EOF\nx\n");
        assert!(
            e.message.contains("line 2") && e.message.contains("never closed"),
            "{}",
            e.message
        );
        let e = read_output_file(&[b'k', b'='].repeat(600)[..], 1000).unwrap_err();
        assert_eq!(e.error_type, ErrorType::OutputLimit);
        // Exactly at the limit is fine.
        assert_eq!(
            read_output_file(&b"k=12345678\n"[..], 11).unwrap(),
            vec![("k".to_string(), "12345678".to_string())]
        );
    }

    #[test]
    fn merge_patch_rfc7386() {
        let mut t = json!({"a": {"b": 1, "c": 2}, "d": 3});
        merge_patch(&mut t, &json!({"a": {"b": null, "e": 4}, "d": [1]}));
        assert_eq!(t, json!({"a": {"c": 2, "e": 4}, "d": [1]}));
    }
}
