//! Background jobs (issue 47, DESIGN §19): a session's table of process trees started to
//! outlive one tool call (dev servers, watchers, long tests), on pipes or on a PTY of their
//! own. Each job is one long call of a reaper that holds its whole tree ([`proc`]), its output
//! goes to a bounded ring (read by absolute offset) and a capped log in the session's private
//! directory ([`output`], [`ring`]), its pids are written down there so the next keel ends
//! what a crashed one left ([`record`]). The table dies with its session: [`Jobs::kill_all`],
//! and, best effort, the drop of its last clone. Owns the table and these types (the wire
//! reuses them); the model's tools, the protocol and the front ends are built on top.

mod cgroup;
mod output;
mod proc;
pub mod pty;
mod record;
mod ring;
mod types;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

use nix::sys::signal::Signal;
use tokio::sync::{broadcast, mpsc, watch};

pub use types::{JobChunk, JobError, JobEvent, JobId, JobInfo, JobLimits, JobState, StartJob};

use crate::kernel::sandbox::policy::SandboxMode;
use crate::kernel::sandbox::watch::{Before, CallRecord};
use crate::kernel::tool::ToolContext;
use proc::{Hangup, JobProc};
pub use record::HostPid;
use record::Record;
use ring::Ring;

/// The hidden command a reaper runs a terminal job's command through (see [`pty`]).
pub const TTY_COMMAND: &str = "__sandbox-tty";
/// The one it runs a job's command through when the job has a cgroup of its own.
pub const CGROUP_COMMAND: &str = "__sandbox-job-cgroup";
pub use cgroup::exec_in_cgroup;

/// How long the output of a job whose main process ended may take to reach its end (what
/// escaped the job could hold it open): then the job is over all the same.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(2);
/// How many events wait for a slow subscriber before it misses some.
const EVENTS: usize = 1024;

/// A session's jobs. Clones share the table; the last one dropped ends every job still
/// running (synchronously, best effort: [`Jobs::kill_all`] is the orderly way).
#[derive(Clone)]
pub struct Jobs(Arc<Inner>);

impl std::fmt::Debug for Jobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jobs").field("dir", &self.0.dir).finish()
    }
}

struct Inner {
    /// The session's private directory: `jobs.json`, `jobs/<id>.log`.
    dir: PathBuf,
    limits: JobLimits,
    next: AtomicU32,
    table: Mutex<Table>,
    events: broadcast::Sender<JobEvent>,
    /// Held while `jobs.json` is written (two jobs may end at once).
    writing: Mutex<()>,
}

#[derive(Default)]
struct Table {
    jobs: BTreeMap<JobId, Arc<Job>>,
    /// Running, or starting.
    live: usize,
    /// Ended since [`Jobs::take_ended`] last asked.
    ended: Vec<JobInfo>,
    /// Jobs a keel that stopped left, ended at this table's start ([`Jobs::note_lost`]).
    lost: BTreeMap<JobId, JobInfo>,
}

/// One job as the table holds it (its supervisor task holds it too).
struct Job {
    id: JobId,
    command: String,
    tty: bool,
    started_ms: i64,
    status: Mutex<Status>,
    ring: Mutex<Ring>,
    progress: watch::Sender<Progress>,
    /// Signals for its supervisor to send.
    signals: mpsc::UnboundedSender<Signal>,
    /// Its terminal's input (terminal jobs).
    input: Option<mpsc::UnboundedSender<Vec<u8>>>,
    master: Option<Arc<OwnedFd>>,
    hangup: Hangup,
    record: Record,
    /// The protected paths as they were before it started, checked once it ended.
    watched: Mutex<Option<(CallRecord, SandboxMode)>>,
}

#[derive(Debug, Clone)]
struct Status {
    pid: Option<i32>,
    state: JobState,
    exit_code: Option<i32>,
    signal: Option<i32>,
    ended_ms: Option<i64>,
    /// It was asked to end ([`Jobs::kill`]): it ends `Killed`.
    killing: bool,
    /// What the check after its end undid in the protected paths.
    repaired: Vec<String>,
}

/// A job whose processes run, before it is in the table.
struct Parts {
    command: String,
    tty: bool,
    proc: JobProc,
    output: output::Source,
    master: Option<Arc<OwnedFd>>,
    /// Its main process's host pid, when the host sees it.
    pid: Option<i32>,
    reaper: Option<HostPid>,
    token: String,
    /// Its output before it became a job.
    seen: Vec<u8>,
}

/// A foreground `bash` call's running process, handed over as a job ([`Jobs::adopt`]).
pub(crate) struct Adopted {
    pub command: String,
    pub proc: crate::kernel::tool::bash_proc::Proc,
    /// What the call's readers go on forwarding (its stdout and stderr, as they come).
    pub output: mpsc::Receiver<Vec<u8>>,
    /// Its output so far.
    pub seen: Vec<u8>,
}

/// What waiters watch: the end of the output so far, and whether the job ended.
#[derive(Debug, Clone, Copy, Default)]
struct Progress {
    end: u64,
    ended: bool,
}

impl Job {
    fn info(&self) -> JobInfo {
        let s = lock(&self.status).clone();
        JobInfo {
            id: self.id,
            command: self.command.clone(),
            pid: s.pid,
            tty: self.tty,
            state: s.state,
            exit_code: s.exit_code,
            signal: s.signal,
            bytes: lock(&self.ring).end(),
            started_ms: self.started_ms,
            ended_ms: s.ended_ms,
            repaired: s.repaired,
        }
    }

    /// Undoes what it changed in the protected paths (once), noting it.
    fn repair(&self) {
        let Some((record, mode)) = lock(&self.watched).take() else {
            return;
        };
        let notes: Vec<String> = record.repair_now().iter().map(|f| f.note(mode)).collect();
        lock(&self.status).repaired.extend(notes);
    }

    fn ended(&self) -> bool {
        self.progress.borrow().ended
    }

    /// Waits until it ended.
    async fn over(&self) {
        let mut rx = self.progress.subscribe();
        let _ = rx.wait_for(|p| p.ended).await;
    }
}

impl Jobs {
    /// The table of a session whose private directory is `dir` (created when a job starts).
    /// Ids go on after the highest one whose log `dir` holds (never reused in a session).
    pub fn new(dir: PathBuf, limits: JobLimits) -> Jobs {
        let first = last_logged(&dir) + 1;
        Jobs(Arc::new(Inner {
            dir,
            limits,
            next: AtomicU32::new(first),
            table: Mutex::default(),
            events: broadcast::channel(EVENTS).0,
            writing: Mutex::default(),
        }))
    }

    /// Ends whatever jobs a keel that stopped without ending them (killed, crashed) left
    /// running for the session whose private directory is `dir`: those jobs, `Lost`. Call it
    /// before that session's table is made: it ends every job the file lists, a live table's
    /// too.
    pub fn reap_stale(dir: &Path) -> Vec<JobInfo> {
        record::reap_stale(dir)
    }

    /// Starts `req` under `ctx`'s sandbox (as `bash` runs a command: the zygote, a sandbox of
    /// its own, or none when it is off; the session's env file sourced first).
    pub async fn start(&self, req: StartJob, ctx: &ToolContext) -> Result<JobInfo, JobError> {
        self.start_watched(req, ctx, None).await
    }

    /// [`Jobs::start`], with the record of the protected paths taken before it
    /// (`sandbox::watch`): what the job changed there is undone once it ended, before anyone
    /// hears of its end (its info's `repaired` says what), or when the table goes with it
    /// still running.
    pub async fn start_watched(
        &self,
        req: StartJob,
        ctx: &ToolContext,
        watched: Option<Before>,
    ) -> Result<JobInfo, JobError> {
        let id = self.reserve()?;
        let started = self.spawn(id, req, ctx, watched).await;
        if started.is_err() {
            self.release();
        }
        started
    }

    /// What this table allows.
    pub fn limits(&self) -> JobLimits {
        self.0.limits
    }

    /// Takes over a foreground `bash` call's running process as a job (it reached its
    /// timeout): its output so far (`seen`) begins the job's, what its readers go on
    /// forwarding (`output`) follows; the call's record of the protected paths
    /// (`ctx.watched`, taken before the call) is checked again when the job ended. Past the
    /// limit of live jobs, or when its log cannot be made, the process is killed and the
    /// error says why.
    pub(crate) async fn adopt(
        &self,
        adopted: Adopted,
        ctx: &ToolContext,
    ) -> Result<JobInfo, JobError> {
        let Adopted {
            command,
            proc: mut call,
            output,
            seen,
        } = adopted;
        let logged = self
            .reserve()
            .and_then(|id| Ok((id, self.log(id).inspect_err(|_| self.release())?)));
        let (id, log) = match logged {
            Ok(l) => l,
            Err(e) => {
                call.kill_group().await;
                return Err(e);
            }
        };
        let (proc, pid) = proc::adopt(call);
        let parts = Parts {
            command,
            tty: false,
            proc,
            output: output::Source::Chunks(output),
            master: None,
            pid,
            reaper: None,
            token: String::new(),
            seen,
        };
        Ok(self.install(id, parts, log, ctx, Some(ctx.watched.clone())))
    }

    /// A place among the live jobs, and the next id.
    fn reserve(&self) -> Result<JobId, JobError> {
        let mut table = lock(&self.0.table);
        let max = self.0.limits.max_live;
        if table.live >= max {
            return Err(JobError::TooMany { max });
        }
        table.live += 1;
        Ok(JobId(self.0.next.fetch_add(1, Ordering::SeqCst)))
    }

    /// Gives back a place [`Jobs::reserve`] took for a job that did not start.
    fn release(&self) {
        let mut table = lock(&self.0.table);
        table.live = table.live.saturating_sub(1);
    }

    /// Job `id`'s log, made empty.
    fn log(&self, id: JobId) -> Result<output::Log, JobError> {
        let logs = self.0.dir.join("jobs");
        crate::kernel::private::create_dir_all(&logs)
            .map_err(|e| JobError::Start(format!("Failed to prepare the job's log: {e}")))?;
        output::Log::create(&logs.join(format!("{id}.log")), self.0.limits.log_bytes)
            .map_err(|e| JobError::Start(format!("Failed to create the job's log: {e}")))
    }

    async fn spawn(
        &self,
        id: JobId,
        req: StartJob,
        ctx: &ToolContext,
        watched: Option<Before>,
    ) -> Result<JobInfo, JobError> {
        let log = self.log(id)?;
        let token = uuid::Uuid::new_v4().simple().to_string();
        let spawned = proc::start(&req, ctx, &token).await?;
        let parts = Parts {
            command: req.command,
            tty: req.tty,
            proc: spawned.proc,
            output: output::Source::Fd(spawned.output),
            master: spawned.master,
            pid: spawned.pid,
            reaper: spawned.reaper,
            token,
            seen: Vec::new(),
        };
        Ok(self.install(
            id,
            parts,
            log,
            ctx,
            watched.map(|w| CallRecord::new(Some(w))),
        ))
    }

    /// Enters a job whose processes run into the table, and starts its reader, its input
    /// and its supervisor.
    fn install(
        &self,
        id: JobId,
        parts: Parts,
        mut log: output::Log,
        ctx: &ToolContext,
        watched: Option<CallRecord>,
    ) -> JobInfo {
        let started_ms = now_ms();
        let record = Record {
            id,
            command: parts.command.clone(),
            tty: parts.tty,
            started_ms,
            token: parts.token,
            reaper: parts.reaper,
            group: parts.pid.and_then(HostPid::of),
        };
        let (signals, signals_rx) = mpsc::unbounded_channel();
        let (input, input_rx) = match parts.tty {
            true => {
                let (tx, rx) = mpsc::unbounded_channel();
                (Some(tx), Some(rx))
            }
            false => (None, None),
        };
        let mut ring = Ring::new(self.0.limits.ring_bytes);
        ring.push(&parts.seen);
        log.write(&parts.seen);
        let job = Arc::new(Job {
            id,
            command: parts.command,
            tty: parts.tty,
            started_ms,
            status: Mutex::new(Status {
                pid: parts.pid,
                state: JobState::Running,
                exit_code: None,
                signal: None,
                ended_ms: None,
                killing: false,
                repaired: Vec::new(),
            }),
            watched: Mutex::new(watched.map(|w| (w, ctx.sandbox.policy.mode))),
            progress: watch::channel(Progress {
                end: ring.end(),
                ended: false,
            })
            .0,
            ring: Mutex::new(ring),
            signals,
            input,
            master: parts.master.clone(),
            hangup: parts.proc.hangup(),
            record,
        });
        lock(&self.0.table).jobs.insert(id, job.clone());
        self.0.write_records();
        let info = job.info();
        let _ = self.0.events.send(JobEvent::Started { info: info.clone() });
        let reader = tokio::spawn(read(job.clone(), parts.output, log, self.0.events.clone()));
        if let (Some(master), Some(rx)) = (&parts.master, input_rx) {
            match master.try_clone() {
                Ok(fd) => drop(tokio::spawn(output::feed(fd, rx))),
                Err(e) => tracing::debug!(job = %id, error = %e, "jobs: no input for the terminal"),
            }
        }
        let weak = Arc::downgrade(&self.0);
        let held = Held {
            proc: parts.proc,
            _sandbox: ctx.sandbox.clone(),
        };
        tokio::spawn(supervise(weak, job, held, signals_rx, reader));
        info
    }

    /// Where job `id`'s log is (all it wrote, up to the log's cap).
    pub fn log_path(&self, id: JobId) -> PathBuf {
        self.0.dir.join("jobs").join(format!("{id}.log"))
    }

    /// Takes in the jobs [`Jobs::reap_stale`] ended (a keel that stopped left them): listed
    /// as `Lost` from now on (their output read from their logs), told to the model with the
    /// jobs that ended ([`Jobs::take_ended`]) and to the subscribers as ended.
    pub fn note_lost(&self, lost: Vec<JobInfo>) {
        let lost: Vec<JobInfo> = lost
            .into_iter()
            .map(|mut info| {
                if let Ok(meta) = std::fs::metadata(self.log_path(info.id)) {
                    info.bytes = info.bytes.max(meta.len());
                }
                info
            })
            .collect();
        {
            let mut table = lock(&self.0.table);
            for info in &lost {
                self.0.next.fetch_max(info.id.0 + 1, Ordering::SeqCst);
                table.lost.insert(info.id, info.clone());
                table.ended.push(info.clone());
            }
        }
        for info in lost {
            let _ = self.0.events.send(JobEvent::Ended { info });
        }
    }

    /// Every job of the session, running or ended (lost ones too), by id.
    pub fn list(&self) -> Vec<JobInfo> {
        let (jobs, mut all): (Vec<Arc<Job>>, BTreeMap<JobId, JobInfo>) = {
            let table = lock(&self.0.table);
            (table.jobs.values().cloned().collect(), table.lost.clone())
        };
        all.extend(jobs.iter().map(|j| (j.id, j.info())));
        all.into_values().collect()
    }

    pub fn info(&self, id: JobId) -> Result<JobInfo, JobError> {
        if let Some(lost) = self.lost(id) {
            return Ok(lost);
        }
        Ok(self.job(id)?.info())
    }

    /// Up to `max` bytes of its output from offset `since` (or from the oldest byte the ring
    /// still holds: `dropped` says how many were missed). A lost job's come from its log.
    pub fn read(&self, id: JobId, since: u64, max: usize) -> Result<JobChunk, JobError> {
        if let Some(lost) = self.lost(id) {
            let max = max.min(self.0.limits.ring_bytes);
            return Ok(output::read_log(&self.log_path(id), lost.bytes, since, max));
        }
        let job = self.job(id)?;
        let slice = lock(&job.ring).read(since, max);
        let next = slice.from + slice.bytes.len() as u64;
        Ok(JobChunk {
            from: slice.from,
            dropped: slice.from.saturating_sub(since),
            bytes: slice.bytes,
            next,
        })
    }

    /// Waits until it wrote past `since`, ended, or `until` came; then its info.
    pub async fn wait(&self, id: JobId, since: u64, until: Instant) -> Result<JobInfo, JobError> {
        let job = self.job(id)?;
        let mut rx = job.progress.subscribe();
        let until = tokio::time::Instant::from_std(until);
        let _ = tokio::time::timeout_at(until, rx.wait_for(|p| p.end > since || p.ended)).await;
        Ok(job.info())
    }

    /// Types `bytes` into a terminal job (queued: written as its terminal takes them).
    pub fn write(&self, id: JobId, bytes: &[u8]) -> Result<(), JobError> {
        if let Some(lost) = self.lost(id) {
            return Err(ended_or_pipes(&lost));
        }
        let job = self.job(id)?;
        let Some(input) = &job.input else {
            return Err(JobError::NoStdin(id));
        };
        if job.ended() {
            return Err(JobError::Ended(id));
        }
        input.send(bytes.to_vec()).map_err(|_| JobError::Ended(id))
    }

    /// Sets a terminal job's size (the kernel sends its foreground group `SIGWINCH`).
    pub fn resize(&self, id: JobId, cols: u16, rows: u16) -> Result<(), JobError> {
        if let Some(lost) = self.lost(id) {
            return Err(match lost.tty {
                true => JobError::Ended(id),
                false => JobError::NoTty(id),
            });
        }
        let job = self.job(id)?;
        let Some(master) = &job.master else {
            return Err(JobError::NoTty(id));
        };
        if job.ended() {
            return Err(JobError::Ended(id));
        }
        pty::resize(&**master, (cols, rows)).map_err(|e| JobError::Io(e.to_string()))
    }

    /// Ends the job's whole tree: TERM, then KILL after the grace period; waits for its end.
    /// An ended job is left as it is.
    pub async fn kill(&self, id: JobId) -> Result<JobInfo, JobError> {
        if let Some(lost) = self.lost(id) {
            return Ok(lost);
        }
        let job = self.job(id)?;
        if job.ended() {
            return Ok(job.info());
        }
        lock(&job.status).killing = true;
        let _ = job.signals.send(Signal::SIGTERM);
        if tokio::time::timeout(self.0.limits.grace, job.over())
            .await
            .is_err()
        {
            let _ = job.signals.send(Signal::SIGKILL);
            job.over().await;
        }
        Ok(job.info())
    }

    /// Ends every running job (the session closes), all at once.
    pub async fn kill_all(&self) {
        let running: Vec<JobId> = self
            .list()
            .into_iter()
            .filter(|j| j.state == JobState::Running)
            .map(|j| j.id)
            .collect();
        let mut all = tokio::task::JoinSet::new();
        for id in running {
            let jobs = self.clone();
            all.spawn(async move { jobs.kill(id).await });
        }
        while all.join_next().await.is_some() {}
    }

    /// Jobs starting, writing, ending.
    pub fn subscribe(&self) -> broadcast::Receiver<JobEvent> {
        self.0.events.subscribe()
    }

    /// The jobs that ended since the last call (for the session's notices).
    pub fn take_ended(&self) -> Vec<JobInfo> {
        std::mem::take(&mut lock(&self.0.table).ended)
    }

    fn lost(&self, id: JobId) -> Option<JobInfo> {
        lock(&self.0.table).lost.get(&id).cloned()
    }

    fn job(&self, id: JobId) -> Result<Arc<Job>, JobError> {
        lock(&self.0.table)
            .jobs
            .get(&id)
            .cloned()
            .ok_or(JobError::Unknown(id))
    }
}

impl Inner {
    /// Writes the running jobs down (`jobs.json`).
    fn write_records(&self) {
        let _writing = lock(&self.writing);
        let records: Vec<Record> = lock(&self.table)
            .jobs
            .values()
            .filter(|j| !j.ended())
            .map(|j| j.record.clone())
            .collect();
        if let Err(e) = record::write(&self.dir, records) {
            tracing::debug!(dir = %self.dir.display(), error = %e, "jobs: the jobs file was not written");
        }
    }
}

impl Drop for Inner {
    /// The session is gone without [`Jobs::kill_all`]: every running job ends now (its reaper
    /// told to end it, or its group and token's processes killed).
    fn drop(&mut self) {
        let table = self.table.get_mut().unwrap_or_else(|e| e.into_inner());
        let mut any = false;
        for job in table.jobs.values().filter(|j| !j.ended()) {
            job.hangup.now();
            any = true;
        }
        // Best effort: what they left in the protected paths so far.
        for job in table.jobs.values().filter(|j| !j.ended()) {
            job.repair();
        }
        if any {
            if let Err(e) = record::write(&self.dir, Vec::new()) {
                tracing::debug!(error = %e, "jobs: the jobs file stays");
            }
        }
    }
}

/// Feeds a job's output to its ring, its log, its waiters and the subscribers.
async fn read(
    job: Arc<Job>,
    source: output::Source,
    mut log: output::Log,
    events: broadcast::Sender<JobEvent>,
) {
    let id = job.id;
    let read = output::pump(source, job.tty, |bytes| {
        log.write(bytes);
        let end = {
            let mut ring = lock(&job.ring);
            ring.push(bytes);
            ring.end()
        };
        job.progress.send_modify(|p| p.end = end);
        let _ = events.send(JobEvent::Output { id, next: end });
    })
    .await;
    if let Err(e) = read {
        tracing::debug!(job = %id, error = %e, "jobs: reading the output failed");
    }
}

/// What a job's supervisor holds until the job ended: its main process, and the sandbox it
/// runs in (a policy change gives the session a fresh sandbox; this one, its zygote, lives on
/// as long as the job).
struct Held {
    proc: JobProc,
    _sandbox: Arc<crate::kernel::sandbox::Sandbox>,
}

/// Holds a job's main process: sends the signals asked for, waits for its end, ends what it
/// left, lets its output drain, and marks it ended.
async fn supervise(
    table: Weak<Inner>,
    job: Arc<Job>,
    held: Held,
    mut signals: mpsc::UnboundedReceiver<Signal>,
    reader: tokio::task::JoinHandle<()>,
) {
    let Held { mut proc, _sandbox } = held;
    let status = loop {
        tokio::select! {
            Some(signal) = signals.recv() => proc.signal(signal).await,
            status = proc.wait() => break status,
        }
    };
    proc.end_leftovers().await;
    // Nothing of it runs any more: what it changed in the protected paths is undone now.
    let undo = job.clone();
    let _ = tokio::task::spawn_blocking(move || undo.repair()).await;
    let abort = reader.abort_handle();
    if tokio::time::timeout(DRAIN, reader).await.is_err() {
        abort.abort();
    }
    let info = {
        let mut s = lock(&job.status);
        use std::os::unix::process::ExitStatusExt;
        match &status {
            Ok(st) => {
                s.exit_code = st.code();
                s.signal = st.signal();
                s.state = match s.killing {
                    true => JobState::Killed,
                    false => JobState::Exited,
                };
            }
            Err(e) => {
                tracing::debug!(job = %job.id, error = %e, "jobs: the job was lost");
                s.state = JobState::Lost;
            }
        }
        s.ended_ms = Some(now_ms());
        drop(s);
        job.info()
    };
    drop((proc, _sandbox));
    // Its place is free before anyone waiting for its end hears of it.
    let table = table.upgrade();
    if let Some(table) = &table {
        let mut t = lock(&table.table);
        t.live = t.live.saturating_sub(1);
        t.ended.push(info.clone());
    }
    job.progress.send_modify(|p| p.ended = true);
    if let Some(table) = table {
        table.write_records();
        let _ = table.events.send(JobEvent::Ended { info });
    }
}

/// Why nothing can be typed into an ended job: it had no input, or it ended.
fn ended_or_pipes(info: &JobInfo) -> JobError {
    match info.tty {
        true => JobError::Ended(info.id),
        false => JobError::NoStdin(info.id),
    }
}

/// The highest job id `dir/jobs/<id>.log` holds (0: none).
fn last_logged(dir: &Path) -> u32 {
    let Ok(entries) = std::fs::read_dir(dir.join("jobs")) else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            name.to_str()?.strip_suffix(".log")?.parse::<u32>().ok()
        })
        .max()
        .unwrap_or(0)
}

pub(crate) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
