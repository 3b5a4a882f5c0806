//! `wf schema`: the JSON Schema of the workflow file, derived (schemars) from
//! the very types the parser reads it into, so it cannot drift from what
//! `wf validate` accepts. Editors use it through a modeline:
//! `# yaml-language-server: $schema=…/workflow.schema.json`.

use crate::exit::ExitStatus;
use crate::printer::Printer;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: Args, printer: &Printer) -> anyhow::Result<ExitStatus> {
    printer.data(&crate::workflow::json_schema());
    Ok(ExitStatus::Success)
}
