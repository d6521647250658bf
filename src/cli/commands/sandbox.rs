//! `keel debug sandbox [--json]` (the mechanism, the policy in force, the limits and how
//! they are held, and a self-test), the hidden `keel __sandbox-exec` helper the Landlock
//! fallback restricts itself in, the hidden `keel __sandbox-walls` that puts one command
//! started inside bubblewrap under the seccomp walls, the hidden `keel __sandbox-zygote` that
//! runs a session's commands inside its sandbox, its `keel __sandbox-reaper`s (one per call at
//! once), and the hidden `keel __sandbox-cgroup` helper that enters the session's cgroup
//! before the sandbox starts. Owns only their arguments and output; the sandbox itself is
//! `kernel::sandbox`.

use std::ffi::OsString;
use std::path::PathBuf;

use serde::Serialize;

use super::Logs;
use crate::cli::args::Cli;
use crate::error::StartupError;
use crate::exit::Exit;
use crate::kernel::sandbox::limits::{self, Enforcement};
use crate::kernel::sandbox::{selftest, Mechanism, Sandbox, SandboxMode, SandboxPolicy};
use crate::output::{ColorChoice, Output};

/// `keel __sandbox-exec --policy JSON --tmp DIR -- PROGRAM [ARGS…]`.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// The policy, as JSON.
    #[arg(long)]
    policy: String,
    /// The session's private temp dir (writable).
    #[arg(long)]
    tmp: PathBuf,
    /// The command to exec.
    #[arg(last = true, required = true)]
    argv: Vec<String>,
}

/// Restricts this process to the policy and execs the command; returns only on failure
/// (exit 70 with the reason on stderr: the command never ran unrestricted).
pub fn exec(args: ExecArgs) -> Exit {
    let mut out = Output::stdio(ColorChoice::Never);
    let policy: SandboxPolicy = match serde_json::from_str(&args.policy) {
        Ok(p) => p,
        Err(e) => {
            out.err(&format!("Error: keel sandbox: bad policy: {e}\n"));
            return Exit::Internal;
        }
    };
    let e = crate::kernel::sandbox::exec_restricted(&policy, &args.tmp, &args.argv);
    out.err(&format!("Error: keel sandbox: {e}\n"));
    Exit::Internal
}

/// `keel __sandbox-walls -- PROGRAM [ARGS…]`.
#[derive(Debug, clap::Args)]
pub struct WallsArgs {
    /// The command to exec.
    #[arg(last = true, required = true)]
    argv: Vec<String>,
}

/// Installs the seccomp walls every sandboxed command lives under on this process and execs
/// the command (inside bubblewrap, for a command not started by the zygote: a hook); returns
/// only on failure (exit 70 with the reason on stderr: the command never ran without them).
pub fn walls(args: WallsArgs) -> Exit {
    let mut out = Output::stdio(ColorChoice::Never);
    let e = crate::kernel::sandbox::exec_walled(&args.argv);
    out.err(&format!("Error: keel sandbox: {e}\n"));
    Exit::Internal
}

/// The value after `flag` in `args` (after the subcommand), as a number.
fn number(args: &[String], flag: &str) -> Result<Option<u64>, String> {
    let Some(at) = args.iter().skip(2).position(|a| a == flag) else {
        return Ok(None);
    };
    let value = args.get(at + 3).map(String::as_str).unwrap_or_default();
    value
        .parse()
        .map(Some)
        .map_err(|_| format!("{flag} needs a number, not {value:?}"))
}

/// `keel __sandbox-zygote [--nproc N] [--address-space BYTES]`, its control socket as stdin:
/// serves calls until keel closes it (exit 0), or fails (exit 70 with the reason on stderr).
/// It dies with its parent (keel's keeper thread, or bubblewrap's init). `--nproc`: its own
/// `RLIMIT_NPROC`; `--address-space`: its reapers' `RLIMIT_AS` (`args[0]`: keel itself, as
/// the sandbox shows it, which runs the reapers).
pub fn zygote(args: &[String]) -> Exit {
    use std::os::fd::AsFd;
    let mut out = Output::stdio(ColorChoice::Never);
    use crate::kernel::sandbox::zygote::serve;
    let limits = number(args, "--nproc").and_then(|n| Ok((n, number(args, "--address-space")?)));
    let (nproc, address_space) = match limits {
        Ok(l) => l,
        Err(e) => {
            out.err(&format!("Error: keel sandbox zygote: {e}\n"));
            return Exit::Internal;
        }
    };
    if let Err(e) = nproc.map_or(Ok(()), limits::limit_processes) {
        out.err(&format!("Error: keel sandbox zygote: RLIMIT_NPROC: {e}\n"));
        return Exit::Internal;
    }
    let reapers = serve::Reapers {
        exe: PathBuf::from(args.first().map(String::as_str).unwrap_or_default()),
        args: address_space
            .map(|b| vec!["--address-space".into(), b.to_string().into()])
            .unwrap_or_default(),
    };
    // Its parent's death is SIGTERM, heard from before it is set: the zygote ends what its
    // commands left before it goes (SIGKILL would give it no time to).
    let ending = match serve::Ending::listen() {
        Ok(e) => e,
        Err(e) => {
            out.err(&format!("Error: keel sandbox zygote: {e}\n"));
            return Exit::Internal;
        }
    };
    let parent = nix::unistd::getppid();
    let orphaned = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM).is_err()
        || nix::unistd::getppid() != parent;
    if orphaned {
        out.err("Error: keel sandbox zygote: its parent is gone\n");
        return Exit::Internal;
    }
    let served = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(|control| serve::serve(control, ending, reapers));
    match served {
        Ok(()) => Exit::Success,
        Err(e) => {
            out.err(&format!("Error: keel sandbox zygote: {e}\n"));
            Exit::Internal
        }
    }
}

/// `keel __sandbox-reaper [--address-space BYTES]`, started by the zygote (or by keel for a job
/// outside the sandbox) with its control socket as stdin: runs one call at a time until the
/// zygote closes it (exit 0) or goes. `args[0]`: keel itself, which a job's terminal command
/// runs through (`__sandbox-tty`).
pub fn reaper(args: &[String]) -> Exit {
    use std::os::fd::AsFd;
    let mut out = Output::stdio(ColorChoice::Never);
    let ran = number(args, "--address-space")
        .map_err(std::io::Error::other)
        .and_then(|bytes| {
            let control = std::io::stdin().as_fd().try_clone_to_owned()?;
            let exe = PathBuf::from(args.first().map(String::as_str).unwrap_or_default());
            crate::kernel::sandbox::zygote::reaper::reap(control, bytes, &exe)
        });
    match ran {
        Ok(()) => Exit::Success,
        Err(e) => {
            out.err(&format!("Error: keel sandbox reaper: {e}\n"));
            Exit::Internal
        }
    }
}

/// `keel __sandbox-tty PROGRAM [ARGS…]`, started by a reaper for a job on a terminal (its
/// stdin): becomes the leader of a new session with that terminal as its controlling one, then
/// execs PROGRAM (exit 70 with the reason on stderr when it could not). `None` for any other
/// command line. Reads the raw `argv`: what it runs need not be UTF-8.
pub fn tty_helper(args: impl Iterator<Item = OsString>) -> Option<Exit> {
    let mut args = args.skip(1).peekable();
    if args.peek().map(|a| a != crate::kernel::jobs::TTY_COMMAND)? {
        return None;
    }
    let e = crate::kernel::jobs::pty::exec_on_terminal(args.skip(1).collect());
    Output::stdio(ColorChoice::Never).err(&format!("Error: keel sandbox tty: {e}\n"));
    Some(Exit::Internal)
}

/// `keel __sandbox-job-cgroup tty|pipes PROGRAM [ARGS…]`, started by a reaper for a job with
/// a cgroup of its own (its `cgroup.procs` as stdin): enters it, then execs PROGRAM (exit 70
/// with the reason on stderr when it could not). `None` for any other command line.
pub fn job_cgroup_helper(args: impl Iterator<Item = OsString>) -> Option<Exit> {
    let mut args = args.skip(1).peekable();
    if args
        .peek()
        .map(|a| a != crate::kernel::jobs::CGROUP_COMMAND)?
    {
        return None;
    }
    let e = crate::kernel::jobs::exec_in_cgroup(args.skip(1).collect());
    Output::stdio(ColorChoice::Never).err(&format!("Error: keel sandbox job cgroup: {e}\n"));
    Some(Exit::Internal)
}

/// `keel __sandbox-cgroup PROCS… -- PROGRAM [ARGS…]`: starts the sandbox in the session's
/// cgroups (each `cgroup.procs` file), waits for it, and removes them (exit 0; 70 with the
/// reason on stderr when it could not). `None` for any other command line. Reads the raw
/// `argv` (`args`): what it runs need not be UTF-8.
pub fn cgroup_helper(args: impl Iterator<Item = OsString>) -> Option<Exit> {
    let mut args = args.skip(1).peekable();
    if args.peek().map(|a| a != "__sandbox-cgroup")? {
        return None;
    }
    let mut out = Output::stdio(ColorChoice::Never);
    let files: Vec<PathBuf> = args
        .by_ref()
        .skip(1)
        .take_while(|a| a != "--")
        .map(PathBuf::from)
        .collect();
    let Some(program) = args.next() else {
        out.err("Error: keel sandbox: no command after the cgroups\n");
        return Some(Exit::Internal);
    };
    let shown = PathBuf::from(&program).display().to_string();
    match limits::cgroup::hold(&files, program, args.collect()) {
        Ok(_) => Some(Exit::Success),
        Err(e) => {
            out.err(&format!(
                "Error: keel sandbox: cannot run {shown} in the session's cgroup: {e}\n"
            ));
            Some(Exit::Internal)
        }
    }
}

/// What `keel debug sandbox --json` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Report<'a> {
    mechanism: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    bwrap_path: Option<String>,
    policy: &'a SandboxPolicy,
    #[serde(skip_serializing_if = "Option::is_none")]
    warning: Option<String>,
    /// Absent when the sandbox runs no zygote (off, unavailable).
    #[serde(skip_serializing_if = "Option::is_none")]
    limits: Option<LimitsReport>,
    self_test: Vec<selftest::Check>,
}

/// The session's limits and how they are held (by the zygote the self-test ran in).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LimitsReport {
    pids: u64,
    memory: u64,
    /// `cgroup-v2`, `cgroup-v1` or `rlimit`.
    enforcement: &'static str,
    #[serde(skip)]
    how: Enforcement,
    /// Whether the process limit binds (not under `rlimit` for root).
    pids_bind: bool,
    /// The session's cgroup directories.
    cgroups: Vec<PathBuf>,
}

impl LimitsReport {
    fn of(sandbox: &Sandbox) -> Option<LimitsReport> {
        if !sandbox.zygote_runs() {
            return None;
        }
        let (enforcement, cgroups) = match sandbox.limits_applied() {
            Some(a) => (a.enforcement, a.cgroup_dirs()),
            None => (limits::plan(), Vec::new()),
        };
        Some(LimitsReport {
            pids: sandbox.limits.pids,
            memory: sandbox.limits.memory,
            enforcement: enforcement.word(),
            how: enforcement,
            pids_bind: enforcement.pids_bind(),
            cgroups,
        })
    }

    fn human(&self) -> String {
        let binds = if self.pids_bind {
            ""
        } else {
            " (the process limit does not bind root)"
        };
        let mut s = format!(
            "limits: pids {} · memory {} · {}{binds}\n",
            self.pids,
            limits::size(self.memory),
            self.how.describe()
        );
        for dir in &self.cgroups {
            s.push_str(&format!("  {}\n", dir.display()));
        }
        s
    }
}

/// `keel debug sandbox [--json] [--sandbox MODE]`: exit 0 when every self-test attempt was
/// stopped (or the sandbox is off by choice), 1 otherwise.
pub fn debug(cli: Cli) -> Exit {
    super::run(Logs::Off, async move |env, out| {
        let settings = crate::cli::invocation::settings(&cli, env)?;
        let mut warnings = Vec::new();
        let trust = crate::setup::trust::Trust::read(&settings, env);
        // Probed for real, not taken from what an earlier session found (which this renews).
        crate::kernel::sandbox::known::forget(&env.keel_home);
        let sandbox = Sandbox::for_session(
            &settings.sandbox(env, &trust, &mut warnings),
            &env.cwd,
            &env.keel_home,
            &env.vars,
            &mut warnings,
        );
        let scratch = tempfile::tempdir().map_err(|e| {
            StartupError::internal("cannot create a scratch directory").cause(e.to_string())
        })?;
        let checks = selftest::run(&sandbox, scratch.path()).await;
        let held = checks.iter().all(|c| c.stopped);
        let report = Report {
            mechanism: sandbox.mechanism.name(),
            bwrap_path: match &sandbox.mechanism {
                Mechanism::Bwrap(b) => Some(b.path.display().to_string()),
                _ => None,
            },
            policy: &sandbox.policy,
            warning: sandbox.warning(),
            limits: LimitsReport::of(&sandbox),
            self_test: checks,
        };
        let text = match cli.json {
            true => serde_json::to_string(&report).unwrap_or_default() + "\n",
            false => human(&report),
        };
        let exit = super::print(out, &text)?;
        Ok(
            match (
                exit,
                held || matches!(sandbox.mechanism, Mechanism::Off | Mechanism::Unenforced),
            ) {
                (Exit::Success, false) => Exit::Failed,
                (other, _) => other,
            },
        )
    })
}

fn human(r: &Report<'_>) -> String {
    let p = r.policy;
    let net = if p.network { "on" } else { "off" };
    let mut s = format!("sandbox: {} · net {net}\n", p.mode.name());
    s.push_str(&format!("mechanism: {}", r.mechanism));
    if let Some(path) = &r.bwrap_path {
        s.push_str(&format!(" ({path})"));
    }
    s.push('\n');
    if let Some(w) = &r.warning {
        s.push_str(&format!("Warning: {w}\n"));
    }
    if let Some(l) = &r.limits {
        s.push_str(&l.human());
    }
    let list = |s: &mut String, title: &str, paths: &[PathBuf]| {
        s.push_str(&format!("{title}:\n"));
        for path in paths {
            s.push_str(&format!("  {}\n", path.display()));
        }
    };
    match p.mode {
        // No wall at all: the lists would describe a sandbox that is not there.
        SandboxMode::Off => s.push_str(
            "writable: everything you may write (no sandbox)
",
        ),
        SandboxMode::ReadOnly => {
            s.push_str(
                "writable: nothing but the private /tmp
",
            );
            list(&mut s, "unreadable", &p.deny_read);
            list(&mut s, "readable again", &p.allow_read);
        }
        SandboxMode::WorkspaceWrite => {
            list(&mut s, "writable", &p.writable_roots);
            if !p.git_writable.is_empty() {
                list(
                    &mut s,
                    "writable to git (a linked worktree's)",
                    &p.git_writable,
                );
            }
            list(&mut s, "read-only inside them", &p.protected);
            list(&mut s, "unreadable", &p.deny_read);
            list(&mut s, "readable again", &p.allow_read);
        }
    }
    s.push_str("self-test:\n");
    for c in &r.self_test {
        let verdict = if c.stopped { "stopped" } else { "NOT STOPPED" };
        s.push_str(&format!("  {:<14} {verdict:<12} {}\n", c.name, c.target));
    }
    s
}
