//! What every page shares: the document around it (head, navigation,
//! the stylesheet and script), the sign-in page a browser without the
//! session cookie gets, and the embedded assets.

use super::super::App;
use super::super::query::{Form, Text};
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{DOCTYPE, Markup, html};
use serde::Deserialize;

/// The stylesheet and the script, compiled into the binary.
const CSS: &str = include_str!("assets/wf.css");
const JS: &str = include_str!("assets/wf.js");
const ICON: &str = include_str!("assets/icon.svg");

/// Which part of the navigation is the current page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Instances,
    Workflows,
    Queues,
    Database,
    None,
}

/// A whole page: `title`, the navigation, `body`.
pub fn page(title: &str, nav: Nav, body: Markup) -> Markup {
    let link = |href: &str, label: &str, me: Nav| {
        html! {
            a href=(href) aria-current=[(nav == me).then_some("page")] { (label) }
        }
    };
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                title { (title) " · wf" }
                link rel="icon" href="/assets/icon.svg" type="image/svg+xml";
                link rel="stylesheet" href="/assets/wf.css";
                script src="/assets/wf.js" defer {}
            }
            body {
                header.top {
                    a.brand href="/" { "wf" }
                    nav aria-label="main" {
                        (link("/", "Instances", Nav::Instances))
                        (link("/workflows", "Workflows", Nav::Workflows))
                        (link("/queues", "Queues", Nav::Queues))
                        (link("/database", "Database", Nav::Database))
                    }
                }
                main { (body) }
                // After the page's own forms: their submit button comes
                // first in the document.
                @if nav != Nav::None {
                    footer.bottom {
                        form.signout method="post" action="/signout" {
                            button type="submit" { "Sign out" }
                        }
                    }
                }
            }
        }
    }
}

/// `GET /assets/{file}`: the stylesheet or the script.
pub async fn asset(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "wf.css" => (CSS, "text/css; charset=utf-8"),
        "wf.js" => (JS, "text/javascript; charset=utf-8"),
        "icon.svg" => (ICON, "image/svg+xml"),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(kind)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

/// The page a browser without the session gets (401): the token, pasted
/// or given by the sign-in link `wf serve` printed.
pub fn signin_body(next: &str, wrong: bool) -> Markup {
    html! {
        h1 { "Sign in" }
        @if wrong { p.notice.error { "That is not this server's token." } }
        p { "Open the sign-in link " code { "wf serve" } " printed when it made its token, or paste the token (" code { "$XDG_STATE_HOME/wf/serve-token" } ", or " code { "WF_SERVE_TOKEN" } ")." }
        form.stack method="post" action="/signin" {
            label { "Token" input type="password" name="token" autocomplete="current-password" required autofocus; }
            input type="hidden" name="next" value=(next);
            div { button.primary type="submit" { "Sign in" } }
        }
    }
}

/// `GET /signin`.
pub async fn signin_page() -> Response {
    (
        StatusCode::OK,
        axum::response::Html(page("Sign in", Nav::None, signin_body("/", false)).into_string()),
    )
        .into_response()
}

/// The sign-in form.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SigninForm {
    #[serde(default)]
    token: Text,
    #[serde(default)]
    next: Option<Text>,
}

/// `POST /signin` (`token`, `next`): the session cookie, then `next`.
pub async fn signin(State(app): State<App>, Form(form): Form<SigninForm>) -> Response {
    let token = form.token.0;
    let next = form.next.map_or_else(|| "/".to_string(), |n| n.0);
    // Only a path of this site: never a redirect elsewhere.
    let next = super::super::auth::local_next(&next).to_string();
    let cookie = match super::super::auth::start_session(&app, &token).await {
        Ok(Some(c)) => c,
        Ok(None) => {
            return (
                StatusCode::UNAUTHORIZED,
                axum::response::Html(
                    page("Sign in", Nav::None, signin_body(&next, true)).into_string(),
                ),
            )
                .into_response();
        }
        Err(e) => return super::error_page(&e),
    };
    let mut r = Redirect::to(&next).into_response();
    if let Ok(v) = cookie.parse() {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}
