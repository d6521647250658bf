//! The sandbox zygote, keel's half: one long-lived sandbox per session and policy (bubblewrap,
//! or the Landlock + seccomp helper, around `keel __sandbox-zygote`) that starts each `bash`
//! command as a fresh process inside it, so a call pays for a fork and exec instead of a whole
//! sandbox. Each call keeps today's semantics: its own process group, cwd and environment,
//! output streamed through its own pipes, kill on abort or timeout, its wait status; and
//! nothing it started outlives it (the zygote runs each call under a [`reaper`]). Owns the
//! zygote's start (on first use, and again when it died or its private `/tmp` changed) under
//! the session's [`limits`](super::limits) (its cgroup made before and removed after), its
//! keeper thread (the zygote's parent: `--die-with-parent` and the parent-death signal are
//! tied to it) and the [`Process`] handle of one call. It never decides the policy.

pub mod family;
pub mod local;
pub mod proto;
pub mod reaper;
pub mod serve;

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{pipe, OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::oneshot;

pub use self::proto::Lifetime;
use self::proto::{OsBytes, Reply, Request};
use super::limits::Applied;
use super::{Launch, Mechanism, Sandbox, SandboxError, SandboxErrorKind};

/// How much of the zygote's own stderr (bubblewrap's complaints) is kept for an error.
const STDERR_KEPT: usize = 4096;
/// How long a zygote started as the probe of its sandbox may take to come up.
const READY_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// How long a session's end waits for its zygote to end by itself, and then killed.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The session's zygote, started on first use. State, not policy: two sandboxes compare
/// equal whatever their zygotes are doing.
#[derive(Clone, Default)]
pub struct ZygoteSlot(Arc<Slot>);

#[derive(Default)]
struct Slot {
    /// keel itself, run inside the sandbox as the zygote; `None` (an embedder that is not
    /// keel): no zygote, each command gets a sandbox of its own.
    exe: Option<PathBuf>,
    running: Mutex<Option<Arc<Zygote>>>,
    /// The findings file that said this sandbox works (it was not probed): forgotten when its
    /// zygote never serves, so the next session probes again (`known.rs`).
    known: Mutex<Option<PathBuf>>,
}

impl ZygoteSlot {
    pub fn new(exe: Option<PathBuf>) -> ZygoteSlot {
        ZygoteSlot(Arc::new(Slot {
            exe,
            running: Mutex::new(None),
            known: Mutex::new(None),
        }))
    }

    /// An empty slot for the same executable (the policy changed: a fresh zygote).
    pub fn fresh(&self) -> ZygoteSlot {
        let slot = ZygoteSlot::new(self.0.exe.clone());
        *lock(&slot.0.known) = lock(&self.0.known).clone();
        slot
    }

    /// keel itself, when it is the executable (it runs inside the sandbox as the zygote).
    pub fn exe(&self) -> Option<&Path> {
        self.0.exe.as_deref()
    }

    /// This sandbox was taken to work from `findings` (not probed): see [`Slot::known`].
    pub fn trusting(&self, findings: PathBuf) {
        *lock(&self.0.known) = Some(findings);
    }
}

impl PartialEq for ZygoteSlot {
    fn eq(&self, _: &ZygoteSlot) -> bool {
        true
    }
}

impl Eq for ZygoteSlot {}

impl std::fmt::Debug for ZygoteSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZygoteSlot")
            .field("exe", &self.0.exe)
            .finish()
    }
}

/// A running zygote: keel's end of its control socket and what its keeper thread knows.
struct Zygote {
    control: OwnedFd,
    tmp: PathBuf,
    /// Whether its commands are in a PID namespace of their own (bubblewrap): their pids
    /// mean nothing here.
    own_pids: bool,
    keeper: Arc<Keeper>,
    /// The session's limits as applied to it (its cgroup goes when it ended).
    limits: Arc<Applied>,
}

#[derive(Default)]
struct Keeper {
    /// The host pid of the zygote's outermost process (bubblewrap, or the helper), 0 until
    /// it is spawned.
    pid: AtomicU32,
    /// Set when it ended (or could not start): the next call starts another.
    dead: AtomicBool,
    /// The start of what it wrote on stderr.
    stderr: Mutex<String>,
    /// Opened once its stderr was read to the end: what it said is all there.
    said_all: Latch,
    /// Opened once it was reaped and its limits removed: nothing of it is left.
    gone: Latch,
}

/// A flag one thread opens and others wait for (a while at most).
#[derive(Default)]
struct Latch(Mutex<bool>, std::sync::Condvar);

impl Latch {
    fn open(&self) {
        *lock(&self.0) = true;
        self.1.notify_all();
    }

    /// Waits until it is open or `wait` passed; whether it is open.
    fn wait(&self, wait: std::time::Duration) -> bool {
        let open = self
            .1
            .wait_timeout_while(lock(&self.0), wait, |open| !*open);
        open.map(|(open, _)| *open).unwrap_or(false)
    }
}

impl Zygote {
    /// Spawns `launch` on a keeper thread that stays its parent until it exits; its stdin is
    /// the zygote's end of the control socket.
    fn start(
        launch: Launch,
        cwd: &Path,
        tmp: &Path,
        own_pids: bool,
        limits: Arc<Applied>,
    ) -> Result<Zygote, SandboxError> {
        let (ours, theirs) = proto::control_pair().map_err(|e| setup(&e.to_string()))?;
        let keeper = Arc::new(Keeper::default());
        let (k, applied) = (keeper.clone(), limits.clone());
        let cwd = cwd.to_path_buf();
        let spawned = std::thread::Builder::new()
            .name("keel-zygote".into())
            .spawn(move || {
                keep(launch, &cwd, theirs, &k);
                applied.remove();
                k.gone.open();
            });
        if let Err(e) = spawned {
            return Err(setup(&format!(
                "cannot start the sandbox's keeper thread: {e}"
            )));
        }
        Ok(Zygote {
            control: ours,
            tmp: tmp.to_path_buf(),
            own_pids,
            keeper,
            limits,
        })
    }

    fn dead(&self) -> bool {
        self.keeper.dead.load(Ordering::SeqCst)
    }

    fn mark_dead(&self) {
        self.keeper.dead.store(true, Ordering::SeqCst);
    }

    /// Why it ended, for an error: its stderr when it said something (waited for, a little:
    /// the keeper reads it to its end just after the zygote's end is seen here).
    fn why(&self) -> String {
        self.keeper.said_all.wait(std::time::Duration::from_secs(2));
        let said = lock(&self.keeper.stderr).trim().to_string();
        match said.is_empty() {
            true => "the sandbox ended before the command started".into(),
            false => format!("the sandbox ended before the command started: {said}"),
        }
    }
}

impl Keeper {
    /// Its stderr was read to the end (or there was none).
    fn heard_all(&self) {
        self.said_all.open();
    }
}

impl Drop for Slot {
    /// The session is gone: its zygote ends now, and is waited for, so that no process of a
    /// run outlives it ([`Zygote::stop`]).
    fn drop(&mut self) {
        let running = self.running.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(z) = running.take() {
            z.stop();
        }
    }
}

impl Zygote {
    /// Ends the zygote and waits until it was reaped (its cgroup removed): its control socket
    /// is shut down (it then ends everything it started and returns), and after
    /// [`STOP_WAIT`] it is killed outright, waited for as long again.
    fn stop(&self) {
        let _ = rustix::net::shutdown(&self.control, rustix::net::Shutdown::Both);
        if self.keeper.gone.wait(STOP_WAIT) {
            return;
        }
        let pid = self.keeper.pid.load(Ordering::SeqCst);
        if let Ok(pid @ 1..) = i32::try_from(pid) {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        self.keeper.gone.wait(STOP_WAIT);
    }
}

/// The keeper thread: spawns the zygote, keeps the start of its stderr, reaps it.
fn keep(launch: Launch, cwd: &Path, control: OwnedFd, k: &Keeper) {
    let mut cmd = std::process::Command::new(&launch.program);
    cmd.args(&launch.args)
        .env_clear()
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .stdin(Stdio::from(control))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let spawned = cmd.spawn();
    // The command holds the zygote's end of the control socket now; this copy must go, or
    // keel would never see it close.
    drop(cmd);
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            *lock(&k.stderr) = format!("cannot run {}: {e}", launch.program.display());
            k.dead.store(true, Ordering::SeqCst);
            k.heard_all();
            return;
        }
    };
    k.pid.store(child.id(), Ordering::SeqCst);
    if let Some(mut err) = child.stderr.take() {
        let mut buf = [0u8; 1024];
        while let Ok(n @ 1..) = err.read(&mut buf) {
            let mut kept = lock(&k.stderr);
            if kept.len() < STDERR_KEPT {
                kept.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        }
    }
    k.heard_all();
    let _ = child.wait();
    k.dead.store(true, Ordering::SeqCst);
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn setup(message: &str) -> SandboxError {
    SandboxError {
        kind: SandboxErrorKind::Setup,
        message: message.to_string(),
    }
}

/// Why a sandboxed command did not start.
#[derive(Debug)]
pub enum SpawnError {
    /// The sandbox itself could not be set up or ended.
    Sandbox(SandboxError),
    /// The command could not be started inside it (e.g. no such program).
    Command(std::io::Error),
}

/// One command to run in the zygote.
#[derive(Debug, Clone)]
pub struct Run {
    pub argv: Vec<OsString>,
    pub cwd: PathBuf,
    /// Its whole environment (the sandbox's own variables go on top).
    pub env: Vec<(OsString, OsString)>,
    /// What happens to what it leaves running when its main process exits.
    pub lifetime: Lifetime,
    /// Its stdout and stderr (and, with `tty`, stdin) instead of two fresh pipes: a job's one
    /// pipe, or its PTY's slave. The [`Process`] then has no pipes to read.
    pub stdio: Option<Arc<OwnedFd>>,
    /// `stdio` is a terminal: the command gets it as its controlling one.
    pub tty: bool,
    /// A job's own cgroup (v2): its `cgroup.procs`, open for writing. The command writes
    /// itself into it before it execs (through `keel __sandbox-job-cgroup`), so that nothing
    /// it starts is outside.
    pub cgroup: Option<Arc<OwnedFd>>,
}

/// A command running in the zygote: its output pipes, its wait status, a way to kill its
/// group. Keeps the zygote alive while it runs.
pub struct Process {
    pub stdout: Option<pipe::Receiver>,
    pub stderr: Option<pipe::Receiver>,
    /// Its process group as keel can signal it: under Landlock (no PID namespace) the host's;
    /// `None` under bubblewrap, where only the zygote can.
    pub host_pgid: Option<i32>,
    /// Its pid as its reaper sees it (the host's when `host_pgid` is set).
    pub pid: i32,
    writer: OwnedWriteHalf,
    exit: oneshot::Receiver<Option<i32>>,
    done: Option<Option<i32>>,
    _keep: Keep,
}

/// What a call keeps alive while it runs: the session's zygote, or a reaper of its own.
enum Keep {
    Zygote(#[allow(dead_code)] Arc<Zygote>),
    Local(#[allow(dead_code)] local::Reaper),
}

impl Process {
    /// Waits for the command's main process to end (cancel-safe). An error when the zygote
    /// ended first.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        let done = match self.done {
            Some(d) => d,
            None => {
                let d = (&mut self.exit).await.unwrap_or(None);
                self.done = Some(d);
                d
            }
        };
        done.map(ExitStatus::from_raw)
            .ok_or_else(|| std::io::Error::other("the sandbox ended while the command was running"))
    }

    /// SIGKILLs the command's process group, and so everything it started (through its
    /// reaper; directly when the zygote is gone and the group is visible here).
    pub async fn kill_group(&mut self) {
        let sent = self.writer.write_all(&proto::line(&Request::Kill)).await;
        if let (Err(_), Some(pg)) = (sent, self.host_pgid) {
            let _ = killpg(Pid::from_raw(pg), Signal::SIGKILL);
        }
    }

    /// Sends `signal` to the command's group and everything else it started (through its
    /// reaper; to the group directly when the reaper is gone and the group is visible here).
    pub async fn signal(&mut self, signal: Signal) {
        let line = proto::line(&Request::Signal {
            signal: signal as i32,
        });
        if let (Err(_), Some(pg)) = (self.writer.write_all(&line).await, self.host_pgid) {
            let _ = killpg(Pid::from_raw(pg), signal);
        }
    }

    /// A second handle on the call's socket: shutting it down (from anywhere, synchronously)
    /// ends the call as dropping this `Process` does (its reaper kills what it started).
    pub fn hangup(&self) -> std::io::Result<OwnedFd> {
        let stream: &tokio::net::UnixStream = self.writer.as_ref();
        stream.as_fd().try_clone_to_owned()
    }
}

impl Sandbox {
    /// Whether `bash` commands run in a zygote (bubblewrap or Landlock, keel's own executable
    /// known); else they get a sandbox each ([`Sandbox::launch`]) or none.
    pub fn zygote_runs(&self) -> bool {
        match &self.mechanism {
            Mechanism::Bwrap(_) => self.zygote.0.exe.is_some(),
            Mechanism::Landlock { .. } => true,
            Mechanism::Off | Mechanism::Unavailable | Mechanism::Unenforced => false,
        }
    }

    /// The session's limits as applied to the running zygote, if one runs.
    pub(super) fn zygote_limits(&self) -> Option<Arc<Applied>> {
        let running = lock(&self.zygote.0.running);
        let z = running.as_ref().filter(|z| !z.dead())?;
        Some(z.limits.clone())
    }

    /// The host pid of the running zygote's outermost process, if one runs (tests, debug).
    pub fn zygote_pid(&self) -> Option<u32> {
        let running = lock(&self.zygote.0.running);
        let z = running.as_ref().filter(|z| !z.dead())?;
        Some(z.keeper.pid.load(Ordering::SeqCst)).filter(|&p| p != 0)
    }

    /// Starts the zygote now (for `cwd`, private `/tmp` `tmp`) if none runs, so the first
    /// command does not wait for it.
    pub fn warm(&self, cwd: &Path, tmp: &Path) -> Result<(), SandboxError> {
        self.running_zygote(cwd, tmp).map(drop)
    }

    /// Starts the zygote now and waits until it serves, so that its start says whether the
    /// sandbox works here: `false` when it ended first or did not come up in time (it is
    /// killed then).
    pub(super) fn start_as_probe(&self, cwd: &Path, tmp: &Path) -> bool {
        let Ok(z) = self.running_zygote(cwd, tmp) else {
            return false;
        };
        if proto::wait_ready(z.control.as_fd(), READY_WAIT) {
            return true;
        }
        let pid = z.keeper.pid.load(Ordering::SeqCst);
        if let Ok(pid @ 1..) = i32::try_from(pid) {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        z.mark_dead();
        false
    }

    /// The running zygote for `tmp`, started now if there is none (or it died).
    fn running_zygote(&self, cwd: &Path, tmp: &Path) -> Result<Arc<Zygote>, SandboxError> {
        let mut running = lock(&self.zygote.0.running);
        if let Some(z) = running.as_ref().filter(|z| !z.dead() && z.tmp == tmp) {
            return Ok(z.clone());
        }
        let limits = Arc::new(Applied::prepare(&self.limits));
        let launch = self.zygote_launch(cwd, tmp, &limits)?;
        let own_pids = matches!(self.mechanism, Mechanism::Bwrap(_));
        let z = Arc::new(Zygote::start(launch, cwd, tmp, own_pids, limits)?);
        *running = Some(z.clone());
        Ok(z)
    }

    /// How to start `keel __sandbox-zygote` under the policy: inside bubblewrap (keel bound
    /// in at [`super::proxy::INSIDE_EXE`]: wherever it lives outside may be hidden inside), or
    /// exec'd by the Landlock helper once it restricted itself (`TMPDIR` set to `tmp`); in
    /// the session's cgroup when `limits` has one, else with the rlimits it sets itself.
    fn zygote_launch(
        &self,
        cwd: &Path,
        tmp: &Path,
        limits: &Applied,
    ) -> Result<Launch, SandboxError> {
        let exe = match (&self.mechanism, &self.zygote.0.exe) {
            (Mechanism::Landlock { exe }, _) => exe.clone(),
            (Mechanism::Bwrap(_), Some(exe)) => exe.clone(),
            _ => return Err(setup("this sandbox runs no zygote")),
        };
        let inside = match &self.mechanism {
            Mechanism::Bwrap(_) => PathBuf::from(super::proxy::INSIDE_EXE),
            _ => exe.clone(),
        };
        let mut tail = vec![inside.into_os_string(), "__sandbox-zygote".into()];
        tail.extend(limits.zygote_args());
        let launch = self
            .launch_argv(tail, cwd, tmp, Some(&exe))?
            .ok_or_else(|| setup("this sandbox runs no zygote"))?;
        Ok(limits.launch(&exe, launch))
    }

    /// Starts `run` in the session's zygote (started now if needed; restarted once if it died
    /// before it took the command). `tmp`: the session's private `/tmp` on the host.
    pub async fn spawn(&self, run: Run, tmp: &Path) -> Result<Process, SpawnError> {
        let mut last = None;
        for _ in 0..2 {
            let z = self
                .running_zygote(&run.cwd, tmp)
                .map_err(SpawnError::Sandbox)?;
            match start_in(&z, &run).await {
                Ok(Started::Running(p)) => return Ok(p),
                Ok(Started::Failed(e)) => return Err(SpawnError::Command(e)),
                Err(Untaken) => {
                    z.mark_dead();
                    last = Some(z.why());
                }
            }
        }
        let mut why = last.unwrap_or_default();
        if let Some(findings) = lock(&self.zygote.0.known).take() {
            let _ = std::fs::remove_file(&findings);
            why.push_str(
                " (an earlier keel found this bubblewrap working, so it was not probed: the \
                 next session probes it again)",
            );
        }
        Err(SpawnError::Sandbox(setup(&why)))
    }
}

enum Started {
    Running(Process),
    Failed(std::io::Error),
}

/// The zygote did not take the command (it is dead): nothing was started.
struct Untaken;

/// Hands `run` to `z` and waits until it started.
async fn start_in(z: &Arc<Zygote>, run: &Run) -> Result<Started, Untaken> {
    let keep = Keep::Zygote(z.clone());
    call(z.control.as_fd(), run, z.own_pids, keep, || z.why()).await
}

/// Hands `run` to whoever reads `control` (a zygote, or a reaper), waits until it started:
/// the process, holding `keep`. `own_pids`: its pids mean nothing here; `why`: why it ended
/// before it said whether the command started.
async fn call(
    control: std::os::fd::BorrowedFd<'_>,
    run: &Run,
    own_pids: bool,
    keep: Keep,
    why: impl Fn() -> String,
) -> Result<Started, Untaken> {
    let io = |e: std::io::Error| Ok(Started::Failed(e));
    let (ours, theirs) = match std::os::unix::net::UnixStream::pair() {
        Ok(p) => p,
        Err(e) => return io(e),
    };
    let cgroup = run.cgroup.as_deref().map(AsFd::as_fd);
    let (pipes, sent) = match &run.stdio {
        Some(fd) => (
            None,
            proto::send_call(control, proto::borrow3(&theirs, &**fd, &**fd), cgroup),
        ),
        None => {
            let ((out_r, out_w), (err_r, err_w)) = match (std::io::pipe(), std::io::pipe()) {
                (Ok(o), Ok(e)) => (o, e),
                (Err(e), _) | (_, Err(e)) => return io(e),
            };
            let sent = proto::send_call(control, proto::borrow3(&theirs, &out_w, &err_w), cgroup);
            (Some((out_r, err_r)), sent)
        }
    };
    if sent.is_err() {
        return Err(Untaken);
    }
    drop(theirs);
    let stream = match ours
        .set_nonblocking(true)
        .and_then(|()| tokio::net::UnixStream::from_std(ours))
    {
        Ok(s) => s,
        Err(e) => return io(e),
    };
    let (read, mut writer) = stream.into_split();
    let request = Request::Run {
        argv: run.argv.iter().map(|a| OsBytes::of(a)).collect(),
        cwd: OsBytes::of(run.cwd.as_os_str()),
        env: run
            .env
            .iter()
            .map(|(k, v)| (OsBytes::of(k), OsBytes::of(v)))
            .collect(),
        lifetime: run.lifetime,
        tty: run.tty,
    };
    if writer.write_all(&proto::line(&request)).await.is_err() {
        return Err(Untaken);
    }
    let mut lines = BufReader::new(read);
    match next_reply(&mut lines).await {
        Some(Reply::Accepted) => {}
        None => return Err(Untaken),
        Some(other) => return io(unexpected(&other)),
    }
    let pid = match next_reply(&mut lines).await {
        Some(Reply::Started { pid }) => pid,
        Some(Reply::Failed { error, not_found }) => {
            let kind = match not_found {
                true => std::io::ErrorKind::NotFound,
                false => std::io::ErrorKind::Other,
            };
            return io(std::io::Error::new(kind, error));
        }
        Some(other) => return io(unexpected(&other)),
        None => return io(std::io::Error::other(why())),
    };
    let host_pgid = Some(pid).filter(|_| !own_pids);
    let (tx, exit) = oneshot::channel();
    tokio::spawn(watch(lines, tx, host_pgid));
    let pipe = |r: std::io::PipeReader| pipe::Receiver::from_owned_fd(OwnedFd::from(r)).ok();
    let (stdout, stderr) = match pipes {
        Some((out, err)) => (pipe(out), pipe(err)),
        None => (None, None),
    };
    Ok(Started::Running(Process {
        stdout,
        stderr,
        host_pgid,
        pid,
        writer,
        exit,
        done: None,
        _keep: keep,
    }))
}

/// Reads the call's replies until `Exited` (or the zygote's end): the status goes to `tx`.
/// A command the zygote left behind when it died is killed here if its group is visible.
async fn watch(
    mut lines: BufReader<OwnedReadHalf>,
    tx: oneshot::Sender<Option<i32>>,
    host_pgid: Option<i32>,
) {
    let status = loop {
        match next_reply(&mut lines).await {
            Some(Reply::Exited { status }) => break Some(status),
            Some(_) => continue,
            None => break None,
        }
    };
    if let (None, Some(pg)) = (status, host_pgid) {
        let _ = killpg(Pid::from_raw(pg), Signal::SIGKILL);
    }
    let _ = tx.send(status);
}

async fn next_reply(lines: &mut BufReader<OwnedReadHalf>) -> Option<Reply> {
    let mut line = String::new();
    match lines.read_line(&mut line).await {
        Ok(0) | Err(_) => None,
        Ok(_) => serde_json::from_str(&line).ok(),
    }
}

fn unexpected(r: &Reply) -> std::io::Error {
    std::io::Error::other(format!("the sandbox answered out of turn: {r:?}"))
}
