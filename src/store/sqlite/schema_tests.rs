//! The schema a new database is made with against what the migrations
//! make ([`super::CURRENT`], [`super::MIGRATIONS`]).

use super::*;
use rusqlite::Connection;

/// Everything the schema is made of, as SQLite describes it: each
/// object (in creation order), each table's columns (name, type, not
/// null, default, primary key), whether it has rowids, its foreign keys
/// and its indexes' columns.
fn describe(conn: &Connection) -> Vec<String> {
    let rows = |sql: &str| -> Vec<String> {
        let mut stmt = conn.prepare(sql).expect(sql);
        let n = stmt.column_count();
        stmt.query_map([], |r| {
            (0..n)
                .map(|i| {
                    r.get::<_, rusqlite::types::Value>(i)
                        .map(|v| format!("{v:?}"))
                })
                .collect::<rusqlite::Result<Vec<_>>>()
                .map(|v| v.join("|"))
        })
        .expect(sql)
        .collect::<rusqlite::Result<Vec<_>>>()
        .expect(sql)
    };
    let mut out = Vec::new();
    let objects = rows("SELECT type, name, tbl_name FROM sqlite_master ORDER BY rowid");
    for object in &objects {
        out.push(format!("object {object}"));
    }
    let names = |kind: &str| {
        let mut stmt = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = ?1 ORDER BY rowid")
            .expect("names");
        stmt.query_map([kind], |r| r.get::<_, String>(0))
            .expect("names")
            .collect::<rusqlite::Result<Vec<_>>>()
            .expect("names")
    };
    for table in names("table") {
        for pragma in ["table_xinfo", "foreign_key_list", "index_list"] {
            for row in rows(&format!("PRAGMA {pragma}({table})")) {
                out.push(format!("{table} {pragma} {row}"));
            }
        }
        for row in rows(&format!("PRAGMA table_list({table})")) {
            out.push(format!("{table} table_list {row}"));
        }
    }
    for index in names("index") {
        for row in rows(&format!("PRAGMA index_xinfo({index})")) {
            out.push(format!("{index} index_xinfo {row}"));
        }
    }
    out
}

#[test]
fn current_is_what_the_migrations_make() {
    let migrated = Connection::open_in_memory().expect("open");
    for sql in MIGRATIONS {
        migrated.execute_batch(sql).expect("migration");
    }
    let created = Connection::open_in_memory().expect("open");
    for sql in CURRENT {
        created.execute_batch(sql).expect("CURRENT");
    }
    let (migrated, created) = (describe(&migrated), describe(&created));
    assert!(migrated.len() > 100, "{migrated:#?}");
    first_difference(&migrated, &created);
}

/// The first line where the two differ, rather than two long lists.
fn first_difference(migrated: &[String], created: &[String]) {
    for (m, c) in migrated.iter().zip(created) {
        assert_eq!(m, c, "migrated (left) and CURRENT (right) differ");
    }
    assert_eq!(migrated.len(), created.len());
}
