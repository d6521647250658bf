//! The cgroups of the session's limits: where keel's own cgroups are (`/proc/self/cgroup`
//! read against `/proc/self/mountinfo`), whether a child can be made below them (v2 with
//! `pids` and `memory` delegated, else the v1 `pids` and `memory` hierarchies), making one
//! per zygote with its limits written, its counters, and its removal (what is left in it
//! killed first), with those of keels that died; and the `__sandbox-cgroup` helper's work:
//! start the sandbox inside it, and remove it once the sandbox ended, even when keel is gone
//! by then. Owns only cgroupfs paths and files, and that one helper process.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Events, Limits};

/// The prefix of the cgroups keel makes: `keel-<pid>-<n>`.
const PREFIX: &str = "keel-";

/// Which cgroup hierarchy holds the limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V2,
    V1,
}

/// keel's own cgroups: the v2 one, and the v1 `pids` and `memory` ones (directories).
#[derive(Debug, Default, PartialEq, Eq)]
struct Found {
    v2: Option<PathBuf>,
    pids: Option<PathBuf>,
    memory: Option<PathBuf>,
}

/// Where keel's cgroups are, from the texts of `/proc/self/cgroup` and
/// `/proc/self/mountinfo`.
fn find(cgroups: &str, mountinfo: &str) -> Found {
    // (root of the mount inside its hierarchy, mount point, fs type, super options)
    let mounts: Vec<(&str, &str, &str, &str)> = mountinfo
        .lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let left: Vec<&str> = left.split(' ').collect();
            let mut right = right.split(' ');
            let (fstype, _, opts) = (right.next()?, right.next()?, right.next()?);
            Some((*left.get(3)?, *left.get(4)?, fstype, opts))
        })
        .filter(|m| m.2 == "cgroup" || m.2 == "cgroup2")
        .collect();
    let dir = |want_v2: bool, controller: &str, path: &str| {
        mounts
            .iter()
            .filter(|m| match want_v2 {
                true => m.2 == "cgroup2",
                false => m.2 == "cgroup" && m.3.split(',').any(|o| o == controller),
            })
            .find_map(|&(root, point, _, _)| {
                let rest = match root {
                    "/" => path,
                    _ => path.strip_prefix(root)?,
                };
                Some(Path::new(point).join(rest.trim_start_matches('/')))
            })
    };
    let mut found = Found::default();
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            found.v2 = dir(true, "", path);
        }
        for c in controllers.split(',') {
            match c {
                "pids" => found.pids = dir(false, "pids", path),
                "memory" => found.memory = dir(false, "memory", path),
                _ => {}
            }
        }
    }
    found
}

fn found_here() -> Found {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    find(&read("/proc/self/cgroup"), &read("/proc/self/mountinfo"))
}

/// keel's own cgroup v2 (a directory), when it is on a mounted cgroup2.
pub fn own_v2() -> Option<PathBuf> {
    found_here().v2
}

/// Whether `dir` (a v2 cgroup) hands `pids` and `memory` to its children.
fn delegates(dir: &Path) -> bool {
    let enabled = std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
    let words: Vec<&str> = enabled.split_whitespace().collect();
    words.contains(&"pids") && words.contains(&"memory")
}

fn writable(dir: &Path) -> bool {
    rustix::fs::access(dir, rustix::fs::Access::WRITE_OK).is_ok()
}

/// Which hierarchy a child of keel's cgroups can be made in, if any.
pub fn usable() -> Option<Version> {
    let found = found_here();
    if let Some(v2) = &found.v2 {
        if delegates(v2) && writable(v2) {
            return Some(Version::V2);
        }
    }
    match (&found.pids, &found.memory) {
        (Some(p), Some(m)) if writable(p) && writable(m) => Some(Version::V1),
        _ => None,
    }
}

/// The cgroup of one zygote (`keel-<pid>-<n>` in each hierarchy it uses).
#[derive(Debug)]
pub struct Session {
    version: Version,
    dirs: Vec<PathBuf>,
}

impl Session {
    /// Makes it below keel's own cgroups with `limits` written, removing those of keels that
    /// died first. `None` when it cannot be made (what was made is removed again).
    pub fn create(limits: &Limits) -> Option<Session> {
        Session::create_in(&found_here(), limits)
    }

    fn create_in(found: &Found, limits: &Limits) -> Option<Session> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let name = format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        let pids = limits.pids.to_string();
        let memory = limits.memory.to_string();
        if let Some(v2) = found.v2.as_deref().filter(|d| delegates(d)) {
            let made = Session::make(Version::V2, &[v2], &name, |s| {
                let dir = &s.dirs[0];
                write(dir, "pids.max", &pids)?;
                write(dir, "memory.max", &memory)?;
                // No swap beyond the limit (the file is missing without swap accounting).
                let _ = write(dir, "memory.swap.max", "0");
                Ok(())
            });
            if made.is_some() {
                return made;
            }
        }
        let (Some(p), Some(m)) = (&found.pids, &found.memory) else {
            return None;
        };
        Session::make(Version::V1, &[p, m], &name, |s| {
            write(&s.dirs[0], "pids.max", &pids)?;
            write(&s.dirs[1], "memory.limit_in_bytes", &memory)?;
            // Memory and swap together (only with swap accounting).
            let _ = write(&s.dirs[1], "memory.memsw.limit_in_bytes", &memory);
            Ok(())
        })
    }

    /// Makes `name` in each of `parents` and runs `setup` on it; undone on any failure.
    fn make(
        version: Version,
        parents: &[&Path],
        name: &str,
        setup: impl FnOnce(&Session) -> std::io::Result<()>,
    ) -> Option<Session> {
        let mut session = Session {
            version,
            dirs: Vec::new(),
        };
        for parent in parents {
            remove_stale(parent);
            let dir = parent.join(name);
            if std::fs::create_dir(&dir).is_err() {
                session.remove();
                return None;
            }
            session.dirs.push(dir);
        }
        match setup(&session) {
            Ok(()) => Some(session),
            Err(e) => {
                tracing::debug!(error = %e, "sandbox limits: a cgroup could not be set up");
                session.remove();
                None
            }
        }
    }

    pub fn version(&self) -> Version {
        self.version
    }

    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// The `cgroup.procs` files the `__sandbox-cgroup` helper writes itself into.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// The OOM kills and refused forks counted so far.
    pub fn events(&self) -> Events {
        let (memory, pids) = match self.version {
            Version::V2 => (self.dirs[0].join("memory.events"), &self.dirs[0]),
            Version::V1 => (self.dirs[1].join("memory.oom_control"), &self.dirs[0]),
        };
        Events {
            oom_kills: counter(&memory, "oom_kill"),
            pids_refused: counter(&pids.join("pids.events"), "max"),
        }
    }

    /// Kills what is left in it and removes its directories (best effort: one whose
    /// processes are not gone yet is left to the next keel's [`remove_stale`]).
    pub fn remove(&self) {
        for dir in self.dirs.iter().rev() {
            end_and_remove(dir);
        }
    }
}

/// The `__sandbox-cgroup` helper's work: enters the cgroups whose `cgroup.procs` are `procs`,
/// starts `program` there (the sandbox: bubblewrap, or the Landlock helper), leaves them
/// again, and waits for it to end (or ends it when keel goes: `SIGTERM`, this process's
/// parent-death signal); then kills what is left in them and removes them. Its status.
pub fn hold(
    procs: &[PathBuf],
    program: std::ffi::OsString,
    args: Vec<std::ffi::OsString>,
) -> std::io::Result<std::process::ExitStatus> {
    use tokio::signal::unix::{signal, SignalKind};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    // The helper's way out again, so that the cgroups can be removed once the sandbox ended.
    let parents: Vec<PathBuf> = procs
        .iter()
        .filter_map(|f| Some(f.parent()?.parent()?.join("cgroup.procs")))
        .collect();
    let status = runtime.block_on(async {
        let mut term = signal(SignalKind::terminate())?;
        let parent = nix::unistd::getppid();
        nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)?;
        if nix::unistd::getppid() != parent {
            return Err(std::io::Error::other("keel is gone"));
        }
        move_into(procs)?;
        let child = tokio::process::Command::new(program).args(args).spawn();
        move_into(&parents)?;
        let mut child = child?;
        // The sandbox's end of keel's control socket is its alone: keel must see it close
        // when the sandbox ends, not when this process does.
        let null = std::fs::File::open("/dev/null")?;
        nix::unistd::dup2(std::os::fd::AsRawFd::as_raw_fd(&null), 0)?;
        tokio::select! {
            status = child.wait() => status,
            _ = term.recv() => {
                let _ = child.start_kill();
                child.wait().await
            }
        }
    });
    // Out of them whatever failed above: what is left in them is killed next.
    let _ = move_into(&parents);
    for dir in procs.iter().rev().filter_map(|f| f.parent()) {
        end_and_remove(dir);
    }
    status
}

/// Writes this process into each of `files` (`cgroup.procs`).
fn move_into(files: &[PathBuf]) -> std::io::Result<()> {
    let me = std::process::id().to_string();
    for f in files {
        std::fs::write(f, &me)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", f.display())))?;
    }
    Ok(())
}

fn write(dir: &Path, file: &str, value: &str) -> std::io::Result<()> {
    std::fs::write(dir.join(file), value)
}

/// `key N` from a flat-keyed cgroup file, 0 when missing.
fn counter(file: &Path, key: &str) -> u64 {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0)
}

/// SIGKILLs every process in `dir` until it is empty, then removes it (a few tries: the
/// killed are not gone until their parent reaped them).
fn end_and_remove(dir: &Path) {
    if !dir.exists() {
        return;
    }
    if dir.join("cgroup.kill").exists() {
        let _ = write(dir, "cgroup.kill", "1");
    }
    // A job's cgroup inside (`keel-job-…`, see `jobs`) goes first: a cgroup with children
    // cannot be removed.
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            end_and_remove(&e.path());
        }
    }
    for _ in 0..200 {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        match std::fs::remove_dir(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            _ => return,
        }
    }
}

/// Removes the cgroups in `parent` that a keel no longer running made.
fn remove_stale(parent: &Path) {
    for dir in left_by_dead(parent, PREFIX) {
        end_and_remove(&dir);
    }
}

/// The cgroups in `parent` named `PREFIX<pid>-…` whose keel (`pid`, never this process) is no
/// longer running.
pub(crate) fn left_by_dead(parent: &Path, prefix: &str) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    let owner = |name: &std::ffi::OsStr| {
        name.to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<i32>().ok())
    };
    let gone = |pid: i32| {
        pid != std::process::id() as i32
            && nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
                == Err(nix::errno::Errno::ESRCH)
    };
    entries
        .flatten()
        .filter(|e| owner(&e.file_name()).is_some_and(gone))
        .map(|e| e.path())
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn keels_cgroups_are_found_in_each_hierarchy() {
        let cgroups = "9:name=systemd:/\n8:pids:/\n4:memory:/api/abc\n0::/user.slice\n";
        let found = find(cgroups, MOUNTS);
        assert_eq!(
            found,
            Found {
                v2: Some("/sys/fs/cgroup/unified/user.slice".into()),
                pids: Some("/sys/fs/cgroup/pids".into()),
                memory: Some("/sys/fs/cgroup/memory/api/abc".into()),
            }
        );
        // A container's bind-mounted subtree: its root is stripped from the path.
        let mounts = "50 1 0:40 /docker/x /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let found = find("0::/docker/x/inner\n", mounts);
        assert_eq!(found.v2, Some("/sys/fs/cgroup/inner".into()));
        assert_eq!(find("0::/elsewhere\n", mounts).v2, None);
    }

    /// The v2 path on a stand-in tree (plain files): a delegated cgroup gets a child with
    /// the limits written; one that delegates nothing gets none.
    #[test]
    fn a_delegated_v2_cgroup_gets_a_child_with_the_limits() {
        let d = tempfile::tempdir().unwrap();
        let own = d.path().join("session.scope");
        std::fs::create_dir(&own).unwrap();
        std::fs::write(own.join("cgroup.subtree_control"), "cpu pids memory\n").unwrap();
        // A cgroup an earlier keel (a pid that cannot be running) left behind.
        let stale = own.join("keel-2147483646-1");
        std::fs::create_dir(&stale).unwrap();
        let found = Found {
            v2: Some(own.clone()),
            ..Found::default()
        };
        let limits = Limits {
            pids: 64,
            memory: 256 << 20,
        };
        let s = Session::create_in(&found, &limits).unwrap();
        assert_eq!(s.version(), Version::V2);
        let dir = &s.dirs()[0];
        assert!(dir.starts_with(&own));
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        assert_eq!(read("pids.max"), "64");
        assert_eq!(read("memory.max"), (256u64 << 20).to_string());
        assert!(!stale.exists(), "a dead keel's cgroup stays");
        std::fs::write(dir.join("memory.events"), "low 0\noom 2\noom_kill 1\n").unwrap();
        std::fs::write(dir.join("pids.events"), "max 3\n").unwrap();
        assert_eq!(
            s.events(),
            Events {
                oom_kills: 1,
                pids_refused: 3
            }
        );
        std::fs::write(own.join("cgroup.subtree_control"), "cpu\n").unwrap();
        assert!(Session::create_in(&found, &limits).is_none());
    }
}
