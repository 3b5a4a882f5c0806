//! `GET /database`: the history's check (`wf db check`), each problem with
//! a link to the instance it hurts, and what an operator does with a whole
//! history (docs/operations.md: backups, moving to PostgreSQL).

use super::super::App;
use super::list::short;
use super::shell::{Nav, page};
use crate::views::CheckView;
use axum::extract::State;
use axum::response::Response;
use maud::html;

pub async fn page_of(State(app): State<App>) -> Response {
    let checked = app
        .db
        .run(|l| async move {
            let c = l.conn().await?;
            let found = crate::engine::db::check::check(&c).await?;
            let actions = crate::engine::db::actions(&c, 20).await?;
            Ok((c.describe(), found, actions))
        })
        .await;
    let now = crate::vocab::Timestamp::now();
    super::respond(checked.map(|(db, found, actions)| {
        let view = CheckView::new(&found);
        let body = html! {
            h1 { "Database" }
            p.muted { code { (db) } }
            h2 { "Check" }
            @if view.sound {
                p.notice role="status" { "Sound: the database's integrity and wf's invariants hold." }
            } @else {
                p.notice role="alert" { (view.problems.len()) " problem" @if view.problems.len() != 1 { "s" } " found." }
                div.table-wrap { table {
                    thead { tr { th { "Check" } th { "Instance" } th { "Detail" } } }
                    tbody {
                        @for f in view.problems {
                            tr {
                                td { (f.check) }
                                td { @if let Some(id) = &f.instance { a.mono href=(format!("/instances/{id}")) { (short(id)) } } @else { "-" } }
                                td { (f.detail) }
                            }
                        }
                    }
                } }
            }
            h2 #actions { "Actions" }
            @if actions.is_empty() {
                p.muted { "No action on the registry, the tokens or the history was recorded." }
            } @else {
                p.muted { "Who did what to the registry, the tokens and the history as a whole (each batch of " code { "wf prune" } "), newest first; " code { "wf db actions" } " lists them too." }
                div.table-wrap { table.actions {
                    thead { tr { th { "Action" } th { "By" } th { "At" } th { "Detail" } } }
                    tbody {
                        @for a in &actions {
                            tr {
                                td { (a.action.as_str()) }
                                td { code { (a.actor) } }
                                td.time { (super::list::when(a.at, now)) }
                                td { (a.detail) }
                            }
                        }
                    }
                } }
            }
            h2 { "Backups and moving" }
            p { "From a shell where " code { "WF_DB" } " names this database: " code { "wf db backup DEST" } " writes a consistent copy while wf runs; " code { "wf db copy --to DB" } " moves the whole history to another database (SQLite to PostgreSQL and back); " code { "wf prune --archive FILE" } " keeps what it deletes, and " code { "wf db import FILE" } " brings it back." }
        };
        page("Database", Nav::Database, body)
    }))
}
