//! `wf serve token list --json` (and the API's `GET /api/v1/tokens`): a
//! token's name, scope and times, never its hash; `token add --json` (and
//! `POST /api/v1/tokens`): the new token's text, shown this once.

use crate::store::TokenRow;
use crate::vocab::{Actor, Timestamp, TokenScope};

/// A named token: `{name, scope, created_at, created_by, last_used_at}`.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct TokenView<'a> {
    pub name: &'a str,
    pub scope: TokenScope,
    pub created_at: Timestamp,
    pub created_by: &'a Actor,
    /// When a request last used it (kept at most once a minute a server).
    #[schema(required)]
    pub last_used_at: Option<Timestamp>,
}

impl<'a> From<&'a TokenRow> for TokenView<'a> {
    fn from(t: &'a TokenRow) -> Self {
        TokenView {
            name: &t.name,
            scope: t.scope,
            created_at: t.created_at,
            created_by: &t.created_by,
            last_used_at: t.last_used_at,
        }
    }
}

/// A token just made: its view and its text (`token`), shown once.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct TokenAdded<'a> {
    #[serde(flatten)]
    pub view: TokenView<'a>,
    pub token: &'a str,
}
