//! What `wf db check` asks of a database: the backend's own integrity
//! check (SQLite's `integrity_check` and `foreign_key_check`; on
//! PostgreSQL, that every table and column of the history is there, at
//! the schema version this wf knows), then wf's invariants over the rows,
//! each as a statement both backends run the same that names the instance
//! a problem hurts: every attempt has its step and its run, every step,
//! run and event its instance, every instance, registered workflow and
//! schedule its pinned definition, and every definition the definitions
//! of the workflows it calls. Whether a lease's holder is alive is the
//! engine's question (`engine::db::check`): here are the leases.

use super::{Result, Store};

/// One thing wrong, and the instance it hurts if it is one's.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct Finding {
    pub check: &'static str,
    pub instance: Option<String>,
    pub detail: String,
}

/// wf's invariants over the rows: a name, and a statement whose rows are
/// (instance, what is wrong) for each breach.
const INVARIANTS: &[(&str, &str)] = &[
    (
        "attempt without its step",
        "SELECT a.instance_id, 'step ' || a.step_key || ' attempt ' || a.attempt FROM attempts a \
         WHERE NOT EXISTS (SELECT 1 FROM steps s WHERE s.instance_id = a.instance_id AND s.key = a.step_key)",
    ),
    (
        "attempt without its run",
        "SELECT a.instance_id, 'step ' || a.step_key || ' attempt ' || a.attempt || ' names run ' || a.run \
         FROM attempts a WHERE NOT EXISTS \
         (SELECT 1 FROM runs r WHERE r.instance_id = a.instance_id AND r.number = a.run)",
    ),
    (
        "step without its instance",
        "SELECT s.instance_id, 'step ' || s.key FROM steps s \
         WHERE NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = s.instance_id)",
    ),
    (
        "run without its instance",
        "SELECT r.instance_id, 'run ' || r.number FROM runs r \
         WHERE NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = r.instance_id)",
    ),
    (
        "event without its instance",
        "SELECT e.instance_id, 'event ' || e.id || ' (' || e.name || ')' FROM events e \
         WHERE NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = e.instance_id)",
    ),
    (
        "instance without its definition",
        "SELECT i.id, 'definition ' || i.definition_hash || ' is missing' FROM instances i \
         WHERE NOT EXISTS (SELECT 1 FROM definitions d WHERE d.hash = i.definition_hash)",
    ),
    (
        "registered workflow without its definition",
        "SELECT NULL, 'workflow ' || w.name || ': definition ' || w.definition_hash || ' is missing' \
         FROM workflows w WHERE NOT EXISTS (SELECT 1 FROM definitions d WHERE d.hash = w.definition_hash)",
    ),
    (
        "schedule without its definition",
        "SELECT NULL, 'schedule ' || s.workflow || ' #' || s.idx || ': definition ' || s.definition_hash || ' is missing' \
         FROM schedules s WHERE NOT EXISTS (SELECT 1 FROM definitions d WHERE d.hash = s.definition_hash)",
    ),
];

/// An instance's lease as stored: (id, holder, expiry in unix ms).
pub type Lease = (String, String, Option<i64>);

impl Store {
    /// Everything wrong with the rows and the database, as the module's doc
    /// says; empty when sound.
    pub async fn check_rows(&self) -> Result<Vec<Finding>> {
        let mut found = Vec::new();
        for (check, detail) in each!(self.integrity())? {
            found.push(Finding {
                check,
                instance: None,
                detail,
            });
        }
        for (check, sql) in INVARIANTS {
            for (instance, detail) in each!(self.pairs(sql))? {
                found.push(Finding {
                    check,
                    instance,
                    detail: detail.unwrap_or_default(),
                });
            }
        }
        // A definition that calls workflows pins theirs by hash.
        let defs: Vec<(String, Option<String>)> =
            each!(self.pairs("SELECT hash, children FROM definitions"))?
                .into_iter()
                .filter_map(|(hash, children)| Some((hash?, children)))
                .collect();
        let known: std::collections::HashSet<&str> = defs.iter().map(|(h, _)| h.as_str()).collect();
        for (hash, children) in &defs {
            let Some(children) = children.as_deref().and_then(|c| {
                serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(c).ok()
            }) else {
                continue;
            };
            for (path, child) in children {
                if let Some(child) = child.as_str()
                    && !known.contains(child)
                {
                    found.push(Finding {
                        check: "definition without a definition it calls",
                        instance: None,
                        detail: format!(
                            "definition {hash} calls {path}, pinned as {child}, which is missing"
                        ),
                    });
                }
            }
        }
        Ok(found)
    }

    /// The instances held under a lease, and by whom.
    pub async fn leases(&self) -> Result<Vec<Lease>> {
        each!(self.leases())
    }
}
