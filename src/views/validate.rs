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

/// What is wrong, and where: `{line, col, message}`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Position<'a> {
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
            error: Position::from(error),
            errors: std::iter::once(error)
                .chain(&error.more)
                .map(Position::from)
                .collect(),
        }
    }
}

impl<'a> From<&'a DefinitionError> for Position<'a> {
    fn from(e: &'a DefinitionError) -> Position<'a> {
        Position {
            line: e.line,
            col: e.col,
            message: &e.message,
        }
    }
}
