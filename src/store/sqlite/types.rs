//! The shared vocabulary (`crate::vocab`) as SQLite columns: each type is
//! stored as its text, and a row whose text does not read back is an error
//! naming the column, not a state the engine guesses at.

use crate::vocab::{
    ActionKind, Actor, AttemptOutcome, ErrorType, InstanceId, InstanceStatus, RunEnd, StepStatus,
    Timestamp, TokenScope, UnitKeyBuf,
};
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};

/// Types stored as their `as_str` word.
macro_rules! word_column {
    ($($t:ty),*) => {$(
        impl ToSql for $t {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(ToSqlOutput::from(self.as_str()))
            }
        }
        impl FromSql for $t {
            fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
                value
                    .as_str()?
                    .parse()
                    .map_err(|e| FromSqlError::Other(Box::new(e)))
            }
        }
    )*};
}
word_column!(
    InstanceStatus,
    StepStatus,
    AttemptOutcome,
    RunEnd,
    ActionKind,
    TokenScope
);

impl ToSql for Actor {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.to_string()))
    }
}

impl FromSql for Actor {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        Ok(Actor::parse(value.as_str()?))
    }
}

impl ToSql for Timestamp {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.text()))
    }
}

impl FromSql for Timestamp {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        value
            .as_str()?
            .parse()
            .map_err(|e| FromSqlError::Other(Box::new(e)))
    }
}

impl ToSql for ErrorType {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self.text() {
            std::borrow::Cow::Borrowed(s) => ToSqlOutput::from(s),
            std::borrow::Cow::Owned(s) => ToSqlOutput::from(s),
        })
    }
}

impl FromSql for ErrorType {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        Ok(ErrorType::parse(value.as_str()?))
    }
}

impl ToSql for InstanceId {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for InstanceId {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        Ok(InstanceId::from(value.as_str()?))
    }
}

impl ToSql for UnitKeyBuf {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for UnitKeyBuf {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        Ok(UnitKeyBuf::new(value.as_str()?))
    }
}
