//! `GET /instances/{id}/compare?a=A&b=B`: two runs of an instance side by
//! side, as `wf inspect ID --compare A,B` prints them: a row per step
//! either ran, what each run did of it (its attempts there, the last one's
//! outcome and error, how long), the rows that differ marked.

use super::super::App;
use super::super::api::CompareParams;
use super::super::params::instance_ref;
use super::super::query::PageQuery;
use super::list::{badge, short};
use super::shell::{Nav, page};
use axum::extract::{Path, State};
use axum::response::Response;
use maud::{Markup, html};

pub async fn page_of(
    State(app): State<App>,
    Path(id): Path<String>,
    PageQuery(p): PageQuery<CompareParams>,
) -> Response {
    let (a, b) = (p.a.0, p.b.0);
    let read = match instance_ref(&id) {
        Err(e) => Err(e),
        Ok(id) => {
            app.db
                .run(move |l| async move {
                    let c = l.conn().await?;
                    let id = c.resolve_id(&id).await?;
                    Ok(c.view(&id, true).await?)
                })
                .await
        }
    };
    super::respond(read.and_then(|view| {
        let cmp = super::super::api::compared(&view, a, b)?;
        let id = &view.instance.id;
        let side = |r: &crate::views::compare::RunSide<'_>| {
            html! {
                "Run " (r.number) " " (badge(r.outcome.map_or("running", |o| o.as_str())))
                @if let Some(h) = r.definition_hash { " " span.muted.mono { (short(h)) } }
            }
        };
        let cell = |u: &Option<crate::views::UnitInRun<'_>>| -> Markup {
            html! {
                @match u {
                    None => { span.muted { "not run" } }
                    Some(u) => {
                        (badge(u.outcome.map_or("running", |o| o.as_str())))
                        " ×" (u.attempts)
                        @if let Some(t) = &u.error_type { " " code { (t) } }
                        @if let Some(m) = u.took_ms { " · " (crate::workflow::duration::human(std::time::Duration::from_millis(m as u64))) }
                        @if let Some(m) = u.error_message { br; span.muted { (m) } }
                    }
                }
            }
        };
        let body = html! {
            h1 { "Runs " (a) " and " (b) " of " span.mono { (short(id)) } }
            div.table-wrap { table.compare {
                thead { tr { th { "Step" } th { (side(&cmp.a)) } th { (side(&cmp.b)) } } }
                tbody {
                    @for r in &cmp.steps {
                        tr.differs[r.differs] {
                            td.mono { (r.step) @if r.differs { " " span.muted title="the two runs differ" { "≠" } } }
                            td { (cell(&r.a)) }
                            td { (cell(&r.b)) }
                        }
                    }
                }
            } }
            p { a href=(format!("/instances/{id}")) { "← back to the instance" } }
        };
        Ok(page(&format!("Runs {a} and {b}"), Nav::Instances, body))
    }))
}

/// The instance page's form that opens the comparison (two runs or more):
/// the last two runs chosen.
pub fn form(id: &str, runs: &[crate::store::RunRow]) -> Markup {
    let n = runs.len();
    html! {
        @if n > 1 {
            form.compare-form method="get" action=(format!("/instances/{id}/compare")) {
                "Compare run "
                select name="a" aria-label="first run" {
                    @for r in runs { option value=(r.number) selected[r.number == runs[n - 2].number] { (r.number) } }
                }
                " with run "
                select name="b" aria-label="second run" {
                    @for r in runs { option value=(r.number) selected[r.number == runs[n - 1].number] { (r.number) } }
                }
                " " button type="submit" { "Compare" }
            }
        }
    }
}
