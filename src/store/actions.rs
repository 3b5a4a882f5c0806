//! Who did what, and who may (SPEC §3 Actions are recorded, §8 Tokens and
//! sessions), over both backends: the actions recorded with the changes
//! they made (each in the transaction of its change: the store methods
//! that change an instance or the registry take the [`ActionRow`] to
//! write), `wf serve`'s named tokens (kept as hashes only) and its
//! browser sessions (kept as hashes of their ids).

use super::{Result, Store};
use crate::vocab::{ActionKind, Actor, InstanceId, Timestamp, TokenScope};

/// A recorded action: what was done, to which instance (none for the
/// registry, tokens and a prune's batch), by whom, when, and its detail
/// (the event's name, the step restarted from, the reason given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionRow {
    pub instance: Option<InstanceId>,
    pub at: Timestamp,
    pub action: ActionKind,
    pub actor: Actor,
    pub detail: String,
}

impl ActionRow {
    /// `action` on instance `id` by `actor`, now.
    pub fn on(
        id: &InstanceId,
        action: ActionKind,
        actor: &Actor,
        detail: impl Into<String>,
    ) -> Self {
        ActionRow {
            instance: Some(id.clone()),
            at: Timestamp::now(),
            action,
            actor: actor.clone(),
            detail: detail.into(),
        }
    }

    /// `action` on no instance (the registry, tokens, a prune) by `actor`, now.
    pub fn global(action: ActionKind, actor: &Actor, detail: impl Into<String>) -> Self {
        ActionRow {
            instance: None,
            at: Timestamp::now(),
            action,
            actor: actor.clone(),
            detail: detail.into(),
        }
    }
}

/// The detail of a child's start: the parent and the step that made it.
pub fn child_start_detail(parent: &super::ParentRef) -> String {
    format!(
        "by {} step {} attempt {}",
        parent.id, parent.key, parent.attempt
    )
}

/// The action a batch of `wf prune` records: how many instances, of which
/// statuses, last changed before when.
pub fn pruned(by: &Actor, instances: u64, before: &str, statuses: &str) -> ActionRow {
    ActionRow::global(
        ActionKind::Prune,
        by,
        format!("{instances} instances ({statuses}) last changed before {before}"),
    )
}

/// The detail of a schedule's start: the fire time it is for.
pub fn fire_detail(fire_ms: i64) -> String {
    format!("fire time {}", Timestamp::from_ms(fire_ms))
}

/// A named token of `wf serve`: its hash (SHA-256 of the token, hex),
/// never the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRow {
    pub name: String,
    pub hash: String,
    pub scope: TokenScope,
    pub created_at: Timestamp,
    pub created_by: Actor,
    /// When a request last used it (kept at most once a minute per
    /// server: never a write per request).
    pub last_used_at: Option<Timestamp>,
}

/// A browser session: the hash of its id (the cookie holds the id), the
/// token that signed it in (name and hash: a token revoked, or revoked and
/// added again under its name, ends it), when it was last used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    pub hash: String,
    pub token: String,
    pub token_hash: String,
    pub created_at: Timestamp,
    /// Unix ms of its last use (its idle expiry counts from here).
    pub seen_ms: i64,
}

/// A session found by its id's hash, with the scope of the token that
/// made it as the database has it now (`None`: that token is gone, or is
/// not a named one: `default` lives in the server's configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundSession {
    pub row: SessionRow,
    pub scope: Option<TokenScope>,
}

impl Store {
    /// The actions recorded on instance `id`, oldest first.
    pub async fn actions(&self, id: &InstanceId) -> Result<Vec<ActionRow>> {
        each!(self.actions(id))
    }

    /// The actions on no instance (the registry, tokens, prunes), newest
    /// first, at most `limit`.
    pub async fn global_actions(&self, limit: usize) -> Result<Vec<ActionRow>> {
        each!(self.global_actions(limit))
    }

    /// Adds token `row` and records `action`, in one transaction; false
    /// (nothing written) when its name is taken.
    pub async fn add_token(&mut self, row: &TokenRow, action: &ActionRow) -> Result<bool> {
        each!(self.add_token(row, action))
    }

    /// Every named token, by name.
    pub async fn tokens(&self) -> Result<Vec<TokenRow>> {
        each!(self.tokens())
    }

    /// The token whose hash is `hash`.
    pub async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRow>> {
        each!(self.token_by_hash(hash))
    }

    /// Removes token `name` and ends its sessions, recording `action`, in
    /// one transaction; false when there was none.
    pub async fn revoke_token(&mut self, name: &str, action: &ActionRow) -> Result<bool> {
        each!(self.revoke_token(name, action))
    }

    /// Keeps when tokens were last used: `(name, at)`, each moved forward
    /// only.
    pub async fn touch_tokens(&mut self, used: &[(String, Timestamp)]) -> Result<()> {
        each!(self.touch_tokens(used))
    }

    /// Records a new session.
    pub async fn add_session(&mut self, row: &SessionRow) -> Result<()> {
        each!(self.add_session(row))
    }

    /// The session whose id hashes to `hash`, if it was used after
    /// `idle_since_ms` (unix ms); an idle one is deleted.
    pub async fn session(
        &mut self,
        hash: &str,
        idle_since_ms: i64,
    ) -> Result<Option<FoundSession>> {
        each!(self.session(hash, idle_since_ms))
    }

    /// Keeps when sessions were last used: `(hash, ms)`, each moved
    /// forward only.
    pub async fn touch_sessions(&mut self, seen: &[(String, i64)]) -> Result<()> {
        each!(self.touch_sessions(seen))
    }

    /// Ends session `hash` (`POST /signout`); and every session idle since
    /// before `idle_since_ms`.
    pub async fn end_session(&mut self, hash: &str, idle_since_ms: i64) -> Result<()> {
        each!(self.end_session(hash, idle_since_ms))
    }
}
