//! The process one `bash` call runs: started here (unsandboxed, the user's own commands, or a
//! sandbox of its own for an embedder that is not keel) or in the session's sandbox zygote.
//! Owns the start, the output pipes, the wait and the kill of the whole group, the same for
//! both, and the end of what the call left running once it exited (the zygote's reaper ends
//! all of it; here, its process group); it never reads the output (`bash` does).

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::AsyncRead;
use tokio::process::{Child, Command};

use super::{ToolContext, ToolEnv};
use crate::kernel::sandbox::zygote::{Lifetime, Process, Run, SpawnError};
use crate::kernel::sandbox::{Launch, Mechanism, Sandbox};

/// A running command.
pub(crate) enum Proc {
    /// Started here: the child, and its process group (kept: the child forgets its pid once
    /// it was reaped).
    Local {
        child: Child,
        pgid: Option<i32>,
    },
    Zygote(Process),
}

/// An output pipe of either.
pub(super) type Pipe = Box<dyn AsyncRead + Unpin + Send>;

/// Starts `command` as the model's: in the session's sandbox (its zygote, or a sandbox of its
/// own), or as is when the sandbox is off. The error is what the model reads.
pub(super) async fn start(command: &str, ctx: &ToolContext) -> Result<Proc, String> {
    let sandbox = &ctx.sandbox;
    if matches!(sandbox.mechanism, Mechanism::Off | Mechanism::Unenforced) {
        return spawn_local(command, &ctx.cwd, &ctx.env, None).map_err(start_failed);
    }
    let tmp = private_tmp(&ctx.env, &ctx.temp_dir)?;
    let shell = shell();
    if !sandbox.zygote_runs() {
        let launch = sandbox
            .launch(shell, command, &ctx.cwd, &tmp)
            .map_err(|e| e.message)?;
        return spawn_local(command, &ctx.cwd, &ctx.env, launch).map_err(start_failed);
    }
    let run = Run {
        argv: vec![shell.into(), "-c".into(), command.into()],
        cwd: ctx.cwd.clone(),
        env: ctx.env.resolved(),
        lifetime: Lifetime::Call,
        stdio: None,
        tty: false,
        cgroup: None,
    };
    match sandbox.spawn(run, &tmp).await {
        Ok(p) => {
            if let Some(pg) = p.host_pgid {
                ctx.env.adopt_group(pg);
            }
            Ok(Proc::Zygote(p))
        }
        Err(SpawnError::Sandbox(e)) => Err(format!("Failed to start the sandbox: {e}")),
        Err(SpawnError::Command(e)) => Err(start_failed(e)),
    }
}

/// Starts the session's zygote now, if `bash` will run in one, so that the first command does
/// not wait for it (`temp_dir`: where the session's private directory goes). A failure waits
/// for that command to report it.
pub fn warm(sandbox: &Sandbox, cwd: &Path, env: &ToolEnv, temp_dir: &Path) {
    if !sandbox.zygote_runs() {
        return;
    }
    if let Ok(tmp) = private_tmp(env, temp_dir) {
        if let Err(e) = sandbox.warm(cwd, &tmp) {
            tracing::debug!(error = %e, "bash: the sandbox could not be warmed");
        }
    }
}

fn start_failed(e: std::io::Error) -> String {
    format!("Failed to start shell: {e}")
}

/// Where the session's private directory that becomes the sandbox's `/tmp` is, not created
/// (the sandbox's probe creates it, or [`private_tmp`] when a command first needs it).
pub fn private_tmp_path(env: &ToolEnv, temp_dir: &Path) -> PathBuf {
    env.spill_path(temp_dir).join("sandbox-tmp")
}

/// The session's private directory that becomes the sandbox's `/tmp` (created now, with the
/// session's kept output directory: what does not exist when the sandbox starts is not bound).
pub fn private_tmp(env: &ToolEnv, temp_dir: &Path) -> Result<PathBuf, String> {
    env.output_dir(temp_dir)
        .and_then(|_| env.spill_dir(temp_dir))
        .map(|d| d.join("sandbox-tmp"))
        .and_then(|d| std::fs::create_dir_all(&d).map(|_| d))
        .map_err(|e| format!("Failed to prepare the sandbox: {e}"))
}

/// The shell sandboxed commands run in: bash where it is, else `sh`.
pub(crate) fn shell() -> &'static str {
    ["/usr/bin/bash", "/bin/bash"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .unwrap_or("sh")
}

/// Spawns `bash -c command` (or `sh -c` when bash is missing), or what `launch` says, in a new
/// process group, without the variables `env` scrubs; the group is handed to `env` to be
/// killed when the session ends.
pub(super) fn spawn_local(
    command: &str,
    cwd: &Path,
    env: &ToolEnv,
    launch: Option<Launch>,
) -> std::io::Result<Proc> {
    let build = |shell: &str| {
        let mut cmd = match &launch {
            Some(l) => {
                let mut cmd = Command::new(&l.program);
                cmd.args(&l.args);
                cmd
            }
            None => {
                let mut cmd = Command::new(shell);
                cmd.arg("-c").arg(command);
                cmd
            }
        };
        cmd.current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        env.apply(&mut cmd);
        if let Some(l) = &launch {
            cmd.envs(l.env.iter().map(|(k, v)| (k, v)));
        }
        cmd.spawn()
    };
    let child = match build("bash") {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => build("sh"),
        other => other,
    }?;
    let pgid = child.id().and_then(|id| i32::try_from(id).ok());
    if let Some(pg) = pgid {
        env.adopt_group(pg);
    }
    Ok(Proc::Local { child, pgid })
}

impl Proc {
    /// Its stdout and stderr, once.
    pub(super) fn take_outputs(&mut self) -> [Option<Pipe>; 2] {
        match self {
            Proc::Local { child: c, .. } => [
                c.stdout.take().map(|p| Box::new(p) as Pipe),
                c.stderr.take().map(|p| Box::new(p) as Pipe),
            ],
            Proc::Zygote(p) => [
                p.stdout.take().map(|p| Box::new(p) as Pipe),
                p.stderr.take().map(|p| Box::new(p) as Pipe),
            ],
        }
    }

    /// Waits for the main process (cancel-safe).
    pub(super) async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match self {
            Proc::Local { child, .. } => child.wait().await,
            Proc::Zygote(p) => p.wait().await,
        }
    }

    /// Ends what the call left running once its main process exited: in the zygote its
    /// reaper did already (everything, in the group or not); here, the process group (what
    /// left it, `setsid`, is not known here and ends with the session at the latest).
    pub(super) fn end_leftovers(&self) {
        if let Proc::Local { pgid: Some(pg), .. } = self {
            let _ = killpg(Pid::from_raw(*pg), Signal::SIGKILL);
        }
    }

    /// SIGKILLs the whole process group, then reaps the main process.
    pub(crate) async fn kill_group(&mut self) {
        match self {
            Proc::Local { child, pgid } => {
                let pgid = *pgid;
                let killed = match pgid {
                    Some(pg) => {
                        killpg(Pid::from_raw(pg), Signal::SIGKILL).map_err(std::io::Error::from)
                    }
                    None => child.start_kill(),
                };
                if let Err(e) = killed {
                    tracing::debug!(?pgid, error = %e, "bash: kill failed");
                }
            }
            Proc::Zygote(p) => p.kill_group().await,
        }
        if let Err(e) = self.wait().await {
            tracing::debug!(error = %e, "bash: wait after kill failed");
        }
    }
}
