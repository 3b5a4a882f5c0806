//! The registry on PostgreSQL, as on SQLite (`store/sqlite/registry.rs`):
//! a registration takes an advisory lock that orders registrations, so two
//! of one hook name cannot both find it free.

use super::history::{get, insert_definition, p};
use super::{Op, Out, PgStore};
use crate::store::Result;
use crate::store::registry::Refused;
use crate::store::rows::*;
use tokio_postgres::Row;

macro_rules! cols {
    () => {
        "name, definition_hash, workflow_path, base_dir, hook, registered_at"
    };
}

fn workflow_row(r: &Row) -> Result<WorkflowRow> {
    Ok(WorkflowRow {
        name: get(r, 0)?,
        definition_hash: get(r, 1)?,
        workflow_path: get(r, 2)?,
        base_dir: get(r, 3)?,
        hook: get(r, 4)?,
        registered_at: get(r, 5)?,
    })
}

impl PgStore {
    pub async fn register_workflow(
        &self,
        row: &WorkflowRow,
        defs: &[DefinitionRow],
        action: &crate::store::ActionRow,
    ) -> Result<std::result::Result<(), Refused>> {
        let outs = self
            .pipeline(vec![
                Op::Simple("BEGIN"),
                Op::Query(
                    "SELECT pg_advisory_xact_lock(hashtext('wf registry'))",
                    vec![],
                ),
                Op::Query(
                    "SELECT name FROM workflows WHERE hook = $1 AND name <> $2",
                    vec![p(row.hook.clone()), p(row.name.clone())],
                ),
            ])
            .await?;
        let other = outs.into_iter().nth(2).map(Out::rows).unwrap_or_default();
        if let Some(r) = other.first() {
            let name: String = get(r, 0)?;
            self.pipeline(vec![Op::Simple("ROLLBACK")]).await?;
            return Ok(Err(Refused::HookTaken(name)));
        }
        let mut ops: Vec<Op> = defs.iter().map(insert_definition).collect();
        ops.push(Op::Exec(
            concat!(
                "INSERT INTO workflows (",
                cols!(),
                ") VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (name) DO UPDATE SET definition_hash = excluded.definition_hash, \
                 workflow_path = excluded.workflow_path, base_dir = excluded.base_dir, \
                 hook = excluded.hook, registered_at = excluded.registered_at"
            ),
            vec![
                p(row.name.clone()),
                p(row.definition_hash.clone()),
                p(row.workflow_path.clone()),
                p(row.base_dir.clone()),
                p(row.hook.clone()),
                p(row.registered_at),
            ],
        ));
        ops.push(super::actions::insert_action(action));
        ops.push(Op::Simple("COMMIT"));
        if let Err(e) = self.pipeline(ops).await {
            let _ = self.pipeline(vec![Op::Simple("ROLLBACK")]).await;
            return Err(e);
        }
        Ok(Ok(()))
    }

    pub async fn remove_workflow(
        &self,
        name: &str,
        action: &crate::store::ActionRow,
    ) -> Result<bool> {
        let mut params = vec![p(name.to_string())];
        params.extend(super::actions::action_params(action));
        let outs = self
            .pipeline(vec![Op::Exec(
                "WITH w AS (DELETE FROM workflows WHERE name = $1 RETURNING 1), \
                 s AS (DELETE FROM schedules WHERE workflow = $1 RETURNING 1) \
                 INSERT INTO actions (instance_id, at, action, actor, detail) \
                 SELECT $2, $3, $4, $5, $6 WHERE EXISTS (SELECT 1 FROM w) OR EXISTS (SELECT 1 FROM s)",
                params,
            )])
            .await;
        match outs {
            Ok(outs) => Ok(outs.iter().map(Out::count).sum::<u64>() > 0),
            Err(e) => {
                let _ = self.pipeline(vec![Op::Simple("ROLLBACK")]).await;
                Err(e)
            }
        }
    }

    pub async fn workflows(&self) -> Result<Vec<WorkflowRow>> {
        let rows = self
            .query(
                concat!("SELECT ", cols!(), " FROM workflows ORDER BY name"),
                &[],
            )
            .await?;
        rows.iter().map(workflow_row).collect()
    }

    pub async fn registered(&self, name: &str) -> Result<Option<WorkflowRow>> {
        let rows = self
            .query(
                concat!("SELECT ", cols!(), " FROM workflows WHERE name = $1"),
                &[&name],
            )
            .await?;
        rows.first().map(workflow_row).transpose()
    }

    pub async fn hook(&self, hook: &str) -> Result<Option<WorkflowRow>> {
        let rows = self
            .query(
                concat!("SELECT ", cols!(), " FROM workflows WHERE hook = $1"),
                &[&hook],
            )
            .await?;
        rows.first().map(workflow_row).transpose()
    }
}

impl PgStore {
    /// A workflow's newest instances (`Store::recent`), off
    /// `instances_by_workflow_created`.
    pub async fn recent(
        &self,
        workflow: &str,
        since: Option<crate::vocab::Timestamp>,
        limit: usize,
    ) -> Result<Vec<crate::store::registry::Recent>> {
        let since = since.map(|t| t.to_string()).unwrap_or_default();
        let limit = limit as i64;
        self.query(
            "SELECT id, status, created_at, updated_at FROM instances \
             WHERE workflow = $1 AND created_at >= $2 ORDER BY created_at DESC, seq DESC LIMIT $3",
            &[&workflow, &since, &limit],
        )
        .await?
        .iter()
        .map(|r| {
            Ok(crate::store::registry::Recent {
                id: get(r, 0)?,
                status: get(r, 1)?,
                created_at: get(r, 2)?,
                updated_at: get(r, 3)?,
            })
        })
        .collect()
    }
}
