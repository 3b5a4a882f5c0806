//! `wf`: a durable workflow runner and history inspector. This file only parses
//! the command line, hands it to `commands`, and turns the result into an exit
//! code; an error is printed once, here.

use clap::Parser;
use wf::{commands, exit, printer};

fn main() -> std::process::ExitCode {
    let cli = commands::Cli::parse();
    let printer = printer::Printer::new(cli.quiet);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            printer.error(&format!("cannot start the async runtime: {e}"));
            return exit::ExitStatus::Failure.into();
        }
    };
    match runtime.block_on(commands::execute(cli, &printer)) {
        Ok(status) => status.into(),
        Err(err) => {
            printer.error(&format!("{err:#}"));
            exit::ExitStatus::for_error(&err).into()
        }
    }
}
