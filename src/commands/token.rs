//! `wf serve token add NAME --scope S | list | revoke NAME`: the named
//! tokens every `wf serve` of this database honours (SPEC §8 Tokens and
//! sessions). `add` prints the token once; the database keeps its hash.
//! `revoke` ends it, and its browser sessions, on the next request to any
//! server.

use crate::engine::tokens;
use crate::exit::ExitStatus;
use crate::printer::Printer;
use crate::views::{TokenAdded, TokenView};
use crate::vocab::{Actor, TokenScope};
use comfy_table::Cell;
use std::path::PathBuf;

#[derive(Debug, clap::Subcommand)]
pub enum Sub {
    /// Make a token: printed once, kept only as its hash
    Add {
        /// Its name (recorded as `token:NAME` on what it does)
        name: String,
        /// What it may do: read (see), operate (also start, signal, cancel, resume, retry,
        /// restart), admin (also register workflows and manage tokens)
        #[arg(long, value_name = "SCOPE", value_parser = parse_scope)]
        scope: TokenScope,
        /// `{name, scope, created_at, created_by, last_used_at, token}` as JSON on stdout
        #[arg(long)]
        json: bool,
    },
    /// The named tokens: name, scope, created, by whom, last used
    List {
        /// An array of `{name, scope, created_at, created_by, last_used_at}`
        #[arg(long)]
        json: bool,
    },
    /// End a token and its sessions, on the next request to any server
    Revoke {
        /// Its name
        name: String,
    },
}

fn parse_scope(s: &str) -> Result<TokenScope, String> {
    s.parse()
        .map_err(|_| format!("`{s}`: one of read, operate, admin"))
}

pub async fn run(sub: Sub, db: Option<PathBuf>, printer: &Printer) -> anyhow::Result<ExitStatus> {
    match sub {
        Sub::Add { name, scope, json } => {
            let mut store = super::open(db).await?;
            let added = tokens::add(&mut store, &name, scope, &Actor::cli()).await?;
            if json {
                printer.json(&TokenAdded {
                    view: TokenView::from(&added.row),
                    token: &added.token,
                });
            } else {
                printer.info(&format!(
                    "token `{name}` ({scope}) added; it is shown this once, the database keeps only its hash:"
                ));
                printer.data(&added.token);
            }
            Ok(ExitStatus::Success)
        }
        Sub::List { json } => {
            let store = super::open_existing(db).await?;
            let rows = tokens::list(&store).await?;
            let views: Vec<TokenView> = rows.iter().map(TokenView::from).collect();
            if json {
                printer.json(&views);
                return Ok(ExitStatus::Success);
            }
            if views.is_empty() {
                printer.info(
                    "no named tokens (`wf serve token add NAME --scope read|operate|admin` makes one; the server's own is `default`)",
                );
                return Ok(ExitStatus::Success);
            }
            let rows: Vec<Vec<Cell>> = views
                .iter()
                .map(|v| {
                    vec![
                        Cell::new(v.name),
                        Cell::new(v.scope.as_str()),
                        Cell::new(v.created_at.to_string()),
                        Cell::new(v.created_by.to_string()),
                        Cell::new(
                            v.last_used_at
                                .map_or("never".to_string(), |t| t.to_string()),
                        ),
                    ]
                })
                .collect();
            let (table, _) = printer.fitted(
                &["NAME", "SCOPE", "CREATED", "BY", "LAST USED"],
                rows,
                Some(3),
                12,
                &[3],
            );
            printer.data(&table.to_string());
            Ok(ExitStatus::Success)
        }
        Sub::Revoke { name } => {
            let mut store = super::open_existing(db).await?;
            tokens::revoke(&mut store, &name, &Actor::cli()).await?;
            printer.info(&format!(
                "token `{name}` revoked: every server refuses it, and ends its sessions, from its next request"
            ));
            Ok(ExitStatus::Success)
        }
    }
}
