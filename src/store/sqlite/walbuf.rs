//! A commit's WAL frames written to the file in one call.
//!
//! SQLite writes each frame of a WAL commit with two `pwrite`s (its 24-byte
//! header, then its page), and on this ext4 each `pwrite` costs about 3.7
//! µs whatever its size: a `/bin/true` step's commit of 7 frames spent
//! about 54 µs in 14 calls, where one write of the same 28 KiB takes 5.
//! That commit is what a step waits for (its process is held until it is
//! durable), so the calls are on every step's path.
//!
//! How: a VFS (`wf-wal`) that is SQLite's default one (unix) for every
//! file but a WAL (and a main database file's sync at close: `closing`). A WAL's writes are gathered in memory while
//! [`synced_commit`] runs on this thread, and written with one call when
//! SQLite syncs the WAL, reads it, asks its size, truncates it, closes it,
//! or writes somewhere that does not follow on. Outside such a commit,
//! every write goes straight through. With `WF_NO_WAL_VFS=1`
//! (`crate::switches`), connections are opened with SQLite's default VFS,
//! as where this one could not be registered.
//!
//! Why that is safe: [`synced_commit`] is only used around the commit of a
//! connection set to `synchronous=FULL`, and such a commit syncs the WAL
//! after its last frame, before it publishes the commit in the wal-index
//! (the shared memory where readers, and other processes, learn which frames
//! exist). So every frame is in the file, and on the disk, before anyone can
//! know of it, exactly as without gathering; what changes is only how many
//! calls put it there. A commit that does not sync (`NORMAL`) publishes its
//! frames without any call on the WAL after them: it is never gathered.
//! Should one be all the same, the gathered bytes are written when
//! [`synced_commit`] returns (and a debug build fails).
#![allow(
    unsafe_code,
    reason = "a SQLite VFS: C callbacks over SQLite's raw files (Cargo.toml's [lints])"
)]

use rusqlite::ffi;
use std::cell::Cell;
use std::ffi::{CStr, c_int, c_void};
use std::sync::OnceLock;

/// The VFS's name, for `Connection::open_with_flags_and_vfs`.
const NAME: &CStr = c"wf-wal";

/// Gathered bytes are written once there are this many, whatever comes.
const FLUSH_AT: usize = 256 * 1024;

/// The most bytes given to the default VFS's xWrite at once: its `unixWrite`
/// writes at most 128 KiB - 1 a call (`nBuf &= 0x1ffff`) and takes a short
/// write for a full disk.
const WRITE_AT_MOST: usize = 64 * 1024;

thread_local! {
    /// Whether this thread's WAL writes are gathered ([`synced_commit`]).
    static GATHER: Cell<bool> = const { Cell::new(false) };
    /// The WAL that holds gathered bytes, if any (one at a time: gathering
    /// into another writes these first).
    static PENDING: Cell<*mut Wal> = const { Cell::new(std::ptr::null_mut()) };
}

/// Runs `commit` (a transaction's `COMMIT` on a connection set to
/// `synchronous=FULL`) with this thread's WAL writes gathered.
pub(super) fn synced_commit<T>(commit: impl FnOnce() -> T) -> T {
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            GATHER.set(false);
            let left = PENDING.get();
            if !left.is_null() {
                // Not a commit that synced: its frames go out now.
                debug_assert!(false, "a gathered WAL commit did not sync");
                // SAFETY: PENDING names an open WAL (close clears it).
                unsafe { flush(left) };
            }
        }
    }
    GATHER.set(true);
    let _done = Done;
    commit()
}

/// The VFS to open connections with; `None` if it could not be registered,
/// or is not to be used (`WF_NO_WAL_VFS`): SQLite's default is used then,
/// only slower.
pub(super) fn vfs() -> Option<&'static CStr> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    if crate::switches::get().no_wal_vfs {
        return None;
    }
    REGISTERED.get_or_init(register).then_some(NAME)
}

/// Registers `wf-wal`: SQLite's default VFS, but for its xOpen ([`open`]).
/// Made once (by [`vfs`]); whether it could be.
fn register() -> bool {
    // SAFETY: a null name asks for the default VFS.
    let base = unsafe { ffi::sqlite3_vfs_find(std::ptr::null()) };
    if base.is_null() {
        return false;
    }
    // SAFETY: SQLite's default VFS is static and never unregistered by wf.
    let mut vfs = unsafe { *base };
    if vfs.xOpen.is_none() {
        return false;
    }
    vfs.szOsFile += std::mem::size_of::<Wal>() as c_int;
    vfs.zName = NAME.as_ptr();
    vfs.pAppData = base.cast();
    vfs.pNext = std::ptr::null_mut();
    vfs.xOpen = Some(open);
    // SAFETY: the copy is leaked, so it lives as long as SQLite may call it,
    // and so do its name and methods (static).
    unsafe { ffi::sqlite3_vfs_register(Box::leak(Box::new(vfs)), 0) == ffi::SQLITE_OK }
}

/// A WAL opened through `wf-wal`: the default VFS's file follows it in the
/// memory SQLite gives (`szOsFile` has room for both).
#[repr(C)]
struct Wal {
    base: ffi::sqlite3_file,
    /// Gathered bytes, to be written at `at`.
    buf: Vec<u8>,
    at: i64,
}

/// The default VFS's file behind `w`.
fn real(w: *mut Wal) -> *mut ffi::sqlite3_file {
    // Wal's size is a multiple of 8, so the file that follows is aligned.
    const { assert!(std::mem::size_of::<Wal>().is_multiple_of(8)) };
    w.wrapping_add(1).cast()
}

unsafe extern "C" fn open(
    vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    // SAFETY: SQLite calls with the VFS registered above, whose pAppData is
    // the default VFS.
    let base = unsafe { (*vfs).pAppData }.cast::<ffi::sqlite3_vfs>();
    // SAFETY: the default VFS is static.
    let base_open = unsafe { (*base).xOpen }.expect("checked at registration");
    if flags & ffi::SQLITE_OPEN_WAL == 0 {
        // SAFETY: SQLite's arguments, for the default VFS, whose file fits in
        // the room SQLite gives (szOsFile, larger).
        let rc = unsafe { base_open(base, name, file, flags, out_flags) };
        if rc == ffi::SQLITE_OK && flags & ffi::SQLITE_OPEN_MAIN_DB != 0 {
            // SAFETY: the default VFS just opened `file`.
            unsafe { super::closing::wrap_main_db(file) };
        }
        return rc;
    }
    // `file` points to szOsFile bytes: room for a Wal, and the default's
    // file after it.
    let w = file.cast::<Wal>();
    let inner = real(w);
    // SAFETY: `inner` is in the room SQLite gave, aligned (see `real`).
    unsafe { (*inner).pMethods = std::ptr::null() };
    // SAFETY: SQLite's arguments, for the default VFS, with its file in the
    // room after the Wal.
    let rc = unsafe { base_open(base, name, inner, flags, out_flags) };
    // SAFETY: as above.
    let opened = !unsafe { (*inner).pMethods }.is_null();
    if opened {
        // Opened (even if rc is an error, SQLite then calls xClose).
        let wal = Wal {
            base: ffi::sqlite3_file {
                pMethods: &raw const METHODS,
            },
            buf: Vec::new(),
            at: 0,
        };
        // SAFETY: `w` is the start of the room SQLite gave, aligned as it
        // aligns every file (8 bytes); nothing was there to drop.
        unsafe { w.write(wal) };
    } else {
        // Not opened: SQLite will not call xClose.
        // SAFETY: `file` is the room SQLite gave; its methods come first.
        unsafe { (*file).pMethods = std::ptr::null() };
    }
    rc
}

/// Writes what `w` gathered, at its place.
///
/// # Safety
/// `w` is an open Wal (opened by `open`, not yet closed), not borrowed
/// elsewhere for the call.
unsafe fn flush(w: *mut Wal) -> c_int {
    if PENDING.get() == w {
        PENDING.set(std::ptr::null_mut());
    }
    // SAFETY: the caller's promise. (Only the default's file, after the
    // Wal, is used through `w` meanwhile.)
    let wal = unsafe { &mut *w };
    if wal.buf.is_empty() {
        return ffi::SQLITE_OK;
    }
    let mut rc = ffi::SQLITE_OK;
    let mut at = wal.at;
    for chunk in wal.buf.chunks(WRITE_AT_MOST) {
        // SAFETY: `w` is open (the caller's promise); `chunk` holds its
        // length in bytes.
        rc = unsafe { real_write(w, chunk.as_ptr().cast(), chunk.len() as c_int, at) };
        if rc != ffi::SQLITE_OK {
            break;
        }
        at += chunk.len() as i64;
    }
    wal.buf.clear();
    if wal.buf.capacity() > FLUSH_AT {
        wal.buf.shrink_to(FLUSH_AT);
    }
    rc
}

/// The default's xWrite, on the file behind `w`.
///
/// # Safety
/// `w` is an open Wal; `data` holds `amt` bytes.
unsafe fn real_write(w: *mut Wal, data: *const c_void, amt: c_int, at: i64) -> c_int {
    #[cfg(test)]
    tests::WRITES.set(tests::WRITES.get() + 1);
    let inner = real(w);
    // SAFETY: the default's file behind an open Wal is open (the caller's
    // promise).
    match unsafe { methods(inner) }.xWrite {
        // SAFETY: the default's own method, on its own open file; `data`
        // holds `amt` bytes (the caller's promise).
        Some(f) => unsafe { f(inner, data, amt, at) },
        None => ffi::SQLITE_IOERR_WRITE,
    }
}

/// The methods of `file`, a file the default VFS opened.
///
/// # Safety
/// `file` is open: its xOpen set its methods, which are static.
unsafe fn methods(file: *mut ffi::sqlite3_file) -> &'static ffi::sqlite3_io_methods {
    // SAFETY: the caller's promise: `file` is a file.
    let methods = unsafe { (*file).pMethods };
    // SAFETY: the caller's promise: its methods are set, and static.
    unsafe { &*methods }
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amt: c_int,
    at: i64,
) -> c_int {
    let w = file.cast::<Wal>();
    let gathering = GATHER.get() && amt > 0;
    let (empty, follows) = {
        // SAFETY: SQLite calls with a file this VFS opened as a Wal, used
        // by nothing else for the call.
        let wal = unsafe { &*w };
        (wal.buf.is_empty(), at == wal.at + wal.buf.len() as i64)
    };
    // What is gathered goes out first unless this write follows on.
    if !(empty || gathering && follows) {
        // SAFETY: as above.
        let rc = unsafe { flush(w) };
        if rc != ffi::SQLITE_OK {
            return rc;
        }
    }
    if !gathering {
        // SAFETY: as above, and SQLite's `data` holds `amt` bytes.
        return unsafe { real_write(w, data, amt, at) };
    }
    let other = PENDING.get();
    if !other.is_null() && other != w {
        // SAFETY: PENDING names an open Wal (close clears it), not `w`.
        let rc = unsafe { flush(other) };
        if rc != ffi::SQLITE_OK {
            return rc;
        }
    }
    // SAFETY: SQLite's `data` holds `amt` bytes (more than 0: gathering).
    let data = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), amt as usize) };
    // SAFETY: as above (a Wal used by nothing else for the call).
    let wal = unsafe { &mut *w };
    if wal.buf.is_empty() {
        wal.at = at;
    }
    wal.buf.extend_from_slice(data);
    PENDING.set(w);
    if wal.buf.len() >= FLUSH_AT {
        // SAFETY: as above (`wal` is not used again).
        return unsafe { flush(w) };
    }
    ffi::SQLITE_OK
}

/// Calls the default's method `$m` on the file behind `$file`, with the
/// gathered bytes written first when `flush` says so.
macro_rules! forward {
    ($file:expr, $m:ident, flush, $missing:expr $(, $arg:expr)*) => {{
        let w = $file.cast::<Wal>();
        // SAFETY: SQLite calls with a file this VFS opened as a Wal.
        let rc = unsafe { flush(w) };
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        forward!($file, $m, $missing $(, $arg)*)
    }};
    ($file:expr, $m:ident, $missing:expr $(, $arg:expr)*) => {{
        let r = real($file.cast::<Wal>());
        // SAFETY: the default's file behind a Wal this VFS opened is open.
        match unsafe { methods(r) }.$m {
            // SAFETY: the default's own method, on its own open file, with
            // SQLite's arguments.
            Some(f) => unsafe { f(r $(, $arg)*) },
            None => $missing,
        }
    }};
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    let w = file.cast::<Wal>();
    // SAFETY: the Wal is open; after this SQLite never uses it again.
    let flushed = unsafe { flush(w) };
    // SAFETY: as above; nothing else uses it for the call.
    let wal = unsafe { &mut *w };
    // Its memory is SQLite's to free: what `buf` holds is freed here (the
    // empty Vec left has nothing to free).
    drop(std::mem::take(&mut wal.buf));
    let closed = forward!(file, xClose, ffi::SQLITE_OK);
    if flushed != ffi::SQLITE_OK {
        flushed
    } else {
        closed
    }
}

unsafe extern "C" fn read(
    file: *mut ffi::sqlite3_file,
    data: *mut c_void,
    amt: c_int,
    at: i64,
) -> c_int {
    forward!(file, xRead, flush, ffi::SQLITE_IOERR_READ, data, amt, at)
}

unsafe extern "C" fn truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    forward!(file, xTruncate, flush, ffi::SQLITE_IOERR_TRUNCATE, size)
}

unsafe extern "C" fn sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    forward!(file, xSync, flush, ffi::SQLITE_IOERR_FSYNC, flags)
}

unsafe extern "C" fn file_size(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    forward!(file, xFileSize, flush, ffi::SQLITE_IOERR_FSTAT, size)
}

unsafe extern "C" fn lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    forward!(file, xLock, ffi::SQLITE_IOERR_LOCK, level)
}

unsafe extern "C" fn unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    forward!(file, xUnlock, ffi::SQLITE_IOERR_UNLOCK, level)
}

unsafe extern "C" fn check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    forward!(
        file,
        xCheckReservedLock,
        ffi::SQLITE_IOERR_CHECKRESERVEDLOCK,
        out
    )
}

unsafe extern "C" fn file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    forward!(file, xFileControl, flush, ffi::SQLITE_NOTFOUND, op, arg)
}

unsafe extern "C" fn sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    forward!(file, xSectorSize, 4096)
}

unsafe extern "C" fn device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    forward!(file, xDeviceCharacteristics, 0)
}

unsafe extern "C" fn shm_map(
    file: *mut ffi::sqlite3_file,
    page: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    forward!(
        file,
        xShmMap,
        ffi::SQLITE_IOERR_SHMMAP,
        page,
        size,
        extend,
        out
    )
}

unsafe extern "C" fn shm_lock(
    file: *mut ffi::sqlite3_file,
    at: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    forward!(file, xShmLock, ffi::SQLITE_IOERR_SHMLOCK, at, n, flags)
}

unsafe extern "C" fn shm_barrier(file: *mut ffi::sqlite3_file) {
    forward!(file, xShmBarrier, ());
}

unsafe extern "C" fn shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    forward!(file, xShmUnmap, ffi::SQLITE_OK, delete)
}

unsafe extern "C" fn fetch(
    file: *mut ffi::sqlite3_file,
    at: i64,
    amt: c_int,
    out: *mut *mut c_void,
) -> c_int {
    forward!(
        file,
        xFetch,
        flush,
        // SAFETY: `out` is SQLite's to fill.
        unsafe { no_fetch(out) },
        at,
        amt,
        out
    )
}

/// What xFetch answers without a default's xFetch: no mapping, read it.
unsafe fn no_fetch(out: *mut *mut c_void) -> c_int {
    // SAFETY: `out` is SQLite's to fill; null means "read it instead".
    unsafe { *out = std::ptr::null_mut() };
    ffi::SQLITE_OK
}

unsafe extern "C" fn unfetch(file: *mut ffi::sqlite3_file, at: i64, p: *mut c_void) -> c_int {
    forward!(file, xUnfetch, ffi::SQLITE_OK, at, p)
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: Some(shm_map),
    xShmLock: Some(shm_lock),
    xShmBarrier: Some(shm_barrier),
    xShmUnmap: Some(shm_unmap),
    xFetch: Some(fetch),
    xUnfetch: Some(unfetch),
};

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::{Connection, OpenFlags};
    use std::path::Path;

    thread_local! {
        /// Writes this thread made to WALs through the VFS.
        pub(super) static WRITES: Cell<usize> = const { Cell::new(0) };
    }

    fn open(path: &Path, vfs: Option<&CStr>, synchronous: &str) -> Connection {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = match vfs {
            Some(vfs) => Connection::open_with_flags_and_vfs(path, flags, vfs),
            None => Connection::open_with_flags(path, flags),
        }
        .expect("open");
        conn.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))
            .expect("WAL");
        conn.execute_batch(&format!("PRAGMA synchronous={synchronous}"))
            .expect("synchronous");
        conn
    }

    /// Commits `rows` blobs of `size` bytes on `conn`, gathered; returns the
    /// writes the commit made to the WAL.
    fn commit(conn: &mut Connection, first: i64, rows: i64, size: usize) -> usize {
        let tx = conn.transaction().expect("begin");
        for id in first..first + rows {
            tx.execute(
                "INSERT INTO t(id, data) VALUES (?1, zeroblob(?2))",
                (id, size as i64),
            )
            .expect("insert");
        }
        let before = WRITES.get();
        synced_commit(|| tx.commit()).expect("commit");
        WRITES.get() - before
    }

    fn seen(conn: &Connection) -> (i64, i64) {
        conn.query_row(
            "SELECT count(*), coalesce(sum(length(data)), 0) FROM t",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("count")
    }

    #[test]
    fn a_synced_commit_reaches_the_wal_in_one_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("one.db");
        let mut conn = open(&path, Some(vfs().expect("registered")), "FULL");
        conn.execute_batch("CREATE TABLE t(id INTEGER PRIMARY KEY, data BLOB)")
            .expect("table");
        // Ten pages or so: twenty writes without gathering.
        assert_eq!(commit(&mut conn, 0, 10, 3000), 1);
        // About 100 pages (200 writes without gathering): in 64 KiB pieces.
        let writes = commit(&mut conn, 10, 100, 3000);
        assert!((6..=10).contains(&writes), "{writes} writes");
        // Not gathered: a write per frame header and one per page.
        let before = WRITES.get();
        let tx = conn.transaction().expect("begin");
        tx.execute("INSERT INTO t(id, data) VALUES (1000, zeroblob(3000))", [])
            .expect("insert");
        tx.commit().expect("commit");
        assert!(
            WRITES.get() - before >= 4,
            "{} writes",
            WRITES.get() - before
        );
        assert!(PENDING.get().is_null());
    }

    #[test]
    fn another_connection_sees_every_gathered_commit_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("seen.db");
        let mut writer = open(&path, Some(vfs().expect("registered")), "FULL");
        writer
            .execute_batch("CREATE TABLE t(id INTEGER PRIMARY KEY, data BLOB)")
            .expect("table");
        // The default VFS, as another process would read it.
        let reader = open(&path, None, "FULL");
        let (mut rows, mut bytes) = (0, 0);
        for (i, size) in [10, 5000, 300_000, 1, 70_000, 4096, 1_000_000, 3]
            .into_iter()
            .cycle()
            .take(40)
            .enumerate()
        {
            let n = 1 + (i as i64 % 7);
            commit(&mut writer, rows, n, size);
            rows += n;
            bytes += n * size as i64;
            assert_eq!(seen(&reader), (rows, bytes), "after commit {i}");
            if i % 9 == 8 {
                // The WAL starts over after a checkpoint: written from its head.
                writer
                    .query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(()))
                    .expect("checkpoint");
            }
        }
        drop(writer);
        let check: String = reader
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .expect("check");
        assert_eq!(check, "ok");
        assert_eq!(seen(&reader), (rows, bytes));
    }

    #[test]
    fn frames_spilled_and_rolled_back_leave_the_next_commits_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("spill.db");
        let mut conn = open(&path, Some(vfs().expect("registered")), "FULL");
        conn.execute_batch(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, data BLOB); PRAGMA cache_size=10",
        )
        .expect("table");
        let reader = open(&path, None, "FULL");
        commit(&mut conn, 0, 3, 100);
        // A transaction larger than the page cache writes frames to the WAL
        // before its commit, here gathered too; then it is rolled back.
        synced_commit(|| {
            let tx = conn.transaction().expect("begin");
            for id in 100..400 {
                tx.execute("INSERT INTO t(id, data) VALUES (?1, zeroblob(2000))", [id])
                    .expect("insert");
            }
            tx.rollback().expect("rollback");
        });
        assert_eq!(seen(&reader), (3, 300));
        commit(&mut conn, 3, 50, 2000);
        assert_eq!(seen(&reader), (53, 300 + 50 * 2000));
        drop(conn);
        let check: String = reader
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .expect("check");
        assert_eq!(check, "ok");
    }
}
