//! The workflows a workflow calls (`workflow:` steps), read with it from
//! their files, relative to the calling file's folder, so that every
//! definition error of the whole tree is found before anything runs: a
//! child file that cannot be read (pointed at where the parent names it),
//! an invalid child (with its own file, line and column), a `with:` that
//! names an input the child does not declare or misses one it requires,
//! and a cycle of files (a.yaml -> b.yaml -> a.yaml).
//!
//! A workflow with children is identified by its source and theirs: its
//! [`Workflow::hash`] covers the children's hashes, so an edited child
//! makes a new definition to pin.

use super::validate::{Pos, hash_source};
use super::{CallSite, DefinitionError, Workflow, origin};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Reads the workflow file at `path` and every workflow it calls.
pub(super) fn load_tree(
    path: &Path,
    calling: &mut Vec<PathBuf>,
) -> Result<Workflow, DefinitionError> {
    let mut wf = Workflow::load_file(path)?;
    if wf.calls.is_empty() {
        return Ok(wf);
    }
    let label = wf_label(path);
    let (_, dir) = origin(path);
    let here = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    calling.push(here);
    for call in wf.calls.clone() {
        let child = match wf.children.get(&call.path) {
            Some(child) => child.clone(),
            None => {
                let child = load_child(&dir, &label, &call, calling)?;
                wf.children.insert(call.path.clone(), child.clone());
                child
            }
        };
        check_with(&label, &call, &child)?;
    }
    calling.pop();
    wf.hash = tree_hash(&wf.hash, child_hashes(&wf));
    Ok(wf)
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
    let child = load_tree(&shown_path(dir, &call.path), calling).map_err(|mut e| {
        e.message = format!(
            "{} (in `{}`, which step `{}` calls at {label}:{}:{})",
            e.message, call.path, call.step, call.at.line, call.at.col
        );
        e
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
