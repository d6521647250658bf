//! The job table's types, as the model's tools, the protocol and the front ends see them (the
//! wire reuses them: camelCase JSON). Owns only their shapes and messages.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A job's id: per session, from 1, never reused; shown as the number ("1", "2").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub u32);

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::str::FromStr for JobId {
    type Err = std::num::ParseIntError;

    fn from_str(s: &str) -> Result<JobId, Self::Err> {
        s.trim().parse().map(JobId)
    }
}

/// What a session's job table allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobLimits {
    /// Jobs running at once; one more is refused ([`JobError::TooMany`]).
    pub max_live: usize,
    /// Each job's output ring.
    pub ring_bytes: usize,
    /// Each job's log file: it stops there (and says so).
    pub log_bytes: u64,
    /// How long a killed job has between TERM and KILL.
    pub grace: Duration,
    /// A foreground `bash` call that reaches its timeout becomes a job instead of being
    /// killed (setting `jobs.backgroundOnTimeout`; never `git` or `sleep`).
    pub background_on_timeout: bool,
}

impl Default for JobLimits {
    /// 16 jobs, a 2 MiB ring, a 64 MiB log, 2 s from TERM to KILL, timed-out calls kept.
    fn default() -> JobLimits {
        JobLimits {
            max_live: 16,
            ring_bytes: 2 << 20,
            log_bytes: 64 << 20,
            grace: Duration::from_secs(2),
            background_on_timeout: true,
        }
    }
}

/// A job to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartJob {
    /// A shell command (`bash -c`).
    pub command: String,
    pub cwd: PathBuf,
    /// On a PTY of its own (input, size) instead of pipes.
    pub tty: bool,
    /// The terminal's size (columns, rows); 120×40 when none is given.
    pub size: Option<(u16, u16)>,
}

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum JobState {
    Running,
    /// Its main process exited by itself (its exit code, or the signal that ended it).
    Exited,
    /// It was killed ([`super::Jobs::kill`], the session's end).
    Killed,
    /// Its end was never seen: its sandbox ended under it, or the keel that held it stopped
    /// (found and ended by [`super::Jobs::reap_stale`]).
    Lost,
}

/// A job as it is now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobInfo {
    pub id: JobId,
    pub command: String,
    /// Its main process's pid on the host, when the host sees it (not inside bubblewrap).
    pub pid: Option<i32>,
    pub tty: bool,
    pub state: JobState,
    pub exit_code: Option<i32>,
    /// The signal that ended its main process.
    pub signal: Option<i32>,
    /// How many bytes it wrote (the offset after its last one).
    pub bytes: u64,
    pub started_ms: i64,
    pub ended_ms: Option<i64>,
    /// What the sandbox's check undid in the protected paths once it ended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repaired: Vec<String>,
}

/// Output read from a job's ring.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobChunk {
    /// The offset of `bytes[0]`: past the one asked for when older bytes left the ring.
    pub from: u64,
    pub bytes: Vec<u8>,
    /// The offset to ask from next.
    pub next: u64,
    /// How many bytes after the one asked for were no longer in the ring.
    pub dropped: u64,
}

/// What happens to a session's jobs, as it happens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum JobEvent {
    Started {
        info: JobInfo,
    },
    /// It wrote: its output now ends at `next`.
    Output {
        id: JobId,
        next: u64,
    },
    Ended {
        info: JobInfo,
    },
}

/// Why a job operation failed, as the model reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobError {
    Unknown(JobId),
    /// It runs on pipes: nothing can be typed into it.
    NoStdin(JobId),
    /// It runs on pipes: it has no terminal to resize.
    NoTty(JobId),
    TooMany {
        max: usize,
    },
    /// It ended: nothing can be typed into it.
    Ended(JobId),
    Start(String),
    Io(String),
}

impl std::fmt::Display for JobError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JobError::Unknown(id) => write!(f, "No background job with id {id}"),
            JobError::NoStdin(id) => write!(
                f,
                "Job {id} runs on pipes: it takes no input (start it with a terminal to type into it)"
            ),
            JobError::NoTty(id) => write!(f, "Job {id} runs on pipes: it has no terminal"),
            JobError::TooMany { max } => write!(
                f,
                "Too many background jobs: at most {max} may run at once in a session; kill one first"
            ),
            JobError::Ended(id) => write!(f, "Job {id} has ended"),
            JobError::Start(e) | JobError::Io(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for JobError {}
