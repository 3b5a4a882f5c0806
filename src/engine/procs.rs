//! Process groups of step attempts, as the kernel knows them: how an attempt's
//! group is identified in the store (host, group id, leader start time), and
//! how a runner that takes an instance over ends what a crashed or lost
//! attempt left running on this host, so two attempts of one step never run
//! at once. Linux `/proc` is the source; a group whose id was reused by an
//! unrelated process (its leader started at another time) is never touched.

use crate::store::ProcessTag;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// `hostname/boot/pid namespace` ([`super::lease::pid_scope`]): process
/// groups recorded under another value are on another machine, from before
/// a reboot, or in another container, and are none of this runner's
/// business.
pub fn host_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(super::lease::pid_scope)
}

/// What `/proc/PID/stat` says of a process.
pub(super) struct Stat {
    zombie: bool,
    pub(super) pgrp: i64,
    /// Clock ticks after boot (field 22).
    pub(super) start: i64,
}

pub(super) fn stat(pid: i64) -> Option<Stat> {
    use std::io::Read;
    // One read into a buffer that holds any stat line (about 300 bytes; the
    // name is at most 64): `read_to_string` grows its buffer from 32 bytes
    // and took six reads and an `fstat`, once per step.
    let mut buf = [0u8; 1024];
    let mut file = std::fs::File::open(format!("/proc/{pid}/stat")).ok()?;
    let mut len = 0;
    while len < buf.len() {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
        if buf[len - 1] == b'\n' {
            break;
        }
    }
    let text = std::str::from_utf8(&buf[..len]).ok()?;
    // The command name may hold spaces and parentheses: fields follow the last ')'.
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        zombie: fields.first().is_some_and(|s| *s == "Z" || *s == "X"),
        pgrp: fields.get(2)?.parse().ok()?,
        // Field 22 of stat (the third field is the first after the name).
        start: fields.get(19)?.parse().ok()?,
    })
}

/// Whether a process with this pid exists and is not a zombie.
pub fn pid_alive(pid: i32) -> bool {
    match kill(Pid::from_raw(pid), None) {
        Ok(()) => stat(i64::from(pid)).is_none_or(|s| !s.zombie),
        Err(nix::errno::Errno::ESRCH) => false,
        Err(_) => true,
    }
}

/// The tag of a process group this process just started (its leader `pid`,
/// which made the group before it exec'd): with the leader's start time
/// when the spawn knew it (`start`, clock ticks after boot), else as
/// `/proc/PID/stat` says (which cost a step about 20 µs of CPU).
pub fn tag(pid: u32, start: Option<i64>) -> Option<ProcessTag> {
    let (pgid, start) = match start {
        Some(start) => (i64::from(pid), start),
        None => {
            let s = stat(i64::from(pid))?;
            (s.pgrp, s.start)
        }
    };
    Some(ProcessTag {
        host: host_id().to_string(),
        pgid,
        start,
    })
}

/// The ids of the processes this host runs (none when `/proc` is unreadable).
fn pids() -> impl Iterator<Item = i64> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i64>().ok())
}

/// Live members of the group `tag` names, or none when its id now belongs to
/// another group (a leader with that pid that started at another time).
fn members(tag: &ProcessTag) -> Vec<i64> {
    if let Some(leader) = stat(tag.pgid)
        && leader.start != tag.start
    {
        return Vec::new();
    }
    pids()
        .filter(|&pid| {
            stat(pid).is_some_and(|s| s.pgrp == tag.pgid && !s.zombie && s.start >= tag.start)
        })
        .collect()
}

/// The process groups on this host that run attempt `attempt` of step `key`
/// of instance `instance`, found by the variables wf gave the attempt's
/// process (`WF_INSTANCE_ID`, `WF_STEP_ID`, `WF_ATTEMPT`, inherited by what it
/// starts), and, when the attempt's run is known, `TRACEPARENT` in that
/// run's trace (`trace`; a program that propagates its own spans keeps
/// the trace): an instance of that id in another database is another
/// run, whose steps are not this one's to end (an id given with `--id`
/// is often the same in two databases; two tests' steps ended each
/// other's so). For an attempt whose group was never recorded: its holder
/// stopped or died between starting the process and recording the group.
/// Only processes this user may read are seen, as only those could be ended.
pub fn unrecorded(instance: &str, key: &str, attempt: i64, trace: Option<&str>) -> Vec<ProcessTag> {
    let wanted = [
        format!("WF_INSTANCE_ID={instance}"),
        format!("WF_STEP_ID={key}"),
        format!("WF_ATTEMPT={attempt}"),
    ];
    let in_trace = trace.map(|t| format!("TRACEPARENT=00-{t}-"));
    // Never this runner's own group (a step cannot have joined it, but a
    // signal there would end the runner).
    let own = i64::from(nix::unistd::getpgrp().as_raw());
    // Group id -> the earliest start among its members that match.
    let mut groups: std::collections::BTreeMap<i64, i64> = Default::default();
    for pid in pids() {
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let vars: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
        if !wanted.iter().all(|w| vars.contains(&w.as_bytes())) {
            continue;
        }
        if let Some(t) = &in_trace
            && !vars.iter().any(|v| v.starts_with(t.as_bytes()))
        {
            continue;
        }
        if let Some(s) = stat(pid).filter(|s| !s.zombie && s.pgrp > 1 && s.pgrp != own) {
            let start = groups.entry(s.pgrp).or_insert(s.start);
            *start = (*start).min(s.start);
        }
    }
    groups
        .into_iter()
        .map(|(pgid, start)| ProcessTag {
            host: host_id().to_string(),
            pgid,
            // The leader's start when it is there (`members` checks it).
            start: stat(pgid).map_or(start, |leader| leader.start),
        })
        .collect()
}

/// Ends what is left of the attempt's process group when it ran on this host:
/// SIGTERM, up to `grace` for it to go, then SIGKILL. Returns how many
/// processes were found.
pub async fn end_leftover(tag: &ProcessTag, grace: Duration) -> usize {
    if tag.host != host_id() || tag.pgid <= 1 {
        return 0;
    }
    let found = members(tag).len();
    if found == 0 {
        return 0;
    }
    let group = Pid::from_raw(tag.pgid as i32);
    let _ = killpg(group, Signal::SIGTERM);
    let until = Instant::now() + grace;
    while Instant::now() < until && !members(tag).is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if !members(tag).is_empty() {
        let _ = killpg(group, Signal::SIGKILL);
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until && !members(tag).is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_tagged_and_alive() {
        let me = std::process::id();
        let t = tag(me, None).expect("own stat");
        assert_eq!(t.host, host_id());
        assert!(t.start > 0);
        assert!(pid_alive(me as i32));
    }

    #[test]
    fn a_leftover_group_is_ended_and_a_reused_id_is_not_touched() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("spawn sleep");
        let ours = tag(child.id(), None).expect("child stat");
        assert_eq!(ours.pgid, i64::from(child.id()));
        // The same group id recorded with another start time: as if the id
        // had been reused since. Nothing is found, so nothing is killed.
        let reused = ProcessTag {
            start: ours.start + 1,
            ..ours.clone()
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        assert_eq!(
            rt.block_on(end_leftover(&reused, Duration::from_secs(1))),
            0
        );
        assert!(child.try_wait().expect("wait").is_none(), "still running");
        // Another host's group is not ours either.
        let elsewhere = ProcessTag {
            host: "other/boot".into(),
            ..ours.clone()
        };
        assert_eq!(
            rt.block_on(end_leftover(&elsewhere, Duration::from_secs(1))),
            0
        );
        assert_eq!(rt.block_on(end_leftover(&ours, Duration::from_secs(1))), 1);
        let status = child.wait().expect("wait");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(15), "ended by SIGTERM");
    }
}
