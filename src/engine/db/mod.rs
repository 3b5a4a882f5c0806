//! `wf db`: what an operator does with a whole history. `copy` moves it
//! to another database (SQLite to PostgreSQL and back), `backup` makes a
//! consistent copy of a live one, `check` finds what is wrong in one. Each
//! is one use case with a typed outcome; `commands/db.rs` renders it.

pub mod archive;
pub mod backup;
pub mod check;
pub mod copy;
