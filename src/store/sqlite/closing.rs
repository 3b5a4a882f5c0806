//! The checkpoint SQLite makes when a process's last connection closes,
//! without its one sync that is redundant: the database file's.
//!
//! That checkpoint syncs the WAL, copies its frames into the database file,
//! then syncs the database file. The WAL's sync is never skipped: another
//! connection (a `WF_DURABILITY=normal` wf, any SQLite client at
//! `synchronous=NORMAL`, a wf killed after an unsynced commit) may have left
//! frames that are not on the disk yet, and a database file holding their
//! pages without them is malformed after a power loss.
//!
//! The database file's sync is redundant because the WAL is kept
//! (`SQLITE_FCNTL_PERSIST_WAL`, and no `journal_size_limit` truncating it
//! at close): every page the checkpoint copied is also in the WAL, synced
//! just before. The next process to open the database is the first
//! connection, so it truncates the `-shm` and rebuilds the WAL's index from
//! the WAL file, with nothing taken as checkpointed (`nBackfill` 0): it
//! reads those pages from the WAL, and SQLite starts the WAL over only after
//! one of that process's own checkpoints copied them all again and synced
//! the database file (at FULL or NORMAL). Whatever a power loss leaves of
//! the unsynced copy is overwritten before anything relies on it. On this
//! VM the sync costs about 1 ms at every exit, 2 ms on a database of
//! 100,000 instances (its pages far apart in a large file).
//!
//! `tests/cli/crash.rs` checks it: every write and sync of every process
//! on one database is recorded, and every state a power loss may leave is
//! rebuilt and checked (integrity, acknowledged steps present).
//!
//! How: the `wf-wal` VFS (`walbuf`) gives main database files a copy of the
//! default VFS's methods whose `xSync` does nothing while [`close`] runs on
//! this thread.
#![allow(
    unsafe_code,
    reason = "part of the SQLite VFS: a main database file's methods, and file controls (Cargo.toml's [lints])"
)]

use rusqlite::{Connection, ffi};
use std::cell::Cell;
use std::ffi::c_int;
use std::sync::OnceLock;

thread_local! {
    /// Whether a main database file's sync is skipped on this thread
    /// ([`close`] is closing a connection).
    static SKIP_DB_SYNC: Cell<bool> = const { Cell::new(false) };
}

/// The default VFS's methods for a main database file, and the copy of
/// them that main database files opened through `wf-wal` get.
struct Methods {
    base: *const ffi::sqlite3_io_methods,
    copy: ffi::sqlite3_io_methods,
}

// SAFETY: both point to SQLite's static method tables or are copies of
// them; nothing is ever written through them.
unsafe impl Send for Methods {}
// SAFETY: as above.
unsafe impl Sync for Methods {}

static METHODS: OnceLock<Methods> = OnceLock::new();

/// Gives a main database file that the default VFS just opened the methods
/// whose `xSync` [`close`] can skip. A file whose methods are not the ones
/// the first such file had (another locking style) is left as it is: its
/// close then syncs.
///
/// # Safety
/// `file` is an open file of the default VFS (its `pMethods` set).
pub(super) unsafe fn wrap_main_db(file: *mut ffi::sqlite3_file) {
    // SAFETY: the caller's promise: `file` is open, `pMethods` valid.
    let base = unsafe { (*file).pMethods };
    if base.is_null() {
        return;
    }
    let methods = METHODS.get_or_init(|| {
        // SAFETY: `base` is the default VFS's static method table.
        let mut copy = unsafe { *base };
        copy.xSync = Some(sync);
        Methods { base, copy }
    });
    if std::ptr::eq(methods.base, base) {
        // SAFETY: the copy lives forever; its methods are the base's but
        // for xSync, which calls the base's.
        unsafe { (*file).pMethods = &raw const methods.copy };
    }
}

unsafe extern "C" fn sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    if SKIP_DB_SYNC.get() {
        return ffi::SQLITE_OK;
    }
    let Some(methods) = METHODS.get() else {
        return ffi::SQLITE_IOERR_FSYNC;
    };
    // SAFETY: `base` is the default VFS's static method table.
    let base_sync = unsafe { (*methods.base).xSync };
    match base_sync {
        // SAFETY: only files given `copy` by `wrap_main_db` get here, and
        // their base's xSync takes them as they are.
        Some(f) => unsafe { f(file, flags) },
        None => ffi::SQLITE_IOERR_FSYNC,
    }
}

/// Whether closing `conn` may skip the database file's sync: its WAL is
/// kept at close, whole (see the module's doc), and its main file has the
/// methods that can skip it.
pub(super) fn may_skip_db_sync(conn: &Connection) -> bool {
    let mut persist: c_int = -1;
    // SAFETY: SQLITE_FCNTL_PERSIST_WAL takes an int: -1 reads the setting
    // into it.
    let rc = unsafe { file_control(conn, ffi::SQLITE_FCNTL_PERSIST_WAL, &mut persist) };
    let limit = conn
        .query_row("PRAGMA journal_size_limit", [], |r| r.get::<_, i64>(0))
        .ok();
    rc == ffi::SQLITE_OK && persist == 1 && limit.is_some_and(|l| l < 0) && wrapped(conn)
}

/// Keeps `conn`'s WAL file when the last connection closes
/// (`SQLITE_FCNTL_PERSIST_WAL`); where refused, it is deleted at exit, as
/// by default.
pub(super) fn persist_wal(conn: &Connection) {
    let mut persist: c_int = 1;
    // SAFETY: SQLITE_FCNTL_PERSIST_WAL takes an int: 1 sets the setting
    // (and it is written back into the int).
    unsafe { file_control(conn, ffi::SQLITE_FCNTL_PERSIST_WAL, &mut persist) };
}

/// Whether `conn`'s main file has the methods [`wrap_main_db`] gives.
fn wrapped(conn: &Connection) -> bool {
    let Some(methods) = METHODS.get() else {
        return false;
    };
    let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
    // SAFETY: SQLITE_FCNTL_FILE_POINTER takes a file pointer, and writes
    // the main file's, which lives as long as the connection.
    let rc = unsafe { file_control(conn, ffi::SQLITE_FCNTL_FILE_POINTER, &mut file) };
    if rc != ffi::SQLITE_OK || file.is_null() {
        return false;
    }
    // SAFETY: a non-null file pointer from SQLite is an open file.
    let file_methods = unsafe { (*file).pMethods };
    std::ptr::eq(file_methods, &raw const methods.copy)
}

/// `sqlite3_file_control` on `conn`'s main database file: operation `op`,
/// with `arg` as its argument; SQLite's result code.
///
/// # Safety
/// `op` is an operation whose argument is a pointer to a `T`.
unsafe fn file_control<T>(conn: &Connection, op: c_int, arg: &mut T) -> c_int {
    // SAFETY: the handle is used for the one call below, while `conn` is
    // borrowed (so open), and nothing is closed through it.
    let db = unsafe { conn.handle() };
    // SAFETY: `db` is open; "main" is a C string; `arg` is what `op`
    // reads and writes (the caller's promise), alive for the call.
    unsafe { ffi::sqlite3_file_control(db, c"main".as_ptr(), op, std::ptr::from_mut(arg).cast()) }
}

/// Closes `conn` (the last connection of this process) with the database
/// file's sync of its closing checkpoint skipped; the WAL's sync is made.
/// Only for a connection [`may_skip_db_sync`] accepted.
pub(super) fn close(conn: Connection) {
    SKIP_DB_SYNC.set(true);
    let closed = conn.close();
    SKIP_DB_SYNC.set(false);
    // Not closed (a statement still open): dropped, it closes as SQLite
    // would, syncing both.
    drop(closed);
}
