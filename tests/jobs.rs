//! Background jobs' processes (issue 47) through keel's library with keel's binary as the
//! reaper: with the sandbox off (a reaper of the job's own) and inside the sandbox's zygote
//! (bubblewrap, and the Landlock fallback). Whatever ends a job (kill, kill_all, the table's
//! drop), nothing it started survives, `setsid`, `nohup` and double forks included; a job on
//! a terminal has it as its controlling terminal (it reads what is typed, it hears a resize).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel::kernel::abort::AbortSignal;
use keel::kernel::jobs::{JobId, JobInfo, JobLimits, JobState, Jobs, StartJob};
use keel::kernel::sandbox::{bwrap, Choice, Places, Sandbox, SandboxMode, SandboxPolicy};
use keel::kernel::tool::ToolContext;

use crate::sandbox::mechanisms;

const PATIENCE: Duration = Duration::from_secs(30);

/// The mechanisms to run under: none (the sandbox off), then the sandbox's.
fn all() -> Vec<&'static str> {
    let mut m = vec!["off"];
    m.extend(mechanisms());
    m
}

/// A sandbox forced to `mech` (or off), keel's binary as its zygote and reapers.
fn sandbox(mech: &str, work: &Path) -> Arc<Sandbox> {
    let places = Places {
        cwd: work.to_path_buf(),
        ..Places::default()
    };
    let (mode, choice) = match mech {
        "off" => (SandboxMode::Off, Choice::Auto),
        "bwrap" => (SandboxMode::WorkspaceWrite, Choice::Bwrap),
        _ => (SandboxMode::WorkspaceWrite, Choice::Landlock),
    };
    let policy = SandboxPolicy::new(mode, &places, &[], &[], &[], mech == "off");
    let exe = Some(env!("CARGO_BIN_EXE_keel").into());
    let sb = Sandbox::new(policy, choice, bwrap::find(None, work), exe);
    assert!(
        mech == "off" || sb.zygote_runs(),
        "{mech}: {:?}",
        sb.mechanism
    );
    Arc::new(sb)
}

struct World {
    _dir: tempfile::TempDir,
    work: std::path::PathBuf,
    ctx: ToolContext,
    jobs: Jobs,
}

fn world(mech: &str) -> World {
    let d = tempfile::tempdir().unwrap();
    let work = d.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let ctx = ToolContext {
        cwd: work.clone(),
        abort: AbortSignal::never(),
        progress: None,
        bash_timeout: Duration::from_secs(60),
        temp_dir: d.path().join("tmp"),
        env: Default::default(),
        files: Default::default(),
        sandbox: sandbox(mech, &work),
        violations: None,
        rules: Default::default(),
        watched: Default::default(),
    };
    let jobs = Jobs::new(d.path().join("session"), JobLimits::default());
    World {
        _dir: d,
        work,
        ctx,
        jobs,
    }
}

impl World {
    async fn start(&self, command: &str, tty: bool) -> JobInfo {
        let req = StartJob {
            command: command.into(),
            cwd: self.work.clone(),
            tty,
            size: Some((80, 24)),
        };
        self.jobs.start(req, &self.ctx).await.unwrap()
    }

    /// Its output from the start once it holds `needle` (or the job ended, or patience ran
    /// out).
    async fn output_until(&self, id: JobId, needle: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let chunk = self.jobs.read(id, 0, usize::MAX).unwrap();
            let text = String::from_utf8_lossy(&chunk.bytes).into_owned();
            if text.contains(needle) || Instant::now() > deadline {
                return text;
            }
            let info = self.jobs.wait(id, chunk.next, deadline).await.unwrap();
            if info.state != JobState::Running && info.bytes == chunk.next {
                return text;
            }
        }
    }
}

/// A `sleep` argument no other test uses.
fn marker() -> String {
    let n = uuid::Uuid::new_v4().as_u128() % 1_000_000;
    format!("1000.{n:06}")
}

/// The live processes (not zombies) whose command line holds `marker` (`sleeps`: only the
/// `sleep`s), seen from the host whatever namespace they run in.
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

/// Waits (for the kill's last steps: the reaper's SIGKILLs land as the kernel schedules
/// them) until nothing with `marker` runs; what still runs then.
async fn survivors(marker: &str) -> Vec<i32> {
    let deadline = Instant::now() + PATIENCE;
    while !running(marker, false).is_empty() && Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
    running(marker, false)
}

/// `setsid`, `nohup` and a double fork, each a `sleep` with `marker`, all running.
async fn tree(w: &World, mech: &str, marker: &str) -> JobInfo {
    let cmd = format!(
        "setsid sleep {marker} & nohup sleep {marker} >/dev/null 2>&1 & (sleep {marker} &); \
         echo started; wait"
    );
    let info = w.start(&cmd, false).await;
    let out = w.output_until(info.id, "started").await;
    assert!(out.contains("started"), "{mech}: {out}");
    let deadline = Instant::now() + PATIENCE;
    while running(marker, true).len() < 3 && Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        running(marker, true).len(),
        3,
        "{mech}: the three sleeps run"
    );
    info
}

#[tokio::test]
async fn kill_ends_the_whole_tree_in_and_out_of_the_sandbox() {
    for mech in all() {
        let w = world(mech);
        let m = marker();
        let info = tree(&w, mech, &m).await;
        let killed = w.jobs.kill(info.id).await.unwrap();
        assert_eq!(killed.state, JobState::Killed, "{mech}");
        assert_eq!(
            survivors(&m).await,
            Vec::<i32>::new(),
            "{mech}: no survivor"
        );
    }
}

#[tokio::test]
async fn kill_all_and_the_tables_drop_end_every_tree() {
    for mech in all() {
        let w = world(mech);
        let (m1, m2) = (marker(), marker());
        tree(&w, mech, &m1).await;
        w.jobs.kill_all().await;
        assert_eq!(survivors(&m1).await, Vec::<i32>::new(), "{mech}: kill_all");
        let w = world(mech);
        tree(&w, mech, &m2).await;
        // The table alone: the session's sandbox (its zygote) lives on.
        let World {
            jobs, ctx, _dir, ..
        } = w;
        drop(jobs);
        assert_eq!(survivors(&m2).await, Vec::<i32>::new(), "{mech}: drop");
        drop((ctx, _dir));
    }
}

#[tokio::test]
async fn a_job_ignoring_term_is_killed_after_the_grace_in_and_out_of_the_sandbox() {
    for mech in all() {
        let w = world(mech);
        let m = marker();
        let info = w
            .start(&format!("trap '' TERM; echo ready; sleep {m}"), false)
            .await;
        w.output_until(info.id, "ready").await;
        let killed = w.jobs.kill(info.id).await.unwrap();
        assert_eq!(
            (killed.state, killed.signal),
            (JobState::Killed, Some(9)),
            "{mech}"
        );
        assert_eq!(survivors(&m).await, Vec::<i32>::new(), "{mech}");
    }
}

#[tokio::test]
async fn a_terminal_job_is_the_programs_controlling_terminal() {
    for mech in all() {
        let w = world(mech);
        // `/dev/tty` opens only on a controlling terminal.
        let cmd = "tty -s && echo on-a-tty; : </dev/tty && echo controlling; \
                   trap 'stty size; exit' WINCH; read x; echo got $x; sleep 30 & wait";
        let info = w.start(cmd, true).await;
        let out = w.output_until(info.id, "controlling").await;
        assert!(
            out.contains("on-a-tty") && out.contains("controlling"),
            "{mech}: {out}"
        );
        w.jobs.write(info.id, b"hi\n").unwrap();
        let out = w.output_until(info.id, "got hi").await;
        assert!(out.contains("got hi"), "{mech}: {out}");
        w.jobs.resize(info.id, 100, 30).unwrap();
        let out = w.output_until(info.id, "30 100").await;
        assert!(out.contains("30 100"), "{mech}: {out}");
        let deadline = Instant::now() + PATIENCE;
        let mut end = w.jobs.info(info.id).unwrap();
        while end.state == JobState::Running && Instant::now() < deadline {
            end = w.jobs.wait(info.id, end.bytes, deadline).await.unwrap();
        }
        assert_eq!(
            (end.state, end.exit_code),
            (JobState::Exited, Some(0)),
            "{mech}"
        );
    }
}

/// The variable that makes [`holder`] hold a job: `MECHANISM MARKER SESSION_DIR`.
const HOLDER: &str = "KEEL_TEST_JOBS_HOLDER";

/// Not a test of its own: the process [`a_keel_killed_with_sigkill_takes_its_jobs_along`]
/// kills, holding a job (a tree of sleeps with the marker it is given) until it is killed.
#[tokio::test]
#[ignore = "run by a_keel_killed_with_sigkill_takes_its_jobs_along"]
async fn holder() {
    let Ok(asked) = std::env::var(HOLDER) else {
        return;
    };
    let [mech, marker, dir] = <[&str; 3]>::try_from(asked.split(' ').collect::<Vec<_>>()).unwrap();
    let mut w = world(mech);
    w.jobs = Jobs::new(dir.into(), JobLimits::default());
    tree(&w, mech, marker).await;
    std::future::pending::<()>().await;
}

#[tokio::test]
async fn a_keel_killed_with_sigkill_takes_its_jobs_along() {
    for mech in all() {
        let d = tempfile::tempdir().unwrap();
        let m = marker();
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "jobs::holder", "--ignored", "--test-threads=1"])
            .env(HOLDER, format!("{mech} {m} {}", d.path().display()))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + PATIENCE;
        while running(&m, true).len() < 3 && Instant::now() < deadline {
            tokio::task::yield_now().await;
        }
        assert_eq!(running(&m, true).len(), 3, "{mech}: the holder's job runs");
        assert!(
            d.path().join("jobs.json").exists(),
            "{mech}: and is recorded"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(
            survivors(&m).await,
            Vec::<i32>::new(),
            "{mech}: no survivor"
        );
        // The next keel to open the session finds the job it never saw end.
        let lost = Jobs::reap_stale(d.path());
        assert_eq!(lost.len(), 1, "{mech}");
        assert_eq!(lost[0].state, JobState::Lost, "{mech}");
    }
}

#[tokio::test]
async fn a_job_whose_sandbox_dies_is_lost_and_leaves_nothing() {
    for mech in mechanisms() {
        let w = world(mech);
        let m = marker();
        let info = tree(&w, mech, &m).await;
        let zygote = w.ctx.sandbox.zygote_pid().expect("the zygote runs");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(zygote as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        let deadline = Instant::now() + PATIENCE;
        let mut end = w.jobs.info(info.id).unwrap();
        while end.state == JobState::Running && Instant::now() < deadline {
            end = w.jobs.wait(info.id, end.bytes, deadline).await.unwrap();
        }
        assert_eq!(end.state, JobState::Lost, "{mech}");
        assert_eq!(
            survivors(&m).await,
            Vec::<i32>::new(),
            "{mech}: no survivor"
        );
    }
}

/// The host path of `pid`'s cgroup v2 (`/proc/PID/cgroup` on the cgroup2 mount).
fn cgroup_of(pid: i32) -> Option<std::path::PathBuf> {
    let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?.to_string();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let point = mounts.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let f: Vec<&str> = left.split(' ').collect();
        (right.starts_with("cgroup2 ") && f.get(3) == Some(&"/")).then(|| f[4].to_string())
    })?;
    Some(Path::new(&point).join(path.trim_start_matches('/')))
}

/// Where this test's cgroup v2 is writable (root here; a delegated systemd subtree), a job's
/// processes are all in one cgroup of its own, `keel-job-<token>`, made for it (its
/// `cgroup.procs` lists them: `setsid`, `nohup` and a double fork included) and gone once the
/// job ended; elsewhere (or with `KEEL_JOB_CGROUP=off`) none is made and the reaper alone holds
/// the job, as the tests above check.
#[tokio::test]
async fn a_job_is_held_in_a_cgroup_of_its_own_where_one_can_be_made() {
    let own = cgroup_of(std::process::id() as i32);
    let usable = std::env::var_os("KEEL_JOB_CGROUP").is_none_or(|v| v != "off")
        && own
            .as_deref()
            .is_some_and(|d| rustix::fs::access(d, rustix::fs::Access::WRITE_OK).is_ok());
    for mech in all() {
        let w = world(mech);
        let m = marker();
        let info = tree(&w, mech, &m).await;
        let sleeps = running(&m, true);
        let groups: std::collections::BTreeSet<_> =
            sleeps.iter().filter_map(|&p| cgroup_of(p)).collect();
        let scope = groups.iter().next().cloned().unwrap();
        let name = scope.file_name().unwrap().to_string_lossy().into_owned();
        if !usable {
            assert!(!name.starts_with("keel-job-"), "{mech}: {scope:?}");
            w.jobs.kill(info.id).await.unwrap();
            continue;
        }
        assert_eq!(groups.len(), 1, "{mech}: one cgroup for all: {groups:?}");
        assert!(name.starts_with("keel-job-"), "{mech}: {scope:?}");
        let procs = std::fs::read_to_string(scope.join("cgroup.procs")).unwrap();
        let listed: Vec<i32> = procs.lines().map(|l| l.parse().unwrap()).collect();
        for pid in &sleeps {
            assert!(listed.contains(pid), "{mech}: {pid} not in {listed:?}");
        }
        let killed = w.jobs.kill(info.id).await.unwrap();
        assert_eq!(killed.state, JobState::Killed, "{mech}");
        assert_eq!(survivors(&m).await, Vec::<i32>::new(), "{mech}");
        // Removed once the job ended (its end is told after the removal).
        assert!(!scope.exists(), "{mech}: {scope:?} stays");
    }
}
