//! The resource limits of a session's sandbox (issue 43 point 14, `DESIGN.md` §14): how many
//! processes (threads count too) and how much memory the commands of one session may use,
//! and the mechanism that holds them, tried in this order for each zygote:
//!
//! 1. a cgroup v2 child of keel's own cgroup, when `pids` and `memory` are delegated to it
//!    (`cgroup.subtree_control`): `pids.max`, `memory.max` and `memory.swap.max` 0;
//! 2. children of keel's cgroups in the v1 `pids` and `memory` hierarchies, where keel may
//!    write them (root, on a v1 or hybrid machine): `pids.max`, `memory.limit_in_bytes` and
//!    `memory.memsw.limit_in_bytes`;
//! 3. else `RLIMIT_NPROC` on the zygote and `RLIMIT_AS` on each call's reaper (so on every
//!    command), set before any command runs and with their hard limits, so that no command
//!    can raise them. `RLIMIT_NPROC` counts every process of the user (under Landlock, the
//!    user's processes outside the sandbox too; under bubblewrap, those of its user namespace)
//!    and does not bind root at all (the kernel exempts uid 0): [`warning`] says so.
//!    `RLIMIT_AS` bounds the address space of each process, not the sum: a generous bound
//!    only, since many runtimes reserve far more address space than they use.
//!
//! The cgroup of a zygote is entered before the sandbox starts (the `__sandbox-cgroup` helper
//! writes itself into it, starts bubblewrap or the Landlock helper there and leaves it), so
//! nothing of the sandbox runs outside it; the helper removes it when the sandbox ended (keel
//! too, when the zygote ends while it runs), and those of keels killed before are removed on
//! the next start ([`cgroup`]). Owns the limits, the choice of mechanism and
//! what the session is told about them; it never starts the sandbox itself.

pub mod cgroup;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::{Launch, Sandbox};

/// The default process limit. A build's compilers, test runners and their threads (threads
/// count as processes here) rarely reach a few hundred, while a fork bomb gets to any number
/// in a moment; and under `RLIMIT_NPROC` the count includes every other process of the user
/// (a desktop session has hundreds), so the bound leaves room for those.
pub const DEFAULT_PIDS: u64 = 4096;

/// The memory limit when the machine's physical memory cannot be read.
const FALLBACK_MEMORY: u64 = 8 << 30;

/// What the commands of one session may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Processes and threads at once (`sandbox.limits.pids`).
    pub pids: u64,
    /// Bytes of memory (`sandbox.limits.memory`): the session's total under a cgroup, each
    /// process's address space under `RLIMIT_AS`.
    pub memory: u64,
}

impl Default for Limits {
    /// [`DEFAULT_PIDS`], and three quarters of the machine's physical memory: a runaway
    /// command is killed while keel, the editor and the desktop still have a quarter, and a
    /// build that needs more than that is rare (`sandbox.limits.memory` raises it).
    fn default() -> Limits {
        Limits {
            pids: DEFAULT_PIDS,
            memory: physical_memory().map_or(FALLBACK_MEMORY, |m| m / 4 * 3),
        }
    }
}

/// The machine's physical memory (`MemTotal`), in bytes.
pub fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// How the limits are held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enforcement {
    /// A cgroup v2 child of keel's own cgroup.
    CgroupV2,
    /// Children of keel's cgroups in the v1 `pids` and `memory` hierarchies.
    CgroupV1,
    /// `RLIMIT_NPROC` on the zygote (not binding root), `RLIMIT_AS` on each command.
    Rlimits,
}

impl Enforcement {
    /// The word `keel debug sandbox --json` prints.
    pub fn word(self) -> &'static str {
        match self {
            Enforcement::CgroupV2 => "cgroup-v2",
            Enforcement::CgroupV1 => "cgroup-v1",
            Enforcement::Rlimits => "rlimit",
        }
    }

    /// How the limits are held, for a person.
    pub fn describe(self) -> &'static str {
        match self {
            Enforcement::CgroupV2 => "a cgroup v2 of the session",
            Enforcement::CgroupV1 => "cgroups v1 (pids, memory) of the session",
            Enforcement::Rlimits => "RLIMIT_NPROC and RLIMIT_AS (memory: per process)",
        }
    }

    /// Whether the process limit binds: not under `RLIMIT_NPROC` for root.
    pub fn pids_bind(self) -> bool {
        match self {
            Enforcement::CgroupV2 | Enforcement::CgroupV1 => true,
            Enforcement::Rlimits => !rustix::process::getuid().is_root(),
        }
    }
}

/// The mechanism a zygote started now would get here (probed once per process: whether
/// keel's cgroups can take a child).
pub fn plan() -> Enforcement {
    static PLAN: OnceLock<Enforcement> = OnceLock::new();
    *PLAN.get_or_init(|| match cgroup::usable() {
        Some(cgroup::Version::V2) => Enforcement::CgroupV2,
        Some(cgroup::Version::V1) => Enforcement::CgroupV1,
        None => Enforcement::Rlimits,
    })
}

/// The session's warning when its process limit would not bind (root, and no cgroup keel
/// may write: `RLIMIT_NPROC` does not bind root).
pub fn warning(limits: &Limits) -> Option<String> {
    unbound_warning(limits, plan().pids_bind())
}

/// The warning of [`warning`] when the process limit does not `bind`.
fn unbound_warning(limits: &Limits, binds: bool) -> Option<String> {
    (!binds).then(|| {
        format!(
            "the sandbox's process limit (sandbox.limits.pids: {}) does not bind here: keel runs \
             as root and no cgroup can be made for the session (RLIMIT_NPROC does not bind \
             root), so a fork bomb runs until its call times out; memory is bounded per process \
             ({} of address space, RLIMIT_AS). Run keel as an ordinary user, or where it may \
             make cgroups, for a binding limit",
            limits.pids,
            size(limits.memory)
        )
    })
}

/// What the limits refused so far (a cgroup's counters; zero without one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Events {
    /// Processes the kernel's OOM killer killed at the memory limit.
    pub oom_kills: u64,
    /// Forks refused at the process limit.
    pub pids_refused: u64,
}

/// The limits as applied to one zygote: how, and its cgroup if it has one.
#[derive(Debug)]
pub struct Applied {
    pub limits: Limits,
    pub enforcement: Enforcement,
    cgroup: Option<cgroup::Session>,
}

impl Applied {
    /// Makes the cgroup of a zygote about to start (removing those of dead keels first), or
    /// falls back to rlimits when none can be made.
    pub fn prepare(limits: &Limits) -> Applied {
        let cgroup = match plan() {
            Enforcement::Rlimits => None,
            _ => cgroup::Session::create(limits),
        };
        let enforcement = match cgroup.as_ref().map(cgroup::Session::version) {
            Some(cgroup::Version::V2) => Enforcement::CgroupV2,
            Some(cgroup::Version::V1) => Enforcement::CgroupV1,
            None => Enforcement::Rlimits,
        };
        Applied {
            limits: *limits,
            enforcement,
            cgroup,
        }
    }

    /// `launch` started in the cgroup: by keel's `__sandbox-cgroup` helper (`exe`), which
    /// removes the cgroup once it ended. Unchanged without a cgroup.
    pub fn launch(&self, exe: &Path, launch: Launch) -> Launch {
        let Some(cg) = &self.cgroup else {
            return launch;
        };
        let mut args: Vec<OsString> = vec!["__sandbox-cgroup".into()];
        args.extend(cg.procs_files().into_iter().map(OsString::from));
        args.push("--".into());
        args.push(launch.program.into_os_string());
        args.extend(launch.args);
        Launch {
            program: exe.to_path_buf(),
            args,
            env: launch.env,
        }
    }

    /// The zygote's own arguments: the rlimits it sets on itself and its reapers.
    pub fn zygote_args(&self) -> Vec<OsString> {
        match self.enforcement {
            Enforcement::Rlimits => vec![
                "--nproc".into(),
                self.limits.pids.to_string().into(),
                "--address-space".into(),
                self.limits.memory.to_string().into(),
            ],
            Enforcement::CgroupV1 | Enforcement::CgroupV2 => Vec::new(),
        }
    }

    /// The cgroup's directories (none under rlimits).
    pub fn cgroup_dirs(&self) -> Vec<PathBuf> {
        self.cgroup
            .as_ref()
            .map(|c| c.dirs().to_vec())
            .unwrap_or_default()
    }

    /// What the cgroup refused so far.
    pub fn events(&self) -> Events {
        self.cgroup
            .as_ref()
            .map(cgroup::Session::events)
            .unwrap_or_default()
    }

    /// Kills what is left in the cgroup and removes it (the zygote ended).
    pub fn remove(&self) {
        if let Some(cg) = &self.cgroup {
            cg.remove();
        }
    }

    /// The lines the model reads after a call during which a limit refused something
    /// (`before`: the counters when it started; `output`: what it printed and `failed`:
    /// whether it failed, for the rlimits, which count nothing: only a failed call's errors
    /// are taken as theirs).
    pub fn notes(&self, before: Events, output: &str, failed: bool) -> Vec<String> {
        let after = self.events();
        let pids = self.limits.pids;
        let memory = size(self.limits.memory);
        let mut notes = Vec::new();
        if self.enforcement == Enforcement::Rlimits && !failed {
            return notes;
        }
        if self.enforcement == Enforcement::Rlimits {
            const MEMORY: [&str; 4] = [
                "memory exhausted",
                "Cannot allocate memory",
                "MemoryError",
                "out of memory",
            ];
            if MEMORY.iter().any(|m| output.contains(m)) {
                notes.push(format!(
                    "[sandbox: a process may have reached the memory limit ({memory} of address \
                     space per process)]"
                ));
            }
            if output.contains("fork") && output.contains("Resource temporarily unavailable") {
                notes.push(format!(
                    "[sandbox: the session's process limit ({pids}) was reached: a fork failed]"
                ));
            }
            return notes;
        }
        if after.oom_kills > before.oom_kills {
            notes.push(format!(
                "[sandbox: the session's memory limit ({memory}) was reached: a process was killed]"
            ));
        }
        if after.pids_refused > before.pids_refused {
            notes.push(format!(
                "[sandbox: the session's process limit ({pids}) was reached: a fork failed]"
            ));
        }
        notes
    }
}

impl Drop for Applied {
    fn drop(&mut self) {
        self.remove();
    }
}

impl Sandbox {
    /// The limits of the running zygote as applied (`None`: no zygote runs).
    pub fn limits_applied(&self) -> Option<std::sync::Arc<Applied>> {
        self.zygote_limits()
    }

    /// What the running zygote's limits refused so far.
    pub fn limit_events(&self) -> Option<Events> {
        self.zygote_limits().map(|a| a.events())
    }

    /// The notes for a call that started at `before` (see [`Applied::notes`]).
    pub fn limit_notes(&self, before: Option<Events>, output: &str, failed: bool) -> Vec<String> {
        match (self.zygote_limits(), before) {
            (Some(a), Some(before)) => a.notes(before, output, failed),
            _ => Vec::new(),
        }
    }
}

/// The zygote's own half: `RLIMIT_NPROC` on this process (and so on everything it starts),
/// soft and hard, never above what it was.
pub fn limit_processes(n: u64) -> std::io::Result<()> {
    lower(rustix::process::Resource::Nproc, n)
}

/// A reaper's own half: `RLIMIT_AS` on this process (and so on each command it starts).
pub fn limit_address_space(bytes: u64) -> std::io::Result<()> {
    lower(rustix::process::Resource::As, bytes)
}

fn lower(resource: rustix::process::Resource, to: u64) -> std::io::Result<()> {
    let now = rustix::process::getrlimit(resource);
    let cap = |v: Option<u64>| Some(v.map_or(to, |v| v.min(to)));
    let new = rustix::process::Rlimit {
        current: cap(now.maximum),
        maximum: cap(now.maximum),
    };
    rustix::process::setrlimit(resource, new)?;
    Ok(())
}

/// `bytes` for a person: `512 MiB`, `23.5 GiB`.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    match value.fract() {
        f if !(0.05..=0.95).contains(&f) => format!("{} {}", value.round(), UNITS[unit]),
        _ => format!("{value:.1} {}", UNITS[unit]),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size(512 << 20), "512 MiB");
        assert_eq!(size(3 << 30), "3 GiB");
        assert_eq!(size((23 << 30) + (512 << 20)), "23.5 GiB");
        assert_eq!(size(100), "100 B");
    }

    #[test]
    fn the_default_memory_is_three_quarters_of_the_machine() {
        let ram = physical_memory().unwrap();
        assert_eq!(Limits::default().memory, ram / 4 * 3);
        assert_eq!(Limits::default().pids, DEFAULT_PIDS);
    }

    #[test]
    fn without_a_cgroup_the_notes_come_from_what_the_command_said() {
        let applied = Applied {
            limits: Limits {
                pids: 64,
                memory: 256 << 20,
            },
            enforcement: Enforcement::Rlimits,
            cgroup: None,
        };
        let notes = applied.notes(Events::default(), "tail: memory exhausted\n", true);
        assert_eq!(
            notes,
            ["[sandbox: a process may have reached the memory limit (256 MiB of address space per process)]"]
        );
        let fork = "bash: fork: retry: Resource temporarily unavailable\n";
        assert_eq!(applied.notes(Events::default(), fork, true).len(), 1);
        assert!(applied.notes(Events::default(), "ok\n", true).is_empty());
        // A command that succeeded only printed those words (a grep through logs).
        assert!(applied.notes(Events::default(), fork, false).is_empty());
    }

    #[test]
    fn the_session_is_warned_only_when_the_process_limit_does_not_bind() {
        let limits = Limits {
            pids: 4096,
            memory: 8 << 30,
        };
        assert_eq!(unbound_warning(&limits, true), None);
        let w = unbound_warning(&limits, false).unwrap();
        assert!(w.starts_with("the sandbox's process limit (sandbox.limits.pids: 4096) does not bind here: keel runs as root"), "{w}");
        assert!(w.contains("8 GiB of address space, RLIMIT_AS"), "{w}");
    }
}
