//! The command line: one file per subcommand, each taking its parsed
//! arguments and the [`Printer`], returning an [`ExitStatus`].

mod bulk;
mod cancel;
mod completions;
mod db;
mod inspect;
mod list;
mod logs;
mod man;
mod prune;
mod queue;
mod restart;
mod result;
mod resume;
mod run;
mod schedule;
mod schema;
mod serve;
mod signal;
mod token;
mod trace;
mod upgrade;
mod validate;
mod worker;
mod workflow;

use crate::exit::{ExitStatus, UsageError};
use crate::printer::Printer;
use crate::store::{Location, Store};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "wf",
    version,
    about = "Durable workflow runner and history inspector",
    after_help = "\
Examples:
  wf run workflows/hello.yaml --input who=ana
  wf list --status failed --since 1d
  wf inspect 1c75 --attempts          (any unique prefix of an id)
  wf resume 1c75 --retry-failed
  wf restart 1c75 --from charge
  wf trace 1c75 --format otlp

Exit codes:
  0 completed (or success)   1 workflow failed      2 usage or definition error
  3 suspended or not started (sleeping, waiting, queued, pending)   4 canceled
  5 held by another process  6 database unreachable  130 interrupted"
)]
pub struct Cli {
    /// SQLite file or postgres:// URL (default: $WF_DB, else $XDG_DATA_HOME/wf/wf.db)
    // `$WF_DB` is read by `db_location`, not by clap: clap takes an empty
    // variable for a missing value, and docs/commands.md says an empty one is unset.
    #[arg(long, global = true, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,
    /// Print no progress or diagnostics (errors still go to stderr)
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// When to colour output (NO_COLOR is honoured by `auto`)
    #[arg(long, global = true, value_enum, default_value_t = crate::printer::ColorChoice::Auto)]
    pub color: crate::printer::ColorChoice,
    /// How tables show times
    #[arg(long, global = true, value_enum, default_value_t = crate::printer::TimeFormat::Relative)]
    pub time_format: crate::printer::TimeFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start an instance of a workflow and run it until it completes, fails or suspends
    Run(run::Args),
    /// Continue an interrupted, sleeping or waiting instance
    Resume(resume::Args),
    /// Run a step and every step downstream of it again (the others keep their results)
    Restart(restart::Args),
    /// Show an instance: header, steps, attempts and outcomes
    Inspect(inspect::Args),
    /// List instances, newest first
    List(list::Args),
    /// Print the captured stdout/stderr of a step attempt
    Logs(logs::Args),
    /// Print the outputs of a completed instance (exit 1 if it failed, 3 while not ended)
    Result(result::Args),
    /// Print the trace of each run of an instance (tree, OTLP/JSON or JSON)
    Trace(trace::Args),
    /// Deliver an event to an instance
    Signal(signal::Args),
    /// Cancel an instance; runs compensations of completed steps
    Cancel(cancel::Args),
    /// Move instances that are not running onto a new definition of their workflow
    Upgrade(upgrade::Args),
    /// Delete ended instances older than a duration, with all their history
    Prune(prune::Args),
    /// Back up, copy to another database, or check the whole history
    Db(db::Args),
    /// Register, remove and list the schedules `wf worker` starts instances on
    Schedule(schedule::Args),
    /// Serve the HTTP API, webhooks and Prometheus metrics (`--worker`: and a worker)
    Serve(serve::Args),
    /// Register, remove and list workflows (for `wf serve`, webhooks and schedules)
    Workflow(workflow::Args),
    /// The queues (`queue:`): admitted and queued instances per key
    Queue(queue::Args),
    /// Resume every instance that is due (timers, events, dead leases) and start
    /// scheduled ones, until stopped
    Worker(worker::Args),
    /// Check a workflow file; silent and 0 when valid
    Validate(validate::Args),
    /// Print shell completions (bash, zsh, fish, elvish, powershell)
    Completions(completions::Args),
    /// Print the man page (roff)
    Man(man::Args),
    /// Print the JSON Schema of the workflow file (for editors)
    Schema(schema::Args),
}

pub async fn execute(cli: Cli, printer: &Printer) -> anyhow::Result<ExitStatus> {
    crate::switches::check().map_err(UsageError)?;
    let db = cli.db;
    let location = db.clone();
    let result = match cli.command {
        Command::Run(args) => run::run(args, db, printer).await,
        Command::Resume(args) => resume::run(args, db, printer).await,
        Command::Restart(args) => restart::run(args, db, printer).await,
        Command::Inspect(args) => inspect::run(args, &open_existing(db).await?, printer).await,
        Command::List(args) => list::run(args, &open_existing(db).await?, printer).await,
        Command::Logs(args) => logs::run(args, &open_existing(db).await?, printer).await,
        Command::Result(args) => result::run(args, &open_existing(db).await?, printer).await,
        Command::Trace(args) => trace::run(args, &open_existing(db).await?, printer).await,
        Command::Signal(args) => signal::run(args, &mut open_existing(db).await?, printer).await,
        Command::Cancel(args) => cancel::run(args, db, printer).await,
        Command::Upgrade(args) => upgrade::run(args, db, printer).await,
        Command::Schedule(args) => schedule::run(args, db, printer).await,
        Command::Workflow(args) => workflow::run(args, db, printer).await,
        Command::Serve(args) => serve::run(args, db, printer).await,
        Command::Queue(args) => queue::run(args, db, printer).await,
        Command::Worker(args) => worker::run(args, db, printer).await,
        Command::Prune(args) => prune::run(args, db, printer).await,
        Command::Db(args) => db::run(args, db, printer).await,
        Command::Validate(args) => validate::run(args, printer),
        Command::Completions(args) => completions::run(args, printer),
        Command::Man(args) => man::run(args, printer),
        Command::Schema(args) => schema::run(args, printer),
    };
    result.map_err(|e| how_to_give(name_read_only(e, location)))
}

/// A required input not given, said as the command line gives it.
fn how_to_give(err: anyhow::Error) -> anyhow::Error {
    use crate::engine::EngineError;
    let missing = err
        .chain()
        .find_map(|cause| match cause.downcast_ref::<EngineError>() {
            Some(EngineError::MissingInput(name)) => Some(name.clone()),
            _ => None,
        });
    match missing {
        Some(name) => UsageError(format!(
            "missing required input `{name}` (give it with --input {name}=VALUE)"
        ))
        .into(),
        None => err,
    }
}

/// A write SQLite refused because the database is read-only (a read-only
/// mount, a read-only file) names the file: the reason alone
/// (`attempt to write a readonly database`) does not say which.
fn name_read_only(err: anyhow::Error, db: Option<PathBuf>) -> anyhow::Error {
    use crate::engine::EngineError;
    use crate::store::StoreError;
    let read_only = err.chain().any(|cause| {
        let store = cause.downcast_ref::<StoreError>().or_else(|| {
            match cause.downcast_ref::<EngineError>() {
                Some(EngineError::Store(s)) => Some(s),
                _ => None,
            }
        });
        matches!(store, Some(StoreError::ReadOnly(_)))
    });
    match db_location(db) {
        Ok(location) if read_only => anyhow::anyhow!(
            "database {} is read-only: cannot write to it (is it on a read-only mount, or not \
             writable by this user?)",
            location.describe()
        ),
        _ => err,
    }
}

/// Where the history is: `--db`, else `$WF_DB` (a path or a `postgres://`
/// URL), else the XDG data dir. Empty values count as unset, and a path
/// starting with `~/` is in `$HOME`, as a shell would have expanded it.
pub fn db_location(db: Option<PathBuf>) -> anyhow::Result<Location> {
    let given = db
        .map(PathBuf::into_os_string)
        .filter(|p| !p.is_empty())
        .or_else(|| std::env::var_os("WF_DB").filter(|p| !p.is_empty()));
    if let Some(p) = given {
        return Ok(match Location::parse(&p)? {
            Location::Sqlite(path) => Location::Sqlite(expand_home(path)?),
            url @ Location::Postgres(_) => url,
        });
    }
    let data = match std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(h) => PathBuf::from(h).join(".local/share"),
            None => {
                return Err(
                    UsageError("cannot find a database: set --db, WF_DB or HOME".into()).into(),
                );
            }
        },
    };
    Ok(Location::Sqlite(data.join("wf").join("wf.db")))
}

/// `~/x.db` as `$HOME/x.db` (a quoted `~` reaches wf unexpanded; a folder
/// named `~` is never what was meant). Other paths are left as they are.
fn expand_home(path: PathBuf) -> anyhow::Result<PathBuf> {
    // By components: `~user/x` and `~x` are not `~`, and stay as they are.
    let rest = match path.strip_prefix("~") {
        Ok(rest) if !rest.as_os_str().is_empty() => rest,
        _ => return Ok(path),
    };
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(rest)),
        None => Err(UsageError(format!(
            "database path {}: HOME is not set, so `~` cannot be expanded",
            path.display()
        ))
        .into()),
    }
}

pub async fn open(db: Option<PathBuf>) -> anyhow::Result<Store> {
    Ok(Store::open(&db_location(db)?).await?)
}

/// Opens the database for a command that only reads: a SQLite file that
/// does not exist is an error (exit 1), and nothing is created.
pub async fn open_existing(db: Option<PathBuf>) -> anyhow::Result<Store> {
    let location = db_location(db)?;
    match Store::open_existing(&location).await? {
        Some(store) => Ok(store),
        None => anyhow::bail!(
            "no database at {}: nothing has run with it yet (`wf run FILE` creates it)",
            location.describe()
        ),
    }
}

/// The caller's W3C trace context (`TRACEPARENT`), if it set one.
pub fn traceparent() -> Option<String> {
    std::env::var("TRACEPARENT").ok().filter(|t| !t.is_empty())
}

/// Parses a duration flag value (`--inline-wait 30s`).
pub fn parse_duration_flag(s: &str) -> Result<std::time::Duration, String> {
    crate::workflow::duration::parse(s)
}

pub use crate::workflow::parse_label;

/// An id as tables show it: its first 12 characters, which any command
/// takes as a prefix.
pub fn short_id(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// Text cut to `max` characters with `…` (tables; the whole text is in
/// `--json` and `wf logs`).
pub fn cut(text: &str, max: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut out: String = one_line.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Maps how a run ended to the process exit status.
pub fn outcome_status(o: &crate::engine::RunOutcome) -> ExitStatus {
    use crate::engine::RunOutcome::*;
    match o {
        Completed => ExitStatus::Success,
        Failed(_) => ExitStatus::Failure,
        Sleeping(_) | Waiting(_) | Queued(_) => ExitStatus::Suspended,
        Canceled | Skipped(_) => ExitStatus::Canceled,
        Interrupted => ExitStatus::Interrupted,
    }
}
