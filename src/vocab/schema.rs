//! The OpenAPI schemas of the words (`wf serve`'s document,
//! `GET /api/v1/openapi.json`): each word serializes as text, so each is a
//! string schema here, with its values when they are a closed set (the
//! statuses, outcomes, scopes), its format (times) or its pattern (ids,
//! actors). The views that hold them derive theirs (`utoipa::ToSchema`),
//! so a word is described once, beside the type that spells it.

use serde_json::json;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, Schema, SchemaFormat, Type};

/// A string schema: `description`, with `example`.
fn text(description: &str, example: serde_json::Value) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(description))
        .examples([example])
}

/// The schema of a closed set of words; `description` is a doc comment's
/// lines.
pub fn words(description: &str, all: &[&str]) -> RefOr<Schema> {
    let description = description
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    text(&description, json!(all[0]))
        .enum_values(Some(all.iter().copied()))
        .into()
}

/// Implements `utoipa`'s schema traits for a word with the schema `$make`.
macro_rules! schema {
    ($name:ty, $make:expr) => {
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                $make
            }
        }
        impl utoipa::ToSchema for $name {}
    };
}
pub(crate) use schema;

schema!(
    super::InstanceId,
    text(
        "An instance's id: 32 hex digits when wf made it, or the caller's (letters, digits, `-`, `_`, `.`, at most 128)",
        json!("0f3a9c2e7b8d4e6fa1c2d3e4f5a6b7c8"),
    )
    .pattern(Some("^[A-Za-z0-9._-]{1,128}$"))
    .into()
);

schema!(
    super::Timestamp,
    text(
        "A time in UTC, RFC 3339 with milliseconds",
        json!("2026-12-07T13:22:25.123Z"),
    )
    .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
    .into()
);

schema!(
    super::Actor,
    text(
        "Who asked: `cli:USER@HOST`, `token:NAME`, `session:NAME`, `hook:NAME`, `worker:HOLDER` or `schedule:NAME`",
        json!("token:deployer"),
    )
    .into()
);

schema!(
    super::ErrorType,
    text(
        "A failed attempt's error type: `exit.N`, `user.NAME`, `spawn`, `timeout`, `output.limit`, `output.invalid`, `http.STATUS`, `http.connect`, `http.request`, `http.redirect`, `expression`, `crashed`, `interrupted`, `canceled`, `child.failed`, … (docs/workflow-file.md, Error types)",
        json!("exit.1"),
    )
    .into()
);

schema!(
    super::UnitKeyBuf,
    text(
        "A unit's key: a step's id, `id[N]` for an item or a matrix combination, `id:compensate` for a compensation",
        json!("deploy[2]"),
    )
    .into()
);

schema!(
    super::ShownStatus,
    words(
        "An instance's status (`interrupted`: running, but its runner is gone)",
        &super::ShownStatus::ALL.map(super::ShownStatus::as_str),
    )
);
