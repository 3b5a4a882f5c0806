//! `matrix:`: a step's combinations, expanded as GitHub Actions expands
//! `strategy.matrix` (the cartesian product of its lists, the first key
//! varying slowest; `exclude` first, then `include`), and the label a
//! combination is shown and addressed by (`build[os=linux,arch=arm64]`).
//! Pure: validation expands a matrix written without expressions to report
//! its errors, and the engine expands the rendered one when the step starts,
//! with the same code.

use serde_json::{Map, Value};

/// The most combinations a matrix may have (GitHub's limit of jobs per matrix).
pub const MAX_COMBINATIONS: usize = 256;

/// What is wrong with a matrix, and which of its keys to point at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatrixError {
    /// The matrix key the error is about (`include`, `exclude`, an axis),
    /// or none for the matrix as a whole.
    pub key: Option<String>,
    pub message: String,
}

impl std::fmt::Display for MatrixError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

fn error(key: Option<&str>, message: String) -> MatrixError {
    MatrixError {
        key: key.map(str::to_string),
        message,
    }
}

/// Whether `name` may be a matrix key: a letter or `_` first, then letters,
/// digits, `_` or `-` (it is read as `matrix.NAME`).
pub fn is_key(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The combinations of a (rendered) matrix, in GitHub's order.
pub fn expand(matrix: &Value) -> Result<Vec<Map<String, Value>>, MatrixError> {
    let Value::Object(m) = matrix else {
        return Err(error(None, "`matrix` must be a map of lists".into()));
    };
    let mut axes: Vec<(&str, &Vec<Value>)> = Vec::new();
    let mut include: &[Value] = &[];
    let mut exclude: &[Value] = &[];
    for (k, v) in m {
        match (k.as_str(), v) {
            ("include", Value::Array(list)) => include = list,
            ("exclude", Value::Array(list)) => exclude = list,
            ("include" | "exclude", _) => {
                return Err(error(Some(k), format!("`{k}` must be a list of maps")));
            }
            (_, _) if !is_key(k) => {
                return Err(error(
                    Some(k),
                    format!(
                        "matrix key `{k}` is not a name (a letter or `_`, then letters, digits, `_` or `-`)"
                    ),
                ));
            }
            (_, Value::Array(list)) if list.is_empty() => {
                return Err(error(Some(k), format!("matrix list `{k}` is empty")));
            }
            (_, Value::Array(list)) => axes.push((k, list)),
            (_, _) => {
                return Err(error(
                    Some(k),
                    format!("matrix key `{k}` must be a list (or an expression that gives one)"),
                ));
            }
        }
    }
    let maps = |key: &str, list: &[Value]| -> Result<Vec<Map<String, Value>>, MatrixError> {
        list.iter()
            .map(|v| match v {
                Value::Object(o) if !o.is_empty() => Ok(o.clone()),
                _ => Err(error(
                    Some(key),
                    format!("each entry of `{key}` must be a map of matrix keys to values"),
                )),
            })
            .collect()
    };
    let include = maps("include", include)?;
    let exclude = maps("exclude", exclude)?;
    if axes.is_empty() && include.is_empty() {
        return Err(error(
            None,
            "the matrix has no combination: give it a list or an `include`".into(),
        ));
    }

    // The product, the first key varying slowest.
    let mut product: Vec<Map<String, Value>> = if axes.is_empty() {
        Vec::new()
    } else {
        vec![Map::new()]
    };
    for (k, list) in &axes {
        let size = product.len().saturating_mul(list.len());
        if size > MAX_COMBINATIONS.saturating_mul(64) {
            return Err(too_many(size));
        }
        let mut next = Vec::with_capacity(size);
        for combo in &product {
            for v in *list {
                let mut c = combo.clone();
                c.insert((*k).to_string(), v.clone());
                next.push(c);
            }
        }
        product = next;
    }

    for (n, ex) in exclude.iter().enumerate() {
        if let Some(bad) = ex.keys().find(|k| !axes.iter().any(|(a, _)| a == k)) {
            return Err(error(
                Some("exclude"),
                format!(
                    "`exclude` entry {} names `{bad}`, which is not a key of the matrix",
                    n + 1
                ),
            ));
        }
        let before = product.len();
        product.retain(|c| !holds(c, ex));
        if product.len() == before {
            return Err(error(
                Some("exclude"),
                format!(
                    "`exclude` entry {} ({}) matches no combination",
                    n + 1,
                    Value::Object(ex.clone())
                ),
            ));
        }
    }

    // Each `include` is added to every original combination whose matrix
    // values it keeps (keys an include added may be overwritten); one that
    // fits none is a combination of its own.
    let originals = product.len();
    let axis = |k: &str| axes.iter().any(|(a, _)| *a == k);
    let mut extra = Vec::new();
    for inc in &include {
        let mut fitted = false;
        for c in product.iter_mut().take(originals) {
            let keeps = inc
                .iter()
                .all(|(k, v)| !axis(k) || c.get(k).is_some_and(|cv| cv == v));
            if keeps {
                for (k, v) in inc {
                    c.insert(k.clone(), v.clone());
                }
                fitted = true;
            }
        }
        if !fitted {
            extra.push(inc.clone());
        }
    }
    product.extend(extra);
    if product.len() > MAX_COMBINATIONS {
        return Err(too_many(product.len()));
    }
    Ok(product)
}

fn too_many(n: usize) -> MatrixError {
    error(
        None,
        format!("the matrix has {n} combinations, more than {MAX_COMBINATIONS}"),
    )
}

/// Whether `combo` holds every key and value of `part`.
fn holds(combo: &Map<String, Value>, part: &Map<String, Value>) -> bool {
    part.iter().all(|(k, v)| combo.get(k) == Some(v))
}

/// A combination's unit as it is shown: `build[os=linux,arch=arm64]`, its
/// keys in order, each value as itself when it is a plain word, else as JSON.
pub fn label(step: &str, combo: &Map<String, Value>) -> String {
    let values: Vec<String> = combo
        .iter()
        .map(|(k, v)| format!("{k}={}", shown(v)))
        .collect();
    format!("{step}[{}]", values.join(","))
}

fn shown(v: &Value) -> String {
    match v {
        Value::String(s)
            if !s.is_empty()
                && s.chars()
                    .all(|c| c.is_alphanumeric() || "-_./:@+".contains(c)) =>
        {
            s.clone()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(m: Value) -> Vec<String> {
        expand(&m).unwrap().iter().map(|c| label("j", c)).collect()
    }

    #[test]
    fn the_product_varies_the_first_key_slowest() {
        assert_eq!(
            labels(json!({"os": ["linux", "macos"], "arch": ["amd64", "arm64"]})),
            [
                "j[os=linux,arch=amd64]",
                "j[os=linux,arch=arm64]",
                "j[os=macos,arch=amd64]",
                "j[os=macos,arch=arm64]"
            ]
        );
    }

    /// docs.github.com, "Running variations of jobs in a workflow",
    /// "Example: Expanding configurations": the six jobs it lists.
    #[test]
    fn githubs_include_example_gives_the_jobs_github_lists() {
        let got = expand(&json!({
            "fruit": ["apple", "pear"],
            "animal": ["cat", "dog"],
            "include": [
                {"color": "green"},
                {"color": "pink", "animal": "cat"},
                {"fruit": "apple", "shape": "circle"},
                {"fruit": "banana"},
                {"fruit": "banana", "animal": "cat"}
            ]
        }))
        .unwrap();
        let want = [
            json!({"fruit": "apple", "animal": "cat", "color": "pink", "shape": "circle"}),
            json!({"fruit": "apple", "animal": "dog", "color": "green", "shape": "circle"}),
            json!({"fruit": "pear", "animal": "cat", "color": "pink"}),
            json!({"fruit": "pear", "animal": "dog", "color": "green"}),
            json!({"fruit": "banana"}),
            json!({"fruit": "banana", "animal": "cat"}),
        ];
        let got: Vec<Value> = got.into_iter().map(Value::Object).collect();
        assert_eq!(got, want);
    }

    /// "Example: Adding configurations": windows/16 gets `npm: 6`.
    #[test]
    fn githubs_adding_example_sets_a_key_on_one_combination() {
        let got = expand(&json!({
            "os": ["windows-latest", "ubuntu-latest"],
            "node": [14, 16],
            "include": [{"os": "windows-latest", "node": 16, "npm": 6}]
        }))
        .unwrap();
        assert_eq!(got.len(), 4);
        assert_eq!(
            Value::Object(got[1].clone()),
            json!({"os": "windows-latest", "node": 16, "npm": 6})
        );
        assert!(got.iter().filter(|c| c.contains_key("npm")).count() == 1);
    }

    /// "Example: Excluding matrix configurations": 12 less 3 (a partial
    /// match excludes every combination it matches).
    #[test]
    fn githubs_exclude_example_leaves_nine() {
        let got = expand(&json!({
            "os": ["macos-latest", "windows-latest"],
            "version": [12, 14, 16],
            "environment": ["staging", "production"],
            "exclude": [
                {"os": "macos-latest", "version": 12, "environment": "production"},
                {"os": "windows-latest", "version": 16}
            ]
        }))
        .unwrap();
        assert_eq!(got.len(), 9);
        assert!(
            !got.iter()
                .any(|c| c["os"] == "windows-latest" && c["version"] == 16)
        );
    }

    /// "Example: Using include only": each entry is a combination.
    #[test]
    fn an_include_only_matrix_is_its_entries() {
        assert_eq!(
            labels(json!({"include": [
                {"site": "production", "datacenter": "site-a"},
                {"site": "staging", "datacenter": "site-b"}
            ]})),
            [
                "j[site=production,datacenter=site-a]",
                "j[site=staging,datacenter=site-b]"
            ]
        );
    }

    #[test]
    fn what_github_would_run_wrongly_or_never_is_an_error() {
        let msg = |m: Value| expand(&m).unwrap_err().message;
        assert!(msg(json!({})).contains("no combination"));
        assert!(msg(json!({"os": []})).contains("`os` is empty"));
        assert!(
            msg(json!({"os": ["a"], "exclude": [{"os": "b"}]})).contains("matches no combination")
        );
        assert!(msg(json!({"os": ["a"], "exclude": [{"arch": "b"}]})).contains("not a key"));
        assert!(msg(json!({"os": "linux"})).contains("must be a list"));
        assert!(msg(json!({"include": [1]})).contains("map of matrix keys"));
        let big: Vec<i64> = (0..17).collect();
        assert!(msg(json!({"a": big, "b": big})).contains("289 combinations, more than 256"));
        assert_eq!(
            expand(&json!({"a": (0..16).collect::<Vec<_>>(), "b": (0..16).collect::<Vec<_>>()}))
                .unwrap()
                .len(),
            256
        );
    }

    #[test]
    fn a_value_that_is_not_a_word_is_labelled_as_json() {
        let c = expand(&json!({"v": ["a b", 3, true, {"x": 1}, "1.2-rc"]})).unwrap();
        let l: Vec<String> = c.iter().map(|c| label("s", c)).collect();
        assert_eq!(
            l,
            [
                "s[v=\"a b\"]",
                "s[v=3]",
                "s[v=true]",
                "s[v={\"x\":1}]",
                "s[v=1.2-rc]"
            ]
        );
    }
}
