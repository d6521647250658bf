//! A job's processes, held as a whole. Where `bash` runs a command ([`bash_proc::start`]) a
//! job runs too, as one long call of a reaper (`keel __sandbox-reaper`, a child subreaper:
//! what the job leaves, `setsid`, `nohup`, a double fork, comes to it): the session's sandbox
//! zygote's, or, with the sandbox off, a reaper of its own started here
//! ([`zygote::local`]). Without keel's executable (an embedder, the unit tests) it runs in a
//! process group of its own, each of its processes tagged with the job's token (`KEEL_JOB`)
//! so that what left the group is found in `/proc` and ended with it. Its output is one pipe
//! for stdout and stderr, or a PTY. Owns the start, the signals, the wait and the synchronous
//! end (`Hangup`); it never reads the output.
//!
//! [`bash_proc::start`]: crate::kernel::tool::bash_proc

use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use super::cgroup::Scope;
use super::record::{self, HostPid};
use super::{pty, JobError, StartJob};
use crate::kernel::sandbox::limits::Enforcement;
use crate::kernel::sandbox::zygote::{local, Lifetime, Process, Run, SpawnError};
use crate::kernel::sandbox::{Launch, Mechanism};
use crate::kernel::tool::{bash_proc, ToolContext};

/// A job's main process, as it is held.
pub(super) enum JobProc {
    /// One call of a reaper (the zygote's, or one of its own), and the job's cgroup where
    /// it has one.
    Reaper(Process, Option<Arc<Scope>>),
    /// A process group of its own (no reaper: keel's executable is unknown, as in the unit
    /// tests); `token` finds what left the group. Not a scan by session id: `setsid` leaves
    /// the session as well as the group, and a job on pipes shares keel's session, whose
    /// other members are not the job's; the token is inherited through both.
    Group {
        child: tokio::process::Child,
        pgid: Option<i32>,
        token: String,
    },
}

/// A started job: its main process, the read end of its output (the PTY's master or the
/// pipe's read end, non-blocking) and what the host knows of it.
pub(super) struct Spawned {
    pub proc: JobProc,
    pub output: OwnedFd,
    /// The PTY's master again (input and resizes), for a job on a terminal.
    pub master: Option<Arc<OwnedFd>>,
    /// Its main process's host pid, when the host sees it (not under bubblewrap).
    pub pid: Option<i32>,
    pub reaper: Option<HostPid>,
}

/// Starts `req` under `ctx`'s sandbox as `bash` would run it (the session's env file
/// sourced first), tagged with `token`.
pub(super) async fn start(
    req: &StartJob,
    ctx: &ToolContext,
    token: &str,
) -> Result<Spawned, JobError> {
    let failed = |e: std::io::Error| JobError::Start(format!("Failed to start the job: {e}"));
    let (output, given, master) = match req.tty {
        true => {
            let pair = pty::open(req.size.unwrap_or(pty::DEFAULT_SIZE)).map_err(failed)?;
            let master = Arc::new(pair.master.try_clone().map_err(failed)?);
            (pair.master, pair.slave, Some(master))
        }
        false => {
            let (r, w) = std::io::pipe().map_err(failed)?;
            let r = OwnedFd::from(r);
            rustix::io::ioctl_fionbio(&r, true).map_err(|e| failed(e.into()))?;
            (r, OwnedFd::from(w), None)
        }
    };
    let command = crate::kernel::tool::bash::sourcing_env_file(&req.command, ctx);
    let mut env = ctx.env.resolved();
    env.push((record::TOKEN_VAR.into(), token.into()));
    let shell = bash_proc::shell();
    let mut run = Run {
        argv: vec![shell.into(), "-c".into(), command.clone().into()],
        cwd: req.cwd.clone(),
        env,
        lifetime: Lifetime::Call,
        stdio: Some(Arc::new(given)),
        tty: req.tty,
        cgroup: None,
    };
    let sandbox = &ctx.sandbox;
    let spawned = if matches!(sandbox.mechanism, Mechanism::Off | Mechanism::Unenforced) {
        match sandbox.zygote.exe() {
            Some(exe) => {
                let scope = scoped(&mut run, token, None);
                let (p, reaper) = local::spawn(exe, run).await.map_err(spawn_failed)?;
                let reaper = i32::try_from(reaper).ok().and_then(HostPid::of);
                let pid = Some(p.pid);
                (JobProc::Reaper(p, scope), pid, reaper)
            }
            None => group(run, None, ctx, token).map_err(failed)?,
        }
    } else {
        let tmp = bash_proc::private_tmp(&ctx.env, &ctx.temp_dir).map_err(JobError::Start)?;
        if !sandbox.zygote_runs() {
            let launch = sandbox
                .launch(shell, &command, &req.cwd, &tmp)
                .map_err(|e| JobError::Start(e.message))?;
            group(run, launch, ctx, token).map_err(failed)?
        } else {
            // The zygote's cgroup (its limits) is the job's cgroup's parent: it is made first.
            let _ = sandbox.warm(&req.cwd, &tmp);
            let parent = sandbox
                .limits_applied()
                .filter(|a| a.enforcement == Enforcement::CgroupV2)
                .and_then(|a| a.cgroup_dirs().into_iter().next());
            let scope = scoped(&mut run, token, parent);
            let p = sandbox.spawn(run, &tmp).await.map_err(spawn_failed)?;
            let pid = p.host_pgid;
            (JobProc::Reaper(p, scope), pid, None)
        }
    };
    let (proc, pid, reaper) = spawned;
    Ok(Spawned {
        proc,
        output,
        master,
        pid,
        reaper,
    })
}

/// The job's cgroup, where one can be made (below `parent`, else keel's own): `run` enters it.
/// Its removal waits for the job's end; one whose file cannot be opened is removed now.
fn scoped(run: &mut Run, token: &str, parent: Option<std::path::PathBuf>) -> Option<Arc<Scope>> {
    let scope = Scope::create(token, parent)?;
    match scope.procs() {
        Ok(fd) => {
            run.cgroup = Some(Arc::new(fd));
            Some(Arc::new(scope))
        }
        Err(e) => {
            tracing::debug!(error = %e, "jobs: the job's cgroup cannot be entered");
            tokio::spawn(async move { scope.remove().await });
            None
        }
    }
}

fn spawn_failed(e: SpawnError) -> JobError {
    JobError::Start(match e {
        SpawnError::Sandbox(e) => format!("Failed to start the sandbox: {e}"),
        SpawnError::Command(e) => format!("Failed to start the job: {e}"),
    })
}

/// A foreground `bash` call's process taken over as a job: in the zygote, its reaper's call
/// (which holds its whole tree as any job's); else its process group, without a token (it
/// started as a call: what left its group ends with the session). Its main process's host
/// pid, when the host sees it.
pub(super) fn adopt(proc: bash_proc::Proc) -> (JobProc, Option<i32>) {
    match proc {
        bash_proc::Proc::Zygote(p) => {
            let pid = p.host_pgid;
            (JobProc::Reaper(p, None), pid)
        }
        bash_proc::Proc::Local { child, pgid } => (
            JobProc::Group {
                child,
                pgid,
                token: String::new(),
            },
            pgid,
        ),
    }
}

/// util-linux's `setsid`, which gives a command a session of its own with its stdin as its
/// controlling terminal (`-c`): a terminal job's way without keel's executable.
fn setsid_program() -> Option<&'static str> {
    ["/usr/bin/setsid", "/bin/setsid"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
}

/// Starts `run` here in a process group of its own (or, on a terminal, a session), or what
/// `launch` says (a sandbox of its own) with `run`'s environment.
fn group(
    run: Run,
    launch: Option<Launch>,
    ctx: &ToolContext,
    token: &str,
) -> std::io::Result<(JobProc, Option<i32>, Option<HostPid>)> {
    let mut argv: Vec<std::ffi::OsString> = match &launch {
        Some(l) => std::iter::once(l.program.clone().into_os_string())
            .chain(l.args.iter().cloned())
            .collect(),
        None => run.argv.clone(),
    };
    let setsid = setsid_program().filter(|_| run.tty);
    if let Some(s) = setsid {
        argv.splice(0..0, [s.into(), "-c".into()]);
    }
    let given = run
        .stdio
        .as_ref()
        .ok_or_else(|| std::io::Error::other("no output for the job"))?;
    let stdin = match run.tty {
        true => Stdio::from(given.try_clone()?),
        false => Stdio::null(),
    };
    let mut argv = argv.into_iter();
    let program = argv
        .next()
        .ok_or_else(|| std::io::Error::other("no command"))?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(argv)
        .current_dir(&run.cwd)
        .stdin(stdin)
        .stdout(Stdio::from(given.try_clone()?))
        .stderr(Stdio::from(given.try_clone()?))
        .kill_on_drop(true);
    // `setsid` makes the session, and so the group; a group leader could not.
    if setsid.is_none() {
        cmd.process_group(0);
    }
    ctx.env.apply(&mut cmd);
    cmd.env(record::TOKEN_VAR, token);
    if let Some(l) = &launch {
        cmd.envs(l.env.iter().map(|(k, v)| (k, v)));
    }
    let child = cmd.spawn();
    // The command holds the output's write end now: no copy may stay here, or its end would
    // never be seen.
    drop((cmd, run));
    let child = child?;
    let pgid = child.id().and_then(|id| i32::try_from(id).ok());
    let token = token.to_string();
    Ok((JobProc::Group { child, pgid, token }, pgid, None))
}

impl JobProc {
    /// Waits for the main process (cancel-safe). An error: the sandbox ended under it.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match self {
            JobProc::Reaper(p, _) => p.wait().await,
            JobProc::Group { child, .. } => child.wait().await,
        }
    }

    /// Sends `signal` to the whole job: its group and what left it.
    pub async fn signal(&mut self, signal: Signal) {
        match self {
            JobProc::Reaper(p, scope) => {
                p.signal(signal).await;
                // KILL reaches all of it at once, a process forking meanwhile too.
                if let (Signal::SIGKILL, Some(scope)) = (signal, scope) {
                    scope.kill();
                }
            }
            JobProc::Group { pgid, token, .. } => {
                if let Some(pg) = pgid {
                    let _ = killpg(Pid::from_raw(*pg), signal);
                }
                record::end_token(token, signal);
            }
        }
    }

    /// Ends what the job left once its main process exited (its reaper did already), and
    /// removes its cgroup.
    pub async fn end_leftovers(&self) {
        self.hangup().now();
        if let JobProc::Reaper(_, Some(scope)) = self {
            scope.remove().await;
        }
    }

    /// A way to end the whole job synchronously, from anywhere (the table's drop).
    pub fn hangup(&self) -> Hangup {
        match self {
            JobProc::Reaper(p, scope) => match p.hangup() {
                Ok(fd) => Hangup::Socket(fd, scope.clone()),
                Err(_) => Hangup::Nothing,
            },
            JobProc::Group { pgid, token, .. } => Hangup::Group {
                pgid: *pgid,
                token: token.clone(),
            },
        }
    }
}

/// Ends a job synchronously.
pub(super) enum Hangup {
    /// Its reaper's call: shut down, its reaper kills what the call started (and its cgroup
    /// is killed).
    Socket(OwnedFd, Option<Arc<Scope>>),
    /// Its group and its token's processes: killed.
    Group {
        pgid: Option<i32>,
        token: String,
    },
    Nothing,
}

impl Hangup {
    pub fn now(&self) {
        match self {
            Hangup::Socket(fd, scope) => {
                let _ = rustix::net::shutdown(fd, rustix::net::Shutdown::Both);
                if let Some(scope) = scope {
                    scope.kill();
                }
            }
            Hangup::Group { pgid, token } => {
                if let Some(pg) = pgid {
                    let _ = killpg(Pid::from_raw(*pg), Signal::SIGKILL);
                }
                record::end_token(token, Signal::SIGKILL);
            }
            Hangup::Nothing => {}
        }
    }
}
