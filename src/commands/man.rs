//! `wf man`: the man page (roff), generated from the same clap definitions
//! that parse the command line. Install it with `wf man > ~/.local/share/man/man1/wf.1`.

use super::Cli;
use crate::exit::ExitStatus;
use crate::printer::Printer;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: Args, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let cmd = <Cli as clap::CommandFactory>::command();
    let mut out = printer.data_writer();
    clap_mangen::Man::new(cmd).render(&mut out)?;
    Ok(ExitStatus::Success)
}
