//! The registry on SQLite: a row per registered workflow, written under
//! the write lock, so two registrations of one hook name cannot both pass
//! the check that it is free.

use super::SqliteStore;
use super::history;
use crate::store::Result;
use crate::store::registry::Refused;
use crate::store::rows::*;
use rusqlite::{OptionalExtension, Row, params};

const COLS: &str = "name, definition_hash, workflow_path, base_dir, hook, registered_at";

fn workflow_from_row(r: &Row) -> rusqlite::Result<WorkflowRow> {
    Ok(WorkflowRow {
        name: r.get(0)?,
        definition_hash: r.get(1)?,
        workflow_path: r.get(2)?,
        base_dir: r.get(3)?,
        hook: r.get(4)?,
        registered_at: r.get(5)?,
    })
}

impl SqliteStore {
    pub fn register_workflow(
        &mut self,
        row: &WorkflowRow,
        defs: &[DefinitionRow],
        action: &crate::store::ActionRow,
    ) -> Result<std::result::Result<(), Refused>> {
        let tx = self.write()?;
        if let Some(hook) = &row.hook {
            let other: Option<String> = tx
                .query_row(
                    "SELECT name FROM workflows WHERE hook = ?1 AND name <> ?2",
                    params![hook, row.name],
                    |r| r.get(0),
                )
                .optional()?;
            if let Some(other) = other {
                return Ok(Err(Refused::HookTaken(other)));
            }
        }
        for def in defs {
            history::insert_definition(&tx, def)?;
        }
        tx.execute(
            &format!(
                "INSERT INTO workflows ({COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                 ON CONFLICT (name) DO UPDATE SET definition_hash = excluded.definition_hash, \
                 workflow_path = excluded.workflow_path, base_dir = excluded.base_dir, \
                 hook = excluded.hook, registered_at = excluded.registered_at"
            ),
            params![
                row.name,
                row.definition_hash,
                row.workflow_path,
                row.base_dir,
                row.hook,
                row.registered_at,
            ],
        )?;
        super::actions::insert_action(&tx, action)?;
        tx.commit()?;
        Ok(Ok(()))
    }

    pub fn remove_workflow(
        &mut self,
        name: &str,
        action: &crate::store::ActionRow,
    ) -> Result<bool> {
        let tx = self.write()?;
        let n = tx.execute("DELETE FROM workflows WHERE name = ?1", [name])?
            + tx.execute("DELETE FROM schedules WHERE workflow = ?1", [name])?;
        if n > 0 {
            super::actions::insert_action(&tx, action)?;
        }
        tx.commit()?;
        Ok(n > 0)
    }

    pub fn workflows(&self) -> Result<Vec<WorkflowRow>> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!("SELECT {COLS} FROM workflows ORDER BY name"))?;
        let rows = stmt
            .query_map([], workflow_from_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    pub fn registered(&self, name: &str) -> Result<Option<WorkflowRow>> {
        Ok(self
            .conn
            .prepare_cached(&format!("SELECT {COLS} FROM workflows WHERE name = ?1"))?
            .query_row([name], workflow_from_row)
            .optional()?)
    }

    pub fn hook(&self, hook: &str) -> Result<Option<WorkflowRow>> {
        Ok(self
            .conn
            .prepare_cached(&format!("SELECT {COLS} FROM workflows WHERE hook = ?1"))?
            .query_row([hook], workflow_from_row)
            .optional()?)
    }
}

impl SqliteStore {
    /// A workflow's newest instances (`Store::recent`), off
    /// `instances_by_workflow_created`.
    pub fn recent(
        &self,
        workflow: &str,
        since: Option<crate::vocab::Timestamp>,
        limit: usize,
    ) -> Result<Vec<crate::store::registry::Recent>> {
        let since = since.map(|t| t.to_string()).unwrap_or_default();
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, status, created_at, updated_at FROM instances \
             WHERE workflow = ?1 AND created_at >= ?2 ORDER BY created_at DESC, rowid DESC LIMIT ?3",
        )?;
        let rows = stmt
            .query_map(params![workflow, since, limit as i64], |r| {
                Ok(crate::store::registry::Recent {
                    id: r.get(0)?,
                    status: r.get(1)?,
                    created_at: r.get(2)?,
                    updated_at: r.get(3)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }
}
