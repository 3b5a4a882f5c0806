//! `wf serve [--listen ADDR] [--worker]`: the HTTP API, webhooks and
//! metrics (`crate::serve`), until SIGINT or SIGTERM; `wf serve token …`
//! manages its named tokens (`token.rs`).

use crate::engine::worker::Options as WorkerOptions;
use crate::exit::{ExitStatus, UsageError};
use crate::printer::Printer;
use crate::serve::{self, auth};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Sub>,
    /// The address to listen on
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Also run a worker in this process (as `wf worker`)
    #[arg(long)]
    pub worker: bool,
    /// The worker's concurrency (with --worker)
    #[arg(long, default_value_t = 4, requires = "worker")]
    pub concurrency: usize,
    /// How often the worker looks for due instances (with --worker)
    #[arg(long, value_name = "DURATION", value_parser = super::parse_duration_flag, default_value = "500ms", requires = "worker")]
    pub poll: Duration,
    /// A PEM certificate chain: serve HTTPS (with --tls-key)
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// How long a browser session lasts unused
    #[arg(long, value_name = "DURATION", value_parser = super::parse_duration_flag, default_value = "12h")]
    pub session_ttl: Duration,
}

#[derive(Debug, clap::Subcommand)]
pub enum Sub {
    /// Named tokens with scopes: add, list, revoke
    Token {
        #[command(subcommand)]
        command: super::token::Sub,
    },
}

pub async fn run(args: Args, db: Option<PathBuf>, printer: &Printer) -> anyhow::Result<ExitStatus> {
    if let Some(Sub::Token { command }) = args.command {
        return super::token::run(command, db, printer).await;
    }
    if args.concurrency == 0 {
        return Err(UsageError("--concurrency must be at least 1".into()).into());
    }
    let location = super::db_location(db)?;
    let (token, source) = auth::load()?;
    let tls = args.tls_cert.zip(args.tls_key);
    if !args.listen.ip().is_loopback() && tls.is_none() {
        printer.warn(&format!(
            "listening on {} without TLS: the token and everything else cross the network in the clear (--tls-cert/--tls-key)",
            args.listen
        ));
    }
    let scheme = if tls.is_some() { "https" } else { "http" };
    match &source {
        auth::Source::Generated(path) => printer.info(&format!(
            "token generated and kept in {} (mode 0600): {}\nsign in: {scheme}://{}/?token={}",
            path.display(),
            token.as_str(),
            args.listen,
            token.as_str()
        )),
        auth::Source::File(path) => {
            printer.info(&format!("token: the one kept in {}", path.display()));
        }
        auth::Source::Env => printer.info("token: WF_SERVE_TOKEN"),
    }
    let worker = args.worker.then(|| WorkerOptions {
        once: false,
        concurrency: args.concurrency,
        poll: args.poll,
        inline_wait: Duration::from_secs(30),
    });
    let opts = serve::Options {
        listen: args.listen,
        token,
        tls,
        worker,
        session_ttl: args.session_ttl,
    };
    match serve::run(location, opts, printer).await? {
        serve::Ended::Stopped => Ok(ExitStatus::Success),
    }
}
