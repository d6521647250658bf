//! The job table with real processes, in temp dirs, without keel's executable (so each job
//! is a process group plus its token: the reaper's way is tested in `tests/jobs.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use super::*;
use crate::kernel::abort::AbortSignal;
use crate::kernel::sandbox::Sandbox;
use crate::kernel::tool::{ToolContext, ToolEnv};

/// How long any one wait in these tests may take before it fails.
const PATIENCE: Duration = Duration::from_secs(20);

fn ctx(dir: &Path) -> ToolContext {
    ToolContext {
        cwd: dir.to_path_buf(),
        abort: AbortSignal::never(),
        progress: None,
        bash_timeout: Duration::from_secs(20),
        temp_dir: dir.join("tmp"),
        env: ToolEnv::default(),
        files: Default::default(),
        sandbox: std::sync::Arc::new(Sandbox::off(dir)),
        violations: None,
        rules: Default::default(),
        watched: Default::default(),
    }
}

fn job(dir: &Path, command: &str, tty: bool) -> StartJob {
    StartJob {
        command: command.to_string(),
        cwd: dir.to_path_buf(),
        tty,
        size: None,
    }
}

/// A `sleep` argument no other test uses: `1000.<random>`.
fn marker() -> String {
    let n = uuid::Uuid::new_v4().as_u128() % 1_000_000;
    format!("1000.{n:06}")
}

/// The live processes (not zombies) whose command line holds `marker`.
fn alive_with(marker: &str) -> Vec<i32> {
    running(marker, false)
}

/// The live `sleep`s with `marker`.
fn sleeping(marker: &str) -> usize {
    running(marker, true).len()
}

fn running(marker: &str, sleeps: bool) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .map(|(_, r)| r.trim_start().chars().next());
        let wanted = !sleeps || text.starts_with("sleep ");
        if wanted && text.contains(marker) && !matches!(state, None | Some(Some('Z' | 'X'))) {
            found.push(pid);
        }
    }
    found
}

/// Reads the job's output until it holds `needle` (or the job ended, or patience ran out).
async fn output_until(jobs: &Jobs, id: JobId, needle: &str) -> String {
    let deadline = Instant::now() + PATIENCE;
    let mut text = Vec::new();
    let mut since = 0;
    loop {
        let chunk = jobs.read(id, since, usize::MAX).unwrap();
        text.extend_from_slice(&chunk.bytes);
        since = chunk.next;
        let now = String::from_utf8_lossy(&text).into_owned();
        if now.contains(needle) || Instant::now() > deadline {
            return now;
        }
        let info = jobs.wait(id, since, deadline).await.unwrap();
        if info.state != JobState::Running && info.bytes == since {
            return now;
        }
    }
}

/// Waits until the job ended.
async fn ended(jobs: &Jobs, id: JobId) -> JobInfo {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let info = jobs.info(id).unwrap();
        if info.state != JobState::Running || Instant::now() > deadline {
            return info;
        }
        jobs.wait(id, info.bytes, deadline).await.unwrap();
    }
}

/// `setsid`, `nohup` and a double fork, each a `sleep` with `marker`: all running.
async fn tree(jobs: &Jobs, dir: &Path, marker: &str) -> JobInfo {
    let cmd = format!(
        "setsid sleep {marker} & nohup sleep {marker} >/dev/null 2>&1 & (sleep {marker} &); \
         echo started; wait"
    );
    let info = jobs.start(job(dir, &cmd, false), &ctx(dir)).await.unwrap();
    assert!(output_until(jobs, info.id, "started")
        .await
        .contains("started"));
    let deadline = Instant::now() + PATIENCE;
    while sleeping(marker) < 3 && Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
    assert_eq!(sleeping(marker), 3, "the three sleeps run");
    info
}

#[tokio::test]
async fn kill_ends_the_whole_tree() {
    let d = tempfile::tempdir().unwrap();
    let jobs = Jobs::new(d.path().to_path_buf(), JobLimits::default());
    let m = marker();
    let info = tree(&jobs, d.path(), &m).await;
    let killed = jobs.kill(info.id).await.unwrap();
    assert_eq!(killed.state, JobState::Killed);
    assert_eq!(alive_with(&m), Vec::<i32>::new(), "no survivor");
    assert_eq!(jobs.take_ended().len(), 1);
    assert!(
        !d.path().join(record::FILE).exists(),
        "no live job is recorded"
    );
}

#[tokio::test]
async fn kill_all_ends_every_tree() {
    let d = tempfile::tempdir().unwrap();
    let jobs = Jobs::new(d.path().to_path_buf(), JobLimits::default());
    let (m1, m2) = (marker(), marker());
    tree(&jobs, d.path(), &m1).await;
    tree(&jobs, d.path(), &m2).await;
    jobs.kill_all().await;
    assert_eq!(alive_with(&m1), Vec::<i32>::new());
    assert_eq!(alive_with(&m2), Vec::<i32>::new());
    assert!(jobs.list().iter().all(|j| j.state == JobState::Killed));
}

#[tokio::test]
async fn dropping_the_table_ends_every_tree() {
    let d = tempfile::tempdir().unwrap();
    let jobs = Jobs::new(d.path().to_path_buf(), JobLimits::default());
    let m = marker();
    tree(&jobs, d.path(), &m).await;
    assert!(
        d.path().join(record::FILE).exists(),
        "the live job is recorded"
    );
    drop(jobs);
    assert_eq!(alive_with(&m), Vec::<i32>::new(), "no survivor");
    assert!(!d.path().join(record::FILE).exists());
}

#[tokio::test]
async fn what_a_crashed_keel_left_is_reaped_and_lost() {
    let d = tempfile::tempdir().unwrap();
    let jobs = Jobs::new(d.path().to_path_buf(), JobLimits::default());
    let m = marker();
    let info = tree(&jobs, d.path(), &m).await;
    // A keel that stops without ending its jobs (killed with -9): its table never drops.
    std::mem::forget(jobs);
    let lost = Jobs::reap_stale(d.path());
    assert_eq!(alive_with(&m), Vec::<i32>::new(), "no survivor");
    assert_eq!(lost.len(), 1);
    assert_eq!((lost[0].id, lost[0].state), (info.id, JobState::Lost));
    assert!(Jobs::reap_stale(d.path()).is_empty(), "reaped once");
    // The next table of the session goes on with the ids.
    let next = Jobs::new(d.path().to_path_buf(), JobLimits::default());
    let again = next
        .start(job(d.path(), "true", false), &ctx(d.path()))
        .await;
    assert_eq!(again.unwrap().id, JobId(info.id.0 + 1));
}

#[tokio::test]
async fn a_job_ignoring_term_is_killed_after_the_grace() {
    let d = tempfile::tempdir().unwrap();
    let grace = Duration::from_millis(300);
    let limits = JobLimits {
        grace,
        ..JobLimits::default()
    };
    let jobs = Jobs::new(d.path().to_path_buf(), limits);
    let m = marker();
    let cmd = format!("trap '' TERM; echo ready; sleep {m}");
    let info = jobs
        .start(job(d.path(), &cmd, false), &ctx(d.path()))
        .await
        .unwrap();
    output_until(&jobs, info.id, "ready").await;
    let asked = Instant::now();
    let killed = jobs.kill(info.id).await.unwrap();
    assert!(
        asked.elapsed() >= grace,
        "TERM was ignored: KILL came after the grace"
    );
    assert_eq!((killed.state, killed.signal), (JobState::Killed, Some(9)));
    assert_eq!(alive_with(&m), Vec::<i32>::new());
}

#[tokio::test]
async fn a_terminal_job_reads_what_is_typed() {
    let d = tempfile::tempdir().unwrap();
    let jobs = Jobs::new(d.path().to_path_buf(), JobLimits::default());
    let cmd = "tty -s && echo on-a-tty; read x; echo got $x";
    let info = jobs
        .start(job(d.path(), cmd, true), &ctx(d.path()))
        .await
        .unwrap();
    assert!(info.tty);
    assert!(output_until(&jobs, info.id, "on-a-tty")
        .await
        .contains("on-a-tty"));
    jobs.write(info.id, b"hi\n").unwrap();
    assert!(output_until(&jobs, info.id, "got hi")
        .await
        .contains("got hi"));
    let end = ended(&jobs, info.id).await;
    assert_eq!((end.state, end.exit_code), (JobState::Exited, Some(0)));
    assert_eq!(jobs.write(info.id, b"x"), Err(JobError::Ended(info.id)));
}

#[tokio::test]
async fn a_resized_terminal_job_sees_its_new_size() {
    let d = tempfile::tempdir().unwrap();
    let jobs = Jobs::new(d.path().to_path_buf(), JobLimits::default());
    let cmd = "trap 'stty size; exit' WINCH; sleep 30 & echo ready; wait";
    let mut start = job(d.path(), cmd, true);
    start.size = Some((80, 24));
    let info = jobs.start(start, &ctx(d.path())).await.unwrap();
    output_until(&jobs, info.id, "ready").await;
    jobs.resize(info.id, 100, 30).unwrap();
    assert!(output_until(&jobs, info.id, "30 100")
        .await
        .contains("30 100"));
    ended(&jobs, info.id).await;
}

#[tokio::test]
async fn a_flood_keeps_to_its_ring_and_says_what_was_dropped() {
    let d = tempfile::tempdir().unwrap();
    let limits = JobLimits {
        log_bytes: 1 << 20,
        ..JobLimits::default()
    };
    let ring = limits.ring_bytes;
    let jobs = Jobs::new(d.path().to_path_buf(), limits);
    let total: u64 = 200 << 20;
    let cmd = "yes | head -c 200M";
    let info = jobs
        .start(job(d.path(), cmd, false), &ctx(d.path()))
        .await
        .unwrap();
    let end = ended(&jobs, info.id).await;
    assert_eq!((end.state, end.bytes), (JobState::Exited, total));
    let held = lock(&jobs.job(info.id).unwrap().ring).len();
    assert!(held <= ring, "{held} bytes held");
    let chunk = jobs.read(info.id, 0, usize::MAX).unwrap();
    assert_eq!(chunk.from, total - ring as u64);
    assert_eq!(chunk.dropped, chunk.from);
    assert_eq!((chunk.bytes.len(), chunk.next), (ring, total));
    let log = std::fs::read(d.path().join("jobs").join(format!("{}.log", info.id))).unwrap();
    assert!(log.len() < (1 << 20) + 200, "the log stops at its cap");
    assert!(String::from_utf8_lossy(&log).contains("the log stops here"));
}

#[tokio::test]
async fn bad_requests_are_refused_clearly() {
    let d = tempfile::tempdir().unwrap();
    let jobs = Jobs::new(d.path().to_path_buf(), JobLimits::default());
    let m = marker();
    let sleep = format!("sleep {m}");
    let first = jobs
        .start(job(d.path(), &sleep, false), &ctx(d.path()))
        .await
        .unwrap();
    assert_eq!(jobs.write(first.id, b"x"), Err(JobError::NoStdin(first.id)));
    assert_eq!(jobs.resize(first.id, 1, 1), Err(JobError::NoTty(first.id)));
    assert_eq!(jobs.info(JobId(99)), Err(JobError::Unknown(JobId(99))));
    assert_eq!(
        jobs.read(JobId(99), 0, 1),
        Err(JobError::Unknown(JobId(99)))
    );
    for _ in 1..16 {
        jobs.start(job(d.path(), &sleep, false), &ctx(d.path()))
            .await
            .unwrap();
    }
    let refused = jobs
        .start(job(d.path(), &sleep, false), &ctx(d.path()))
        .await;
    assert_eq!(refused, Err(JobError::TooMany { max: 16 }));
    assert!(refused.unwrap_err().to_string().contains("at most 16"));
    jobs.kill(first.id).await.unwrap();
    let again = jobs
        .start(job(d.path(), &sleep, false), &ctx(d.path()))
        .await;
    assert_eq!(
        again.unwrap().id,
        JobId(17),
        "a place is free again; ids are not reused"
    );
    jobs.kill_all().await;
    assert_eq!(alive_with(&m), Vec::<i32>::new());
}

#[tokio::test]
async fn events_and_notices_follow_a_job_to_its_end() {
    let d = tempfile::tempdir().unwrap();
    let jobs = Jobs::new(d.path().to_path_buf(), JobLimits::default());
    let mut events = jobs.subscribe();
    let info = jobs
        .start(
            job(d.path(), "echo out; echo err >&2; exit 3", false),
            &ctx(d.path()),
        )
        .await
        .unwrap();
    let mut seen = Vec::new();
    loop {
        let e = tokio::time::timeout(PATIENCE, events.recv())
            .await
            .unwrap()
            .unwrap();
        let last = matches!(e, JobEvent::Ended { .. });
        seen.push(e);
        if last {
            break;
        }
    }
    assert!(matches!(&seen[0], JobEvent::Started { info: i } if i.id == info.id));
    assert!(seen.iter().any(|e| matches!(e, JobEvent::Output { .. })));
    let Some(JobEvent::Ended { info: end }) = seen.last() else {
        panic!("{seen:?}")
    };
    assert_eq!((end.state, end.exit_code), (JobState::Exited, Some(3)));
    let out = jobs.read(info.id, 0, usize::MAX).unwrap();
    assert_eq!(
        out.bytes, b"out\nerr\n",
        "stdout and stderr, merged in order"
    );
    assert_eq!(jobs.take_ended(), vec![end.clone()]);
    assert!(jobs.take_ended().is_empty());
    let json = serde_json::to_value(end).unwrap();
    assert_eq!(json["state"], "exited");
    assert_eq!(json["exitCode"], 3);
}

/// The table's futures can be spawned (the daemon runs them on its multi-threaded runtime).
#[allow(dead_code)]
fn its_futures_are_send(jobs: Jobs, ctx: ToolContext, req: StartJob) {
    fn send<T: Send>(_: T) {}
    send(jobs.start(req, &ctx));
    send(jobs.wait(JobId(1), 0, Instant::now()));
    send(jobs.kill(JobId(1)));
    send(jobs.kill_all());
    send(jobs.clone());
}
