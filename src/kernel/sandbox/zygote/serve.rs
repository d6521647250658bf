//! The zygote's own half (`keel __sandbox-zygote`, already inside the sandbox): takes calls
//! from the control socket and runs each one as a fresh process (`std::process::Command`, a
//! process group of its own, the call's cwd and environment, its stdout and stderr the pipes
//! keel passed), reports its pid and wait status, and SIGKILLs its group when keel asks. When
//! keel closes the control socket it kills every group it started and returns. Owns only that
//! loop; the restriction of this process (Landlock, seccomp) happened before it runs.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

use super::proto::{self, OsBytes, Reply, Request};

/// The process groups started and maybe still alive.
type Groups = Arc<Mutex<BTreeSet<i32>>>;

/// keel's death as this process hears it: SIGTERM (its parent-death signal), listened for from
/// before that signal is set, so that what the commands left ends before the zygote does. A
/// handler, not a blocked signal: the commands start with SIGTERM as it always is.
pub struct Ending {
    runtime: tokio::runtime::Runtime,
    term: tokio::signal::unix::Signal,
}

impl Ending {
    /// Starts listening (no thread yet: the runtime runs only on [`serve`]'s waiter).
    pub fn listen() -> std::io::Result<Ending> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()?;
        let term = runtime.block_on(async {
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        })?;
        Ok(Ending { runtime, term })
    }
}

/// Serves calls from `control` until keel closes it; returns the error that ended it early.
pub fn serve(control: OwnedFd, ending: Ending) -> std::io::Result<()> {
    // The walls every command lives under, installed here (before any thread starts) under
    // bubblewrap; the Landlock helper installed them before it exec'd this.
    if rustix::thread::secure_computing_mode()
        .is_ok_and(|m| m == rustix::thread::SecureComputingMode::Disabled)
    {
        crate::kernel::sandbox::seccomp::install_walls().map_err(std::io::Error::other)?;
    }
    // What a command leaves running when its parent exits (a double fork, `setsid cmd &`)
    // becomes this process's child, so it ends with the zygote.
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    // What the sandbox set around this process (TMPDIR, the proxy variables) goes on top of
    // each call's environment.
    let own: Arc<Vec<(OsString, OsString)>> = Arc::new(std::env::vars_os().collect());
    let groups: Groups = Arc::default();
    // keel's death arrives as SIGTERM: what was started ends before this process does.
    let last = groups.clone();
    std::thread::spawn(move || {
        let Ending { runtime, mut term } = ending;
        runtime.block_on(term.recv());
        end_all(&last);
        let _ = kill(Pid::this(), Signal::SIGKILL);
    });
    // keel may be waiting for this to know the sandbox works (its start is the probe).
    proto::send_ready(control.as_fd())?;
    let ended = loop {
        match proto::recv_call(control.as_fd()) {
            Ok(Some([call, out, err])) => {
                let (own, groups) = (own.clone(), groups.clone());
                std::thread::spawn(move || handle(call, out, err, &own, &groups));
            }
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    end_all(&groups);
    ended
}

/// Kills every group started, then whatever else is left below this process.
fn end_all(groups: &Groups) {
    let groups = groups.lock().unwrap_or_else(|e| e.into_inner());
    for &pg in groups.iter() {
        let _ = killpg(Pid::from_raw(pg), Signal::SIGKILL);
    }
    end_descendants();
}

/// Kills every child this process still has (the commands' left-overs it adopted as their
/// subreaper), and the children they leave to it in turn, until none is left.
fn end_descendants() {
    let me = std::process::id();
    for _ in 0..64 {
        let children = children_of(me);
        if children.is_empty() {
            return;
        }
        for &pid in &children {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        // Reaped, so that their own children come to this process next.
        for pid in children {
            let _ = nix::sys::wait::waitpid(Pid::from_raw(pid), None);
        }
    }
}

/// The pids whose parent is `parent`, from `/proc/*/stat`.
fn children_of(parent: u32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // `pid (comm) state ppid …`: comm may hold spaces and parentheses.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1));
            ppid.and_then(|p| p.parse::<u32>().ok()) == Some(parent)
        })
        .collect()
}

/// One call: read the request, start it, report, serve kills until it exits.
fn handle(
    call: OwnedFd,
    out: OwnedFd,
    err: OwnedFd,
    own: &[(OsString, OsString)],
    groups: &Groups,
) {
    let stream = UnixStream::from(call);
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut lines = BufReader::new(read_half);
    let mut first = String::new();
    let Ok(Request::Run { argv, cwd, env }) = lines
        .read_line(&mut first)
        .map_err(|_| ())
        .and_then(|_| serde_json::from_str::<Request>(&first).map_err(|_| ()))
    else {
        return;
    };
    let mut writer = &stream;
    let reply = |w: &mut &UnixStream, r: &Reply| w.write_all(&proto::line(r)).is_ok();
    if !reply(&mut writer, &Reply::Accepted) {
        return;
    }
    let mut argv = argv.into_iter().map(OsBytes::into_os);
    let Some(program) = argv.next() else {
        reply(
            &mut writer,
            &Reply::Failed {
                error: "no command to run".into(),
                not_found: false,
            },
        );
        return;
    };
    let mut cmd = Command::new(program);
    cmd.args(argv)
        .current_dir(cwd.into_os())
        .env_clear()
        .envs(env.into_iter().map(|(k, v)| (k.into_os(), v.into_os())))
        .envs(own.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .process_group(0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let not_found = e.kind() == std::io::ErrorKind::NotFound;
            let error = e.to_string();
            reply(&mut writer, &Reply::Failed { error, not_found });
            return;
        }
    };
    // The command holds the pipes now; this process must not keep them open.
    drop(cmd);
    let Ok(pid) = i32::try_from(child.id()) else {
        return;
    };
    {
        let mut g = groups.lock().unwrap_or_else(|e| e.into_inner());
        g.retain(|&pg| killpg(Pid::from_raw(pg), None).is_ok());
        g.insert(pid);
    }
    let exited = Arc::new(AtomicBool::new(false));
    let watcher = exited.clone();
    std::thread::spawn(move || kills(lines, pid, &watcher));
    reply(&mut writer, &Reply::Started { pid });
    let status = match child.wait() {
        Ok(s) => s.into_raw(),
        Err(_) => (Signal::SIGKILL as i32) & 0x7f,
    };
    exited.store(true, Ordering::SeqCst);
    reply(&mut writer, &Reply::Exited { status });
}

/// Kills `pid`'s group on each `Kill`; when keel goes away before the command ended (its call
/// was dropped), kills the command as a dropped child is.
fn kills(lines: BufReader<UnixStream>, pid: i32, exited: &AtomicBool) {
    for line in lines.lines() {
        let Ok(line) = line else { break };
        if let Ok(Request::Kill) = serde_json::from_str::<Request>(&line) {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
    if !exited.load(Ordering::SeqCst) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
}
