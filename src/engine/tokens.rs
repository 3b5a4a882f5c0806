//! `wf serve`'s named tokens and browser sessions (SPEC §8 Tokens and
//! sessions), as use cases both interfaces call: `wf serve token
//! add|list|revoke` and the API's token routes add, list and revoke; the
//! server's middleware finds the token or session a request carries. A
//! token is shown once, when made, and kept only as its SHA-256 (256
//! random bits need no slow hash, and a hash is found by index), so every
//! server of a fleet honours it and a revocation is seen by the next
//! request anywhere. A session is a random id of its own in the cookie
//! (never the token), kept as its hash with the token that signed it in.

use super::EngineError;
use crate::store::{ActionRow, FoundSession, SessionRow, Store, TokenRow};
use crate::vocab::{ActionKind, Actor, Timestamp, TokenScope};
use sha2::{Digest, Sha256};

/// The name of the server's own token (`WF_SERVE_TOKEN`, the token file):
/// an `admin` token no command adds or revokes.
pub const DEFAULT: &str = "default";

/// What a token's text starts with: a token found in a log or a paste is
/// known for what it is.
pub const PREFIX: &str = "wft_";

/// The SHA-256 of `secret` (a token, a session id), as hex.
pub fn hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// 32 random bytes from the operating system, as hex.
fn random_hex() -> Result<String, EngineError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| EngineError::Internal(format!("no randomness from the system: {e}")))?;
    Ok(hex::encode(bytes))
}

/// Why `name` cannot name a token, if it cannot.
pub fn name_problem(name: &str) -> Option<String> {
    if name == DEFAULT {
        return Some(format!(
            "`{DEFAULT}` is the server's own token (WF_SERVE_TOKEN or its token file): choose another name"
        ));
    }
    let ok = (1..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric());
    (!ok).then(|| {
        format!("token name `{name}`: 1 to 63 letters, digits, `-`, `_` or `.`, starting with a letter or digit")
    })
}

/// A token made by [`add`]: its row, and its text, to show once.
#[derive(Debug)]
pub struct Added {
    pub row: TokenRow,
    pub token: String,
}

/// Makes token `name` with `scope`, recorded as added by `by`; refused
/// when the name is not one a token can have or is taken.
pub async fn add(
    store: &mut Store,
    name: &str,
    scope: TokenScope,
    by: &Actor,
) -> Result<Added, EngineError> {
    if name == DEFAULT {
        return Err(EngineError::Refused(name_problem(name).unwrap_or_default()));
    }
    if let Some(why) = name_problem(name) {
        return Err(EngineError::Input(why));
    }
    let token = format!("{PREFIX}{}", random_hex()?);
    let row = TokenRow {
        name: name.to_string(),
        hash: hash(&token),
        scope,
        created_at: Timestamp::now(),
        created_by: by.clone(),
        last_used_at: None,
    };
    let action = ActionRow::global(ActionKind::TokenAdd, by, format!("{name} ({scope})"));
    if !store.add_token(&row, &action).await? {
        return Err(EngineError::Refused(format!(
            "a token named `{name}` exists: revoke it first"
        )));
    }
    Ok(Added { row, token })
}

/// Every named token, by name (hashes only).
pub async fn list(store: &Store) -> Result<Vec<TokenRow>, EngineError> {
    Ok(store.tokens().await?)
}

/// Revokes token `name` and ends its sessions, recorded as done by `by`.
pub async fn revoke(store: &mut Store, name: &str, by: &Actor) -> Result<(), EngineError> {
    let action = ActionRow::global(ActionKind::TokenRevoke, by, name);
    if store.revoke_token(name, &action).await? {
        return Ok(());
    }
    let names: Vec<String> = store.tokens().await?.into_iter().map(|t| t.name).collect();
    Err(EngineError::NoSuch(if names.is_empty() {
        format!("no token is named `{name}` (none was added)")
    } else {
        format!("no token is named `{name}` (tokens: {})", names.join(", "))
    }))
}

/// The named token whose text is `token`, if one is.
pub async fn find(store: &Store, token: &str) -> Result<Option<TokenRow>, EngineError> {
    if !token.starts_with(PREFIX) {
        return Ok(None);
    }
    Ok(store.token_by_hash(&hash(token)).await?)
}

/// A new session for the token named `token` whose text hashes to
/// `token_hash`: its id, for the cookie (only its hash is kept).
pub async fn open_session(
    store: &mut Store,
    token: &str,
    token_hash: &str,
) -> Result<String, EngineError> {
    let id = random_hex()?;
    let now = Timestamp::now();
    store
        .add_session(&SessionRow {
            hash: hash(&id),
            token: token.to_string(),
            token_hash: token_hash.to_string(),
            created_at: now,
            seen_ms: now.ms(),
        })
        .await?;
    Ok(id)
}

/// The session whose id is `id`, if it was used within `idle` (an idle
/// one ends here).
pub async fn session(
    store: &mut Store,
    id: &str,
    idle: std::time::Duration,
) -> Result<Option<FoundSession>, EngineError> {
    Ok(store.session(&hash(id), idle_since(idle)).await?)
}

/// Unix ms `idle` ago: a session last used before it is over.
fn idle_since(idle: std::time::Duration) -> i64 {
    let idle_ms = i64::try_from(idle.as_millis()).unwrap_or(i64::MAX);
    Timestamp::now().ms().saturating_sub(idle_ms)
}

/// Ends session `id` (`POST /signout`), and every session idle longer
/// than `idle`.
pub async fn end_session(
    store: &mut Store,
    id: &str,
    idle: std::time::Duration,
) -> Result<(), EngineError> {
    Ok(store.end_session(&hash(id), idle_since(idle)).await?)
}

#[cfg(test)]
mod tests {
    use super::{DEFAULT, hash, name_problem};

    #[test]
    fn names_are_words_and_default_is_the_servers() {
        for ok in ["ci", "deploy-bot", "ana.p", "r2_d2", &"a".repeat(63)] {
            assert_eq!(name_problem(ok), None, "{ok}");
        }
        for bad in ["", DEFAULT, "-x", "a b", "é", &"a".repeat(64), "a/b"] {
            assert!(name_problem(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn a_hash_is_sha256_hex() {
        assert_eq!(
            hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
