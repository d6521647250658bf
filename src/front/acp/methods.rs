//! The client's ACP requests and notifications: `initialize`, `session/new|load|resume|list|
//! close|prompt`, keel's `_keel/jobs/*` extension methods (`jobs`), `session/cancel`,
//! `$/cancel_request`, and the errors for everything else.
//! Sessions open here (off the serve loop, so a slow start never holds up other requests) and
//! then live in their own task (`session`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::config::{Config, Policy};
use super::fs::EditorFiles;
use super::schema::{
    AgentCapabilities, AvailableCommandsUpdate, CancelNotification, CloseSessionRequest,
    FileSystemCapabilities, Implementation, InitializeRequest, InitializeResponse,
    ListSessionsRequest, ListSessionsResponse, LoadSessionRequest, McpCapabilities, McpServer,
    NewSessionRequest, PromptCapabilities, PromptRequest, ProtocolVersion, ResumeSessionRequest,
    SessionCapabilities, SessionCloseCapabilities, SessionInfo, SessionListCapabilities,
    SessionNotification, SessionResumeCapabilities, SessionUpdate, SetSessionConfigOptionRequest,
    SetSessionModeRequest,
};
use super::session::{self, ToSession};
use super::updates::Mapper;
use super::{content, Peer, Sink};
use crate::client::link::Link;
use crate::kernel::agent::Permission;
use crate::kernel::clock::Clock;
use crate::kernel::message::Message;
use crate::mode::Env;
use crate::wire::jsonl::{Frame, MAX_LINE_BYTES};
use crate::wire::jsonrpc::{self as j, ErrorObject, Id, Incoming};
use crate::wire::protocol::spec::{SessionPick, SessionSpec};

/// The replay ring of an ACP session's host (ACP has no cursors; the editor is attached from
/// the start): events and bytes.
const RING: (usize, usize) = (256, 1024 * 1024);

/// A live session: its task's inbox and the task.
struct Entry {
    tx: mpsc::UnboundedSender<ToSession>,
    task: tokio::task::JoinHandle<()>,
}

type Sessions = Arc<Mutex<HashMap<String, Entry>>>;

/// How a session is opened.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    New,
    /// `session/load`: the branch is replayed before the answer.
    Load,
    /// `session/resume`: no replay.
    Resume,
}

/// The agent side of the connection.
pub struct Agent {
    /// The sessions' spec (the process's, without a session pick: each request names its own).
    spec: SessionSpec,
    env: Env,
    clock: Clock,
    sink: Sink,
    peer: Arc<Peer>,
    sessions: Sessions,
    /// `--permission` was given: sessions keep that policy (no modes to choose from).
    explicit_permission: bool,
    /// Sessions being opened (their answers are still to come).
    opening: Vec<tokio::task::JoinHandle<()>>,
    /// `--daemon`: sessions live in the daemon on this socket.
    daemon: Option<PathBuf>,
    /// The editor's file methods, from `initialize` (none until then).
    fs: FileSystemCapabilities,
    /// The editor shows `notice` updates (`session.notices`, from `initialize`).
    notices: bool,
}

impl Agent {
    pub fn new(
        spec: &SessionSpec,
        env: &Env,
        clock: &Clock,
        explicit_permission: bool,
        sink: Sink,
        daemon: Option<PathBuf>,
    ) -> Agent {
        // Each ACP request names its session: the spec's pick does not apply.
        let spec = SessionSpec {
            session: SessionPick::New,
            ..spec.clone()
        };
        Agent {
            spec,
            env: env.clone(),
            clock: clock.clone(),
            peer: Arc::new(Peer {
                sink: sink.clone(),
                next: AtomicU64::new(0),
                pending: Mutex::new(HashMap::new()),
            }),
            sink,
            sessions: Arc::new(Mutex::new(HashMap::new())),
            opening: Vec::new(),
            explicit_permission,
            daemon,
            fs: FileSystemCapabilities::default(),
            notices: false,
        }
    }

    /// Serves one input line.
    pub fn on_frame(&mut self, frame: Frame) {
        match j::parse_frame(&frame, MAX_LINE_BYTES) {
            Incoming::Invalid(e) => self.sink.line(e.line()),
            Incoming::Response { id, result } => self.peer.route(&id, result),
            Incoming::Notification { method, params } => {
                self.notification(&method, params.as_deref())
            }
            Incoming::Request { id, method, params } => {
                if let Err(e) = self.request(&id, &method, params.as_deref()) {
                    self.sink.error(Some(&id), &e);
                }
            }
        }
    }

    fn notification(&self, method: &str, params: Option<&RawValue>) {
        match method {
            "session/cancel" => match j::params::<CancelNotification>(params) {
                Ok(c) => self.send(&c.session_id.0, ToSession::Cancel { request: None }),
                Err(e) => tracing::warn!("session/cancel: {}", e.message),
            },
            "$/cancel_request" => match j::params::<CancelRequest>(params) {
                Ok(c) => {
                    let id = Id::from_raw(&c.request_id);
                    self.broadcast(|| ToSession::Cancel {
                        request: Some(id.clone()),
                    });
                }
                Err(e) => tracing::warn!("$/cancel_request: {}", e.message),
            },
            other => tracing::debug!("ignoring the notification {other}"),
        }
    }

    fn request(
        &mut self,
        id: &Id,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<(), ErrorObject> {
        match method {
            "initialize" => {
                let p: InitializeRequest = j::params(params)?;
                self.notices = p
                    .client_capabilities
                    .session
                    .as_ref()
                    .is_some_and(|s| s.notices.is_some());
                self.fs = p.client_capabilities.fs;
                self.sink.result(id, &initialize());
            }
            "session/new" => {
                let p: NewSessionRequest = j::params(params)?;
                self.open(id, Open::New, p.cwd, None, &p.mcp_servers)?;
            }
            "session/load" => {
                let p: LoadSessionRequest = j::params(params)?;
                self.open(
                    id,
                    Open::Load,
                    p.cwd,
                    Some(p.session_id.0.to_string()),
                    &p.mcp_servers,
                )?;
            }
            "session/resume" => {
                let p: ResumeSessionRequest = j::params(params)?;
                self.open(
                    id,
                    Open::Resume,
                    p.cwd,
                    Some(p.session_id.0.to_string()),
                    &p.mcp_servers,
                )?;
            }
            "session/list" => {
                let p: ListSessionsRequest = j::params(params)?;
                if p.cursor.is_some() {
                    return Err(ErrorObject::new(
                        j::INVALID_PARAMS,
                        "Invalid params: `cursor`: this agent never gives one (the whole list comes in one answer)",
                    ));
                }
                self.sink.result(id, &self.list(p.cwd.as_deref()));
            }
            "session/close" => {
                let p: CloseSessionRequest = j::params(params)?;
                let entry = self
                    .sessions
                    .lock()
                    .ok()
                    .and_then(|mut s| s.remove(p.session_id.0.as_ref()));
                let Some(entry) = entry else {
                    return Err(not_found(&p.session_id.0));
                };
                let _ = entry.tx.send(ToSession::Close {
                    id: Some(id.clone()),
                });
            }
            "session/prompt" => {
                let p: PromptRequest = j::params(params)?;
                let prompt = content::prompt(&p.prompt).map_err(|e| {
                    ErrorObject::new(j::INVALID_PARAMS, format!("Invalid params: {e}"))
                })?;
                if !self.live(&p.session_id.0) {
                    return Err(not_found(&p.session_id.0));
                }
                self.send(
                    &p.session_id.0,
                    ToSession::Prompt {
                        id: id.clone(),
                        prompt,
                    },
                );
            }
            "session/set_mode" => {
                let p: SetSessionModeRequest = j::params(params)?;
                if !self.live(&p.session_id.0) {
                    return Err(not_found(&p.session_id.0));
                }
                let mode = p.mode_id.0.to_string();
                self.send(
                    &p.session_id.0,
                    ToSession::SetMode {
                        id: id.clone(),
                        mode,
                    },
                );
            }
            "session/set_config_option" => {
                let p: SetSessionConfigOptionRequest = j::params(params)?;
                if !self.live(&p.session_id.0) {
                    return Err(not_found(&p.session_id.0));
                }
                let option = p.config_id.0.to_string();
                let msg = ToSession::SetOption {
                    id: id.clone(),
                    option,
                    value: p.value,
                };
                self.send(&p.session_id.0, msg);
            }
            jobs if super::jobs::is_jobs_method(jobs) => {
                let (session, command) = super::jobs::command(jobs, params)?;
                if !self.live(&session) {
                    return Err(not_found(&session));
                }
                let id = id.clone();
                self.send(&session, ToSession::Command { id, command });
            }
            other => {
                return Err(ErrorObject::new(
                    j::METHOD_NOT_FOUND,
                    format!("Method not found: {other}"),
                ))
            }
        }
        Ok(())
    }

    fn live(&self, session: &str) -> bool {
        self.sessions.lock().is_ok_and(|s| s.contains_key(session))
    }

    fn send(&self, session: &str, msg: ToSession) {
        if let Some(e) = self
            .sessions
            .lock()
            .ok()
            .as_ref()
            .and_then(|s| s.get(session))
        {
            let _ = e.tx.send(msg);
        }
    }

    fn broadcast(&self, msg: impl Fn() -> ToSession) {
        if let Ok(s) = self.sessions.lock() {
            for e in s.values() {
                let _ = e.tx.send(msg());
            }
        }
    }

    /// The spec and environment of a session in `cwd` (the process's spec, as the daemon's
    /// `session/open` takes a client's).
    fn session_spec_env(&self, cwd: &Path, existing: Option<&str>) -> (SessionSpec, Env) {
        let mut spec = self.spec.clone();
        if let Some(id) = existing {
            spec.session = SessionPick::Resume(id.to_string());
        }
        let env = crate::setup::open::env_in(
            &self.env.vars,
            &self.env.keel_home,
            &self.env.temp_dir,
            cwd,
            BTreeMap::new(),
        );
        (spec, env)
    }

    fn open(
        &mut self,
        id: &Id,
        how: Open,
        cwd: PathBuf,
        existing: Option<String>,
        mcp_servers: &[McpServer],
    ) -> Result<(), ErrorObject> {
        if !cwd.is_absolute() || !cwd.is_dir() {
            return Err(ErrorObject::new(
                j::INVALID_PARAMS,
                format!(
                    "Invalid params: `cwd`: {} is not an absolute path of a directory",
                    cwd.display()
                ),
            ));
        }
        let (mut spec, env) = self.session_spec_env(&cwd, existing.as_deref());
        // The client's MCP servers join keel's own, through a config file read at startup.
        let mut mcp_file = None;
        if !mcp_servers.is_empty() {
            let (config, warnings) = super::mcp::config(mcp_servers);
            for w in warnings {
                tracing::warn!("{w}");
            }
            let file = super::mcp::write(&config, &env.keel_home.join("tmp")).map_err(|e| {
                ErrorObject::new(
                    j::INTERNAL_ERROR,
                    format!("cannot pass the client's MCP servers to the session: {e}"),
                )
            })?;
            spec.mcp.config.push(file.to_path_buf());
            mcp_file = Some(file);
        }
        if let Some(wanted) = &existing {
            if self.live(wanted) {
                let replay = how == Open::Load;
                self.send(
                    wanted,
                    ToSession::Reopen {
                        id: id.clone(),
                        replay,
                    },
                );
                return Ok(());
            }
            let dir = crate::setup::session_dir_in(spec.session_dir.as_deref(), &env);
            if crate::kernel::session::resolve(&dir, wanted).is_err() {
                return Err(not_found(wanted));
            }
        }
        // In the daemon, ACP sessions ask unless `--permission` was given (over the files' mode).
        let in_daemon = self.daemon.clone().map(|socket| {
            let mut spec = spec.clone();
            if !self.explicit_permission {
                spec.permission = Some(Permission::Ask);
            }
            (socket, spec)
        });
        let (id, clock, sink) = (id.clone(), self.clock.clone(), self.sink.clone());
        let (peer, sessions) = (self.peer.clone(), self.sessions.clone());
        // The settings of the session's directory; without `--permission` or a
        // `permissions.defaultMode`, ACP sessions ask.
        let settings = crate::setup::Settings::resolve(&spec, crate::mode::Mode::Acp, &env)
            .map(|mut s| {
                if !self.explicit_permission && !s.permission_chosen {
                    s.permission = Permission::Ask;
                }
                s
            })
            .map_err(|e| e.render().trim_end().to_string());
        let asks = settings
            .as_ref()
            .map_or(true, |s| s.permission == Permission::Ask);
        // In this process the tools can work on the editor's buffers; a daemon session's tools
        // work on the disk (the daemon cannot reach this editor's files).
        let editor = match in_daemon {
            None => EditorFiles::new(self.peer.clone(), &self.fs),
            Some(_) => {
                if self.fs.read_text_file || self.fs.write_text_file {
                    tracing::info!("a daemon session's tools use the disk, not the editor's files");
                }
                None
            }
        };
        let fixed = self.explicit_permission;
        let notices = self.notices;
        self.opening.retain(|t| !t.is_finished());
        self.opening.push(tokio::spawn(async move {
            let started = async {
                if let Some((socket, spec)) = in_daemon {
                    let opened = open_in_daemon(&socket, &env, spec).await;
                    drop(mcp_file);
                    return opened;
                }
                let mut setup = crate::setup::open::start(&settings?, &env, &clock, true)
                    .await
                    .map_err(|e| e.render().trim_end().to_string())?;
                if let Some(editor) = &editor {
                    setup.config.files = editor.files();
                }
                // Read at startup: the file (which may hold the servers' secrets) can go.
                drop(mcp_file);
                for w in &setup.warnings {
                    tracing::warn!("{w}");
                }
                Link::local(setup, RING).await.map_err(|e| e.message)
            };
            let (link, start) = match started.await {
                Ok(opened) => opened,
                Err(e) => {
                    sink.error(Some(&id), &ErrorObject::new(j::INTERNAL_ERROR, e));
                    return;
                }
            };
            let session = link.session_id().to_string();
            if let Some(editor) = &editor {
                editor.started(&session);
            }
            let messages: Vec<Message> = start.snapshot.map(|s| s.messages).unwrap_or_default();
            let mut mapper = Mapper::new(cwd.clone(), asks);
            mapper.notices = notices;
            if how == Open::Load {
                for u in mapper.replay(&messages) {
                    sink.notify(
                        "session/update",
                        &SessionNotification::new(session.clone(), u),
                    );
                }
            } else {
                mapper.skip(messages.len());
            }
            let policy = asks.then_some(Policy::Ask).filter(|_| !fixed);
            let config = Config::fetch(&link.commands(), policy).await;
            let templates = super::config::commands(&link.commands()).await;
            let answer = session::opened(&config, (how == Open::New).then_some(session.as_str()));
            let (tx, task) = session::spawn(link, mapper, config, cwd, sink.clone(), peer, editor);
            if let Ok(mut s) = sessions.lock() {
                s.insert(session.clone(), Entry { tx, task });
            }
            sink.result(&id, &answer);
            if !templates.is_empty() {
                let update =
                    SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(templates));
                sink.notify("session/update", &SessionNotification::new(session, update));
            }
        }));
        Ok(())
    }

    /// `session/list`: stored sessions, newest first (of `cwd` if given), live ones included.
    fn list(&self, cwd: Option<&Path>) -> ListSessionsResponse {
        let summaries = match cwd {
            Some(cwd) => {
                let (spec, env) = self.session_spec_env(cwd, None);
                let want = cwd.display().to_string();
                crate::kernel::session::list(&crate::setup::session_dir_in(
                    spec.session_dir.as_deref(),
                    &env,
                ))
                .into_iter()
                .filter(|s| s.cwd == want)
                .collect()
            }
            None => match &self.spec.session_dir {
                Some(dir) => crate::kernel::session::list(dir),
                None => crate::kernel::session::list_all(&self.env.keel_home),
            },
        };
        let sessions = summaries
            .into_iter()
            .map(|s| {
                let title = s
                    .name
                    .clone()
                    .or(s.first_message.clone())
                    .map(|t| title_of(&t));
                let updated = chrono::DateTime::from_timestamp_millis(s.modified_ms)
                    .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
                SessionInfo::new(s.id, PathBuf::from(s.cwd))
                    .title(title)
                    .updated_at(updated)
            })
            .collect();
        ListSessionsResponse::new(sessions)
    }

    /// Stops every session and saves it (end of input or a signal).
    pub async fn shutdown(&mut self) {
        for t in self.opening.drain(..) {
            let _ = t.await;
        }
        let entries: Vec<Entry> = match self.sessions.lock() {
            Ok(mut s) => s.drain().map(|(_, e)| e).collect(),
            Err(_) => Vec::new(),
        };
        for e in &entries {
            let _ = e.tx.send(ToSession::Close { id: None });
        }
        for e in entries {
            let _ = e.task.await;
        }
    }
}

/// `$/cancel_request` params.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CancelRequest {
    request_id: Box<RawValue>,
}

fn not_found(session: &str) -> ErrorObject {
    ErrorObject::new(
        j::RESOURCE_NOT_FOUND,
        format!("Resource not found: no session {session}"),
    )
}

/// A title: the first line, at most 100 characters.
fn title_of(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default().trim();
    let mut t: String = line.chars().take(100).collect();
    if t.len() < line.len() {
        t.push('…');
    }
    t
}

/// Opens (or finds) a session in the daemon on `socket` (started if none runs) with `spec` in
/// `env`'s directory, and attaches to it: the editor and `keel attach` show one agent.
async fn open_in_daemon(
    socket: &Path,
    env: &Env,
    spec: SessionSpec,
) -> Result<(Link, crate::client::link::Start), String> {
    let dial = crate::client::dial::Dial::Local(socket.to_path_buf());
    let conn = crate::client::open::start(&dial, env)
        .await
        .map_err(|e| e.render().trim_end().to_string())?;
    let mut client = crate::client::socket::Client::greet(conn, true, &dial)
        .await
        .map_err(|e| e.to_string())?;
    let params = crate::client::open::open_params(env, spec, false);
    let opened = client.call::<crate::wire::protocol::session::Open>(&params);
    let opened = opened.await.map_err(|e| {
        crate::front::client::open_failed(e)
            .render()
            .trim_end()
            .to_string()
    })?;
    drop(client);
    for w in &opened.warnings {
        tracing::warn!("{w}");
    }
    Link::daemon(&dial, &opened.session_id, None, true)
        .await
        .map_err(|e| e.to_string())
}

/// What this agent supports, and nothing more (`reference/daemon-acp.md` §1.4).
fn initialize() -> InitializeResponse {
    let sessions = SessionCapabilities::new()
        .list(SessionListCapabilities::new())
        .resume(SessionResumeCapabilities::new())
        .close(SessionCloseCapabilities::new());
    let caps = AgentCapabilities::new()
        .load_session(true)
        .prompt_capabilities(PromptCapabilities::new().image(true).embedded_context(true))
        .mcp_capabilities(McpCapabilities::new().http(true))
        .session_capabilities(sessions);
    InitializeResponse::new(ProtocolVersion::V1)
        .agent_capabilities(caps)
        .agent_info(
            Implementation::new("keel", env!("CARGO_PKG_VERSION")).title("keel".to_string()),
        )
}
