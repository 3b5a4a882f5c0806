//! `wf workflow add FILE | rm NAME | list`: the registry of workflows, the
//! definitions `wf serve` starts by name (`POST /api/v1/workflows/NAME/instances`)
//! and by webhook (`on.webhook`), and whose `on.schedule` `wf worker` fires.
//! Registering pins the definition: what runs is the text registered,
//! whatever the file says now. `wf schedule add` registers the same way.

use crate::engine::registry;
use crate::exit::ExitStatus;
use crate::printer::Printer;
use crate::views::WorkflowView;
use crate::workflow::Workflow;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

#[derive(Debug, clap::Subcommand)]
pub enum Sub {
    /// Register a workflow file under its `name`, with its triggers (again: replace it)
    Add {
        /// The workflow file
        file: PathBuf,
        /// The workflow as registered, as JSON on stdout
        #[arg(long)]
        json: bool,
    },
    /// Remove a registered workflow and its schedules
    Rm {
        /// The workflow's name
        name: String,
    },
    /// Registered workflows and their triggers
    List {
        /// An array of `{name, workflow_path, definition_hash, registered_at, inputs, schedules, webhook}`
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(args: Args, db: Option<PathBuf>, printer: &Printer) -> anyhow::Result<ExitStatus> {
    match args.command {
        Sub::Add { file, json } => {
            let wf = Workflow::load(&file)?;
            let mut store = super::open(db).await?;
            let reg = registry::register(
                &mut store,
                &wf,
                &file,
                &crate::vocab::Actor::cli(),
                crate::vocab::ActionKind::WorkflowAdd,
            )
            .await?;
            if json {
                printer.json(&WorkflowView::new(&reg.row, Some(&wf), &reg.schedules));
                return Ok(ExitStatus::Success);
            }
            let mut triggers = Vec::new();
            if !reg.schedules.is_empty() {
                triggers.push(format!(
                    "{} schedule{}",
                    reg.schedules.len(),
                    if reg.schedules.len() == 1 { "" } else { "s" }
                ));
            }
            if let Some(h) = &wf.webhook {
                triggers.push(format!("webhook POST /hooks/{}", h.name));
                if std::env::var_os(&h.secret).is_none() {
                    printer.info(&format!(
                        "note: `wf serve` verifies its deliveries with the key in `{}`: set it where the server runs (unset here)",
                        h.secret
                    ));
                }
            }
            printer.info(&format!(
                "registered {} ({}){}",
                wf.name,
                &wf.hash[..12],
                if triggers.is_empty() {
                    String::new()
                } else {
                    format!(": {}", triggers.join(", "))
                }
            ));
            Ok(ExitStatus::Success)
        }
        Sub::Rm { name } => {
            let mut store = super::open_existing(db).await?;
            registry::unregister(&mut store, &name, &crate::vocab::Actor::cli()).await?;
            printer.info(&format!("removed {name}"));
            Ok(ExitStatus::Success)
        }
        Sub::List { json } => {
            let store = super::open_existing(db).await?;
            let listing = registry::listing(&store).await?;
            let views = WorkflowView::all(&listing);
            if json {
                printer.json(&views);
                return Ok(ExitStatus::Success);
            }
            if views.is_empty() {
                printer.info("no workflows are registered (`wf workflow add FILE` registers one)");
                return Ok(ExitStatus::Success);
            }
            let mut table = printer.table();
            table.set_header([
                "NAME",
                "TRIGGERS",
                "LAST",
                "OK 7D",
                "P50",
                "P95",
                "REGISTERED",
                "FILE",
            ]);
            for v in &views {
                let mut triggers: Vec<String> = v
                    .schedules
                    .iter()
                    .map(|s| match s.timezone {
                        Some(tz) => format!("{} ({tz})", s.spec),
                        None => s.spec.to_string(),
                    })
                    .collect();
                if let Some(h) = &v.webhook {
                    triggers.push(h.path.clone());
                }
                let dash = || "-".to_string();
                let ms = |m: Option<i64>| {
                    m.map_or_else(dash, |m| {
                        crate::workflow::duration::human(std::time::Duration::from_millis(
                            m.max(0) as u64
                        ))
                    })
                };
                let st = v.stats.as_ref();
                table.add_row(vec![
                    v.name.to_string(),
                    if triggers.is_empty() {
                        "-".into()
                    } else {
                        triggers.join(", ")
                    },
                    st.and_then(|s| s.last_instance.as_ref())
                        .map_or_else(dash, |l| {
                            format!("{} {}", l.status.as_str(), printer.when(l.created_at))
                        }),
                    st.filter(|s| s.completed + s.failed > 0)
                        .map_or_else(dash, |s| {
                            format!("{}/{}", s.completed, s.completed + s.failed)
                        }),
                    ms(st.and_then(|s| s.p50_ms)),
                    ms(st.and_then(|s| s.p95_ms)),
                    printer.when(v.registered_at),
                    v.workflow_path.to_string(),
                ]);
            }
            printer.keep_columns(&mut table, Some(1));
            printer.data(&table.to_string());
            Ok(ExitStatus::Success)
        }
    }
}
