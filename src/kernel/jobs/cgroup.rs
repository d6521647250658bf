//! A job's own cgroup (v2), where the user has one (issue 47 point 2):
//! `keel-job-<pid>-<token>` (`pid`: the keel that made it, so that the next keel removes what
//! an exited one left) below the cgroup the job's sandbox runs in (the session's limits cgroup
//! when its limits are a v2 cgroup, else keel's own), made where that one is writable by this
//! user. The job's command enters it before it execs (`keel __sandbox-job-cgroup`, handed the
//! cgroup's `cgroup.procs` opened here: the kernel checks the opener's rights, so a command
//! inside bubblewrap's user and PID namespaces can write itself in with `0`), so everything it
//! starts is in it, whatever session or group it moves to. Killing the job kills the cgroup
//! (`cgroup.kill`, or each process it lists on a kernel before 5.14); the cgroup is removed
//! once the job ended. No controller is enabled anywhere (cgroup v2's rule against processes
//! in a cgroup with children applies only to one that hands controllers down). Elsewhere, no
//! cgroup: the job's reaper alone holds it. Owns only these cgroupfs files.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use crate::kernel::sandbox::limits::cgroup as limits;

/// The prefix of a job's cgroup: `keel-job-<pid of the keel that made it>-<token>`.
const PREFIX: &str = "keel-job-";

/// A job's cgroup, removed (what is left in it killed first) by [`Scope::remove`], or at the
/// latest when it is dropped.
#[derive(Debug)]
pub(super) struct Scope {
    dir: PathBuf,
}

impl Scope {
    /// Makes the cgroup of the job tagged `token` below `parent` (the sandbox's v2 limits
    /// cgroup) or keel's own v2 cgroup; `None` where there is no writable one. Jobs with the
    /// `KEEL_JOB_CGROUP=off` environment (the tests' way to the reaper alone) get none.
    pub fn create(token: &str, parent: Option<PathBuf>) -> Option<Scope> {
        if std::env::var_os("KEEL_JOB_CGROUP").is_some_and(|v| v == "off") {
            return None;
        }
        let parent = parent.or_else(limits::own_v2)?;
        if rustix::fs::access(&parent, rustix::fs::Access::WRITE_OK).is_err() {
            return None;
        }
        remove_orphans(&parent);
        let dir = parent.join(format!("{PREFIX}{}-{token}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => Some(Scope { dir }),
            Err(e) => {
                tracing::debug!(dir = %dir.display(), error = %e, "jobs: no cgroup for the job");
                None
            }
        }
    }

    /// Its `cgroup.procs`, open for writing (close-on-exec), for the job's command.
    pub fn procs(&self) -> std::io::Result<OwnedFd> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.procs"))?;
        Ok(OwnedFd::from(file))
    }

    /// SIGKILLs every process in it (and in what it holds).
    pub fn kill(&self) {
        kill(&self.dir);
    }

    /// Kills what is left in it and removes it, waiting (up to 2 s) for the killed to be
    /// gone; what cannot be removed is left to [`remove_stale`].
    pub async fn remove(&self) {
        for _ in 0..200 {
            if !self.dir.exists() {
                return;
            }
            kill(&self.dir);
            match std::fs::remove_dir(&self.dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                _ => return,
            }
        }
        tracing::debug!(dir = %self.dir.display(), "jobs: the job's cgroup stays");
    }
}

impl Drop for Scope {
    /// The job's end did not remove it (the runtime went first, the table was dropped):
    /// what is in it is killed and it is removed now, waiting (up to 2 s) as [`Scope::remove`].
    fn drop(&mut self) {
        end_and_remove(&self.dir);
    }
}

/// Kills what is in cgroup `dir` and removes it, a few tries (the killed are not gone until
/// their parent reaped them); one already gone is nothing to do.
fn end_and_remove(dir: &Path) {
    for _ in 0..200 {
        if !dir.exists() {
            return;
        }
        kill(dir);
        match std::fs::remove_dir(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            _ => return,
        }
    }
    tracing::debug!(dir = %dir.display(), "jobs: the job's cgroup stays");
}

/// SIGKILLs every process in cgroup `dir`: `cgroup.kill` (Linux 5.14), else each pid listed.
fn kill(dir: &Path) {
    if std::fs::write(dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// The jobs' cgroups in `parent` whose keel is no longer running (it exited before its jobs'
/// ends were seen through, or was killed): what is in them killed, then removed.
fn remove_orphans(parent: &Path) {
    for dir in limits::left_by_dead(parent, PREFIX) {
        end_and_remove(&dir);
    }
}

/// The cgroup of the job tagged `token` that a keel which stopped left, if any: what is in it
/// killed, then removed (a lost job, see `record`). Looked for below keel's own v2 cgroup
/// and the limits cgroups there.
pub(super) fn remove_stale(token: &str) {
    let Some(own) = limits::own_v2() else {
        return;
    };
    let suffix = format!("-{token}");
    let mine = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect()
    };
    let candidates = mine(&own)
        .into_iter()
        .flat_map(|d| std::iter::once(d.clone()).chain(mine(&d)));
    for dir in candidates {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with(PREFIX) && name.ends_with(&suffix) {
            end_and_remove(&dir);
        }
    }
}

/// `keel __sandbox-job-cgroup tty|pipes PROGRAM [ARGS…]`, started by a reaper with a job's
/// `cgroup.procs` as its stdin: writes itself into that cgroup, then execs `argv` with stdin
/// `/dev/null` (`pipes`) or its stdout, the job's terminal (`tty`). A cgroup that refuses it
/// is not fatal (the job's reaper holds it all the same). Returns only the error that stopped
/// it.
pub fn exec_in_cgroup(argv: Vec<std::ffi::OsString>) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    // The job's output (its terminal, for `tty`): not a front end's stdout.
    use rustix::stdio::stdout as job_output;
    let mut argv = argv.into_iter();
    let tty = match argv.next() {
        Some(w) if w == "tty" => true,
        Some(w) if w == "pipes" => false,
        _ => return std::io::Error::other("tty or pipes first"),
    };
    let Some(program) = argv.next() else {
        return std::io::Error::other("no command to run");
    };
    // `0`: the writer itself, whatever PID namespace it is in.
    let _ = rustix::io::write(rustix::stdio::stdin(), b"0");
    let stdin = match tty {
        true => match job_output().try_clone_to_owned() {
            Ok(fd) => std::process::Stdio::from(fd),
            Err(e) => return e,
        },
        false => std::process::Stdio::null(),
    };
    std::process::Command::new(program)
        .args(argv)
        .stdin(stdin)
        .exec()
}
