//! A call's reaper (`keel __sandbox-reaper`, started by the zygote inside the sandbox: one per
//! call running at once, and reused for the next call once its call ended). A child
//! subreaper, so what a call's processes leave running comes to it rather than to the
//! zygote: it takes one call at a time from the zygote (its stdin is the control socket, as
//! the zygote's is keel's), starts the command (a process group of its own, the call's cwd
//! and environment, stdin `/dev/null`, its stdout and stderr the call's pipes), reports its
//! pid, SIGKILLs its group on `Kill` (and when keel drops the call), and once its main process
//! exited kills everything else the call started, in its group or not (`setsid`, a double
//! fork), before it reports the wait status; then it tells the zygote it is ready for another.
//! A job's call (`tty`) runs the command on the PTY slave it was handed, as stdin too, in a
//! session of its own with that terminal as its controlling one (through `keel
//! __sandbox-tty`: without `unsafe`, no `pre_exec` can do it here); a `Signal` goes to the
//! command's group and to everything else the call started. Keel runs it outside any sandbox
//! too, for a job on an unsandboxed session: the same catch of `setsid` and double forks.
//! Owns only that loop: the sandbox's walls and the limits were set before it runs, the
//! memory one (`RLIMIT_AS`) by itself first thing.

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream as StdStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::OwnedWriteHalf;
use tokio::signal::unix::{signal, SignalKind};

use super::family;
use super::proto::{self, Lifetime, OsBytes, Reply, Request};

/// The signals a reaper waits on besides its call: a child changed state, and the zygote (its
/// parent) is gone (`SIGTERM`, its parent-death signal) or ends everything.
struct Signals {
    child: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

/// How a call ended for the reaper.
enum Ended {
    /// The call is over: ready for the next.
    Call,
    /// The reaper must go (`SIGTERM`): what the call started is gone already.
    Terminated,
}

/// Serves calls from `control` (its stdin) until the zygote closes it or goes. With
/// `address_space`, `RLIMIT_AS` is set on itself first, so on every command it starts. `exe`:
/// keel as this process was started (it runs a `tty` call's command through it).
pub fn reap(control: OwnedFd, address_space: Option<u64>, exe: &Path) -> std::io::Result<()> {
    if let Some(bytes) = address_space {
        crate::kernel::sandbox::limits::limit_address_space(bytes)?;
    }
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    let mut signals = runtime.block_on(async {
        Ok::<_, std::io::Error>(Signals {
            child: signal(SignalKind::child())?,
            term: signal(SignalKind::terminate())?,
        })
    })?;
    // The zygote's death is SIGTERM, heard from before it is set (a call under way ends).
    let parent = nix::unistd::getppid();
    nix::sys::prctl::set_pdeathsig(Signal::SIGTERM).map_err(std::io::Error::from)?;
    if nix::unistd::getppid() != parent {
        return Ok(());
    }
    let own: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    while let Some(handed) = proto::recv_call(control.as_fd())? {
        let [call, out, err] = handed.fds;
        let with = Call {
            exe,
            own: &own,
            cgroup: handed.cgroup,
        };
        match runtime.block_on(one_call((call, with), [out, err], &mut signals)) {
            Ended::Call => proto::send_ready(control.as_fd())?,
            Ended::Terminated => return Ok(()),
        }
    }
    Ok(())
}

/// What every call's command is started with besides its request.
struct Call<'a> {
    /// keel itself (`__sandbox-tty`, `__sandbox-job-cgroup`).
    exe: &'a Path,
    /// This process's environment, on top of the request's.
    own: &'a [(OsString, OsString)],
    /// A job's cgroup (its `cgroup.procs`, open for writing), which the command enters
    /// before it execs.
    cgroup: Option<OwnedFd>,
}

/// One call: read the request, start it, report, serve kills and signals until its main
/// process exits, end the rest, report its status.
async fn one_call(
    (socket, call): (OwnedFd, Call<'_>),
    [out, err]: [OwnedFd; 2],
    signals: &mut Signals,
) -> Ended {
    let stream = StdStream::from(socket);
    let Ok(stream) = stream
        .set_nonblocking(true)
        .and_then(|()| tokio::net::UnixStream::from_std(stream))
    else {
        return Ended::Call;
    };
    let (read, mut writer) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let request = match lines.next_line().await {
        Ok(Some(line)) => serde_json::from_str::<Request>(&line).ok(),
        _ => None,
    };
    let Some(Request::Run {
        argv,
        cwd,
        env,
        lifetime,
        tty,
    }) = request
    else {
        return Ended::Call;
    };
    if !reply(&mut writer, &Reply::Accepted).await {
        return Ended::Call;
    }
    let pid = match start((argv, cwd, env, tty), call, out, err) {
        Ok(pid) => pid,
        Err(e) => {
            let not_found = e.kind() == std::io::ErrorKind::NotFound;
            let error = e.to_string();
            reply(&mut writer, &Reply::Failed { error, not_found }).await;
            return Ended::Call;
        }
    };
    reply(&mut writer, &Reply::Started { pid }).await;
    let mut listening = true;
    let status = loop {
        tokio::select! {
            line = lines.next_line(), if listening => match line {
                Ok(Some(line)) => match serde_json::from_str::<Request>(&line) {
                    Ok(Request::Kill) => kill_group(pid),
                    Ok(Request::Signal { signal }) => signal_all(pid, signal),
                    _ => {}
                },
                // keel dropped the call: it ends as a dropped child does.
                _ => {
                    listening = false;
                    kill_group(pid);
                }
            },
            _ = signals.child.recv() => {
                if let Some(status) = reaped(pid) {
                    break status;
                }
            }
            _ = signals.term.recv() => {
                kill_group(pid);
                family::end_descendants(&|_| false);
                return Ended::Terminated;
            }
        }
    };
    match lifetime {
        Lifetime::Call => {
            kill_group(pid);
            family::end_descendants(&|_| false);
        }
    }
    reply(&mut writer, &Reply::Exited { status }).await;
    Ended::Call
}

/// What a `Run` request asks for: argv, cwd, environment, on a terminal.
type Asked = (Vec<OsBytes>, OsBytes, Vec<(OsBytes, OsBytes)>, bool);

/// Starts the command as the request says; its pid (and process group). On a terminal (`tty`:
/// `out` is a PTY slave) it runs through `keel __sandbox-tty`, which makes it the leader of a
/// session (and so of a group) of its own whose controlling terminal `out` is, then execs it.
/// With a cgroup, through `keel __sandbox-job-cgroup` first (the cgroup's file as its
/// stdin), which writes itself into the cgroup, then execs the rest: the command is in it
/// before it runs, and so is everything it starts.
fn start(
    (argv, cwd, env, tty): Asked,
    call: Call<'_>,
    out: OwnedFd,
    err: OwnedFd,
) -> std::io::Result<i32> {
    let mut argv = argv.into_iter().map(OsBytes::into_os);
    let program = argv
        .next()
        .ok_or_else(|| std::io::Error::other("no command to run"))?;
    let mut cmd = match (&call.cgroup, tty) {
        (Some(_), _) => {
            let mut cmd = Command::new(call.exe);
            cmd.arg(crate::kernel::jobs::CGROUP_COMMAND);
            cmd.arg(if tty { "tty" } else { "pipes" });
            if tty {
                cmd.arg(call.exe).arg(crate::kernel::jobs::TTY_COMMAND);
            }
            cmd.arg(program);
            cmd
        }
        (None, true) => {
            let mut cmd = Command::new(call.exe);
            cmd.arg(crate::kernel::jobs::TTY_COMMAND).arg(program);
            cmd
        }
        (None, false) => Command::new(program),
    };
    let stdin = match (call.cgroup, tty) {
        (Some(cgroup), _) => Stdio::from(cgroup),
        (None, true) => Stdio::from(out.try_clone()?),
        (None, false) => Stdio::null(),
    };
    cmd.args(argv)
        .current_dir(cwd.into_os())
        .env_clear()
        .envs(env.into_iter().map(|(k, v)| (k.into_os(), v.into_os())))
        .envs(call.own.iter().map(|(k, v)| (k, v)))
        .stdin(stdin)
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err));
    // A group leader cannot start a session: on a terminal the helper's `setsid` makes both.
    if !tty {
        cmd.process_group(0);
    }
    let child = cmd.spawn()?;
    // The command holds the pipes now; this process must not keep them open. The child is
    // reaped below, by pid (with whatever else comes to this process).
    drop(cmd);
    i32::try_from(child.id()).map_err(std::io::Error::other)
}

/// Reaps every child that ended (the call's main process, and what was left to this
/// process); the main process's raw wait status once it is among them.
fn reaped(main: i32) -> Option<i32> {
    use rustix::process::{wait, WaitOptions};
    let mut status = None;
    // `wait`, any child (`waitpid(None)` would be those of this process's group only).
    while let Ok(Some((pid, s))) = wait(WaitOptions::NOHANG) {
        if pid.as_raw_nonzero().get() == main {
            status = Some(s.as_raw());
        }
    }
    status
}

fn kill_group(pid: i32) {
    let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
}

/// `signal` to the command's group and every process below this one (what the call started:
/// nothing else runs below a reaper during its call). An unknown number is not sent.
fn signal_all(pid: i32, signal: i32) {
    let Ok(signal) = Signal::try_from(signal) else {
        return;
    };
    let _ = killpg(Pid::from_raw(pid), signal);
    family::signal_descendants(signal);
}

async fn reply(w: &mut OwnedWriteHalf, r: &Reply) -> bool {
    w.write_all(&proto::line(r)).await.is_ok()
}
