//! The zygote's own half (`keel __sandbox-zygote`, already inside the sandbox): takes calls
//! from the control socket and hands each to a reaper of its own ([`super::reaper`]: an idle
//! one, or one started now), which runs the command and ends everything it started with it.
//! Reapers are kept for the next calls (a call pays for no exec of keel), a few idle at most.
//! The zygote is a child subreaper too: what a reaper that died (a command may kill it) left
//! comes to it, and is killed at once; when keel closes the control socket, or dies, it ends
//! everything below it and returns. When no reaper can start (the process limit is reached),
//! it answers the call itself with the error. Owns only that loop; the restriction of this
//! process (Landlock, seccomp) and its `RLIMIT_NPROC` happened before it runs.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::family;
use super::proto::{self, Reply};

/// How many reapers wait for a call at most (more only while that many calls run at once).
const IDLE_REAPERS: usize = 4;

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

/// How the zygote starts its reapers: keel's executable (as this process was started) and
/// the reapers' own arguments (`--address-space BYTES`).
pub struct Reapers {
    pub exe: PathBuf,
    pub args: Vec<OsString>,
}

/// Serves calls from `control` until keel closes it; returns the error that ended it early.
pub fn serve(control: OwnedFd, ending: Ending, reapers: Reapers) -> std::io::Result<()> {
    // The walls every command lives under, installed here (before any thread starts) under
    // bubblewrap; the Landlock helper installed them before it exec'd this.
    if rustix::thread::secure_computing_mode()
        .is_ok_and(|m| m == rustix::thread::SecureComputingMode::Disabled)
    {
        crate::kernel::sandbox::seccomp::install_walls().map_err(std::io::Error::other)?;
    }
    // What a reaper leaves when it dies becomes this process's child, so it can end it.
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    let pool = Arc::new(Pool {
        reapers,
        idle: Mutex::default(),
        live: Mutex::default(),
    });
    // keel's death arrives as SIGTERM: what was started ends before this process does.
    std::thread::spawn(move || {
        let Ending { runtime, mut term } = ending;
        runtime.block_on(term.recv());
        family::end_descendants(&|_| false);
        let _ = kill(Pid::this(), Signal::SIGKILL);
    });
    // keel may be waiting for this to know the sandbox works (its start is the probe).
    proto::send_ready(control.as_fd())?;
    // The first call finds its reaper started (keel's exec is not on its way).
    if let Ok(first) = pool.start() {
        lock(&pool.idle).push(first);
    }
    let ended = loop {
        match proto::recv_call(control.as_fd()) {
            Ok(Some(call)) => pool.dispatch(call),
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    family::end_descendants(&|_| false);
    ended
}

/// The zygote's reapers: the idle ones, and the pids of all that live (their zombies too,
/// until their keeper reaped them).
struct Pool {
    reapers: Reapers,
    idle: Mutex<Vec<Idle>>,
    live: Mutex<BTreeSet<i32>>,
}

/// A reaper waiting for a call: its end of the control socket (its keeper thread reads the
/// other direction on the same one).
struct Idle {
    control: Arc<OwnedFd>,
}

impl Pool {
    /// Hands `call` (its socket, stdout, stderr) to a reaper; answers it with the error when
    /// none can start.
    fn dispatch(self: &Arc<Pool>, call: proto::Handed) {
        loop {
            let reaper = match lock(&self.idle).pop() {
                Some(r) => r,
                None => match self.start() {
                    Ok(r) => r,
                    Err(e) => return refuse(call.fds, &e),
                },
            };
            let [c, o, e] = &call.fds;
            let cgroup = call.cgroup.as_ref().map(AsFd::as_fd);
            if proto::send_call(reaper.control.as_fd(), proto::borrow3(c, o, e), cgroup).is_ok() {
                return;
            }
            // It died while it waited (its keeper reaps it): the next one.
        }
    }

    /// Starts a reaper and its keeper thread (under the `live` lock: a sweep never takes a
    /// reaper just started for a left-over).
    fn start(self: &Arc<Pool>) -> std::io::Result<Idle> {
        let (ours, theirs) = proto::control_pair()?;
        let mut live = lock(&self.live);
        let child = Command::new(&self.reapers.exe)
            .arg("__sandbox-reaper")
            .args(&self.reapers.args)
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            .spawn()?;
        let pid = i32::try_from(child.id()).map_err(std::io::Error::other)?;
        live.insert(pid);
        drop(live);
        let control = Arc::new(ours);
        let (pool, kept) = (self.clone(), control.clone());
        let keeper = std::thread::Builder::new()
            .name("keel-reaper".into())
            .spawn(move || pool.keep(child, pid, kept));
        if let Err(e) = keeper {
            // Without its keeper nobody would reap it: it goes (and is reaped by a sweep).
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            lock(&self.live).remove(&pid);
            return Err(e);
        }
        Ok(Idle { control })
    }

    /// A reaper's keeper: back to the idle ones after each call (or told to go when enough
    /// wait), then, once it exited, reaped, and what it left killed.
    fn keep(&self, mut child: Child, pid: i32, control: Arc<OwnedFd>) {
        while proto::recv_ready(control.as_fd()) {
            let mut idle = lock(&self.idle);
            if idle.len() < IDLE_REAPERS {
                idle.push(Idle {
                    control: control.clone(),
                });
            } else {
                // Its next read sees the end of the socket: it exits.
                let _ = rustix::net::shutdown(&*control, rustix::net::Shutdown::Write);
            }
        }
        let _ = child.wait();
        let mut live = lock(&self.live);
        live.remove(&pid);
        // A reaper that died during a call (a command can kill it) left the call's
        // processes to this one: they end now, and nothing of a live reaper is touched.
        family::end_descendants(&|p| live.contains(&p));
    }
}

/// Answers `call` without a reaper: accepted, and failed with `e`.
fn refuse(call: [OwnedFd; 3], e: &std::io::Error) {
    let [socket, _, _] = call;
    let mut stream = UnixStream::from(socket);
    let failed = Reply::Failed {
        error: format!("the sandbox could not start the command: {e}"),
        not_found: false,
    };
    let _ = stream.write_all(&proto::line(&Reply::Accepted));
    let _ = stream.write_all(&proto::line(&failed));
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
