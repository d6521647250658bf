//! One running language server: started in the session's sandbox (the `Launch` path, which
//! gives it a stdin of its own), initialized, its open documents (at most [`MAX_OPEN`], the
//! least recently used closed) and the diagnostics it published, each with the document version
//! it was computed for.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lsp_types::{Diagnostic, ServerCapabilities};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::watch;

use super::config::ServerSpec;
use super::rpc::{Conn, Handler, RpcError};
use super::uri;
use crate::kernel::sandbox::{Launch, Mechanism, Sandbox};
use crate::kernel::tool::ToolEnv;

/// Documents a server keeps open at once (Claude Code's cap).
pub const MAX_OPEN: usize = 50;

/// Where and how servers start: the session's root, sandbox, tool environment and temp dir.
#[derive(Debug, Clone)]
pub struct Place {
    pub root: PathBuf,
    pub sandbox: Arc<Sandbox>,
    pub env: ToolEnv,
    pub temp_dir: PathBuf,
}

/// Diagnostics as published for one document.
#[derive(Debug, Clone, Default)]
pub struct Published {
    pub version: Option<i32>,
    /// The publication's number among all this server sent (1 for the first).
    pub seq: u64,
    pub diagnostics: Vec<Diagnostic>,
}

/// What the reader task shares with the callers.
pub struct Shared {
    diags: Mutex<HashMap<String, Published>>,
    seq: watch::Sender<u64>,
    alive: AtomicBool,
    settings: Option<Value>,
    root_uri: String,
    root_name: String,
}

impl Handler for Shared {
    fn notification(&self, method: &str, params: Option<Value>) {
        if method != "textDocument/publishDiagnostics" {
            return;
        }
        let Some(p) = params
            .and_then(|p| serde_json::from_value::<lsp_types::PublishDiagnosticsParams>(p).ok())
        else {
            return;
        };
        let seq = *self.seq.borrow() + 1;
        lock(&self.diags).insert(
            p.uri.as_str().to_string(),
            Published {
                version: p.version,
                seq,
                diagnostics: p.diagnostics,
            },
        );
        self.seq.send_replace(seq);
    }

    fn request(&self, method: &str, params: Option<Value>) -> Result<Value, ()> {
        match method {
            "workspace/configuration" => {
                let items = params
                    .and_then(|p| serde_json::from_value::<lsp_types::ConfigurationParams>(p).ok())
                    .map(|p| p.items)
                    .unwrap_or_default();
                let values: Vec<Value> = items
                    .iter()
                    .map(|i| section(self.settings.as_ref(), i.section.as_deref()))
                    .collect();
                Ok(Value::Array(values))
            }
            "workspace/workspaceFolders" => {
                Ok(json!([{"uri": self.root_uri, "name": self.root_name}]))
            }
            "client/registerCapability"
            | "client/unregisterCapability"
            | "window/workDoneProgress/create"
            | "window/showMessageRequest"
            | "workspace/diagnostic/refresh"
            | "workspace/semanticTokens/refresh"
            | "workspace/inlayHint/refresh"
            | "workspace/codeLens/refresh" => Ok(Value::Null),
            _ => Err(()),
        }
    }
}

/// The part of `settings` a `workspace/configuration` item names (`a.b`: `settings.a.b`).
fn section(settings: Option<&Value>, name: Option<&str>) -> Value {
    let Some(mut v) = settings else {
        return Value::Null;
    };
    for part in name.unwrap_or("").split('.').filter(|p| !p.is_empty()) {
        match v.get(part) {
            Some(next) => v = next,
            None => return Value::Null,
        }
    }
    v.clone()
}

/// The documents open in a server, least recently used first, and the next version of each
/// document it has seen (versions only grow, across a close and a reopen too).
#[derive(Default)]
struct Docs {
    open: Vec<String>,
    versions: HashMap<String, i32>,
}

/// A running server.
#[allow(dead_code)] // `spec` and `capabilities`: read by the `lsp` tool (next step)
pub struct Server {
    pub spec: ServerSpec,
    conn: Arc<Conn>,
    child: Mutex<Option<Child>>,
    shared: Arc<Shared>,
    docs: tokio::sync::Mutex<Docs>,
    pub capabilities: ServerCapabilities,
    stderr: Arc<Mutex<String>>,
    last_used: Mutex<Instant>,
    /// `stop` was called (it did not crash).
    stopped: AtomicBool,
}

/// What makes two sessions' servers one: the root, the server's name and entry, and the
/// sandbox's mode and mechanism (not the session's private directories).
type Key = (PathBuf, String, String, String);

/// The servers running in this process, shared by the sessions of one root (the daemon's).
static LIVE: std::sync::LazyLock<Mutex<HashMap<Key, std::sync::Weak<Server>>>> =
    std::sync::LazyLock::new(Mutex::default);

fn key(spec: &ServerSpec, place: &Place) -> Key {
    fn json<T: serde::Serialize>(v: &T) -> String {
        serde_json::to_string(v).unwrap_or_default()
    }
    let sandbox = &place.sandbox;
    (
        place.root.clone(),
        spec.name.clone(),
        json(&spec.config),
        format!(
            "{}/{}",
            json(&sandbox.policy.mode),
            sandbox.mechanism.name()
        ),
    )
}

/// Why a server did not start.
#[derive(Debug, Clone)]
pub struct StartError(pub String);

impl Server {
    /// The running server of `spec` in `place` another session of this process started, or
    /// a new one (started in `place`'s sandbox and initialized).
    pub async fn start_or_share(
        spec: &ServerSpec,
        place: &Place,
    ) -> Result<Arc<Server>, StartError> {
        let key = key(spec, place);
        let live = lock(&LIVE).get(&key).and_then(std::sync::Weak::upgrade);
        if let Some(s) = live.filter(|s| s.alive() && !s.was_stopped()) {
            return Ok(s);
        }
        let s = Server::start(spec, place).await?;
        let mut live = lock(&LIVE);
        live.retain(|_, w| w.strong_count() > 0);
        live.insert(key, Arc::downgrade(&s));
        Ok(s)
    }

    /// Starts `spec`'s server in `place`'s sandbox and initializes it.
    pub async fn start(spec: &ServerSpec, place: &Place) -> Result<Arc<Server>, StartError> {
        let (mut child, sandboxed) = spawn(spec, place)?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(StartError("the server has no stdio".into()));
        };
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(mut pipe) = child.stderr.take() {
            let tail = stderr.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = pipe.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    let mut t = lock(&tail);
                    t.push_str(&String::from_utf8_lossy(&buf[..n]));
                    if t.len() > 4096 {
                        let cut = t.len() - 2048;
                        let cut = (cut..t.len()).find(|i| t.is_char_boundary(*i)).unwrap_or(0);
                        t.drain(..cut);
                    }
                }
            });
        }
        let root_uri = uri::from_path(&place.root);
        let shared = Arc::new(Shared {
            diags: Mutex::default(),
            seq: watch::Sender::new(0),
            alive: AtomicBool::new(true),
            settings: spec.config.settings.clone(),
            root_uri: root_uri.clone(),
            root_name: place
                .root
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        });
        let closed = shared.clone();
        let conn = Conn::start(
            Box::new(stdin),
            BufReader::new(stdout),
            shared.clone(),
            move || {
                closed.alive.store(false, Ordering::SeqCst);
                closed.seq.send_modify(|_| {});
            },
        );
        // In the sandbox's own pid namespace keel's pid names no process (or another one), and
        // a server that watches its parent's pid (typescript-language-server) would exit.
        let pid = (!sandboxed).then(std::process::id);
        let init = initialize_params(spec, pid, &root_uri, &shared.root_name);
        let answer = tokio::time::timeout(
            spec.config.startup_timeout(),
            conn.request("initialize", init),
        )
        .await;
        let fail = |what: String| {
            let tail = lock(&stderr).trim().to_string();
            match tail.is_empty() {
                true => StartError(what),
                false => StartError(format!("{what}: {}", last_lines(&tail, 3))),
            }
        };
        let result = match answer {
            Err(_) => {
                return Err(fail(format!(
                    "it did not answer `initialize` within {} ms",
                    spec.config.startup_timeout().as_millis()
                )))
            }
            Ok(Err(e)) => return Err(fail(e.to_string())),
            Ok(Ok(v)) => v,
        };
        #[derive(Deserialize)]
        struct Init {
            #[serde(default)]
            capabilities: ServerCapabilities,
        }
        let caps = serde_json::from_value::<Init>(result)
            .map(|i| i.capabilities)
            .unwrap_or_default();
        let sent = async {
            conn.notify("initialized", json!({})).await?;
            if let Some(settings) = &spec.config.settings {
                conn.notify(
                    "workspace/didChangeConfiguration",
                    json!({ "settings": settings }),
                )
                .await?;
            }
            Ok::<_, RpcError>(())
        };
        sent.await.map_err(|e| fail(e.to_string()))?;
        Ok(Arc::new(Server {
            spec: spec.clone(),
            conn,
            child: Mutex::new(Some(child)),
            shared,
            docs: Default::default(),
            capabilities: caps,
            stderr,
            last_used: Mutex::new(Instant::now()),
            stopped: AtomicBool::new(false),
        }))
    }

    /// Whether it was stopped by keel (idle, or the session's end) rather than crashing.
    pub fn was_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Whether its process still talks.
    pub fn alive(&self) -> bool {
        self.shared.alive.load(Ordering::SeqCst)
    }

    /// The last lines it wrote on stderr.
    pub fn stderr_tail(&self) -> String {
        last_lines(lock(&self.stderr).trim(), 3)
    }

    pub fn touch(&self) {
        *lock(&self.last_used) = Instant::now();
    }

    pub fn idle_for(&self) -> Duration {
        lock(&self.last_used).elapsed()
    }

    pub fn open_documents(&self) -> usize {
        self.docs.try_lock().map(|d| d.open.len()).unwrap_or(0)
    }

    /// The diagnostics currently known, by document URI.
    pub fn all_diagnostics(&self) -> HashMap<String, Published> {
        lock(&self.shared.diags).clone()
    }

    /// Sends `text` as the document's new content (opening it, and closing the least recently
    /// used beyond [`MAX_OPEN`]), then waits at most `timeout` for diagnostics of that version:
    /// a publication with that version or a later one, or, from a server that does not say
    /// versions, the first publication for the document after the change was sent. `None`
    /// when none came in time (or the server stopped).
    pub async fn change_and_wait(
        &self,
        path: &Path,
        language: &str,
        text: String,
        timeout: Duration,
    ) -> Result<Option<Published>, RpcError> {
        self.touch();
        let uri = uri::from_path(path);
        let mut rx = self.shared.seq.subscribe();
        let since = *rx.borrow_and_update();
        let version = self.sync(&uri, language, text).await?;
        let fresh = |p: &Published| match p.version {
            Some(v) => v >= version,
            None => p.seq > since,
        };
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(p) = lock(&self.shared.diags).get(&uri).filter(|p| fresh(p)) {
                return Ok(Some(p.clone()));
            }
            if !self.alive() {
                return Err(RpcError::Closed);
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => continue,
                Ok(Err(_)) => return Err(RpcError::Closed),
                Err(_) => return Ok(None),
            }
        }
    }

    /// Makes sure the document is open with the text on disk (for navigation).
    pub async fn ensure_open(&self, path: &Path, language: &str) -> Result<(), RpcError> {
        self.touch();
        let uri = uri::from_path(path);
        if self.docs.lock().await.open.contains(&uri) {
            return Ok(());
        }
        let text = tokio::fs::read_to_string(path).await.unwrap_or_default();
        self.sync(&uri, language, text).await.map(|_| ())
    }

    /// didOpen or didChange (full text), returning the version sent.
    async fn sync(&self, uri: &str, language: &str, text: String) -> Result<i32, RpcError> {
        let mut docs = self.docs.lock().await;
        let version = {
            let v = docs.versions.entry(uri.to_string()).or_insert(0);
            *v += 1;
            *v
        };
        if let Some(i) = docs.open.iter().position(|u| u == uri) {
            let u = docs.open.remove(i);
            docs.open.push(u);
            self.conn
                .notify(
                    "textDocument/didChange",
                    json!({
                        "textDocument": {"uri": uri, "version": version},
                        "contentChanges": [{"text": text}],
                    }),
                )
                .await?;
            return Ok(version);
        }
        while docs.open.len() >= MAX_OPEN {
            let old = docs.open.remove(0);
            self.conn
                .notify(
                    "textDocument/didClose",
                    json!({"textDocument": {"uri": old}}),
                )
                .await?;
        }
        docs.open.push(uri.to_string());
        self.conn
            .notify(
                "textDocument/didOpen",
                json!({"textDocument": {
                    "uri": uri, "languageId": language, "version": version, "text": text,
                }}),
            )
            .await?;
        Ok(version)
    }

    /// A request, bounded by `timeout`.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, RpcError> {
        self.touch();
        match tokio::time::timeout(timeout, self.conn.request(method, params)).await {
            Ok(r) => r,
            Err(_) => Err(RpcError::Server {
                code: -32803,
                message: format!("no answer within {} s", timeout.as_secs()),
            }),
        }
    }

    /// `shutdown` then `exit` (each given a moment), then the process is killed.
    pub async fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        let quick = Duration::from_millis(1500);
        if self.alive() {
            let _ = tokio::time::timeout(quick, self.conn.request("shutdown", Value::Null)).await;
            let _ = self.conn.notify("exit", Value::Null).await;
        }
        let child = lock(&self.child).take();
        if let Some(mut child) = child {
            if tokio::time::timeout(quick, child.wait()).await.is_err() {
                let _ = child.start_kill();
                let _ = child.wait().await;
            }
        }
    }
}

#[allow(deprecated)]
fn initialize_params(spec: &ServerSpec, pid: Option<u32>, root_uri: &str, name: &str) -> Value {
    json!({
        "processId": pid,
        "clientInfo": {"name": "keel", "version": env!("CARGO_PKG_VERSION")},
        "rootUri": root_uri,
        "rootPath": uri::to_path(root_uri),
        "workspaceFolders": [{"uri": root_uri, "name": name}],
        "initializationOptions": spec.config.initialization_options,
        "capabilities": {
            "workspace": {
                "configuration": true,
                "workspaceFolders": true,
                "didChangeConfiguration": {"dynamicRegistration": false},
                "symbol": {"dynamicRegistration": false},
            },
            "textDocument": {
                "synchronization": {"dynamicRegistration": false, "didSave": false},
                "publishDiagnostics": {"versionSupport": true, "relatedInformation": false},
                "hover": {"contentFormat": ["plaintext", "markdown"]},
                "definition": {"linkSupport": false},
                "implementation": {"linkSupport": false},
                "references": {},
                "documentSymbol": {"hierarchicalDocumentSymbolSupport": true},
                "rename": {"prepareSupport": false},
            },
            "general": {"positionEncodings": ["utf-16"]},
        },
    })
}

/// Starts the server's process: in `place`'s sandbox unless it is off (then `true`).
fn spawn(spec: &ServerSpec, place: &Place) -> Result<(Child, bool), StartError> {
    let c = &spec.config;
    let sandbox = &place.sandbox;
    let enforced = !matches!(sandbox.mechanism, Mechanism::Off | Mechanism::Unenforced);
    let launch = match enforced {
        true => {
            let tmp = crate::kernel::tool::bash::private_tmp(&place.env, &place.temp_dir)
                .map_err(StartError)?;
            let line = std::iter::once(&c.command)
                .chain(c.args.iter())
                .map(|a| quote(a))
                .collect::<Vec<_>>()
                .join(" ");
            sandbox
                .launch("sh", &format!("exec {line}"), &place.root, &tmp)
                .map_err(|e| StartError(e.message))?
        }
        false => None,
    };
    let mut cmd = match &launch {
        Some(Launch { program, args, .. }) => {
            let mut cmd = Command::new(program);
            cmd.args(args);
            cmd
        }
        None => {
            let mut cmd = Command::new(&c.command);
            cmd.args(&c.args);
            cmd
        }
    };
    cmd.current_dir(&place.root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // The Landlock helper leaves the terminal with `setsid`, which a group leader cannot do.
    if !(launch.is_some() && matches!(sandbox.mechanism, Mechanism::Landlock { .. })) {
        cmd.process_group(0);
    }
    place.env.apply(&mut cmd);
    cmd.envs(&c.env);
    if let Some(l) = &launch {
        cmd.envs(l.env.iter().map(|(k, v)| (k, v)));
    }
    let child = cmd
        .spawn()
        .map_err(|e| StartError(format!("cannot start `{}`: {e}", c.command)))?;
    Ok((child, launch.is_some()))
}

/// `s` quoted for `sh`.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join(" / ")
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Opening document 51 closes the least recently used one (the first, unless it was
    /// changed since), and a reopened document's version keeps growing.
    #[tokio::test]
    async fn at_most_max_open_documents_the_least_recently_used_closed() {
        let (ours, mut theirs) = tokio::io::duplex(1 << 20);
        let (_unused, reader) = tokio::io::duplex(64);
        let shared = Arc::new(Shared {
            diags: Mutex::default(),
            seq: watch::Sender::new(0),
            alive: AtomicBool::new(true),
            settings: None,
            root_uri: "file:///w".into(),
            root_name: "w".into(),
        });
        let conn = Conn::start(
            Box::new(ours),
            BufReader::new(reader),
            shared.clone(),
            || {},
        );
        let server = Server {
            spec: ServerSpec {
                name: "t".into(),
                config: Default::default(),
                configured: true,
                hint: None,
            },
            conn,
            child: Mutex::new(None),
            shared,
            docs: Default::default(),
            capabilities: Default::default(),
            stderr: Arc::default(),
            last_used: Mutex::new(Instant::now()),
            stopped: AtomicBool::new(false),
        };
        let uri = |i: usize| format!("file:///w/{i}.py");
        for i in 0..MAX_OPEN {
            server.sync(&uri(i), "python", String::new()).await.unwrap();
        }
        // 0 is used again: 1 is now the least recently used.
        assert_eq!(server.sync(&uri(0), "python", "x".into()).await.unwrap(), 2);
        server
            .sync(&uri(MAX_OPEN), "python", String::new())
            .await
            .unwrap();
        assert_eq!(server.open_documents(), MAX_OPEN);
        // 1, closed, comes back with a later version.
        assert_eq!(
            server.sync(&uri(1), "python", String::new()).await.unwrap(),
            2
        );
        drop(server);
        let mut sent = Vec::new();
        let mut r = BufReader::new(&mut theirs);
        while let Ok(Ok(Some(body))) = tokio::time::timeout(
            Duration::from_millis(100),
            super::super::rpc::read_message(&mut r),
        )
        .await
        {
            let v: Value = serde_json::from_slice(&body).unwrap();
            let method = v["method"].as_str().unwrap().to_string();
            let doc = v["params"]["textDocument"]["uri"]
                .as_str()
                .unwrap()
                .to_string();
            sent.push((method, doc));
        }
        let closed: Vec<_> = sent
            .iter()
            .filter(|(m, _)| m == "textDocument/didClose")
            .map(|(_, d)| d.clone())
            .collect();
        assert_eq!(closed, [uri(1), uri(2)]);
        assert_eq!(sent.len(), MAX_OPEN + 1 + 1 + 1 + 2);
    }
}
