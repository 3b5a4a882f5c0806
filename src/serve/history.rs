//! The whole history over HTTP, for an `admin` token (issue 56, beside
//! `wf db`): a consistent backup downloaded as a SQLite file (`GET
//! /api/v1/db/backup`), the history copied into another database (`POST
//! /api/v1/db/copy`), and an archive of `wf prune --archive` brought back
//! (`POST /api/v1/db/import`, the archive as the body). Each calls the
//! use case `wf db` calls (`engine::db`); the server only carries bytes.

use super::App;
use super::body::{Body, CopyBody};
use super::error::ApiError;
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;

/// The largest archive `POST /api/v1/db/import` takes.
pub const IMPORT_BODY_LIMIT: usize = 1024 * 1024 * 1024;

/// How much of a backup file is sent at a time.
const CHUNK: usize = 256 * 1024;

/// `GET /api/v1/db/backup`: a consistent copy of the whole history, made
/// now while wf goes on writing, as a SQLite file any wf opens with
/// `--db` (`wf db backup`). Made in a temporary folder, sent, then gone.
pub async fn backup(State(app): State<App>) -> Result<Response, ApiError> {
    let (dir, made) = app
        .db
        .run(|l| async move {
            let c = l.conn().await?;
            let dir = tempfile::Builder::new()
                .prefix("wf-backup-")
                .tempdir()
                .map_err(|e| ApiError::unavailable(format!("no temporary folder: {e}")))?;
            let dest = dir.path().join("wf-backup.db");
            let made = crate::engine::db::backup::backup(&c, &dest, &mut |_, _| {}).await?;
            Ok((dir, made))
        })
        .await?;
    let file = tokio::fs::File::open(&made.path)
        .await
        .map_err(|e| ApiError::unavailable(format!("the backup could not be read: {e}")))?;
    // The folder lives as long as the body is read. An error ends it; and
    // it is fused: a layer that polls a body again after its end (gzip, for
    // a client that accepts it) gets the end again, where `unfold` panics.
    let body = futures_util::stream::unfold(Some((file, dir)), |open| async move {
        use tokio::io::AsyncReadExt as _;
        let (mut file, dir) = open?;
        let mut buf = vec![0u8; CHUNK];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok::<_, std::io::Error>(Bytes::from(buf)), Some((file, dir))))
            }
            Err(e) => Some((Err(e), None)),
        }
    })
    .fuse();
    let name = format!(
        "wf-backup-{}.db",
        crate::vocab::Timestamp::now()
            .to_string()
            .replace([':', '.'], "")
    );
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/vnd.sqlite3".to_string()),
            (header::CONTENT_LENGTH, made.bytes.to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}\""),
            ),
            (
                header::HeaderName::from_static("x-wf-instances"),
                made.instances.to_string(),
            ),
        ],
        axum::body::Body::from_stream(body),
    )
        .into_response())
}

/// `POST /api/v1/db/copy` `{to, resume?}`: copies the whole history into
/// the database `to` names, as `wf db copy --to` does; answers when done
/// with `{instances, written, skipped}`.
pub async fn copy(
    State(app): State<App>,
    Body(CopyBody { to, resume }): Body<CopyBody>,
) -> Result<Response, ApiError> {
    let location = crate::store::Location::parse(std::ffi::OsStr::new(&to))
        .map_err(|e| ApiError::bad_request(format!("`to`: {e}")))?;
    let resume = resume.unwrap_or(false);
    let copied = app
        .db
        .run(move |l| async move {
            let c = l.conn().await?;
            let (copied, _) =
                crate::engine::db::copy::copy_into(&c, &location, resume, &mut |_, _| {}).await?;
            Ok(copied)
        })
        .await?;
    Ok(Json(copied).into_response())
}

/// `POST /api/v1/db/import`: the body is an archive of `wf prune
/// --archive` (JSON lines, or zstd frames of them); its instances the
/// database does not hold come back, as `wf db import` brings them.
/// Answers `{records, written, skipped}`.
pub async fn import(State(app): State<App>, body: Bytes) -> Result<Response, ApiError> {
    // zstd's frames begin with its magic number; anything else is read
    // as JSON lines.
    let zstd = body.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]);
    let imported = app
        .db
        .run(move |l| async move {
            let mut c = l.conn().await?;
            let dir = tempfile::Builder::new()
                .prefix("wf-import-")
                .tempdir()
                .map_err(|e| ApiError::unavailable(format!("no temporary folder: {e}")))?;
            let path = dir.path().join(if zstd {
                "archive.jsonl.zst"
            } else {
                "archive.jsonl"
            });
            std::fs::write(&path, &body).map_err(|e| {
                ApiError::unavailable(format!("the archive could not be kept: {e}"))
            })?;
            let done = crate::engine::db::archive::import(&mut c, &path)
                .await
                .map_err(|e| match e {
                    // The file is the body: name the body, not a temporary path.
                    crate::engine::EngineError::Input(m) => {
                        ApiError::bad_request(m.replace(&path.display().to_string(), "the body"))
                    }
                    e => ApiError::from(e),
                })?;
            Ok(done)
        })
        .await?;
    Ok(Json(imported).into_response())
}
