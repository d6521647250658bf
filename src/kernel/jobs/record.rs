//! What a session's private directory says of its live jobs (`jobs.json`): each one's host
//! pids (its reaper's, its process group's) with their start times and its token (the
//! `KEEL_JOB` variable every process of the job inherits), rewritten whenever a job starts or
//! ends, so that the next keel to open the session ends whatever a crashed one left
//! ([`reap_stale`]) and never a process that merely reuses a pid. Owns the file and those
//! `/proc` checks; it never starts anything.

use std::path::{Path, PathBuf};

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use super::{JobId, JobInfo, JobState};

/// The file, in the session's private directory.
pub(super) const FILE: &str = "jobs.json";
/// The variable every process of a job inherits: its token.
pub(super) const TOKEN_VAR: &str = "KEEL_JOB";
/// How many rounds of killing a token's processes are made at most.
const ROUNDS: usize = 100;

/// A host process, named by its pid and its start time (in clock ticks since boot, as
/// `/proc/PID/stat` says): another process that got the same pid has another start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostPid {
    pub pid: i32,
    pub start: u64,
}

impl HostPid {
    /// `pid` as it runs now; `None` when it does not.
    pub fn of(pid: i32) -> Option<HostPid> {
        Some(HostPid {
            pid,
            start: start_time(pid)?,
        })
    }

    /// Whether it still is that process.
    pub fn alive(&self) -> bool {
        start_time(self.pid) == Some(self.start)
    }
}

/// One live job as the file keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Record {
    pub id: JobId,
    pub command: String,
    #[serde(default)]
    pub tty: bool,
    pub started_ms: i64,
    pub token: String,
    /// Its reaper outside any sandbox (SIGTERM ends it and everything below it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reaper: Option<HostPid>,
    /// Its process group, when the host sees it (its leader's pid and start time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<HostPid>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    jobs: Vec<Record>,
}

/// Writes `records` as the session's live jobs (the file goes when there are none).
pub(super) fn write(dir: &Path, records: Vec<Record>) -> std::io::Result<()> {
    let path = dir.join(FILE);
    if records.is_empty() {
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    let text = serde_json::to_vec_pretty(&File { jobs: records }).map_err(std::io::Error::other)?;
    let tmp = dir.join(format!(".{FILE}.{}", std::process::id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &path)
}

/// Ends every job `dir`'s file lists (what a keel that did not end them left) and removes the
/// file: those jobs, `Lost`.
pub(super) fn reap_stale(dir: &Path) -> Vec<JobInfo> {
    let path: PathBuf = dir.join(FILE);
    let Ok(text) = std::fs::read(&path) else {
        return Vec::new();
    };
    let records = match serde_json::from_slice::<File>(&text) {
        Ok(f) => f.jobs,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "jobs: an unreadable jobs file");
            Vec::new()
        }
    };
    let now = super::now_ms();
    let lost = records
        .into_iter()
        .map(|r| {
            end_record(&r);
            JobInfo {
                id: r.id,
                command: r.command,
                pid: r.group.map(|g| g.pid),
                tty: r.tty,
                state: JobState::Lost,
                exit_code: None,
                signal: None,
                bytes: 0,
                started_ms: r.started_ms,
                ended_ms: Some(now),
                repaired: Vec::new(),
            }
        })
        .collect();
    if let Err(e) = std::fs::remove_file(&path) {
        tracing::debug!(path = %path.display(), error = %e, "jobs: the jobs file stays");
    }
    lost
}

/// Ends what is left of a recorded job: its reaper (which ends what it holds), its group,
/// every process carrying its token, and its cgroup.
pub(super) fn end_record(r: &Record) {
    if let Some(reaper) = r.reaper.filter(HostPid::alive) {
        let _ = kill(Pid::from_raw(reaper.pid), Signal::SIGTERM);
    }
    if let Some(group) = r.group.filter(HostPid::alive) {
        let _ = killpg(Pid::from_raw(group.pid), Signal::SIGKILL);
    }
    end_token(&r.token, Signal::SIGKILL);
    if !r.token.is_empty() {
        super::cgroup::remove_stale(&r.token);
    }
}

/// Sends `signal` to every process of this user carrying `token` in its environment, until
/// none is left (for KILL) or once (any other signal).
pub(super) fn end_token(token: &str, signal: Signal) {
    // A `bash` call that became a job has none: its group is all there is.
    if token.is_empty() {
        return;
    }
    let needle = format!("{TOKEN_VAR}={token}");
    for _ in 0..ROUNDS {
        let found = carrying(needle.as_bytes());
        for &pid in &found {
            let _ = kill(Pid::from_raw(pid), signal);
        }
        if found.is_empty() || signal != Signal::SIGKILL {
            return;
        }
    }
}

/// The live processes (zombies are not) whose environment holds `entry` (`NAME=value`).
fn carrying(entry: &[u8]) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| u32::try_from(pid).is_ok_and(|p| p != me))
        .filter(|&pid| {
            // Another user's process cannot be read, and is never a job's.
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|e| e == entry))
        })
        .filter(|&pid| !zombie(pid))
        .collect()
}

/// `/proc/PID/stat` after the command name: `state ppid pgrp session …`.
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Its start time (field 22 of `stat`), `None` when it does not run (or is a zombie).
fn start_time(pid: i32) -> Option<u64> {
    let fields = stat_fields(pid)?;
    if matches!(fields.first().map(String::as_str), Some("Z" | "X")) {
        return None;
    }
    // Fields counted from 1 with `pid` and `comm` first: `starttime` is the 22nd, the 20th
    // after the command name.
    fields.get(19)?.parse().ok()
}

fn zombie(pid: i32) -> bool {
    stat_fields(pid).is_none_or(|f| matches!(f.first().map(String::as_str), Some("Z" | "X")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_is_known_by_its_start_time() {
        let me = i32::try_from(std::process::id()).unwrap();
        let now = HostPid::of(me).unwrap();
        assert!(now.alive());
        let other = HostPid {
            start: now.start + 1,
            ..now
        };
        assert!(!other.alive(), "the same pid, started at another time");
    }

    #[test]
    fn records_are_written_read_back_and_removed_when_none_is_left() {
        let d = tempfile::tempdir().unwrap();
        let r = Record {
            id: JobId(3),
            command: "sleep 1".into(),
            tty: false,
            started_ms: 7,
            token: "t".into(),
            reaper: None,
            group: Some(HostPid { pid: 1, start: 1 }),
        };
        write(d.path(), vec![r.clone()]).unwrap();
        let back: File =
            serde_json::from_slice(&std::fs::read(d.path().join(FILE)).unwrap()).unwrap();
        assert_eq!(back.jobs, vec![r]);
        write(d.path(), vec![]).unwrap();
        assert!(!d.path().join(FILE).exists());
    }
}
