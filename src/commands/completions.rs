//! `wf completions SHELL`: shell completions, generated from the same clap
//! definitions that parse the command line (so they cannot drift).

use super::Cli;
use crate::exit::ExitStatus;
use crate::printer::Printer;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell: bash, zsh, fish, elvish or powershell
    pub shell: clap_complete::Shell,
}

pub fn run(args: Args, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    let mut out = printer.data_writer();
    clap_complete::generate(args.shell, &mut cmd, "wf", &mut out);
    Ok(ExitStatus::Success)
}
