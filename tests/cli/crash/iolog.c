/* An I/O recorder for the crash-state replay test (tests/cli/crash.rs).
 *
 * Loaded with LD_PRELOAD into every process of a scenario (each `wf`, and the
 * step processes they start), it appends to one log, in the order they
 * happen on this machine, every write, truncation and sync made to the files
 * of one SQLite database: the database itself, its `-wal` and its `-journal`
 * (the `-shm` is rebuilt from the WAL after a power loss, so it is not kept).
 * The replayer rebuilds from that log what a power loss at any moment may
 * have left on the disk.
 *
 *   WF_IOLOG=/path/log        the log (appended to; created if missing)
 *   WF_IOLOG_DB=/abs/wf.db    the database whose files are recorded
 *   WF_IOLOG_MARK=text        a process started with this logs it once, at
 *                             its start (a step process saying "my step
 *                             started", so the steps before it were
 *                             acknowledged)
 *   WF_IOLOG_BACKUP=/abs/dir/NAME
 *                             a `wf db backup` to that name, whose files are
 *                             recorded too: its temporary file
 *                             (`/abs/dir/.NAME.partial-PID`, file 3) and
 *                             its folder (file 4, opened to be synced), with
 *                             the temporary file's link to NAME ('L') and
 *                             its removal ('U')
 *
 * Each record is written with one write(2) to the log opened O_APPEND, and
 * the operation and its record are made under one lock (flock(2) on the log
 * between processes, a mutex between threads), so the log's order is the
 * order in which the operations reached the kernel: a sync is logged after
 * every write it covers.
 *
 * A record: u8 kind, u8 file, u32 pid, i64 offset, u32 length, then `length`
 * bytes (little-endian, packed). Kinds: 'W' write (offset, data), 'T'
 * truncate (offset = new size), 'S' sync, 'M' mark (data = text), 'X' an
 * operation the replayer cannot model (rename or unlink of a recorded file,
 * a write through an mmap-able path, a failed lookup); its data says what.
 * Files: 0 database, 1 WAL, 2 journal, 3 a backup's temporary file, 4 its
 * folder.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_FD 4096

struct tracked {
  int file; /* -1: not recorded */
  dev_t dev;
  ino_t ino;
};

static struct tracked fds[MAX_FD];
static int log_fd = -1;
static pid_t owner;
static char db_path[PATH_MAX];
static size_t db_len;
static char backup_dir[PATH_MAX];
static char backup_partial[2 * PATH_MAX + 16]; /* "/abs/dir/.NAME.partial-" */
static char backup_dest[PATH_MAX];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static ssize_t (*real_pwrite64)(int, const void *, size_t, off64_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_ftruncate)(int, off_t);
static int (*real_ftruncate64)(int, off64_t);
static int (*real_close)(int);
static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_openat64)(int, const char *, int, ...);
static int (*real_unlink)(const char *);
static int (*real_rename)(const char *, const char *);
static int (*real_linkat)(int, const char *, int, const char *, int);
static int (*real_link)(const char *, const char *);

static void resolve(void) {
  real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
  real_pwrite = dlsym(RTLD_NEXT, "pwrite");
  real_write = dlsym(RTLD_NEXT, "write");
  real_pwritev = dlsym(RTLD_NEXT, "pwritev");
  real_fsync = dlsym(RTLD_NEXT, "fsync");
  real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
  real_ftruncate = dlsym(RTLD_NEXT, "ftruncate");
  real_ftruncate64 = dlsym(RTLD_NEXT, "ftruncate64");
  real_close = dlsym(RTLD_NEXT, "close");
  real_open = dlsym(RTLD_NEXT, "open");
  real_open64 = dlsym(RTLD_NEXT, "open64");
  real_openat = dlsym(RTLD_NEXT, "openat");
  real_openat64 = dlsym(RTLD_NEXT, "openat64");
  real_unlink = dlsym(RTLD_NEXT, "unlink");
  real_rename = dlsym(RTLD_NEXT, "rename");
  real_linkat = dlsym(RTLD_NEXT, "linkat");
  real_link = dlsym(RTLD_NEXT, "link");
}

/* Whether this is the process whose table `fds` is: a child made with
 * CLONE_VM (vfork, posix_spawn) shares the table's memory until its exec,
 * and must not change it. */
static int is_owner(void) { return (pid_t)syscall(SYS_getpid) == owner; }

static void append(char kind, int file, int64_t offset, const void *data, uint32_t len) {
  if (log_fd < 0) return;
  size_t head = 1 + 1 + 4 + 8 + 4;
  char *buf = malloc(head + len);
  if (!buf) abort();
  uint32_t pid = (uint32_t)syscall(SYS_getpid);
  buf[0] = kind;
  buf[1] = (char)file;
  memcpy(buf + 2, &pid, 4);
  memcpy(buf + 6, &offset, 8);
  memcpy(buf + 14, &len, 4);
  if (len) memcpy(buf + head, data, len);
  size_t done = 0;
  while (done < head + len) {
    ssize_t n = real_write(log_fd, buf + done, head + len - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) abort(); /* a record lost would make the replay lie */
    done += (size_t)n;
  }
  free(buf);
}

static void lock(void) {
  pthread_mutex_lock(&mu);
  if (log_fd >= 0)
    while (flock(log_fd, LOCK_EX) != 0 && errno == EINTR) {
    }
}

static void unlock(void) {
  if (log_fd >= 0) flock(log_fd, LOCK_UN);
  pthread_mutex_unlock(&mu);
}

__attribute__((constructor)) static void init(void) {
  resolve();
  owner = (pid_t)syscall(SYS_getpid);
  for (int i = 0; i < MAX_FD; i++) fds[i].file = -1;
  const char *db = getenv("WF_IOLOG_DB");
  const char *log = getenv("WF_IOLOG");
  const char *backup = getenv("WF_IOLOG_BACKUP");
  if (!log || (!db && !backup)) return;
  if (db) {
    db_len = strlen(db);
    if (db_len + 16 >= sizeof db_path) return;
    memcpy(db_path, db, db_len + 1);
  }
  if (backup) {
    const char *slash = strrchr(backup, '/');
    size_t n = strlen(backup);
    if (!slash || n + 32 >= sizeof backup_dir) return;
    memcpy(backup_dest, backup, n + 1);
    memcpy(backup_dir, backup, (size_t)(slash - backup));
    backup_dir[slash - backup] = 0;
    snprintf(backup_partial, sizeof backup_partial, "%s/.%s.partial-", backup_dir, slash + 1);
  }
  log_fd = real_open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  const char *mark = getenv("WF_IOLOG_MARK");
  if (mark && log_fd >= 0) {
    lock();
    append('M', 0, 0, mark, (uint32_t)strlen(mark));
    unlock();
  }
}

/* Whether `path` is a backup's temporary file: the prefix, then digits. */
static int is_partial(const char *path) {
  size_t n = strlen(backup_partial);
  if (!n || strncmp(path, backup_partial, n) != 0 || !path[n]) return 0;
  for (const char *c = path + n; *c; c++)
    if (*c < '0' || *c > '9') return 0;
  return 1;
}

/* Which recorded file `path` names, or -1. */
static int file_of(const char *path) {
  if (!path) return -1;
  if (is_partial(path)) return 3;
  if (backup_dir[0] && strcmp(path, backup_dir) == 0) return 4;
  if (!db_len || strncmp(path, db_path, db_len) != 0) return -1;
  const char *rest = path + db_len;
  if (*rest == 0) return 0;
  if (strcmp(rest, "-wal") == 0) return 1;
  if (strcmp(rest, "-journal") == 0) return 2;
  return -1;
}

/* The recorded file behind `fd`, or -1 (checked against the inode seen at
 * open, so a number reused for another file is never taken for it). */
static int tracked(int fd) {
  if (fd < 0 || fd >= MAX_FD || fds[fd].file < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_dev != fds[fd].dev || st.st_ino != fds[fd].ino) return -1;
  return fds[fd].file;
}

static void opened(int fd, const char *path, int flags) {
  if (fd < 0 || fd >= MAX_FD || !is_owner()) return;
  int file = file_of(path);
  fds[fd].file = -1;
  if (file < 0 || log_fd < 0) return;
  struct stat st;
  if (fstat(fd, &st) != 0) return;
  fds[fd].file = file;
  fds[fd].dev = st.st_dev;
  fds[fd].ino = st.st_ino;
  if (flags & O_TRUNC) append('T', file, 0, NULL, 0);
}

#define OPEN_BODY(call)                                      \
  mode_t mode = 0;                                           \
  if (flags & (O_CREAT | O_TMPFILE)) {                       \
    va_list ap;                                              \
    va_start(ap, flags);                                     \
    mode = va_arg(ap, mode_t);                               \
    va_end(ap);                                              \
  }                                                          \
  if (log_fd < 0) return call;                               \
  lock();                                                    \
  int fd = call;                                             \
  int saved = errno;                                         \
  opened(fd, path, flags);                                   \
  unlock();                                                  \
  errno = saved;                                             \
  return fd;

int open(const char *path, int flags, ...) { OPEN_BODY(real_open(path, flags, mode)) }
int open64(const char *path, int flags, ...) { OPEN_BODY(real_open64(path, flags, mode)) }
int openat(int dir, const char *path, int flags, ...) {
  /* SQLite opens by absolute path; a relative one is not ours. */
  OPEN_BODY(real_openat(dir, path, flags, mode))
}
int openat64(int dir, const char *path, int flags, ...) {
  OPEN_BODY(real_openat64(dir, path, flags, mode))
}

int close(int fd) {
  if (fd >= 0 && fd < MAX_FD && is_owner()) fds[fd].file = -1;
  return real_close(fd);
}

/* Whether `fd` may be a recorded file (the cheap test, before the lock). */
#define MAYBE(fd) (log_fd >= 0 && (fd) >= 0 && (fd) < MAX_FD && fds[fd].file >= 0)

/* Runs `call` (yielding `r` of type `type`) under the lock, then appends a
 * record made by `record` when `fd` is a recorded file and `ok`. */
#define LOGGED(fd, type, call, ok, record) \
  if (!MAYBE(fd)) return call;             \
  lock();                                  \
  int file = tracked(fd);                  \
  type r = call;                           \
  int saved = errno;                       \
  if (file >= 0 && (ok)) record;           \
  unlock();                                \
  errno = saved;                           \
  return r;

ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t at) {
  LOGGED(fd, ssize_t, real_pwrite64(fd, buf, n, at), r > 0,
         append('W', file, (int64_t)at, buf, (uint32_t)r))
}
ssize_t pwrite(int fd, const void *buf, size_t n, off_t at) {
  LOGGED(fd, ssize_t, real_pwrite(fd, buf, n, at), r > 0,
         append('W', file, (int64_t)at, buf, (uint32_t)r))
}
ssize_t write(int fd, const void *buf, size_t n) {
  if (!MAYBE(fd)) return real_write(fd, buf, n);
  lock();
  int file = tracked(fd);
  off_t at = lseek(fd, 0, SEEK_CUR);
  ssize_t r = real_write(fd, buf, n);
  int saved = errno;
  if (file >= 0 && r > 0) append('W', file, (int64_t)at, buf, (uint32_t)r);
  unlock();
  errno = saved;
  return r;
}
ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t at) {
  if (!MAYBE(fd)) return real_pwritev(fd, iov, cnt, at);
  lock();
  int file = tracked(fd);
  ssize_t r = real_pwritev(fd, iov, cnt, at);
  int saved = errno;
  if (file >= 0 && r > 0) {
    ssize_t left = r;
    int64_t pos = at;
    for (int i = 0; i < cnt && left > 0; i++) {
      size_t n = iov[i].iov_len < (size_t)left ? iov[i].iov_len : (size_t)left;
      append('W', file, pos, iov[i].iov_base, (uint32_t)n);
      pos += (int64_t)n;
      left -= (ssize_t)n;
    }
  }
  unlock();
  errno = saved;
  return r;
}

int fsync(int fd) { LOGGED(fd, int, real_fsync(fd), r == 0, append('S', file, 0, NULL, 0)) }
int fdatasync(int fd) {
  LOGGED(fd, int, real_fdatasync(fd), r == 0, append('S', file, 0, NULL, 0))
}
int ftruncate(int fd, off_t size) {
  LOGGED(fd, int, real_ftruncate(fd, size), r == 0, append('T', file, (int64_t)size, NULL, 0))
}
int ftruncate64(int fd, off64_t size) {
  LOGGED(fd, int, real_ftruncate64(fd, size), r == 0,
         append('T', file, (int64_t)size, NULL, 0))
}

int unlink(const char *path) {
  int file = file_of(path);
  if (log_fd < 0 || file < 0) return real_unlink(path);
  lock();
  int r = real_unlink(path);
  int saved = errno;
  if (r == 0 && file == 3) append('U', file, 0, NULL, 0);
  else if (r == 0) append('X', file, 0, "unlink", 6);
  unlock();
  errno = saved;
  return r;
}

int rename(const char *from, const char *to) {
  int file = file_of(to) >= 0 ? file_of(to) : file_of(from);
  if (log_fd < 0 || file < 0) return real_rename(from, to);
  lock();
  int r = real_rename(from, to);
  int saved = errno;
  if (r == 0) append('X', file, 0, "rename", 6);
  unlock();
  errno = saved;
  return r;
}

/* A link of a backup's temporary file to its name: 'L'; any other link
 * of a recorded file cannot be modelled. */
static int linked(const char *from, const char *to, int r) {
  int file = file_of(from);
  if (r == 0 && file == 3 && strcmp(to, backup_dest) == 0) append('L', 3, 0, NULL, 0);
  else if (r == 0 && file >= 0) append('X', file, 0, "link", 4);
  return r;
}

int linkat(int fromdir, const char *from, int todir, const char *to, int flags) {
  if (log_fd < 0 || file_of(from) < 0) return real_linkat(fromdir, from, todir, to, flags);
  lock();
  int r = real_linkat(fromdir, from, todir, to, flags);
  int saved = errno;
  linked(from, to, r);
  unlock();
  errno = saved;
  return r;
}

int link(const char *from, const char *to) {
  if (log_fd < 0 || file_of(from) < 0) return real_link(from, to);
  lock();
  int r = real_link(from, to);
  int saved = errno;
  linked(from, to, r);
  unlock();
  errno = saved;
  return r;
}
