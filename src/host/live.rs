//! One session being served by the host (for RPC, the daemon and the TUI alike): the kernel
//! handle, its bus, and the store its recorder writes, plus the ways to start, replace and
//! retire one.
//! Front-end neutral: no output, no wire format.

use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::host::{CommandError, CommandErrorKind};
use crate::kernel::agent::{AgentConfig, AgentSession};
use crate::kernel::bus::{Bus, EventRx};
use crate::kernel::clock::Clock;
use crate::kernel::jobs::Jobs;
use crate::kernel::recorder::{self, Recorder, SharedStore};
use crate::kernel::session::{self, SessionError, SessionHeader, Store};

/// One session being served: the kernel handle, its bus, the store its recorder writes.
pub struct Live {
    pub session: AgentSession,
    pub bus: Bus,
    pub store: SharedStore,
    /// Applied by the loop to every event before it is written, so the store answers reads
    /// (`get_entries`, `get_state`, …) with everything published so far.
    pub recorder: Recorder,
    pub rx: EventRx,
    /// Its background jobs (the model's tools share the table; see [`crate::host::jobs`]).
    pub jobs: Jobs,
    /// When this session started being served (its wall time, as the clock reports
    /// durations: none on a test clock).
    pub started: std::time::Instant,
}

impl Live {
    /// Starts serving a store. `previous`: the session being replaced, whose queue modes and
    /// automatic retry and compaction switches carry over.
    pub fn start(config: &AgentConfig, previous: Option<&AgentSession>, setup: Starting) -> Live {
        let Starting {
            store,
            clock,
            provider,
            thinking,
            announce,
        } = setup;
        let history = store.context_entries();
        let last_checkpoint = crate::kernel::checkpoint::list(&store, None)
            .pop()
            .map(|c| c.snapshot);
        // The list as last written on this branch of the conversation.
        let todos = store
            .branch()
            .iter()
            .rev()
            .find_map(|e| crate::kernel::tool::todo::Todos::from_entry(e))
            .map(|t| t.todos)
            .unwrap_or_default();
        let session_id = store.header().id.clone();
        let transcript = store
            .path()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let kept = store.path().map(crate::kernel::tool::output_dir_of);
        let model_differs = store.last_model() != Some((provider.name(), provider.model()));
        let started = std::time::Instant::now();
        let bus = Bus::new(clock.clone());
        let store: SharedStore = Arc::new(Mutex::new(store));
        let recorder = Recorder::new(store.clone(), &clock);
        // Subscribed before anything is published: the announcement below is recorded.
        let rx = bus.subscribe();
        let mut config = config.clone();
        config.thinking_level = thinking;
        config.hooks = config
            .hooks
            .as_ref()
            .map(|h| h.for_session(&session_id, &transcript));
        config.subagents = config
            .subagents
            .as_ref()
            .map(|s| s.for_session(&session_id, &transcript));
        config.session_id = Some(session_id);
        // A saved session keeps its full tool outputs beside its file; its tools may read them.
        if let Some(dir) = &kept {
            config.tool_env = config.tool_env.keeping_outputs_in(dir.clone());
            config.sandbox = Arc::new(config.sandbox.as_ref().clone().reading(dir));
        }
        // Its background jobs: a table of its own, where the next keel finds what a crash
        // left (ended now, before the session goes on).
        let jobs_dir = kept.unwrap_or_else(|| config.tool_env.spill_path(&config.temp_dir));
        let lost = Jobs::reap_stale(&jobs_dir);
        if !lost.is_empty() {
            tracing::info!(count = lost.len(), "jobs a stopped keel left were ended");
        }
        let jobs = Jobs::new(jobs_dir, config.job_limits);
        // Its clients hear of its jobs on its stream; the lost ones are listed as such, and
        // the model is told of them before its next request.
        crate::host::jobs::forward(&jobs, bus.clone());
        jobs.note_lost(lost);
        config.tool_env = config.tool_env.with_jobs(jobs.clone());
        let session = AgentSession::with_entries(config, provider, bus.clone(), clock, history);
        session.watch_store(&recorder.health());
        session.resume_checkpoints(last_checkpoint);
        session.resume_todos(todos);
        if let Some(previous) = previous {
            let (steering, follow_up) = previous.queue_modes();
            session.set_steering_mode(steering);
            session.set_follow_up_mode(follow_up);
            let status = previous.status();
            session.set_auto_retry(status.auto_retry);
            session.set_auto_compaction(status.auto_compaction);
            session.inherit_policy(previous);
        }
        let mut live = Live {
            session,
            bus,
            store,
            recorder,
            rx,
            jobs,
            started,
        };
        if announce || model_differs {
            session_announce(&mut live);
        }
        live
    }
}

/// Records the model and thinking level of a session start without telling the client
/// (a session start is not news to it).
fn session_announce(live: &mut Live) {
    live.session.announce_model();
    while let Ok(ev) = live.rx.try_recv() {
        live.recorder.apply(&ev);
    }
}

pub struct Starting {
    pub store: Store,
    pub clock: Clock,
    pub provider: Arc<dyn crate::kernel::provider::Provider>,
    pub thinking: String,
    pub announce: bool,
}

impl Live {
    /// Ends serving this session: closes its bus, records its last events (normally none: it
    /// is idle) into its own store, then syncs and drops the store, releasing its file lock.
    pub async fn retire(mut self) {
        self.bus.close();
        while let Some(ev) = self.rx.recv().await {
            self.recorder.apply(&ev);
        }
        self.recorder.sync();
    }

    /// The session file, if this session has one.
    pub fn path(&self) -> Option<std::path::PathBuf> {
        recorder::lock(&self.store).path().map(Path::to_path_buf)
    }
}

/// A new session store like `live`'s: a file in `session_dir`, or in memory when `live` runs
/// without a session file.
pub fn new_store(live: &Live, session_dir: &Path, header: SessionHeader) -> Store {
    if live.path().is_none() {
        Store::in_memory(header)
    } else {
        let path = session_dir.join(session::file_name(&header));
        Store::new_file(path, header)
    }
}

/// A copy of `live`'s session up to `leaf` under a new header, whose file (in `session_dir`)
/// exists only when `parent` (the current file) does.
pub fn fork_store(
    live: &Live,
    session_dir: &Path,
    mut header: SessionHeader,
    leaf: Option<&str>,
    parent: Option<&Path>,
) -> Result<Store, SessionError> {
    header.parent_session = parent.map(|p| p.display().to_string());
    let path = parent.map(|_| session_dir.join(session::file_name(&header)));
    recorder::lock(&live.store).fork_at(leaf, path, header)
}

/// Writes `live`'s session (the current branch) as a self-contained HTML page to `path`, or
/// to `cwd/keel-session-<session file name>.html` (`<id>` for a session without a file);
/// returns the path written.
pub fn export_html(
    live: &Live,
    cwd: &Path,
    path: Option<std::path::PathBuf>,
) -> Result<std::path::PathBuf, CommandError> {
    let store = recorder::lock(&live.store);
    let name = match store.path() {
        Some(file) => crate::host::html::default_name(file),
        None => format!("keel-session-{}.html", store.header().id),
    };
    let path = path.unwrap_or_else(|| cwd.join(name));
    let page = crate::host::html::store_page(&store);
    crate::kernel::private::write_file(&path, page.as_bytes()).map_err(|e| {
        let message = format!("export_html: cannot write {}: {e}", path.display());
        CommandError::new(CommandErrorKind::Export, message)
    })?;
    Ok(path)
}
