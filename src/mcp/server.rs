//! One MCP server's connection, on rmcp: spawning a stdio child (its own process group, an
//! environment allowlist plus its `env`, stderr into a bounded log) or opening a Streamable
//! HTTP client, the era-probing handshake (`ClientLifecycleMode::Auto`), tool listing,
//! `list_changed` refreshes, progress routing and calls with timeouts and cancellation.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientConfig, ClientRequest,
    Implementation, ProgressNotificationParam, ProtocolVersion, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, Peer, RoleClient};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;
use tokio::sync::{mpsc, Notify};

use super::config::{ServerConfig, Transport, TOOL_HARD_MAX};
use crate::kernel::abort::AbortSignal;
use crate::kernel::tool::ToolOutput;

/// Variables a stdio server inherits from keel's environment (Codex's list, plus `LC_*`);
/// everything else, provider keys included, is left out unless the server's `env` sets it.
pub const ENV_ALLOWLIST: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "USER", "LANG", "LC_ALL", "TERM", "TMPDIR", "TZ",
];
/// A server's stderr log is restarted (the old one kept as `.1`) past this size.
pub const MAX_LOG_BYTES: u64 = 1024 * 1024;

/// Where a server is in its life.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Connecting,
    Ready,
    Failed(String),
}

impl Status {
    pub fn word(&self) -> &'static str {
        match self {
            Status::Connecting => "connecting",
            Status::Ready => "ready",
            Status::Failed(_) => "failed",
        }
    }
}

/// A tool as its server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct RawTool {
    pub name: String,
    pub description: String,
    pub schema: Value,
    pub read_only: bool,
}

#[derive(Debug)]
struct State {
    status: Status,
    tools: Vec<RawTool>,
    peer: Option<Peer<RoleClient>>,
    pgid: Option<i32>,
    protocol: Option<String>,
}

/// One configured server and what is known about it now.
#[derive(Debug)]
pub struct Server {
    pub config: ServerConfig,
    state: Mutex<State>,
    /// Open calls' progress sinks, by progress token (JSON text of the token).
    progress: Mutex<HashMap<String, mpsc::UnboundedSender<ToolOutput>>>,
    /// Set by `list_changed`: the server task re-lists.
    refresh: Notify,
    /// A `list_changed` arrived and the new list is not in yet.
    refreshing: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the server task needs from its owner.
#[derive(Clone)]
pub struct Context {
    pub vars: BTreeMap<String, String>,
    /// Where a stdio server runs: its configured `cwd`, or the session's directory.
    pub cwd: PathBuf,
    pub log_dir: PathBuf,
    /// Woken on every status or tool-list change.
    pub changed: Arc<Notify>,
    /// Receives one line for each failure.
    pub warn: Arc<dyn Fn(String) + Send + Sync>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("log_dir", &self.log_dir)
            .finish()
    }
}

impl Server {
    pub fn new(config: ServerConfig) -> Arc<Server> {
        Arc::new(Server {
            config,
            state: Mutex::new(State {
                status: Status::Connecting,
                tools: Vec::new(),
                peer: None,
                pgid: None,
                protocol: None,
            }),
            progress: Mutex::new(HashMap::new()),
            refresh: Notify::new(),
            refreshing: AtomicBool::new(false),
        })
    }

    pub fn status(&self) -> Status {
        lock(&self.state).status.clone()
    }

    pub fn tools(&self) -> Vec<RawTool> {
        let st = lock(&self.state);
        match st.status {
            Status::Ready => st.tools.clone(),
            _ => Vec::new(),
        }
    }

    /// Whether a `list_changed` is still being followed up.
    pub fn refreshing(&self) -> bool {
        self.refreshing.load(Ordering::SeqCst)
    }

    /// The protocol revision negotiated, once connected.
    pub fn protocol(&self) -> Option<String> {
        lock(&self.state).protocol.clone()
    }

    fn set(&self, ctx: &Context, status: Status) {
        let failed = match &status {
            Status::Failed(why) => Some(why.clone()),
            _ => None,
        };
        let mut st = lock(&self.state);
        if st.status == status {
            return;
        }
        st.status = status;
        if failed.is_some() {
            st.peer = None;
        }
        drop(st);
        if let Some(why) = failed {
            (ctx.warn)(format!("MCP server `{}` failed: {why}", self.config.name));
            self.kill_group(Signal::SIGKILL);
        }
        ctx.changed.notify_waiters();
    }

    /// Signals the stdio child's process group (nothing for HTTP servers or gone groups).
    pub fn kill_group(&self, sig: Signal) {
        if let Some(pg) = lock(&self.state).pgid {
            let _ = killpg(Pid::from_raw(pg), sig);
        }
    }

    /// Connects, lists, then follows `list_changed` and the connection's end. Runs as the
    /// server's task until it ends or is aborted.
    pub async fn run(self: Arc<Self>, ctx: Context) {
        let startup = self.config.startup_timeout;
        let connected = tokio::time::timeout(startup, self.connect(&ctx)).await;
        let running = match connected {
            Ok(Ok(running)) => running,
            Ok(Err(why)) => return self.set(&ctx, Status::Failed(why)),
            Err(_) => {
                return self.set(
                    &ctx,
                    Status::Failed(format!(
                        "no answer within {}s of starting",
                        startup.as_secs_f64()
                    )),
                )
            }
        };
        let peer = running.peer().clone();
        match tokio::time::timeout(startup, list(&peer)).await {
            Ok(Ok(tools)) => {
                let mut st = lock(&self.state);
                st.tools = tools;
                st.peer = Some(peer.clone());
                st.protocol = peer.peer_info().map(|i| i.protocol_version.to_string());
            }
            Ok(Err(why)) => {
                return self.set(&ctx, Status::Failed(format!("tools/list failed: {why}")))
            }
            Err(_) => return self.set(&ctx, Status::Failed("tools/list did not answer".into())),
        }
        self.set(&ctx, Status::Ready);
        let ended = running.waiting();
        tokio::pin!(ended);
        loop {
            tokio::select! {
                _ = &mut ended => {
                    return self.set(&ctx, Status::Failed("the connection closed (the server exited?)".into()));
                }
                _ = self.refresh.notified() => {
                    if let Ok(Ok(tools)) = tokio::time::timeout(startup, list(&peer)).await {
                        lock(&self.state).tools = tools;
                    }
                    self.refreshing.store(false, Ordering::SeqCst);
                    ctx.changed.notify_waiters();
                }
            }
        }
    }

    async fn connect(
        self: &Arc<Self>,
        ctx: &Context,
    ) -> Result<RunningService<RoleClient, Handler>, String> {
        let handler = Handler {
            server: self.clone(),
        };
        let lifecycle = ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: None,
        };
        match &self.config.transport {
            Transport::Stdio {
                command, args, env, ..
            } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args)
                    .env_clear()
                    .process_group(0)
                    .kill_on_drop(true);
                for (k, v) in &ctx.vars {
                    if ENV_ALLOWLIST.contains(&k.as_str()) || k.starts_with("LC_") {
                        cmd.env(k, v);
                    }
                }
                cmd.envs(env).current_dir(&ctx.cwd);
                // Spawning blocks until the child has exec'd: off the runtime's threads, so
                // that several servers start side by side and the run goes on meanwhile.
                let spawned = tokio::task::spawn_blocking(move || {
                    rmcp::transport::TokioChildProcess::builder(cmd)
                        .stderr(std::process::Stdio::piped())
                        .spawn()
                })
                .await
                .map_err(|e| format!("cannot start `{command}`: {e}"))?;
                let (proc, stderr) =
                    spawned.map_err(|e| format!("cannot start `{command}`: {e}"))?;
                lock(&self.state).pgid = proc.id().map(|p| p as i32);
                if let Some(stderr) = stderr {
                    tokio::spawn(log_stderr(
                        stderr,
                        ctx.log_dir.clone(),
                        self.config.name.clone(),
                    ));
                }
                handler
                    .serve_with_lifecycle(proc, lifecycle)
                    .await
                    .map_err(|e| format!("handshake failed: {e}"))
            }
            Transport::Http { url, headers } => {
                use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                use rmcp::transport::StreamableHttpClientTransport;
                let mut custom = HashMap::new();
                for (k, v) in headers {
                    let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                        .map_err(|e| format!("bad header name `{k}`: {e}"))?;
                    let value = reqwest::header::HeaderValue::from_str(v)
                        .map_err(|e| format!("bad value for header `{k}`: {e}"))?;
                    custom.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom);
                let transport = StreamableHttpClientTransport::from_config(config);
                handler
                    .serve_with_lifecycle(transport, lifecycle)
                    .await
                    .map_err(|e| format!("cannot connect to {url}: {}", short(&e.to_string())))
                    .map_err(|e| crate::kernel::url::redact_url(&e))
            }
        }
    }

    /// Calls `tool` (its raw name) with `args`: the per-call timeout restarts on progress
    /// (forwarded to `progress`) up to the hard maximum; an abort cancels the call at the server.
    pub(super) async fn call(
        &self,
        tool: &str,
        args: &Value,
        abort: &AbortSignal,
        progress: mpsc::UnboundedSender<ToolOutput>,
    ) -> Result<Value, String> {
        let Some(peer) = lock(&self.state).peer.clone() else {
            return Err(format!(
                "MCP server `{}` is not connected",
                self.config.name
            ));
        };
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = match args {
            Value::Object(m) => Some(m.clone()),
            Value::Null => None,
            other => return Err(format!("arguments must be an object, got {other}")),
        };
        let timeout = self.config.tool_timeout;
        let options = PeerRequestOptions::with_timeout(timeout)
            .reset_timeout_on_progress()
            .with_max_total_timeout(TOOL_HARD_MAX.max(timeout));
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = peer
            .send_cancellable_request(request, options)
            .await
            .map_err(|e| format!("the call could not be sent: {e}"))?;
        let token = serde_json::to_string(&handle.progress_token).unwrap_or_default();
        lock(&self.progress).insert(token.clone(), progress);
        let id = handle.id.clone();
        let response = tokio::select! {
            r = handle.await_response() => Some(r),
            _ = abort.aborted() => None,
        };
        // Progress notifications read before the response are handled in tasks spawned
        // ahead of this one: let them run before the sink goes.
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        lock(&self.progress).remove(&token);
        match response {
            None => {
                let cancel = rmcp::model::CancelledNotification::new(
                    rmcp::model::CancelledNotificationParam::new(
                        Some(id),
                        Some("the user aborted the run".into()),
                    ),
                );
                let _ = peer.send_notification(cancel.into()).await;
                Err("aborted".into())
            }
            Some(Ok(ServerResult::CallToolResult(r))) => {
                serde_json::to_value(&r).map_err(|e| e.to_string())
            }
            Some(Ok(other)) => Err(format!("unexpected answer to tools/call: {other:?}")),
            Some(Err(rmcp::ServiceError::Timeout { timeout })) => Err(format!(
                "the call timed out after {}s without progress",
                timeout.as_secs_f64()
            )),
            Some(Err(e)) => Err(e.to_string()),
        }
    }
}

/// An rmcp transport error without the transport's type name (`… [Type<…>] error: why`).
fn short(e: &str) -> String {
    let e = e
        .trim_end_matches(", when send discover request")
        .trim_end_matches(", when send initialize request");
    match e.rfind("] error: ") {
        Some(at) => e[at + "] error: ".len()..].to_string(),
        None => e.to_string(),
    }
}

/// Lists every page of tools.
async fn list(peer: &Peer<RoleClient>) -> Result<Vec<RawTool>, String> {
    let tools = peer.list_all_tools().await.map_err(|e| e.to_string())?;
    Ok(tools
        .into_iter()
        .filter_map(|t| serde_json::to_value(&t).ok())
        .map(|t| {
            let s = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            RawTool {
                name: s("name"),
                description: s("description"),
                schema: t
                    .get("inputSchema")
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!({"type": "object"})),
                read_only: t
                    .pointer("/annotations/readOnlyHint")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            }
        })
        .collect())
}

/// Copies a child's stderr into `$KEEL_HOME/logs/mcp-<name>.log`, restarting the file past
/// [`MAX_LOG_BYTES`] (the previous one becomes `.1`). Never on the screen.
async fn log_stderr(stderr: tokio::process::ChildStderr, dir: PathBuf, name: String) {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!("mcp-{safe}.log"));
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let mut file = open_log(&dir, &path);
    while let Ok(Some(line)) = lines.next_line().await {
        let Some(f) = file.as_mut() else { continue };
        let over = f
            .metadata()
            .map(|m| m.len() > MAX_LOG_BYTES)
            .unwrap_or(false);
        if over {
            let _ = std::fs::rename(&path, path.with_extension("log.1"));
            file = open_log(&dir, &path);
        }
        if let Some(f) = file.as_mut() {
            let _ = std::io::Write::write_all(f, format!("{line}\n").as_bytes());
        }
    }
}

fn open_log(dir: &Path, path: &Path) -> Option<std::fs::File> {
    crate::kernel::private::create_dir_all(dir).ok()?;
    crate::kernel::private::append_file(path).ok()
}

/// The client side of the connection: routes progress to the open call and marks the tool
/// list stale on `list_changed`.
pub struct Handler {
    server: Arc<Server>,
}

impl ClientHandler for Handler {
    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        let token = serde_json::to_string(&params.progress_token).unwrap_or_default();
        if let Some(tx) = lock(&self.server.progress).get(&token) {
            let mut line = match params.total {
                Some(t) => format!("progress {}/{t}", params.progress),
                None => format!("progress {}", params.progress),
            };
            if let Some(m) = &params.message {
                line.push_str(&format!(": {m}"));
            }
            let _ = tx.send(ToolOutput::ok(line));
        }
        std::future::ready(())
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.server.refreshing.store(true, Ordering::SeqCst);
        self.server.refresh.notify_one();
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("keel", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// How long a stdio server has after SIGTERM before its group is killed, when keel stops.
pub const STOP_GRACE: Duration = Duration::from_millis(500);
