//! `wf`: a durable workflow runner and history inspector. This file only parses
//! the command line, hands it to `commands`, and turns the result into an exit
//! code; an error is printed once, here.

use clap::Parser;
use wf::{commands, exit, printer};

fn main() -> std::process::ExitCode {
    let cli = match commands::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let printer = printer::Printer::with(cli.quiet, cli.color, cli.time_format);
    // One thread: the engine is one loop that waits on processes and sockets;
    // a single-threaded runtime wakes it without cross-thread hand-offs.
    let runtime = match tokio::runtime::Builder::new_current_thread()
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

/// A command line clap rejects. clap's own rendering spans several lines (a
/// tip, the usage, a hint); docs/secrets.md wants one `error:` line, so the message
/// (its lines up to the first blank one) is folded onto one. Help and version
/// output, including the help shown for a bare `wf`, print as clap renders them.
fn usage_error(e: clap::Error) -> std::process::ExitCode {
    use clap::error::ErrorKind;
    if !e.use_stderr() || e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let _ = e.print();
        return std::process::ExitCode::from(e.exit_code().clamp(0, 255) as u8);
    }
    let rendered = e.render().to_string();
    let message = rendered
        .lines()
        .map(str::trim)
        .take_while(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let message = message.trim().trim_start_matches("error:").trim();
    // clap's "did you mean" tip sits in a paragraph of its own: keep it.
    use clap::error::{ContextKind, ContextValue};
    let tip = [
        ContextKind::SuggestedSubcommand,
        ContextKind::SuggestedArg,
        ContextKind::SuggestedValue,
    ]
    .into_iter()
    .find_map(|kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(vec![s.clone()]),
        Some(ContextValue::Strings(v)) if !v.is_empty() => Some(v.clone()),
        _ => None,
    })
    // clap finds no near subcommand for short typos (`rn`): look closer.
    .or_else(|| match e.get(ContextKind::InvalidSubcommand) {
        Some(ContextValue::String(typed)) => {
            let cmd = <commands::Cli as clap::CommandFactory>::command();
            let names: Vec<String> = cmd
                .get_subcommands()
                .map(|c| c.get_name().to_string())
                .collect();
            wf::workflow::nearest(typed, names.iter().map(String::as_str))
                .map(|n| vec![n.to_string()])
        }
        _ => None,
    })
    .map(|names| {
        let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
        format!("; did you mean {}?", names.join(" or "))
    })
    .unwrap_or_default();
    printer::Printer::new(false).error(&format!("{message}{tip} (try --help)"));
    exit::ExitStatus::Usage.into()
}
