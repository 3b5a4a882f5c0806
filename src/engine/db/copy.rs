//! `wf db copy --to DB`: the whole history of one database moved into
//! another (SQLite to PostgreSQL and back) by `store::transfer::copy`: one
//! snapshot of the source, 500 instances a transaction of the target. The leases are cleared on the way, so the target's workers take
//! up what was in flight (a running instance without a holder is an
//! orphan; a sleeping or waiting one is due as it was).
//!
//! A target that holds history is refused, unless the copy is continued
//! (`--resume`): then the instances it holds are skipped, each having been
//! written whole or not at all, and a target holding an instance the
//! source does not is refused as another history.

use super::super::EngineError;
use crate::store::Store;
pub use crate::store::transfer::Copied;

/// Copies the history of `source` into the database at `to` (opened, or
/// made, here); a `to` that names `source` itself is refused. What
/// `wf db copy --to DB` and the API's copy do.
pub async fn copy_into(
    source: &Store,
    to: &crate::store::Location,
    resume: bool,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(Copied, String), EngineError> {
    if let crate::store::Location::Sqlite(p) = to
        && p.as_os_str().is_empty()
    {
        return Err(EngineError::Input("the target names no database".into()));
    }
    let mut target = Store::open(to).await?;
    if source.describe() == target.describe() {
        return Err(EngineError::Input(format!(
            "the target is the database copied from ({})",
            source.describe()
        )));
    }
    let copied = copy(source, &mut target, resume, progress).await?;
    Ok((copied, target.describe()))
}

/// Copies the history of `source` into `target`; see the module's doc.
/// `progress` hears how many instances are done of how many.
pub async fn copy(
    source: &Store,
    target: &mut Store,
    resume: bool,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Copied, EngineError> {
    let held: i64 = target.portable_counts().await?.iter().map(|(_, n)| n).sum();
    if held > 0 && !resume {
        return Err(EngineError::HoldsHistory {
            target: target.describe(),
            rows: held,
        });
    }
    if resume {
        refuse_other_history(source, target).await?;
    }
    Ok(crate::store::transfer::copy(source, target, resume, true, progress).await?)
}

/// Refuses a target that holds an instance the source does not: the copy
/// it would continue is not of this history.
async fn refuse_other_history(source: &Store, target: &Store) -> Result<(), EngineError> {
    let mut after: Option<String> = None;
    loop {
        let ids = target.portable_ids(after.as_deref(), 1000).await?;
        let Some(last) = ids.last().cloned() else {
            return Ok(());
        };
        let known = source.portable_present(&ids).await?;
        if let Some(other) = ids.iter().find(|i| !known.contains(i)) {
            return Err(EngineError::Input(format!(
                "{} holds instance {other}, which {} does not: it is not a copy of this history",
                target.describe(),
                source.describe()
            )));
        }
        after = Some(last);
    }
}
