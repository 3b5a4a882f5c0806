//! Turns the raw YAML shape into a checked [`Workflow`]: every rule of docs/workflow-file.md
//! (unique ids, known `needs`, no cycles, durations, expressions, one action per
//! step) is enforced here, before anything runs or anything is written, and each
//! violation is reported with the file, line and column it comes from.
//!
//! This file holds the entry point, the YAML library's errors made readable,
//! the checker's shared state and source positions; `workflow` checks the
//! top-level keys, `schedule` the `on.schedule` entries, `queue` the `queue:` block, `step` each step and
//! its retry policy, `actions` what a step runs, `exprs` every expression and
//! the names it uses, and `graph` the `needs` graph.

mod actions;
mod cache;
mod child;
mod exprs;
mod graph;
mod queue;
mod schedule;
mod step;
mod webhook;
mod workflow;

use super::duration;
use super::model::{RawRetry, RawStep, RawWorkflow};
use super::*;
use serde_json::Value;
use serde_saphyr::Spanned;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// Largest workflow file accepted; a bigger one is certainly not hand-written.
pub const MAX_FILE_BYTES: usize = 2 * 1024 * 1024;

/// Where a definition error points: 1-based line and column.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl<T> From<&Spanned<T>> for Pos {
    fn from(s: &Spanned<T>) -> Self {
        Pos {
            line: s.referenced.line() as u32,
            col: s.referenced.column() as u32,
        }
    }
}

impl<T> From<&Box<Spanned<T>>> for Pos {
    fn from(s: &Box<Spanned<T>>) -> Self {
        Pos::from(&**s)
    }
}

/// Parses and validates workflow source text. `label` names the file in errors.
pub fn parse_source(source: &str, label: &str) -> Result<Workflow, DefinitionError> {
    parse_with_calls(source, label).map_err(|invalid| invalid.error)
}

/// [`parse_source`], and when the text is invalid, the `workflow:` steps
/// read before that was known ([`Invalid::calls`]).
pub(crate) fn parse_with_calls(source: &str, label: &str) -> Result<Workflow, Invalid> {
    let err_at = |pos: Pos, message: String| DefinitionError {
        file: label.to_string(),
        line: pos.line,
        col: pos.col,
        message,
        more: Vec::new(),
    };
    if source.len() > MAX_FILE_BYTES {
        return Err(err_at(
            Pos { line: 1, col: 1 },
            format!(
                "file is {} bytes; workflow files are limited to {} bytes",
                source.len(),
                MAX_FILE_BYTES
            ),
        )
        .into());
    }
    // Blank, or nothing but comments (and document markers): an empty document.
    if source.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#') || l == "---" || l == "..."
    }) {
        return Err(err_at(
            Pos { line: 1, col: 1 },
            "empty workflow file (expected a mapping with `name` and `steps`)".into(),
        )
        .into());
    }
    let raw: RawWorkflow =
        serde_saphyr::from_str_with_options(source, yaml_options()).map_err(|e| {
            let loc = e.location();
            let pos = loc
                .map(|l| Pos {
                    line: l.line().max(1) as u32,
                    col: l.column().max(1) as u32,
                })
                .unwrap_or(Pos { line: 1, col: 1 });
            err_at(pos, yaml_message(&e))
        })?;
    let mut checker = Checker {
        source,
        label,
        step_ids: HashMap::new(),
        folded_ids: HashMap::new(),
        step_refs: Default::default(),
        results_read: std::cell::RefCell::new(Some(Default::default())),
        matrix_keys: Default::default(),
        hash_files_ok: Default::default(),
        warnings: Default::default(),
        calls: Default::default(),
    };
    let checked = checker.check(raw);
    checked.map_err(|error| Invalid {
        error,
        calls: checker.calls.take(),
    })
}

/// An invalid workflow file: its errors, and the `workflow:` steps it calls
/// that were read all the same (each whole), so that their children are
/// checked in the same pass.
#[derive(Debug)]
pub(crate) struct Invalid {
    pub error: DefinitionError,
    pub calls: Vec<CallSite>,
}

impl From<DefinitionError> for Invalid {
    fn from(error: DefinitionError) -> Invalid {
        Invalid {
            error,
            calls: Vec::new(),
        }
    }
}

/// YAML 1.2 rules: only `true`/`false` are booleans, so `[x, y, no]` stays a
/// list of strings (YAML 1.1 would turn `y` and `no` into booleans).
fn yaml_options() -> serde_saphyr::Options {
    let mut options = serde_saphyr::Options::default();
    options.strict_booleans = true;
    options
}

/// One line of the YAML library's error, without its snippet or location suffix.
fn yaml_message(e: &serde_saphyr::Error) -> String {
    let text = e.without_snippet().to_string();
    let first = text.lines().next().unwrap_or("invalid YAML").trim();
    // The library appends " at line X, column Y"; we print the location ourselves.
    let msg = match first.rfind(" at line ") {
        Some(i) => &first[..i],
        None => first,
    };
    // Advice addressed to the library's caller, not to the user of the file.
    let msg = msg.split(", set DuplicateKeyPolicy").next().unwrap_or(msg);
    let msg = msg.split("; use from_str_multiple").next().unwrap_or(msg);
    // A breached parser limit (an alias bomb, absurd nesting) reads
    // `budget breached: Nodes { nodes: 250001 } at line …(used at line …)`.
    if let Some(breach) = first.strip_prefix("budget breached: ") {
        let limit = breach.split(" {").next().unwrap_or(breach).to_lowercase();
        return format!(
            "the YAML is too big or too deeply nested once aliases are expanded ({limit} limit exceeded)"
        );
    }
    let msg = msg.trim_end_matches('.');
    // Inside `{ … }` or `[ … ]`, `,`, `{` and `}` end a plain value: an
    // unquoted expression (`{ run: echo ${{ x }} }`) breaks the mapping.
    if msg.contains("while parsing a flow mapping") || msg.contains("while parsing a flow sequence")
    {
        return format!(
            "{msg} (inside `{{ … }}` or `[ … ]`, quote a value that holds an expression, `{{`, \
             `}}` or `,`: {{ run: 'echo \"x ${{{{ inputs.dir }}}}\"' }})"
        );
    }
    // serde names the keys it knows: point at the one that was meant.
    if let Some(rest) = msg.strip_prefix("unknown field `")
        && let Some((typed, known)) = rest.split_once("`, expected one of ")
    {
        let known: Vec<&str> = known.split(", ").map(|k| k.trim_matches('`')).collect();
        if let Some(near) = super::nearest(typed, known.iter().copied()) {
            return format!("unknown key `{typed}`; did you mean `{near}`?");
        }
        return format!("unknown key `{typed}` (known keys: {})", known.join(", "));
    }
    msg.to_string()
}

struct Checker<'a> {
    source: &'a str,
    label: &'a str,
    step_ids: HashMap<String, usize>,
    /// Step ids in lower case -> as written (expressions look them up
    /// ignoring case).
    folded_ids: HashMap<String, String>,
    /// `steps.X` references made in steps (which step, in its compensation
    /// or not, X, where), checked against `needs` once every step is read.
    step_refs: std::cell::RefCell<Vec<StepRef>>,
    /// Every step whose result some expression reads (`steps.X`, from
    /// anywhere, `outputs:` included); `None` once one reads `steps` whole
    /// or through a dynamic index.
    results_read: std::cell::RefCell<Option<std::collections::BTreeSet<String>>>,
    /// What is valid but likely not meant ([`Workflow::warnings`]).
    warnings: std::cell::RefCell<Vec<DefinitionError>>,
    /// The `workflow:` steps read so far ([`Workflow::calls`]).
    calls: std::cell::RefCell<Vec<CallSite>>,
    /// The keys of the combinations of the `matrix` step being read, when
    /// its matrix is written without expressions (`matrix.KEY` is checked).
    matrix_keys: std::cell::RefCell<Option<std::collections::BTreeSet<String>>>,
    /// Whether the expression being read is a `cache.key`, the one place
    /// `hashFiles()` is known.
    hash_files_ok: std::cell::Cell<bool>,
}

struct StepRef {
    from: usize,
    compensation: bool,
    to: String,
    at: Pos,
}

/// What an expression is allowed to see, depending on where it stands.
#[derive(Clone, Copy)]
struct Scope {
    output: bool,
    item: bool,
    matrix: bool,
}

const PLAIN: Scope = Scope {
    output: false,
    item: false,
    matrix: false,
};

impl Checker<'_> {
    fn err(&self, pos: Pos, message: impl Into<String>) -> DefinitionError {
        DefinitionError {
            file: self.label.to_string(),
            line: pos.line,
            col: pos.col,
            message: message.into(),
            more: Vec::new(),
        }
    }

    /// Finds where `needle` first appears in the source at or after `from`, to point
    /// at an expression inside a value that carries no span of its own.
    fn locate(&self, needle: &str, from: Pos) -> Pos {
        let start = offset_of(self.source, from);
        let Some(hay) = self.source.get(start..).filter(|_| !needle.is_empty()) else {
            return from;
        };
        // Prefer a match that is a whole value, not a piece of a longer one
        // (`1` inside `10s` when the bad value is `interval: 1`).
        let part = |c: char| c.is_alphanumeric() || matches!(c, '_' | '.' | '-');
        let whole = hay.match_indices(needle).map(|(i, _)| i).find(|&i| {
            !hay[..i].chars().next_back().is_some_and(part)
                && !hay[i + needle.len()..].chars().next().is_some_and(part)
        });
        match whole.or_else(|| hay.find(needle)) {
            Some(i) => pos_of(self.source, start + i),
            None => from,
        }
    }

    fn duration(&self, s: &Spanned<String>) -> Result<Duration, DefinitionError> {
        duration::parse(&s.value).map_err(|m| self.err(s.into(), m))
    }

    /// An optional duration; a bad one is added to `errors` (and is none).
    fn optional_duration(
        &self,
        s: Option<&Spanned<String>>,
        errors: &mut Vec<DefinitionError>,
    ) -> Option<Duration> {
        s.map(|s| self.duration(s)).transpose().unwrap_or_else(|e| {
            errors.push(e);
            None
        })
    }

    fn duration_at(&self, text: &str, pos: Pos) -> Result<Duration, DefinitionError> {
        duration::parse(text).map_err(|m| self.err(self.locate(text, pos), m))
    }
}

struct ExprCtx<'a> {
    inputs: &'a BTreeMap<String, InputSpec>,
    secrets: &'a [String],
    scope: Scope,
    /// The step the expression belongs to (and whether to its
    /// compensation), for the check that `steps.X` runs before it.
    step: Option<(usize, bool)>,
}

impl Clone for ExprCtx<'_> {
    fn clone(&self) -> Self {
        ExprCtx { ..*self }
    }
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Byte offset of a 1-based line/column (columns count characters).
fn offset_of(source: &str, pos: Pos) -> usize {
    let mut offset = 0;
    for (i, line) in source.split_inclusive('\n').enumerate() {
        if i + 1 == pos.line as usize {
            let col_bytes: usize = line
                .chars()
                .take(pos.col.saturating_sub(1) as usize)
                .map(char::len_utf8)
                .sum();
            return offset + col_bytes;
        }
        offset += line.len();
    }
    0
}

/// 1-based line/column of a byte offset.
pub(crate) fn pos_of(source: &str, offset: usize) -> Pos {
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() as u32 + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let col = before
        .get(line_start..)
        .map(|l| l.chars().count())
        .unwrap_or(0) as u32
        + 1;
    Pos { line, col }
}

/// Moves `at` (where `text` starts in the source) forward by `offset` bytes of
/// `text`, when `text` appears verbatim on one line; otherwise leaves it.
fn advance(source: &str, at: Pos, text: &str, offset: usize) -> Pos {
    let start = offset_of(source, at);
    if source.get(start..start + text.len()) == Some(text) {
        pos_of(source, start + offset.min(text.len()))
    } else {
        at
    }
}

pub(crate) fn hash_source(source: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(source.as_bytes()))
}
