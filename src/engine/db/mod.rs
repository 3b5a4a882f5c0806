//! `wf db`: what an operator does with a whole history. `copy` moves it
//! to another database (SQLite to PostgreSQL and back), `backup` makes a
//! consistent copy of a live one, `check` finds what is wrong in one,
//! `actions` lists who did what to the registry, the tokens and the
//! history as a whole (prunes). Each is one use case with a typed
//! outcome; `commands/db.rs` renders it.

pub mod archive;
pub mod backup;
pub mod check;
pub mod copy;

/// The newest `limit` actions on no instance (workflow and schedule
/// registrations, tokens, each batch of `wf prune`), newest first.
pub async fn actions(
    store: &crate::store::Store,
    limit: usize,
) -> Result<Vec<crate::store::ActionRow>, super::EngineError> {
    Ok(store.global_actions(limit).await?)
}
