//! `GET /database`: the history's check (`wf db check`), each problem with
//! a link to the instance it hurts, and what an operator does with a whole
//! history (docs/operations.md: backups, moving to PostgreSQL).

use super::super::App;
use super::super::error::ApiError;
use super::super::query::{Form, Text};
use super::list::short;
use super::shell::{Nav, page};
use crate::views::CheckView;
use axum::extract::State;
use axum::response::Response;
use maud::html;

pub async fn page_of(
    State(app): State<App>,
    axum::extract::Extension(who): axum::extract::Extension<super::super::auth::Principal>,
) -> Response {
    let admin = who.scope >= crate::vocab::TokenScope::Admin;
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
                (super::instance::actions_table(&actions, now))
            }
            h2 { "Backups and moving" }
            @if admin {
                div.stack {
                    p { a.button href="/api/v1/db/backup" download { "Download a backup" } " a consistent copy of the whole history, made now while wf runs: a SQLite file any wf opens with " code { "--db" } "." }
                    form.stack method="post" action="/database/copy" {
                        label { "Copy the whole history to " input type="text" name="to" placeholder="postgres://user@host/db or a path on the server" required; }
                        label { input type="checkbox" name="resume" value="1"; " continue an interrupted copy" }
                        div { button type="submit" { "Copy…" } }
                    }
                    form.stack data-upload="/api/v1/db/import" {
                        label { "Bring back an archive of " code { "wf prune --archive" } " " input type="file" name="archive" required; }
                        div { button type="submit" { "Import" } }
                        p.muted data-said aria-live="polite" {}
                    }
                }
            }
            p { "From a shell where " code { "WF_DB" } " names this database: " code { "wf db backup DEST" } " writes a consistent copy while wf runs; " code { "wf db copy --to DB" } " moves the whole history to another database (SQLite to PostgreSQL and back); " code { "wf prune --archive FILE" } " keeps what it deletes, and " code { "wf db import FILE" } " brings it back." }
        };
        page("Database", Nav::Database, body)
    }))
}

/// The copy form.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CopyForm {
    #[serde(default)]
    to: Text,
    #[serde(default)]
    resume: Option<Text>,
}

/// `POST /database/copy` (`admin`): the whole history copied into another
/// database (`wf db copy --to`); the page says what was copied, or why not.
pub async fn copy(State(app): State<App>, Form(form): Form<CopyForm>) -> Response {
    let to = form.to.0.trim().to_string();
    let resume = form.resume.is_some_and(|r| !r.0.is_empty());
    let copied = app
        .db
        .run(move |l| async move {
            if to.is_empty() {
                return Err(ApiError::bad_request("name the database to copy to"));
            }
            let location = crate::store::Location::parse(std::ffi::OsStr::new(&to))
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
            let c = l.conn().await?;
            Ok(crate::engine::db::copy::copy_into(&c, &location, resume, &mut |_, _| {}).await?)
        })
        .await;
    let body = match copied {
        Ok((c, target)) => html! {
            h1 { "Copied" }
            p.notice role="status" {
                "Copied " (c.written) " of " (c.instances) " instance(s) to " code { (target) }
                @if c.skipped > 0 { " (" (c.skipped) " there already)" } "."
            }
            p { a href="/database" { "Back to the database" } }
        },
        Err(e) => html! {
            h1 { "Not copied" }
            p.notice.error role="alert" { (e.message) }
            p { a href="/database" { "Back to the database" } }
        },
    };
    super::respond(Ok(page("Database", Nav::Database, body)))
}
