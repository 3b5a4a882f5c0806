//! The workflows a workflow calls (`workflow:` steps), read with it from
//! their files, relative to the calling file's folder, so that every
//! definition error of the whole tree is found before anything runs: a
//! child file that cannot be read (pointed at where the parent names it),
//! an invalid child (with its own file, line and column), a `with:` that
//! names an input the child does not declare or misses one it requires,
//! and a cycle of files (a.yaml -> b.yaml -> a.yaml). Every one is found
//! in one pass, with the file's own errors: each step's children are read
//! even when another step is in error.
//!
//! A workflow with children is identified by its source and theirs: its
//! [`Workflow::hash`] covers the children's hashes, so an edited child
//! makes a new definition to pin.

use super::validate::{Invalid, Pos, hash_source};
use super::{CallSite, DefinitionError, Workflow, origin};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Reads the workflow file at `path` and every workflow it calls, and
/// reports every error of the tree in one pass: the file's own, and for
/// each `workflow:` step (read whole, even when others are not), its
/// child's (unreadable, invalid, or called with a `with:` it does not
/// take), in file order, a child's where its step calls it.
pub(super) fn load_tree(
    path: &Path,
    calling: &mut Vec<PathBuf>,
) -> Result<Workflow, DefinitionError> {
    let (wf, calls, mut found) = match Workflow::load_file(path) {
        Ok(wf) if wf.calls.is_empty() => return Ok(wf),
        Ok(wf) => {
            let calls = wf.calls.clone();
            (Some(wf), calls, Vec::new())
        }
        Err(Invalid { error, calls }) => {
            let own: Vec<(Pos, DefinitionError)> = error
                .all()
                .into_iter()
                .map(|e| {
                    (
                        Pos {
                            line: e.line,
                            col: e.col,
                        },
                        e,
                    )
                })
                .collect();
            if calls.is_empty() {
                return Err(error);
            }
            (None, calls, own)
        }
    };
    let label = wf_label(path);
    let (_, dir) = origin(path);
    let here = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    calling.push(here);
    let mut children: BTreeMap<String, Arc<Workflow>> = BTreeMap::new();
    // Children found invalid: their errors are reported once, at the first
    // step that calls them.
    let mut invalid = HashSet::new();
    for call in &calls {
        let child = match children.get(&call.path) {
            Some(child) => child.clone(),
            None if invalid.contains(&call.path) => continue,
            None => match load_child(&dir, &label, call, calling) {
                Ok(child) => {
                    children.insert(call.path.clone(), child.clone());
                    child
                }
                Err(e) => {
                    if e.file != label {
                        invalid.insert(call.path.clone());
                    }
                    found.extend(e.all().into_iter().map(|e| (call.at, e)));
                    continue;
                }
            },
        };
        if let Err(e) = check_with(&label, call, &child) {
            found.push((call.at, e));
        }
    }
    calling.pop();
    match wf {
        Some(mut wf) if found.is_empty() => {
            wf.children = children;
            wf.hash = tree_hash(&wf.hash, child_hashes(&wf));
            Ok(wf)
        }
        _ => {
            // File order (stable: a child's errors stay in its order).
            found.sort_by_key(|(at, _)| (at.line, at.col));
            let mut errors = found.into_iter().map(|(_, e)| e);
            // (Never empty here: a file that did not load has an error.)
            let mut first = errors.next().unwrap_or_else(|| DefinitionError {
                file: label.clone(),
                line: 1,
                col: 1,
                message: "invalid workflow".into(),
                more: Vec::new(),
            });
            first.more = errors.collect();
            Err(first)
        }
    }
}

/// The child `call` names, read relative to `dir` (the calling file's folder).
fn load_child(
    dir: &Path,
    label: &str,
    call: &CallSite,
    calling: &mut Vec<PathBuf>,
) -> Result<Arc<Workflow>, DefinitionError> {
    let at = |message: String| error_at(label, call.at, message);
    let file = dir.join(&call.path);
    let canonical = std::fs::canonicalize(&file).map_err(|e| {
        at(format!(
            "step `{}`: cannot read workflow file `{}`: {}",
            call.step,
            call.path,
            super::io_reason(&e)
        ))
    })?;
    if let Some(first) = calling.iter().position(|p| *p == canonical) {
        let cycle: Vec<String> = calling[first..]
            .iter()
            .chain(std::iter::once(&canonical))
            .map(|p| display_name(p))
            .collect();
        return Err(at(format!(
            "step `{}`: a cycle of workflow files: {}",
            call.step,
            cycle.join(" -> ")
        )));
    }
    let child = load_tree(&shown_path(dir, &call.path), calling).map_err(|e| {
        let mut all = e.all().into_iter().map(|mut e| {
            e.message = format!(
                "{} (in `{}`, which step `{}` calls at {label}:{}:{})",
                e.message, call.path, call.step, call.at.line, call.at.col
            );
            e
        });
        let mut first = all.next().unwrap_or(e);
        first.more = all.collect();
        first
    })?;
    Ok(Arc::new(child))
}

/// A child's `with:` against the inputs it declares.
fn check_with(label: &str, call: &CallSite, child: &Workflow) -> Result<(), DefinitionError> {
    for (key, at) in &call.with {
        if !child.inputs.contains_key(key) {
            let declared: Vec<&str> = child.inputs.keys().map(String::as_str).collect();
            return Err(error_at(
                label,
                *at,
                format!(
                    "step `{}`: `with.{key}` is not an input of workflow `{}` ({})",
                    call.step,
                    child.name,
                    if declared.is_empty() {
                        "it declares none".to_string()
                    } else {
                        format!("it declares: {}", declared.join(", "))
                    }
                ),
            ));
        }
    }
    for (name, spec) in &child.inputs {
        if spec.required && spec.default.is_none() && !call.with.iter().any(|(k, _)| k == name) {
            return Err(error_at(
                label,
                call.at,
                format!(
                    "step `{}`: workflow `{}` requires input `{name}`, which `with` does not give",
                    call.step, child.name
                ),
            ));
        }
    }
    Ok(())
}

/// The hash of a workflow and the children it calls: its source's alone
/// when it calls none.
/// `children`: path as written -> the child's hash, in path order.
pub fn tree_hash<'a>(
    source_hash: &str,
    children: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> String {
    let mut text = format!("wf tree\n{source_hash}");
    let mut any = false;
    for (path, hash) in children {
        text.push_str(&format!("\n{path}\0{hash}"));
        any = true;
    }
    if any {
        hash_source(&text)
    } else {
        source_hash.to_string()
    }
}

/// The hashes of `wf`'s children, as [`tree_hash`] takes them.
pub fn child_hashes(wf: &Workflow) -> impl Iterator<Item = (&str, &str)> {
    wf.children
        .iter()
        .map(|(path, child)| (path.as_str(), child.hash.as_str()))
}

fn error_at(label: &str, at: Pos, message: String) -> DefinitionError {
    DefinitionError {
        file: label.to_string(),
        line: at.line,
        col: at.col,
        message,
        more: Vec::new(),
    }
}

/// How errors name the file at `path` (`<stdin>` for `-`).
fn wf_label(path: &Path) -> String {
    if super::is_stdin(path) {
        super::STDIN_LABEL.to_string()
    } else {
        path.display().to_string()
    }
}

/// How a child's errors name it: its path as the caller wrote it, joined
/// to the caller's folder as the user named it (not made absolute).
fn shown_path(dir: &Path, path: &str) -> PathBuf {
    let joined = dir.join(path);
    match std::env::current_dir() {
        Ok(cwd) => joined
            .strip_prefix(&cwd)
            .map(Path::to_path_buf)
            .unwrap_or(joined),
        Err(_) => joined,
    }
}

fn display_name(p: &Path) -> String {
    match std::env::current_dir() {
        Ok(cwd) => p.strip_prefix(&cwd).unwrap_or(p).display().to_string(),
        Err(_) => p.display().to_string(),
    }
}
