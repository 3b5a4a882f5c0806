//! `wf validate FILE --json`: a valid file's summary, or every error found.

use crate::workflow::{DefinitionError, Workflow};

/// A valid file: `{file, valid: true, workflow, steps, warnings}`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ValidView<'a> {
    pub file: &'a str,
    /// Always true.
    pub valid: bool,
    /// The workflow's `name`.
    pub workflow: &'a str,
    /// How many steps it has.
    pub steps: usize,
    /// Expressions whose meaning changed when wf took GitHub's rules exactly.
    pub warnings: Vec<Position<'a>>,
}

/// A file with errors: `{file, valid: false, error, errors}`, `error` being
/// the first of `errors` (in file order).
#[derive(Debug, Clone, serde::Serialize)]
pub struct InvalidView<'a> {
    pub file: &'a str,
    /// Always false.
    pub valid: bool,
    pub error: Position<'a>,
    pub errors: Vec<Position<'a>>,
}

/// What is wrong, and where: `{line, col, message}`, with `file` when it
/// is another file than the one validated (a child workflow it calls).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Position<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<&'a str>,
    pub line: u32,
    pub col: u32,
    pub message: &'a str,
}

impl<'a> ValidView<'a> {
    /// `wf`, loaded from `file` (as given).
    pub fn new(file: &'a str, wf: &'a Workflow) -> ValidView<'a> {
        ValidView {
            file,
            valid: true,
            workflow: &wf.name,
            steps: wf.steps.len(),
            warnings: wf.warnings.iter().map(Position::from).collect(),
        }
    }
}

impl<'a> InvalidView<'a> {
    /// `error` (with the others found in the same pass, its `more`), found
    /// in `file` (as given).
    pub fn new(file: &'a str, error: &'a DefinitionError) -> InvalidView<'a> {
        InvalidView {
            file,
            valid: false,
            error: Position::in_file(error, file),
            errors: std::iter::once(error)
                .chain(&error.more)
                .map(|e| Position::in_file(e, file))
                .collect(),
        }
    }
}

impl<'a> Position<'a> {
    /// `e`, found while validating `file`.
    fn in_file(e: &'a DefinitionError, file: &str) -> Position<'a> {
        Position {
            file: (e.file != file && !(file == "-" && e.file == crate::workflow::STDIN_LABEL))
                .then_some(e.file.as_str()),
            ..Position::from(e)
        }
    }
}

impl<'a> From<&'a DefinitionError> for Position<'a> {
    fn from(e: &'a DefinitionError) -> Position<'a> {
        Position {
            file: None,
            line: e.line,
            col: e.col,
            message: &e.message,
        }
    }
}
