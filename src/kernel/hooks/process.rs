//! Running one command hook: `sh -c COMMAND` in the session's cwd, in its own process group,
//! no terminal, the payload on stdin (then closed), the session's tool environment (provider
//! keys scrubbed) plus `KEEL_PROJECT_DIR` and `CLAUDE_PROJECT_DIR`; killed with its group on
//! timeout or abort. Output is read whole up to a bound; what the model or user sees of it is
//! capped by the caller.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::kernel::abort::AbortSignal;
use crate::kernel::tool::ToolEnv;

/// Output beyond this many bytes per stream is read and dropped (a hook that floods its pipe
/// is not killed by SIGPIPE, and keel's memory stays bounded).
const READ_LIMIT: usize = 1 << 20;

/// Where and how hooks run: the same for every hook of a session.
#[derive(Debug, Clone)]
pub struct HookEnv {
    pub cwd: PathBuf,
    /// `KEEL_PROJECT_DIR` / `CLAUDE_PROJECT_DIR`: the project root.
    pub project_dir: PathBuf,
    pub tool_env: ToolEnv,
    /// The session's temp root; long hook output is saved under its spill directory.
    pub temp_dir: PathBuf,
}

/// How one hook process ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Exit {
    /// It exited with this code (a signal death is `None`).
    Code(Option<i32>),
    /// It ran past its timeout and was killed.
    TimedOut,
    /// The run was aborted and it was killed.
    Aborted,
    /// It could not be started.
    SpawnFailed(String),
}

/// What one hook process did.
#[derive(Debug, Clone)]
pub struct Ran {
    pub exit: Exit,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `command` with `payload` on stdin; never fails: a hook that cannot start is an `Exit`.
pub async fn run(
    command: &str,
    payload: &[u8],
    env: &HookEnv,
    timeout: Duration,
    abort: &AbortSignal,
) -> Ran {
    let mut child = match spawn(command, &env.cwd, &env.project_dir, &env.tool_env) {
        Ok(c) => c,
        Err(e) => {
            return Ran {
                exit: Exit::SpawnFailed(e.to_string()),
                stdout: String::new(),
                stderr: String::new(),
            }
        }
    };
    let pgid = child.id().and_then(|id| i32::try_from(id).ok());
    let stdin = child.stdin.take();
    let payload = payload.to_vec();
    // A hook that never reads its stdin must not stall us: the write runs beside the wait.
    let writer = tokio::spawn(async move {
        if let Some(mut w) = stdin {
            let _ = w.write_all(&payload).await;
            let _ = w.shutdown().await;
        }
    });
    let mut out = tokio::spawn(read_bounded(child.stdout.take()));
    let mut err = tokio::spawn(read_bounded(child.stderr.take()));
    let deadline = tokio::time::Instant::now() + timeout;
    let exit = tokio::select! {
        status = child.wait() => Exit::Code(status.ok().and_then(|s| s.code())),
        _ = tokio::time::sleep_until(deadline) => Exit::TimedOut,
        _ = abort.aborted() => Exit::Aborted,
    };
    let kill = |pgid: Option<i32>| {
        if let Some(pg) = pgid {
            let _ = killpg(Pid::from_raw(pg), Signal::SIGKILL);
        }
    };
    if matches!(exit, Exit::TimedOut | Exit::Aborted) {
        kill(pgid);
        let _ = child.kill().await;
    }
    writer.abort();
    // A background child that keeps the pipes open has until the hook's deadline; then its
    // group is killed so the pipes close.
    let (mut stdout, mut stderr) = (None, None);
    let both = async {
        stdout = Some((&mut out).await.unwrap_or_default());
        stderr = Some((&mut err).await.unwrap_or_default());
    };
    if tokio::time::timeout_at(deadline, both).await.is_err() {
        kill(pgid);
    }
    let stdout = match stdout {
        Some(s) => s,
        None => out.await.unwrap_or_default(),
    };
    let stderr = match stderr {
        Some(s) => s,
        None => err.await.unwrap_or_default(),
    };
    Ran {
        exit,
        stdout,
        stderr,
    }
}

fn spawn(
    command: &str,
    cwd: &Path,
    project: &Path,
    tool_env: &ToolEnv,
) -> std::io::Result<tokio::process::Child> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    tool_env.apply(&mut cmd);
    cmd.env("KEEL_PROJECT_DIR", project)
        .env("CLAUDE_PROJECT_DIR", project);
    cmd.spawn()
}

/// Reads a pipe to its end (a background grandchild holding it open ends with the group kill
/// or keeps it until it exits), keeping the first `READ_LIMIT` bytes.
async fn read_bounded<R: AsyncRead + Unpin>(pipe: Option<R>) -> String {
    let Some(mut pipe) = pipe else {
        return String::new();
    };
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = READ_LIMIT.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(dir: &Path) -> HookEnv {
        HookEnv {
            cwd: dir.to_path_buf(),
            project_dir: dir.to_path_buf(),
            tool_env: ToolEnv::new(vec!["KEEL_HOOK_TEST_SECRET".into()]),
            temp_dir: dir.to_path_buf(),
        }
    }

    async fn go(cmd: &str, payload: &str, timeout: Duration) -> Ran {
        let d = tempfile::tempdir().unwrap();
        run(
            cmd,
            payload.as_bytes(),
            &env(d.path()),
            timeout,
            &AbortSignal::never(),
        )
        .await
    }

    #[tokio::test]
    async fn the_payload_is_on_stdin_and_exit_code_and_both_streams_come_back() {
        let ran = go(
            "cat; echo oops >&2; exit 2",
            "{\"a\":1}",
            Duration::from_secs(20),
        )
        .await;
        assert_eq!(ran.exit, Exit::Code(Some(2)));
        assert_eq!(ran.stdout, "{\"a\":1}");
        assert_eq!(ran.stderr, "oops\n");
    }

    #[tokio::test]
    async fn project_dir_is_set_and_scrubbed_variables_are_not_seen() {
        std::env::set_var("KEEL_HOOK_TEST_SECRET", "canary");
        let ran = go(
            "echo \"$CLAUDE_PROJECT_DIR|$KEEL_PROJECT_DIR|${KEEL_HOOK_TEST_SECRET-unset}|$(pwd)\"",
            "",
            Duration::from_secs(20),
        )
        .await;
        let parts: Vec<&str> = ran.stdout.trim().split('|').collect();
        assert_eq!(parts[0], parts[1]);
        assert_eq!(parts[2], "unset");
        assert_eq!(parts[0], parts[3], "the hook runs in the project directory");
    }

    #[tokio::test]
    async fn a_hook_past_its_timeout_is_killed_with_its_children() {
        let d = tempfile::tempdir().unwrap();
        let pids = d.path().join("pids");
        let cmd = format!("sleep 30 & echo $! > {}; wait", pids.display());
        let ran = run(
            &cmd,
            b"",
            &env(d.path()),
            Duration::from_millis(300),
            &AbortSignal::never(),
        )
        .await;
        assert_eq!(ran.exit, Exit::TimedOut);
        let pid: i32 = std::fs::read_to_string(&pids)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The group was SIGKILLed: the background sleep is gone (or a zombie being reaped).
        // A SIGKILL takes effect when the process next runs, which on a loaded machine is
        // not at once: wait for it, up to a bound that only a survivor reaches.
        let gone = || {
            nix::sys::signal::kill(Pid::from_raw(pid), None).is_err()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .map(|s| s.contains(") Z "))
                    .unwrap_or(true)
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !gone() && std::time::Instant::now() < deadline {
            tokio::task::yield_now().await;
        }
        assert!(gone(), "background child {pid} survived the timeout");
    }

    #[tokio::test]
    async fn a_hook_that_ignores_stdin_does_not_stall() {
        let big = "x".repeat(4 << 20);
        let ran = go("exit 0", &big, Duration::from_secs(20)).await;
        assert_eq!(ran.exit, Exit::Code(Some(0)));
    }
}
