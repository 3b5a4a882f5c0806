//! Actions, tokens and sessions on SQLite (`store/actions.rs`): an action
//! is inserted by the transaction of the change it records
//! ([`insert_action`]), tokens and sessions by their own.

use super::SqliteStore;
use super::history::cached;
use crate::store::Result;
use crate::store::actions::{ActionRow, FoundSession, SessionRow, TokenRow};
use crate::vocab::{InstanceId, Timestamp};
use rusqlite::{Connection, OptionalExtension, Row, params};

/// Inserts `a` in the transaction `c` is in.
pub(super) fn insert_action(c: &Connection, a: &ActionRow) -> Result<()> {
    cached(
        c,
        "INSERT INTO actions (instance_id, at, action, actor, detail) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![a.instance, a.at, a.action, a.actor, a.detail],
    )?;
    Ok(())
}

fn action_from_row(r: &Row) -> rusqlite::Result<ActionRow> {
    Ok(ActionRow {
        instance: r.get::<_, Option<InstanceId>>(0)?,
        at: r.get(1)?,
        action: r.get(2)?,
        actor: r.get(3)?,
        detail: r.get(4)?,
    })
}

pub(super) fn actions(c: &Connection, id: &str) -> Result<Vec<ActionRow>> {
    let mut stmt = c.prepare_cached(
        "SELECT instance_id, at, action, actor, detail FROM actions WHERE instance_id = ?1 ORDER BY seq",
    )?;
    let rows = stmt.query_map([id], action_from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

const TOKEN_COLS: &str = "name, hash, scope, created_at, created_by, last_used_at";

fn token_from_row(r: &Row) -> rusqlite::Result<TokenRow> {
    Ok(TokenRow {
        name: r.get(0)?,
        hash: r.get(1)?,
        scope: r.get(2)?,
        created_at: r.get(3)?,
        created_by: r.get(4)?,
        last_used_at: r.get(5)?,
    })
}

impl SqliteStore {
    pub fn actions(&self, id: &str) -> Result<Vec<ActionRow>> {
        actions(&self.conn, id)
    }

    pub fn global_actions(&self, limit: usize) -> Result<Vec<ActionRow>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT instance_id, at, action, actor, detail FROM actions WHERE instance_id IS NULL \
             ORDER BY seq DESC LIMIT ?1",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt.query_map([limit], action_from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub fn add_token(&mut self, row: &TokenRow, action: &ActionRow) -> Result<bool> {
        let tx = self.write()?;
        let n = tx.execute(
            &format!(
                "INSERT INTO tokens ({TOKEN_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING"
            ),
            params![
                row.name,
                row.hash,
                row.scope,
                row.created_at,
                row.created_by,
                row.last_used_at
            ],
        )?;
        if n == 0 {
            return Ok(false);
        }
        insert_action(&tx, action)?;
        tx.commit()?;
        Ok(true)
    }

    pub fn tokens(&self) -> Result<Vec<TokenRow>> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!("SELECT {TOKEN_COLS} FROM tokens ORDER BY name"))?;
        let rows = stmt.query_map([], token_from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRow>> {
        Ok(self
            .conn
            .prepare_cached(&format!("SELECT {TOKEN_COLS} FROM tokens WHERE hash = ?1"))?
            .query_row([hash], token_from_row)
            .optional()?)
    }

    pub fn revoke_token(&mut self, name: &str, action: &ActionRow) -> Result<bool> {
        let tx = self.write()?;
        let n = tx.execute("DELETE FROM tokens WHERE name = ?1", [name])?;
        if n == 0 {
            return Ok(false);
        }
        tx.execute("DELETE FROM sessions WHERE token = ?1", [name])?;
        insert_action(&tx, action)?;
        tx.commit()?;
        Ok(true)
    }

    pub fn touch_tokens(&mut self, used: &[(String, Timestamp)]) -> Result<()> {
        if used.is_empty() {
            return Ok(());
        }
        let tx = self.write()?;
        for (name, at) in used {
            cached(
                &tx,
                "UPDATE tokens SET last_used_at = ?2 WHERE name = ?1 \
                 AND (last_used_at IS NULL OR last_used_at < ?2)",
                params![name, at],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    pub fn add_session(&mut self, row: &SessionRow) -> Result<()> {
        let tx = self.write()?;
        tx.execute(
            "INSERT INTO sessions (hash, token, token_hash, created_at, seen_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![row.hash, row.token, row.token_hash, row.created_at, row.seen_ms],
        )?;
        tx.commit()?;
        Ok(())
    }

    pub fn session(&mut self, hash: &str, idle_since_ms: i64) -> Result<Option<FoundSession>> {
        let found = self
            .conn
            .prepare_cached(
                "SELECT s.hash, s.token, s.token_hash, s.created_at, s.seen_ms, t.scope \
                 FROM sessions s LEFT JOIN tokens t ON t.name = s.token AND t.hash = s.token_hash \
                 WHERE s.hash = ?1",
            )?
            .query_row([hash], |r| {
                Ok(FoundSession {
                    row: SessionRow {
                        hash: r.get(0)?,
                        token: r.get(1)?,
                        token_hash: r.get(2)?,
                        created_at: r.get(3)?,
                        seen_ms: r.get(4)?,
                    },
                    scope: r.get(5)?,
                })
            })
            .optional()?;
        match found {
            Some(s) if s.row.seen_ms < idle_since_ms => {
                let tx = self.write()?;
                tx.execute("DELETE FROM sessions WHERE hash = ?1", [hash])?;
                tx.commit()?;
                Ok(None)
            }
            other => Ok(other),
        }
    }

    pub fn touch_sessions(&mut self, seen: &[(String, i64)]) -> Result<()> {
        if seen.is_empty() {
            return Ok(());
        }
        let tx = self.write()?;
        for (hash, ms) in seen {
            cached(
                &tx,
                "UPDATE sessions SET seen_ms = ?2 WHERE hash = ?1 AND seen_ms < ?2",
                params![hash, ms],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    pub fn end_session(&mut self, hash: &str, idle_since_ms: i64) -> Result<()> {
        let tx = self.write()?;
        tx.execute(
            "DELETE FROM sessions WHERE hash = ?1 OR seen_ms < ?2",
            params![hash, idle_since_ms],
        )?;
        tx.commit()?;
        Ok(())
    }
}
