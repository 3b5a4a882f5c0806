//! `wf validate FILE`: check a workflow file without running it. Silent and 0
//! when valid; one `file:line:col: message` line and exit 2 otherwise.

use crate::exit::ExitStatus;
use crate::workflow::Workflow;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The workflow file
    pub file: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<ExitStatus> {
    Workflow::load(&args.file)?;
    Ok(ExitStatus::Success)
}
