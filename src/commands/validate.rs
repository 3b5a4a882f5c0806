//! `wf validate FILE`: check a workflow file without running it. Silent and 0
//! when valid (but for warnings of expressions whose meaning changed when wf
//! took GitHub's rules exactly); otherwise a `file:line:col: message` line
//! for every error found in one pass, and exit 2.

use crate::exit::ExitStatus;
use crate::printer::Printer;
use crate::views::{InvalidView, ValidView};
use crate::workflow::Workflow;
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
                printer.json(&ValidView::new(&file, &wf));
            }
            for w in &wf.warnings {
                printer.warn(&w.to_string());
            }
            Ok(ExitStatus::Success)
        }
        Err(e) => {
            if args.json {
                printer.json(&InvalidView::new(&file, &e));
            }
            for e in &e.all() {
                printer.error(&e.to_string());
            }
            Ok(ExitStatus::Usage)
        }
    }
}
