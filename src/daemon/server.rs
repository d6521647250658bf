//! The daemon (`keel daemon run`, `DESIGN.md` §10.2–§10.4): a Unix-socket server over shared
//! session hosts. It owns the socket and the registry of live sessions; each connection is
//! served by `connection.rs`; each session by a host actor. Lifetime: idle exit, SIGTERM,
//! `daemon/stop` (idle exit never happens while a scheduled task is not paused); every exit
//! broadcasts `daemon/shutdown`, saves every session and removes the socket. Out of
//! descriptors, accepts back off (`server/accept.rs`). Never writes to stdout: logs go through
//! `tracing` (to the daemon log when spawned).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::UnixListener;
use tokio::sync::{broadcast, watch, Mutex};

use super::connection;
use super::socket::{self, DaemonLock};
use crate::error::StartupError;
use crate::host::actor::SessionHandle;
use crate::kernel::clock::Clock;

mod accept;

/// How the daemon was asked to run.
#[derive(Debug, Clone)]
pub struct DaemonOptions {
    pub socket: PathBuf,
    /// Exit after this long with no client, no run and no pending request (`None`: never).
    pub idle_exit: Option<Duration>,
    /// The replay ring of each session (events, bytes).
    pub ring: (usize, usize),
    /// `$KEEL_HOME`, reported by `daemon/hello`.
    pub keel_home: PathBuf,
    /// The daemon's own environment (sessions start from it, plus what `session/open` sends).
    pub vars: std::collections::BTreeMap<String, String>,
    pub temp_dir: PathBuf,
    /// The event journal on NATS JetStream (`--journal`), if any.
    pub journal: Option<crate::daemon::journal::JournalOptions>,
    /// Converts a schedule store of version 1 (tasks holding flags) when it is loaded.
    pub convert_schedules: Option<crate::schedule::ArgvToSpec>,
    /// Unlocked clean worktrees older than this are removed at start (`worktree.cleanupDays`).
    pub worktree_cleanup: Duration,
}

/// Why the daemon ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Idle,
    Stopped,
    Signal(i32),
}

/// What every connection shares.
pub struct Shared {
    pub options: DaemonOptions,
    pub pid: u32,
    pub started_at: String,
    pub started: Instant,
    /// Live sessions by id (held only briefly). A handle's own id is the truth: after a
    /// session change its key is stale until [`Shared::rekey`] (which every lookup does).
    pub sessions: Mutex<HashMap<String, SessionHandle>>,
    /// Held while an opened session is loaded and registered (the quick end of a
    /// `session/open`; the slow provider setup before it holds nothing), so two clients
    /// naming one session get the same live one.
    pub opening: Mutex<()>,
    /// Connected clients (for status and idle exit).
    pub clients: std::sync::atomic::AtomicUsize,
    /// Requests being served (idle exit waits for them).
    pub pending: std::sync::atomic::AtomicUsize,
    /// Numbers connections and epochs.
    pub counter: std::sync::atomic::AtomicU64,
    /// Asks the server to end (`daemon/stop`).
    pub stop: watch::Sender<bool>,
    /// `daemon/shutdown {reason}` to every connection.
    pub shutdown: broadcast::Sender<String>,
    /// Notified each time a connection ends.
    pub gone: tokio::sync::Notify,
    /// Scheduled tasks (`$KEEL_HOME/schedules.json`).
    pub scheduler: crate::daemon::scheduler::Scheduler,
    /// `daemon/notice {level, message, …}` to every connection (a scheduled run that failed).
    pub notices: broadcast::Sender<crate::wire::protocol::notify::Notice>,
    /// The event journal, when `--journal` runs one.
    pub journal: Option<crate::daemon::journal::Journal>,
}

impl Shared {
    pub fn next(&self) -> u64 {
        self.counter
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1
    }

    /// A new epoch string: this daemon and a counter, never reused.
    pub fn epoch(&self) -> String {
        format!("{:x}-{}-{}", self.pid, self.started_at_ms(), self.next())
    }

    /// The live session `id`: the handle that serves it now. A session's old id, once it was
    /// changed (`new_session`, `switch_session`, `fork`, `clone`), is no longer live.
    pub async fn live(&self, id: &str) -> Option<SessionHandle> {
        let mut sessions = self.sessions.lock().await;
        rekey(&mut sessions);
        sessions.get(id).cloned()
    }

    /// Takes `handle`'s session out of the registry (it is being closed).
    pub async fn forget(&self, handle: &SessionHandle) {
        let mut sessions = self.sessions.lock().await;
        sessions.retain(|_, h| h.stream_id() != handle.stream_id());
    }

    /// Files a session just opened under its id.
    pub async fn register(&self, id: &str, handle: &SessionHandle) {
        let mut sessions = self.sessions.lock().await;
        sessions.insert(id.to_string(), handle.clone());
    }

    /// Files every handle under the id of the session it serves now.
    pub async fn rekey(&self) {
        rekey(&mut *self.sessions.lock().await);
    }

    /// Journals `attached` or `detached` for `session` by connection `client`.
    pub fn journal_fact(&self, kind: &str, session: &str, client: u64) {
        if let Some(j) = &self.journal {
            j.fact(kind, session, serde_json::json!({"client": client}));
        }
    }

    fn started_at_ms(&self) -> i64 {
        crate::kernel::clock::parse_iso(&self.started_at).unwrap_or(0)
    }
}

/// Runs the daemon until it is idle, stopped or signalled. `lock` is the `daemon.lock` this
/// process holds; `listener` the bound socket.
pub async fn serve(
    options: DaemonOptions,
    listener: UnixListener,
    lock: DaemonLock,
) -> Result<Ending, StartupError> {
    let clock = Clock::new(None, None);
    let (journal, commands) = match options.journal.clone() {
        Some(o) => {
            let (j, commands) = crate::daemon::journal::Journal::start(o, clock.clone())?;
            (Some(j), commands)
        }
        None => (None, None),
    };
    let (stop, mut stop_rx) = watch::channel(false);
    let (shutdown, _) = broadcast::channel(4);
    let (notices, _) = broadcast::channel(64);
    let scheduler = crate::daemon::scheduler::Scheduler::new(
        match options.convert_schedules {
            Some(f) => crate::schedule::Store::new(&options.keel_home).converting(f),
            None => crate::schedule::Store::new(&options.keel_home),
        },
        Box::new(crate::daemon::scheduler::SystemClock),
    );
    scheduler.start();
    let shared = Arc::new(Shared {
        pid: std::process::id(),
        started_at: clock.now_iso(),
        started: Instant::now(),
        options,
        sessions: Mutex::new(HashMap::new()),
        opening: Mutex::new(()),
        clients: Default::default(),
        pending: Default::default(),
        counter: Default::default(),
        stop,
        shutdown,
        gone: tokio::sync::Notify::new(),
        scheduler,
        notices,
        journal,
    });
    if let Some(requests) = commands {
        tokio::spawn(serve_commands(shared.clone(), requests));
    }
    // The daemon's error shows the message only (no cause), as it always has.
    let bare = |e: StartupError| StartupError::internal(e.message);
    let mut sigterm =
        crate::signals::listen(tokio::signal::unix::SignalKind::terminate()).map_err(bare)?;
    let mut sigint =
        crate::signals::listen(tokio::signal::unix::SignalKind::interrupt()).map_err(bare)?;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let mut idle_since = Instant::now();
    tracing::info!(
        "keel daemon {} listening on {}",
        shared.pid,
        shared.options.socket.display()
    );
    // Out of descriptors, accepts pause for a while (see `accept.rs`).
    let mut backoff = accept::Backoff::default();
    let mut paused: Option<tokio::time::Instant> = None;
    let ending = loop {
        let resume_at = paused.unwrap_or_else(tokio::time::Instant::now);
        tokio::select! {
            accepted = listener.accept(), if paused.is_none() => match accepted {
                Ok((stream, _)) => {
                    backoff.accepted();
                    if let Err(why) = socket::peer_allowed(&stream) {
                        tracing::warn!("connection refused: {why}");
                        continue;
                    }
                    // A client inside a keel sandbox gets its hello refused (issue 43, 6).
                    let sandboxed = stream
                        .peer_cred()
                        .ok()
                        .and_then(|c| c.pid())
                        .and_then(|pid| u32::try_from(pid).ok())
                        .and_then(crate::kernel::sandbox::inside::inside);
                    tokio::spawn(connection::serve(stream, shared.clone(), sandboxed));
                }
                Err(e) => {
                    if let accept::After::Pause(d) = backoff.failed(&e) {
                        paused = Some(tokio::time::Instant::now() + d);
                    }
                }
            },
            _ = tokio::time::sleep_until(resume_at), if paused.is_some() => paused = None,
            _ = stop_rx.changed() => break Ending::Stopped,
            _ = sigterm.recv() => break Ending::Signal(crate::exit::SIGTERM),
            _ = sigint.recv() => break Ending::Signal(crate::exit::SIGINT),
            _ = tick.tick() => {
                crate::daemon::scheduler::spawn_due(&shared);
                if !idle(&shared).await {
                    idle_since = Instant::now();
                } else if shared.options.idle_exit.is_some_and(|d| idle_since.elapsed() >= d) {
                    break Ending::Idle;
                }
            }
        }
    };
    let reason = match ending {
        Ending::Idle => "idle",
        Ending::Stopped => "stopped",
        Ending::Signal(_) => "signal",
    };
    let _ = shared.shutdown.send(reason.to_string());
    let sessions: Vec<SessionHandle> = shared
        .sessions
        .lock()
        .await
        .drain()
        .map(|(_, h)| h)
        .collect();
    for handle in sessions {
        handle.stop(Duration::from_secs(3)).await;
        if let Some(j) = &shared.journal {
            j.fact(
                "closed",
                &handle.session_id(),
                serde_json::json!({"reason": reason}),
            );
        }
    }
    // Let every connection write `daemon/shutdown` and close (bounded: a client that does
    // not read cannot hold the exit).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    while shared.clients.load(std::sync::atomic::Ordering::Relaxed) > 0 {
        tokio::select! {
            _ = shared.gone.notified() => {}
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }
    if let Some(j) = &shared.journal {
        j.flush(Duration::from_secs(2)).await;
    }
    let _ = std::fs::remove_file(&shared.options.socket);
    drop(lock);
    tracing::info!("keel daemon {} ended ({reason})", shared.pid);
    Ok(ending)
}

/// Serves the requests of the journal's `keel.cmd.<host>` service, each through the socket
/// connections' own dispatch, concurrently.
async fn serve_commands(
    shared: Arc<Shared>,
    mut requests: tokio::sync::mpsc::UnboundedReceiver<crate::daemon::journal::Command>,
) {
    while let Some(c) = requests.recv().await {
        let shared = shared.clone();
        tokio::spawn(async move {
            let out = connection::one_request(shared, &c.line).await;
            let _ = c.answer.send(out);
        });
    }
}

fn rekey(sessions: &mut HashMap<String, SessionHandle>) {
    let stale: Vec<String> = sessions
        .iter()
        .filter(|(key, h)| **key != *h.session_id())
        .map(|(key, _)| key.clone())
        .collect();
    for key in stale {
        let Some(h) = sessions.remove(&key) else {
            continue;
        };
        let id = h.session_id().to_string();
        if sessions.contains_key(&id) {
            // Never drop a handle (its session would not be saved at exit); a session is
            // live once, so this does not happen.
            tracing::warn!("session {id} is live twice in this daemon; keeping {key} as it was");
            sessions.insert(key, h);
        } else {
            sessions.insert(id, h);
        }
    }
}

/// No client, no run, no request in flight, no scheduled task that is not paused.
async fn idle(shared: &Shared) -> bool {
    use std::sync::atomic::Ordering;
    if shared.scheduler.keeps_alive() {
        return false;
    }
    if shared.clients.load(Ordering::Relaxed) > 0 || shared.pending.load(Ordering::Relaxed) > 0 {
        return false;
    }
    let handles: Vec<SessionHandle> = shared.sessions.lock().await.values().cloned().collect();
    for h in handles {
        if h.status().await.is_some_and(|s| s.summary.running) {
            return false;
        }
    }
    true
}
