//! `wf db check`: what is wrong with a history, each problem named with
//! the instance it hurts (`store::Store::check_rows`: the backend's own
//! integrity check and wf's invariants over the rows), and the one
//! invariant only the engine can judge: no lease still runs for a holder
//! on this host whose process is gone (`lease::holder_alive`).

use super::super::{EngineError, lease};
use crate::store::{Finding, Store};
use crate::vocab::Timestamp;

/// Everything wrong with `store`'s history; empty when sound.
pub async fn check(store: &Store) -> Result<Vec<Finding>, EngineError> {
    store
        .snapshot(async |s: &Store| -> Result<Vec<Finding>, EngineError> {
            let mut found = s.check_rows().await?;
            let now = Timestamp::now().ms();
            for (id, holder, expires) in s.leases().await? {
                if expires.is_some_and(|e| e > now) && !lease::holder_alive(&holder) {
                    found.push(Finding {
                        check: "lease held by a dead holder",
                        instance: Some(id),
                        detail: format!(
                            "held by {holder}, a process of this host that is gone (a worker or `wf resume` takes it over)"
                        ),
                    });
                }
            }
            Ok(found)
        })
        .await
}
