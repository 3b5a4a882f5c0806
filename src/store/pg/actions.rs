//! Actions, tokens and sessions on PostgreSQL, as on SQLite
//! (`store/sqlite/actions.rs`): an action goes in the transaction (or the
//! one statement) of the change it records ([`insert_action`]); a token's
//! addition or revocation and its action are one statement.

use super::history::{get, p};
use super::{Op, PgStore};
use crate::store::Result;
use crate::store::actions::{ActionRow, FoundSession, SessionRow, TokenRow};
use crate::vocab::Timestamp;
use tokio_postgres::Row;

/// The statement that records `a`, for a pipeline's transaction.
pub(super) fn insert_action(a: &ActionRow) -> Op {
    Op::Exec(
        "INSERT INTO actions (instance_id, at, action, actor, detail) VALUES ($1, $2, $3, $4, $5)",
        action_params(a),
    )
}

pub(super) fn action_params(a: &ActionRow) -> Vec<super::Param> {
    vec![
        p(a.instance.clone()),
        p(a.at),
        p(a.action),
        p(a.actor.clone()),
        p(a.detail.clone()),
    ]
}

/// An instance's actions, oldest first.
pub(super) const ACTIONS: &str = "SELECT instance_id, at, action, actor, detail FROM actions WHERE instance_id = $1 ORDER BY seq";

pub(super) fn action_row(r: &Row) -> Result<ActionRow> {
    Ok(ActionRow {
        instance: get(r, 0)?,
        at: get(r, 1)?,
        action: get(r, 2)?,
        actor: get(r, 3)?,
        detail: get(r, 4)?,
    })
}

macro_rules! token_cols {
    () => {
        "name, hash, scope, created_at, created_by, last_used_at"
    };
}

fn token_row(r: &Row) -> Result<TokenRow> {
    Ok(TokenRow {
        name: get(r, 0)?,
        hash: get(r, 1)?,
        scope: get(r, 2)?,
        created_at: get(r, 3)?,
        created_by: get(r, 4)?,
        last_used_at: get(r, 5)?,
    })
}

impl PgStore {
    pub async fn actions(&self, id: &str) -> Result<Vec<ActionRow>> {
        self.query(ACTIONS, &[&id])
            .await?
            .iter()
            .map(action_row)
            .collect()
    }

    pub async fn global_actions(&self, limit: usize) -> Result<Vec<ActionRow>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.query(
            "SELECT instance_id, at, action, actor, detail FROM actions WHERE instance_id IS NULL \
             ORDER BY seq DESC LIMIT $1",
            &[&limit],
        )
        .await?
        .iter()
        .map(action_row)
        .collect()
    }

    pub async fn add_token(&self, row: &TokenRow, action: &ActionRow) -> Result<bool> {
        let mut params = vec![
            p(row.name.clone()),
            p(row.hash.clone()),
            p(row.scope),
            p(row.created_at),
            p(row.created_by.clone()),
            p(row.last_used_at),
        ];
        params.extend(action_params(action));
        let outs = self
            .pipeline(vec![Op::Exec(
                concat!(
                    "WITH t AS (INSERT INTO tokens (",
                    token_cols!(),
                    ") VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING RETURNING name) \
                     INSERT INTO actions (instance_id, at, action, actor, detail) \
                     SELECT $7, $8, $9, $10, $11 FROM t"
                ),
                params,
            )])
            .await?;
        Ok(outs.first().is_some_and(|o| o.count() == 1))
    }

    pub async fn tokens(&self) -> Result<Vec<TokenRow>> {
        self.query(
            concat!("SELECT ", token_cols!(), " FROM tokens ORDER BY name"),
            &[],
        )
        .await?
        .iter()
        .map(token_row)
        .collect()
    }

    pub async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRow>> {
        self.query(
            concat!("SELECT ", token_cols!(), " FROM tokens WHERE hash = $1"),
            &[&hash],
        )
        .await?
        .first()
        .map(token_row)
        .transpose()
    }

    pub async fn revoke_token(&self, name: &str, action: &ActionRow) -> Result<bool> {
        let mut params = vec![p(name.to_string())];
        params.extend(action_params(action));
        let outs = self
            .pipeline(vec![Op::Exec(
                "WITH t AS (DELETE FROM tokens WHERE name = $1 RETURNING name), \
                 s AS (DELETE FROM sessions WHERE token IN (SELECT name FROM t)) \
                 INSERT INTO actions (instance_id, at, action, actor, detail) \
                 SELECT $2, $3, $4, $5, $6 FROM t",
                params,
            )])
            .await?;
        Ok(outs.first().is_some_and(|o| o.count() == 1))
    }

    pub async fn touch_tokens(&self, used: &[(String, Timestamp)]) -> Result<()> {
        if used.is_empty() {
            return Ok(());
        }
        let names: Vec<String> = used.iter().map(|(n, _)| n.clone()).collect();
        let ats: Vec<String> = used.iter().map(|(_, at)| at.text()).collect();
        self.exec(
            "UPDATE tokens t SET last_used_at = u.at FROM unnest($1::text[], $2::text[]) AS u(name, at) \
             WHERE t.name = u.name AND (t.last_used_at IS NULL OR t.last_used_at < u.at)",
            &[&names, &ats],
        )
        .await?;
        Ok(())
    }

    pub async fn add_session(&self, row: &SessionRow) -> Result<()> {
        self.exec(
            "INSERT INTO sessions (hash, token, token_hash, created_at, seen_ms) VALUES ($1, $2, $3, $4, $5)",
            &[
                &row.hash,
                &row.token,
                &row.token_hash,
                &row.created_at,
                &row.seen_ms,
            ],
        )
        .await?;
        Ok(())
    }

    pub async fn session(&self, hash: &str, idle_since_ms: i64) -> Result<Option<FoundSession>> {
        let rows = self
            .query(
                "SELECT s.hash, s.token, s.token_hash, s.created_at, s.seen_ms, t.scope \
                 FROM sessions s LEFT JOIN tokens t ON t.name = s.token AND t.hash = s.token_hash \
                 WHERE s.hash = $1",
                &[&hash],
            )
            .await?;
        let Some(r) = rows.first() else {
            return Ok(None);
        };
        let found = FoundSession {
            row: SessionRow {
                hash: get(r, 0)?,
                token: get(r, 1)?,
                token_hash: get(r, 2)?,
                created_at: get(r, 3)?,
                seen_ms: get(r, 4)?,
            },
            scope: get(r, 5)?,
        };
        if found.row.seen_ms < idle_since_ms {
            self.exec("DELETE FROM sessions WHERE hash = $1", &[&hash])
                .await?;
            return Ok(None);
        }
        Ok(Some(found))
    }

    pub async fn touch_sessions(&self, seen: &[(String, i64)]) -> Result<()> {
        if seen.is_empty() {
            return Ok(());
        }
        let hashes: Vec<String> = seen.iter().map(|(h, _)| h.clone()).collect();
        let ms: Vec<i64> = seen.iter().map(|(_, m)| *m).collect();
        self.exec(
            "UPDATE sessions s SET seen_ms = u.ms FROM unnest($1::text[], $2::bigint[]) AS u(hash, ms) \
             WHERE s.hash = u.hash AND s.seen_ms < u.ms",
            &[&hashes, &ms],
        )
        .await?;
        Ok(())
    }

    pub async fn end_session(&self, hash: &str, idle_since_ms: i64) -> Result<()> {
        self.exec(
            "DELETE FROM sessions WHERE hash = $1 OR seen_ms < $2",
            &[&hash, &idle_since_ms],
        )
        .await?;
        Ok(())
    }
}
