//! The physical floor of a durable shell step, for `bench/bench.py`: what any
//! runner that records an attempt durably before running its command must do
//! at the least, with nothing else (no database, no engine, no spans).
//!
//! Each step writes an attempt record (`PAGES` pages of 4 KiB, appended in a
//! ring like a write-ahead log) and waits for the disk (`fdatasync`), then
//! starts the command with stdin from /dev/null and stdout/stderr piped (std
//! spawns with `posix_spawn`, as glibc's `CLONE_VM | CLONE_VFORK`), reads
//! both pipes to their end and reaps it.
//!
//! Usage: `floor STEPS PAGES FILE [PROGRAM]` (PROGRAM defaults to
//! `/bin/true`; `PAGES` 0 writes and syncs nothing: the spawn alone).
//! Built by bench.py with `rustc -O`; it needs nothing but std.

use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::process::{Command, Stdio};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: floor STEPS PAGES FILE [PROGRAM]");
        std::process::exit(2);
    }
    let steps: u64 = args[1].parse().expect("STEPS: a number");
    let pages: u64 = args[2].parse().expect("PAGES: a number");
    let program = args.get(4).map_or("/bin/true", String::as_str);
    let log = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&args[3])
        .expect("FILE: cannot open");
    let ring = 1000;
    let page = vec![0x5au8; 4096];
    let mut slot = 0u64;
    let (mut out, mut err) = (Vec::new(), Vec::new());
    for step in 0..steps {
        if pages > 0 {
            for _ in 0..pages {
                log.write_all_at(&page, (slot % ring) * 4096)
                    .expect("write");
                slot += 1;
            }
            log.sync_data().expect("fdatasync");
        }
        let mut child = Command::new(program)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        out.clear();
        err.clear();
        // /bin/true writes nothing: reading one pipe to its end, then the
        // other, cannot block on a full pipe.
        child.stdout.take().unwrap().read_to_end(&mut out).expect("stdout");
        child.stderr.take().unwrap().read_to_end(&mut err).expect("stderr");
        let status = child.wait().expect("wait");
        assert!(status.success(), "step {step}: {status}");
    }
}
