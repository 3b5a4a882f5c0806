//! `wf validate FILE`: check a workflow file without running it. Silent and 0
//! when valid (but for warnings of expressions whose meaning changed when wf
//! took GitHub's rules exactly); otherwise a `file:line:col: message` line
//! for every error found in one pass, and exit 2.

use crate::exit::ExitStatus;
use crate::printer::Printer;
use crate::workflow::Workflow;
use serde_json::json;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The workflow file
    pub file: PathBuf,
    /// `{file, valid, workflow, steps}` or `{file, valid, error: {line, col, message}}`
    /// on stdout (still exit 2 when invalid)
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let file = args.file.display().to_string();
    match Workflow::load(&args.file) {
        Ok(wf) => {
            if args.json {
                let warnings: Vec<_> = wf
                    .warnings
                    .iter()
                    .map(|w| json!({ "line": w.line, "col": w.col, "message": w.message }))
                    .collect();
                printer.json(&json!({
                    "file": file, "valid": true, "workflow": wf.name, "steps": wf.steps.len(),
                    "warnings": warnings,
                }));
            }
            for w in &wf.warnings {
                printer.warn(&w.to_string());
            }
            Ok(ExitStatus::Success)
        }
        Err(e) => {
            let all = e.all();
            if args.json {
                let errors: Vec<_> = all
                    .iter()
                    .map(|e| json!({ "line": e.line, "col": e.col, "message": e.message }))
                    .collect();
                printer.json(&json!({
                    "file": file,
                    "valid": false,
                    "error": errors[0],
                    "errors": errors,
                }));
            }
            for e in &all {
                printer.error(&e.to_string());
            }
            Ok(ExitStatus::Usage)
        }
    }
}
