//! Runs one attempt of a `run:` step as a real process: its own process group
//! (so a timeout or an interrupt can stop everything it started), captured
//! stdout/stderr with a size cap, a `$WF_OUTPUT` file for key=value outputs,
//! and the mapping from how the process ended to an error type.

use super::output::{self, shell_output};
use super::output_files::{self, OutputFile, OutputFiles};
use super::{AttemptResult, Failure, spawn};
use crate::vocab::ErrorType;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use opentelemetry::trace::Status;
use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// How long a process group gets between SIGTERM and SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(2);

/// Values longer than this go to a step through a file, not an environment
/// variable: Linux refuses one argument or variable over 128 KiB
/// (MAX_ARG_STRLEN), and all of them together over ARG_MAX.
pub const LARGE_VALUE: usize = 64 * 1024;

/// The kernel's limit on one argument or environment entry (MAX_ARG_STRLEN).
const MAX_ARG_STRLEN: usize = 32 * 4096;

/// Everything needed to start the process, already rendered.
#[derive(Debug, Clone)]
pub struct ShellJob {
    /// The script when `shell` is set: `sh -c <text>`, or written to a
    /// file that `interpreter` runs; else exec `argv`.
    pub shell: Option<String>,
    /// The `shell:` that runs the script from a file (`None`: `sh -c`).
    pub interpreter: Option<crate::workflow::shell::Shell>,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Variables of wf's environment the process does not inherit: the
    /// workflow's secrets (a step gets one only through what references it).
    pub env_remove: Vec<String>,
    /// Values handed over in memory files: `NAME_FILE` names each one's path
    /// (`/dev/fd/N`) in the process's environment.
    pub files: Vec<(String, String)>,
    /// Files stdout and stderr are copied to as they come (masked), for
    /// `wf logs --follow`; removed when the attempt ends.
    pub live: Option<(PathBuf, PathBuf)>,
    /// Masks secrets in what goes to `live`.
    pub redactor: super::redact::Redactor,
    pub dir: PathBuf,
    pub timeout: Option<Duration>,
    /// Exit code -> error type.
    pub errors: BTreeMap<i32, String>,
}

impl ShellJob {
    /// What runs, for the `process.command` span attribute: `sh` for a shell
    /// string, else the program.
    pub fn program(&self) -> &str {
        match (&self.shell, &self.interpreter) {
            (Some(_), None) => "sh",
            (Some(_), Some(shell)) => shell.program(),
            (None, _) => self.argv.first().map_or("", String::as_str),
        }
    }
}

enum Ended {
    Exited(std::process::ExitStatus),
    TimedOut,
    Interrupted,
    OverLimit,
}

/// How long the step's stdout/stderr are still read once its process group
/// is gone: a descendant that left the group (setsid, a daemon) may hold them
/// open for ever, and a step must end all the same.
const DRAIN_GRACE: Duration = Duration::from_millis(250);

/// A started attempt: the process is running, its output being captured.
pub struct Running {
    job: ShellJob,
    child: spawn::Child,
    output_file: OutputFile,
    span: tracing::Span,
    /// The `shell:` script's file, removed when the attempt is done with.
    _script: Option<tempfile::TempPath>,
}

impl Running {
    /// The pid of the step's direct child, which leads its process group.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process waits at its exec for `spawn::release`.
    pub fn held(&self) -> bool {
        self.child.held()
    }

    /// The process group this attempt runs in, as the store records it.
    pub fn group(&self) -> Option<crate::store::ProcessTag> {
        super::procs::tag(self.child.id(), self.child.start_ticks())
    }
}

/// Why [`start`] started nothing.
pub enum Unstarted {
    /// The attempt failed before its process could start.
    Failed(Box<AttemptResult>),
    /// Asked to hold the process at its exec, which cannot be done for this
    /// one (see `spawn::hold`): nothing was started, the job and its span
    /// are given back, to be started once the attempt is durable.
    NotHeld(Box<ShellJob>, tracing::Span),
}

/// Starts the attempt's process in a process group of its own, with a
/// parent-death signal so that it dies with wf. `span` (the process span)
/// gets its pid, and later its exit code and status. `hold`: the process is
/// stopped at its exec until `spawn::release` (for an attempt whose record
/// is being committed), or not started at all.
pub fn start(
    job: ShellJob,
    span: tracing::Span,
    files: &mut OutputFiles,
    hold: bool,
) -> Result<Running, Unstarted> {
    let failed = |span: &tracing::Span, f: Failure| {
        span.set_status(Status::error(f.message.clone()));
        Unstarted::Failed(Box::new(AttemptResult::failed(f)))
    };
    let output_file = match files.take() {
        Ok(f) => f,
        Err(e) => {
            let f = Failure::new(
                ErrorType::Spawn,
                format!("cannot create $WF_OUTPUT file: {e}"),
            );
            return Err(failed(&span, f));
        }
    };
    // A `shell:`'s script: a file of the run's private folder, removed when
    // the attempt ends (dropped with `Running`).
    let mut script = None;
    let script_words: Vec<String>;
    let (program, args): (&std::ffi::OsStr, Vec<&std::ffi::OsStr>) = match &job.shell {
        Some(text) if let Some(shell) = &job.interpreter => {
            let folder = output_file.path().parent().unwrap_or(Path::new("."));
            let path = match super::script::write(folder, shell, text) {
                Ok(p) => p,
                Err(e) => {
                    files.unused(output_file);
                    let f = Failure::new(
                        ErrorType::Spawn,
                        format!("cannot write the script file: {e}"),
                    );
                    return Err(failed(&span, f));
                }
            };
            let mut words = shell.argv(&path.to_string_lossy());
            // GitHub's `python` is `python3` where only that is installed
            // (Debian, Ubuntu).
            if words[0] == "python" && !super::script::on_path("python", &job.env) {
                words[0] = "python3".into();
            }
            script = Some(path);
            script_words = words;
            (
                script_words[0].as_ref(),
                script_words[1..].iter().map(AsRef::as_ref).collect(),
            )
        }
        Some(text) => ("sh".as_ref(), vec!["-c".as_ref(), text.as_ref()]),
        None => {
            let Some(program) = job.argv.first() else {
                return Err(failed(
                    &span,
                    Failure::new(ErrorType::Spawn, "empty command".into()),
                ));
            };
            (
                program.as_ref(),
                job.argv[1..]
                    .iter()
                    .map(std::convert::AsRef::as_ref)
                    .collect(),
            )
        }
    };
    // A relative path with a slash is relative to the step's folder, like in a shell.
    let joined;
    let program = if program.as_bytes().contains(&b'/') && !program.as_bytes().starts_with(b"/") {
        joined = job.dir.join(program);
        joined.as_os_str()
    } else {
        program
    };
    let mut env: Vec<(&std::ffi::OsStr, &std::ffi::OsStr)> = job
        .env
        .iter()
        .map(|(k, v)| (k.as_ref(), v.as_ref()))
        .collect();
    env.push(("WF_OUTPUT".as_ref(), output_file.path().as_os_str()));
    // Large values: memory files the child inherits (closed here once it
    // started), never written to disk.
    let mut memfds = Vec::with_capacity(job.files.len());
    let mut file_vars = Vec::with_capacity(job.files.len());
    for (name, value) in &job.files {
        match memfd(value) {
            Ok(fd) => {
                file_vars.push((
                    format!("{name}_FILE"),
                    format!("/dev/fd/{}", fd.as_raw_fd()),
                ));
                memfds.push(fd);
            }
            Err(e) => {
                let f = Failure::new(
                    ErrorType::Spawn,
                    format!("cannot hand a large value to the step: {e}"),
                );
                return Err(failed(&span, f));
            }
        }
    }
    env.extend(file_vars.iter().map(|(k, v)| (k.as_ref(), v.as_ref())));
    if let Some(f) = over_kernel_limits(program, &args, &env) {
        return Err(failed(&span, f));
    }
    let env_remove: Vec<&std::ffi::OsStr> = job
        .env_remove
        .iter()
        .map(std::convert::AsRef::as_ref)
        .collect();
    let spawned = spawn::spawn(&spawn::Spec {
        program,
        args: &args,
        env: &env,
        env_remove: &env_remove,
        dir: &job.dir,
        hold,
    });
    drop(memfds);
    match spawned {
        Ok(child) => {
            span.set_attribute("process.pid", i64::from(child.id()));
            Ok(Running {
                job,
                child,
                output_file,
                span,
                _script: script,
            })
        }
        Err(e) if hold && e.kind() == spawn::NOT_HELD => {
            files.unused(output_file);
            Err(Unstarted::NotHeld(Box::new(job), span))
        }
        Err(e) => {
            let what = match &job.shell {
                None => job.argv[0].clone(),
                Some(_) => program.to_string_lossy().into_owned(),
            };
            let reason = if !job.dir.is_dir() {
                format!("working directory {} does not exist", job.dir.display())
            } else {
                format!("cannot start `{what}`: {}", crate::workflow::io_reason(&e))
            };
            Err(failed(&span, Failure::new(ErrorType::Spawn, reason)))
        }
    }
}

/// An anonymous in-memory file holding `value`, inherited by the next child.
fn memfd(value: &str) -> std::io::Result<std::os::fd::OwnedFd> {
    use nix::sys::memfd::{MFdFlags, memfd_create};
    use std::io::Write;
    // Not close-on-exec: the step's process opens it as /dev/fd/N. Children
    // are started one at a time, and the parent closes it right after.
    let fd = memfd_create(c"wf-value", MFdFlags::empty())?;
    let mut file = std::fs::File::from(fd);
    file.write_all(value.as_bytes())?;
    Ok(file.into())
}

/// A clear failure, before anything starts, for what execve would refuse
/// with "Argument list too long".
fn over_kernel_limits(
    program: &std::ffi::OsStr,
    args: &[&std::ffi::OsStr],
    env: &[(&std::ffi::OsStr, &std::ffi::OsStr)],
) -> Option<Failure> {
    let limit = MAX_ARG_STRLEN - 1;
    for (i, a) in args.iter().enumerate() {
        if a.len() > limit {
            return Some(Failure::new(
                ErrorType::Spawn,
                format!(
                    "argument {} of `{}` is {} bytes, over the system's limit of {limit} bytes for one argument",
                    i + 1,
                    program.to_string_lossy(),
                    a.len()
                ),
            ));
        }
    }
    for (k, v) in env {
        if k.len() + 1 + v.len() > limit {
            return Some(Failure::new(
                ErrorType::Spawn,
                format!(
                    "environment variable `{}` is {} bytes, over the system's limit of {limit} bytes for one variable",
                    k.to_string_lossy(),
                    k.len() + 1 + v.len()
                ),
            ));
        }
    }
    // (glibc's sysconf asks the kernel for the stack limit every time:
    // read once, as wf never changes its limits.)
    static ARG_MAX: std::sync::OnceLock<nix::libc::c_long> = std::sync::OnceLock::new();
    let arg_max = *ARG_MAX.get_or_init(|| {
        use nix::unistd::{SysconfVar, sysconf};
        // No limit, or none known: -1, as the C call says.
        sysconf(SysconfVar::ARG_MAX).ok().flatten().unwrap_or(-1)
    });
    let inherited = spawn::inherited_env_size();
    let total: usize = args.iter().map(|a| a.len() + 1 + 8).sum::<usize>()
        + env
            .iter()
            .map(|(k, v)| k.len() + v.len() + 2 + 8)
            .sum::<usize>()
        + inherited;
    (arg_max > 0 && total > arg_max as usize).then(|| {
        Failure::new(
            ErrorType::Spawn,
            format!(
                "the arguments and environment of the step are {total} bytes, over the system's limit of {arg_max} bytes"
            ),
        )
    })
}

/// Waits for the attempt to end (or stops it on a timeout, an interrupt or
/// output over the limit) and reports how it went, with its `$WF_OUTPUT`
/// file for [`OutputFiles::spent`]; the process span ends here.
pub async fn finish(
    running: Running,
    interrupt: super::stop::StopSignal,
) -> (AttemptResult, OutputFile) {
    let Running {
        job,
        child,
        output_file,
        span,
        _script: script,
    } = running;
    let result = execute(job, child, &output_file, interrupt).await;
    drop(script);
    if let Some(code) = result.exit_code {
        span.set_attribute("process.exit.code", i64::from(code));
    }
    if let Err(f) = &result.outcome {
        span.set_status(Status::error(f.message.clone()));
    }
    (result, output_file)
}

async fn execute(
    job: ShellJob,
    mut child: spawn::Child,
    output_file: &OutputFile,
    mut interrupt: super::stop::StopSignal,
) -> AttemptResult {
    let limit = output::output_limit();
    let pgid = Some(Pid::from_raw(child.id() as i32));
    let kill = |sig: Signal| {
        if let Some(p) = pgid {
            let _ = killpg(p, sig);
        }
    };

    let (over_tx, mut over_rx) = watch::channel(false);
    let (cut_tx, cut_rx) = watch::channel(false);
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let live =
        |path: Option<&PathBuf>| path.and_then(|p| LiveCopy::create(p, job.redactor.clone()));
    let out_task = tokio::spawn(capture(
        stdout,
        limit,
        Some(over_tx),
        cut_rx.clone(),
        live(job.live.as_ref().map(|l| &l.0)),
    ));
    let err_task = tokio::spawn(capture(
        stderr,
        limit,
        None,
        cut_rx,
        live(job.live.as_ref().map(|l| &l.1)),
    ));

    let deadline = async {
        match job.timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    let ended = tokio::select! {
        status = child.wait() => match status {
            Ok(s) => Ended::Exited(s),
            Err(e) => return AttemptResult::failed(Failure::new(ErrorType::Spawn, format!("waiting for the process failed: {e}"))),
        },
        _ = &mut deadline => Ended::TimedOut,
        () = interrupt.fired() => Ended::Interrupted,
        _ = wait_true(&mut over_rx) => Ended::OverLimit,
    };
    if !matches!(ended, Ended::Exited(_)) {
        kill(Signal::SIGTERM);
        if tokio::time::timeout(KILL_GRACE, child.wait())
            .await
            .is_err()
        {
            kill(Signal::SIGKILL);
            let _ = child.wait().await;
        }
    }
    // Whatever the step left behind in its process group ends with the step.
    kill(Signal::SIGKILL);
    // Output still on its way is read for a moment; a descendant outside the
    // group that holds the pipes open cannot keep the step running. (Most
    // steps' pipes are at their end by now: no timer is set for them.)
    let drained = async {
        (
            out_task.await.unwrap_or_default(),
            err_task.await.unwrap_or_default(),
        )
    };
    tokio::pin!(drained);
    let ((stdout, _), (stderr, _)) = match tokio::time::timeout(DRAIN_GRACE, &mut drained).await {
        Ok(both) => both,
        Err(_) => {
            let _ = cut_tx.send(true);
            drained.await
        }
    };
    // Read only when the step succeeded, and never more than the cap.
    let keys = if matches!(ended, Ended::Exited(s) if s.success()) {
        match output_files::contents(output_file) {
            Ok(Some(f)) => output::read_output_file(f, limit),
            Ok(None) => Ok(Vec::new()),
            Err(e) => Err(Failure::new(
                ErrorType::OutputInvalid,
                format!("cannot read $WF_OUTPUT: {e}"),
            )),
        }
    } else {
        Ok(Vec::new())
    };

    let mut result = AttemptResult {
        stdout,
        stderr,
        ..AttemptResult::default()
    };
    match ended {
        Ended::TimedOut => {
            let t = job.timeout.unwrap_or_default();
            result.outcome = Err(Failure::new(
                ErrorType::Timeout,
                format!("timed out after {}", crate::workflow::duration::human(t)),
            ));
        }
        Ended::Interrupted => {
            result.interrupted = true;
            result.outcome = Err(Failure::new(ErrorType::Interrupted, "interrupted".into()));
        }
        Ended::OverLimit => {
            result.outcome = Err(Failure::new(
                ErrorType::OutputLimit,
                format!("stdout exceeded the output limit of {limit} bytes; the step was stopped"),
            ));
        }
        Ended::Exited(status) => {
            use std::os::unix::process::ExitStatusExt;
            let code = status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
            result.exit_code = Some(code);
            if code == 0 {
                let keys = match keys {
                    Ok(k) => k,
                    Err(f) => {
                        result.outcome = Err(f);
                        return result;
                    }
                };
                let out = shell_output(&result.stdout, 0, keys);
                let size = out.to_string().len();
                result.outcome = if size > limit {
                    Err(Failure::new(
                        ErrorType::OutputLimit,
                        format!("output is {size} bytes, over the limit of {limit} bytes"),
                    ))
                } else {
                    Ok(out)
                };
            } else {
                let error_type = match job.errors.get(&code) {
                    Some(t) => ErrorType::parse(t),
                    None if code == 127 || (code == 126 && job.shell.is_some()) => ErrorType::Spawn,
                    None => ErrorType::Exit(code),
                };
                let last = String::from_utf8_lossy(&result.stderr)
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .map(|l| format!(": {}", l.trim()))
                    .unwrap_or_default();
                result.outcome = Err(Failure::new(
                    error_type,
                    format!("exited with code {code}{last}"),
                ));
            }
        }
    }
    result
}

async fn wait_true(rx: &mut watch::Receiver<bool>) {
    if rx.wait_for(|v| *v).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Reads a stream to its end (or until `cut`), keeping at most `limit` bytes.
/// When `over` is given, signals it as soon as the stream goes past the limit.
async fn capture<R: AsyncRead + Unpin>(
    reader: Option<R>,
    limit: usize,
    over: Option<watch::Sender<bool>>,
    mut cut: watch::Receiver<bool>,
    mut live: Option<LiveCopy>,
) -> (Vec<u8>, bool) {
    let Some(mut reader) = reader else {
        return (Vec::new(), false);
    };
    let mut kept = Vec::new();
    let mut buf = ReadBuffer::take();
    let mut truncated = false;
    loop {
        let read = tokio::select! {
            r = reader.read(&mut buf) => r,
            _ = wait_true(&mut cut) => break,
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = limit.saturating_sub(kept.len());
                if let Some(l) = &mut live {
                    l.write(&buf[..n.min(room)]);
                }
                kept.extend_from_slice(&buf[..n.min(room)]);
                if n > room && !truncated {
                    truncated = true;
                    if let Some(tx) = &over {
                        let _ = tx.send(true);
                    }
                }
            }
        }
    }
    if truncated && over.is_none() {
        kept.extend_from_slice(b"\n[wf: output truncated at the capture limit]\n");
    }
    if let Some(l) = live {
        l.finish();
    }
    (kept, truncated)
}

/// A buffer `capture` reads into, kept by the thread for the next capture:
/// made and freed twice a step, a buffer of this size made glibc's malloc
/// consolidate its free lists each time. 16 KiB: most steps print little, a
/// large output takes a few more reads.
struct ReadBuffer(Vec<u8>);

thread_local! {
    static READ_BUFFERS: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl ReadBuffer {
    const SIZE: usize = 16 * 1024;
    /// Buffers kept at most: two a running step, for steps that end together.
    const KEPT: usize = 8;

    fn take() -> ReadBuffer {
        let kept = READ_BUFFERS.with(|b| b.borrow_mut().pop());
        ReadBuffer(kept.unwrap_or_else(|| vec![0u8; Self::SIZE]))
    }
}

impl Drop for ReadBuffer {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.0);
        READ_BUFFERS.with(|b| {
            let mut b = b.borrow_mut();
            if b.len() < Self::KEPT {
                b.push(buf);
            }
        });
    }
}

impl std::ops::Deref for ReadBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl std::ops::DerefMut for ReadBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

/// A copy of a stream, as it comes, with secrets masked, for `wf logs
/// --follow`. A secret split across two reads is never written in part: the
/// last bytes (as many as the longest form of a secret, less one) wait for the
/// next read, and a cut is moved back before any secret it would split, so
/// the copy is exactly the masked text `wf logs` shows once the attempt ended.
struct LiveCopy {
    /// Opened (with its folder) at the first output: most attempts are over
    /// before anybody could follow them, and never pay for the file.
    file: Option<std::fs::File>,
    failed: bool,
    path: PathBuf,
    pending: Vec<u8>,
    redactor: super::redact::Redactor,
}

impl LiveCopy {
    fn create(path: &Path, redactor: super::redact::Redactor) -> Option<LiveCopy> {
        Some(LiveCopy {
            file: None,
            failed: false,
            path: path.to_path_buf(),
            pending: Vec::new(),
            redactor,
        })
    }

    /// The file, opened (mode 0600, its folders 0700) on first use.
    fn file(&mut self) -> Option<&mut std::fs::File> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        if self.file.is_none() && !self.failed {
            let open = || {
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(&self.path)
            };
            // The folders: made private, and used only while they are this
            // user's own and nobody else's to write into (a shared temp dir).
            let private = |dir: &Path| {
                use std::os::unix::fs::MetadataExt;
                std::fs::symlink_metadata(dir).is_ok_and(|m| {
                    m.is_dir()
                        && m.uid() == nix::unistd::geteuid().as_raw()
                        && m.mode() & 0o022 == 0
                })
            };
            let id_dir = self.path.parent();
            let root = id_dir.and_then(Path::parent);
            let opened = match (id_dir, root) {
                (Some(dir), Some(root)) => std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .and_then(|()| {
                        if private(root) && private(dir) {
                            open()
                        } else {
                            Err(std::io::Error::other("not a private folder"))
                        }
                    }),
                _ => open(),
            };
            match opened {
                Ok(f) => self.file = Some(f),
                Err(_) => self.failed = true,
            }
        }
        self.file.as_mut()
    }

    fn write(&mut self, chunk: &[u8]) {
        use std::io::Write as _;
        self.pending.extend_from_slice(chunk);
        let hold = self.redactor.longest().saturating_sub(1);
        if self.pending.len() <= hold {
            return;
        }
        let mut cut = self.pending.len() - hold;
        for (start, end) in self.redactor.spans(&self.pending) {
            if start < cut && cut < end {
                cut = start;
            }
        }
        let rest = self.pending.split_off(cut);
        let ready = std::mem::replace(&mut self.pending, rest);
        let masked = self.redactor.bytes(ready);
        if let Some(f) = self.file() {
            let _ = f.write_all(&masked);
        }
    }

    /// Writes what is left, then removes the file: the attempt's logs are
    /// in the database from now on.
    fn finish(mut self) {
        use std::io::Write as _;
        if self.file.is_none() && self.pending.is_empty() {
            return;
        }
        let rest = std::mem::take(&mut self.pending);
        let masked = self.redactor.bytes(rest);
        if let Some(f) = self.file() {
            let _ = f.write_all(&masked);
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_live_copy_goes_into_a_folder_others_may_write_to() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("shared");
        std::fs::create_dir(&root).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
        let path = root.join("i1").join("x.1.out");
        let redactor = super::super::redact::Redactor::new(Vec::new());
        let mut live = LiveCopy::create(&path, redactor).unwrap();
        live.write(b"some output\n");
        assert!(
            !path.exists(),
            "a copy was written under a world-writable folder"
        );
        live.finish();
    }

    #[test]
    fn a_live_copy_never_writes_part_of_a_secret() {
        let dir = tempfile::tempdir().unwrap();
        // As the runner lays them out: <live root>/<instance>/<key>.<n>.out.
        let path = dir.path().join("wf.db.live").join("i1").join("x.1.out");
        let redactor = super::super::redact::Redactor::new(vec!["f0ll0w-s3cret".to_string()]);
        let mut live = LiveCopy::create(&path, redactor).unwrap();
        for chunk in [
            "ab",
            "c f0ll0",
            "w-s3c",
            "ret and more text after it",
            " end",
        ] {
            live.write(chunk.as_bytes());
            // (The file appears with the first bytes that are safe to write.)
            let so_far = std::fs::read_to_string(&path).unwrap_or_default();
            for part in ["f0ll0", "0w-s3", "s3cret"] {
                assert!(!so_far.contains(part), "{so_far:?} after {chunk:?}");
            }
        }
        let before_finish = std::fs::read_to_string(&path).unwrap();
        assert!(
            before_finish.starts_with("abc *** and more"),
            "{before_finish:?}"
        );
        live.finish();
        assert!(!path.exists(), "the copy is removed at the end");
    }
}
