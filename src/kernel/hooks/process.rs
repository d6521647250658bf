//! Running one command hook: `sh -c COMMAND` in the session's cwd, in its own process group,
//! no terminal, the payload on stdin (then closed), the session's tool environment (provider
//! keys scrubbed) plus `KEEL_PROJECT_DIR` and `CLAUDE_PROJECT_DIR`; killed with everything it
//! started on timeout or abort. In the session's sandbox (issue 43 point 16) it is started
//! through [`Sandbox::launch`] (bubblewrap, or keel's Landlock helper) with the session's
//! private `/tmp`, never through the zygote (which has no stdin to give); when no sandbox
//! works it is not started at all, as `bash` is not. Output is read whole up to a bound; what
//! the model or user sees of it is capped by the caller. It never decides whether a hook is
//! sandboxed: the caller passes the sandbox or `None`.
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::kernel::abort::AbortSignal;
use crate::kernel::sandbox::{Launch, Mechanism, Sandbox};
use crate::kernel::tool::{bash, ToolEnv};

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
    /// Directories hooks may read although the sandbox keeps them from the model: Claude
    /// Code's `~/.claude/hooks`, where its users keep the scripts their hooks run (the rest of
    /// `~/.claude`, sessions and credentials, stays unreadable).
    pub readable: Vec<PathBuf>,
}

/// What one firing adds to a hook's environment.
#[derive(Debug, Clone, Default)]
pub struct Vars {
    /// `CLAUDE_ENV_FILE` (`SessionStart`): the session's env file, this host's path.
    pub env_file: Option<PathBuf>,
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

/// Runs `command` with `payload` on stdin, in `sandbox` (`None`: as is); never fails: a hook
/// that cannot start is an `Exit`.
pub async fn run(
    command: &str,
    payload: &[u8],
    env: &HookEnv,
    vars: &Vars,
    sandbox: Option<&Sandbox>,
    timeout: Duration,
    abort: &AbortSignal,
) -> Ran {
    let mut child = match spawn(command, env, vars, sandbox) {
        Ok(c) => c,
        Err(e) => {
            return Ran {
                exit: Exit::SpawnFailed(e),
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
    let kill_group = |pgid: Option<i32>| {
        if let Some(pg) = pgid {
            let _ = killpg(Pid::from_raw(pg), Signal::SIGKILL);
        }
    };
    if matches!(exit, Exit::TimedOut | Exit::Aborted) {
        // Not reaped yet: its pid is still its own.
        if let Some(pid) = pgid {
            kill_started(pid);
        }
        let _ = child.start_kill();
        let _ = child.wait().await;
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
        kill_group(pgid);
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

/// Kills the hook process `pid` (not reaped) with everything it started. Its group is not
/// always all of it: bubblewrap's child, the init of the hook's PID namespace, leaves the group
/// (`--new-session`) before it arms its parent-death signal, so a bubblewrap killed in between
/// would leave the sandbox running. So `pid` is stopped first (a stopped process starts nothing
/// more: a fork pending a signal is undone), then its children are killed (an init's death
/// ends its whole namespace), then its group, which under the Landlock helper is the session
/// it made with `setsid` (or, stopped before that, `pid` alone).
fn kill_started(pid: i32) {
    let leader = Pid::from_raw(pid);
    let _ = kill(leader, Signal::SIGSTOP);
    for child in children(pid) {
        let _ = kill(Pid::from_raw(child), Signal::SIGKILL);
    }
    let _ = killpg(leader, Signal::SIGKILL);
    let _ = kill(leader, Signal::SIGKILL);
}

/// The children of the single-threaded process `pid` (from `/proc`).
fn children(pid: i32) -> Vec<i32> {
    match std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")) {
        Ok(list) => list
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect(),
        // A kernel without CONFIG_PROC_CHILDREN.
        Err(_) => children_by_parent(pid),
    }
}

/// Every process whose parent is `pid`.
fn children_by_parent(pid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| parent_of(*p) == Some(pid))
        .collect()
}

/// The parent of `pid`: the field after the state in `/proc/PID/stat` (after the name, which
/// may hold spaces and parentheses).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Of `dirs`, the real directories (their real paths): a symlink there (`~/.claude/hooks ->
/// ~/.ssh`) would open what it points to, so it opens nothing.
fn readable_dirs(dirs: &[PathBuf]) -> Vec<PathBuf> {
    dirs.iter()
        .filter(|d| std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir()))
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .collect()
}

/// Starts the hook, in `sandbox` when there is one that runs commands; the error is what the
/// user reads (the sandbox's own when it refuses, as `bash` reports it).
fn spawn(
    command: &str,
    env: &HookEnv,
    vars: &Vars,
    sandbox: Option<&Sandbox>,
) -> Result<tokio::process::Child, String> {
    let launch = match sandbox {
        Some(s) if !matches!(s.mechanism, Mechanism::Off | Mechanism::Unenforced) => {
            let tmp = crate::kernel::tool::bash::private_tmp(&env.tool_env, &env.temp_dir)?;
            let readable = readable_dirs(&env.readable);
            let widened;
            let s = match readable.is_empty() {
                true => s,
                false => {
                    let mut w = s.clone();
                    w.policy.allow_read.extend(readable);
                    widened = w;
                    &widened
                }
            };
            s.launch("sh", command, &env.cwd, &tmp)
                .map_err(|e| e.message)?
        }
        _ => None,
    };
    let mut cmd = match &launch {
        Some(Launch { program, args, .. }) => {
            let mut cmd = Command::new(program);
            cmd.args(args);
            cmd
        }
        None => {
            let mut cmd = Command::new("sh");
            cmd.arg("-c").arg(command);
            cmd
        }
    };
    cmd.current_dir(&env.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // The Landlock helper leaves the terminal with `setsid`, which a group leader cannot do:
    // its new session is the hook's group (the same id, its pid). Anything else leads one.
    let helper = sandbox.is_some_and(|s| matches!(s.mechanism, Mechanism::Landlock { .. }));
    if !(launch.is_some() && helper) {
        cmd.process_group(0);
    }
    env.tool_env.apply(&mut cmd);
    cmd.env("KEEL_PROJECT_DIR", &env.project_dir)
        .env("CLAUDE_PROJECT_DIR", &env.project_dir);
    if let Some(l) = &launch {
        cmd.envs(l.env.iter().map(|(k, v)| (k, v)));
    }
    if let Some(file) = &vars.env_file {
        let sandbox = sandbox.filter(|_| launch.is_some());
        cmd.env("CLAUDE_ENV_FILE", bash::env_file_inside(sandbox, file));
    }
    cmd.spawn().map_err(|e| e.to_string())
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
    use std::path::Path;

    fn env(dir: &Path) -> HookEnv {
        HookEnv {
            cwd: dir.to_path_buf(),
            project_dir: dir.to_path_buf(),
            tool_env: ToolEnv::new(vec!["KEEL_HOOK_TEST_SECRET".into()]),
            temp_dir: dir.to_path_buf(),
            readable: Vec::new(),
        }
    }

    async fn go(cmd: &str, payload: &str, timeout: Duration) -> Ran {
        let d = tempfile::tempdir().unwrap();
        run(
            cmd,
            payload.as_bytes(),
            &env(d.path()),
            &Vars::default(),
            None,
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
            &Vars::default(),
            None,
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

    #[test]
    fn only_real_directories_are_opened_to_hooks_not_links_or_what_is_missing() {
        let d = tempfile::tempdir().unwrap();
        let (real, link, missing) = (
            d.path().join("hooks"),
            d.path().join("link"),
            d.path().join("none"),
        );
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(d.path(), &link).unwrap();
        let got = readable_dirs(&[real.clone(), link, missing]);
        assert_eq!(got, [std::fs::canonicalize(&real).unwrap()]);
    }

    #[tokio::test]
    async fn where_no_sandbox_works_a_sandboxed_hook_is_refused_as_bash_is() {
        let d = tempfile::tempdir().unwrap();
        let mut sandbox = Sandbox::workspace_write(d.path());
        sandbox.mechanism = Mechanism::Unavailable;
        let ran = run(
            "echo ran > ran.txt",
            b"",
            &env(d.path()),
            &Vars::default(),
            Some(&sandbox),
            Duration::from_secs(20),
            &AbortSignal::never(),
        )
        .await;
        let Exit::SpawnFailed(why) = &ran.exit else {
            panic!("{ran:?}")
        };
        assert!(why.contains("no sandbox works here"), "{why}");
        assert!(!d.path().join("ran.txt").exists(), "it ran unsandboxed");
    }

    #[test]
    fn a_processs_children_are_found_with_or_without_the_children_file() {
        use std::io::BufRead;
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let mut out = std::io::BufReader::new(sh.stdout.take().unwrap());
        out.read_line(&mut line).unwrap();
        let (shell, sleep) = (sh.id() as i32, line.trim().parse::<i32>().unwrap());
        let (listed, scanned) = (children(shell), children_by_parent(shell));
        let parent = parent_of(sleep);
        kill_started(shell);
        sh.wait().unwrap();
        assert_eq!(listed, [sleep]);
        assert_eq!(scanned, [sleep]);
        assert_eq!(parent, Some(shell));
        // Killed: gone, or a zombie until its new parent reaps it (a SIGKILL lands when the
        // process next runs: waited for, to a bound only a survivor reaches).
        let gone = || {
            std::fs::read_to_string(format!("/proc/{sleep}/stat"))
                .map(|s| s.contains(") Z "))
                .unwrap_or(true)
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !gone() && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert!(gone(), "the sleep {sleep} survived");
    }

    #[tokio::test]
    async fn a_hook_that_ignores_stdin_does_not_stall() {
        let big = "x".repeat(4 << 20);
        let ran = go("exit 0", &big, Duration::from_secs(20)).await;
        assert_eq!(ran.exit, Exit::Code(Some(0)));
    }
}
