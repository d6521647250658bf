//! Language servers (`DESIGN.md` §22): started lazily on the first file of their language, in
//! the session's sandbox; after `edit` and `write` the change is sent with a new version and
//! the diagnostics of that version (never older ones) are appended to the tool's result,
//! bounded. Servers idle for [`IDLE`] are shut down; one that crashed is restarted on the next
//! request, with a notice. The kernel seam is [`Lsp::annotate`], run by the turn loop after
//! every `edit` and `write` whatever the front end.

pub mod config;
pub mod diag;
mod rpc;
mod server;
mod show;
pub mod tool;
mod uri;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::kernel::abort::AbortSignal;
use crate::kernel::message::Content;
use crate::kernel::tool::ToolOutput;

pub use config::{DiagnosticsMode, LspSettings, ServerConfig, ServerSpec};
pub use diag::{FileDiagnostic, LspReport};
pub use rpc::RpcError;
pub use server::{Place, MAX_OPEN};

use server::Server;

/// A server unused this long is shut down (started again on the next file of its language).
pub const IDLE: Duration = Duration::from_secs(600);

/// A session's language servers.
#[derive(Clone)]
pub struct Lsp {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Lsp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lsp")
            .field("servers", &self.inner.servers.len())
            .finish()
    }
}

struct Inner {
    servers: Vec<ServerSpec>,
    mode: DiagnosticsMode,
    timeout: Duration,
    tool: bool,
    place: Place,
    idle: Duration,
    slots: Vec<tokio::sync::Mutex<Slot>>,
    /// Bumped when a server's state changes.
    changed: tokio::sync::watch::Sender<u64>,
}

/// Where a server stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// Not started yet (it starts on the first file of its language).
    #[default]
    NotStarted,
    Running,
    /// Shut down after being idle; starts again when needed.
    Idle,
    /// It stopped by itself; restarted on the next request.
    Crashed,
    /// Its command is not on `PATH`.
    Missing,
    /// It did not start (not restarted in this session).
    Failed,
}

#[derive(Default)]
struct Slot {
    server: Option<Arc<Server>>,
    state: State,
    last_error: Option<String>,
    told: bool,
}

/// One server as `keel lsp status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    pub name: String,
    pub command: String,
    /// Where the command was found on `PATH` (`None`: missing).
    pub found: Option<PathBuf>,
    /// From the settings (else a built-in default found on `PATH`).
    pub configured: bool,
    pub extensions: Vec<String>,
    pub state: State,
    pub root: PathBuf,
    pub open_documents: usize,
    pub last_error: Option<String>,
}

impl Lsp {
    /// The servers `settings` name (and the defaults found on the tools' `PATH`) for a session
    /// in `place`; `None` when there is none, or diagnostics and the tool are both off.
    pub fn new(settings: &LspSettings, place: Place) -> Option<Lsp> {
        let path = path_var(&place);
        let servers = config::servers(settings, path.as_deref());
        let mode = settings.diagnostics.unwrap_or_default();
        // The tool is in every request's tool list: on by default only where servers are
        // configured, not merely found on PATH (the tool list does not change with the machine).
        let tool = settings.tool.unwrap_or(!settings.servers.is_empty());
        if servers.is_empty() || (mode == DiagnosticsMode::Off && !tool) {
            return None;
        }
        Some(Lsp {
            inner: Arc::new(Inner {
                slots: servers.iter().map(|_| Default::default()).collect(),
                servers,
                mode,
                timeout: Duration::from_millis(settings.diagnostics_timeout.unwrap_or(1500)),
                tool,
                place,
                idle: IDLE,
                changed: tokio::sync::watch::Sender::new(0),
            }),
        })
    }

    /// With servers shut down after `idle` instead of [`IDLE`] (tests).
    pub fn with_idle(self, idle: Duration) -> Lsp {
        match Arc::try_unwrap(self.inner) {
            Ok(mut inner) => {
                inner.idle = idle;
                Lsp {
                    inner: Arc::new(inner),
                }
            }
            Err(inner) => Lsp { inner },
        }
    }

    /// Changes whenever a server's state does (`status` tells the new states).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.changed.subscribe()
    }

    pub fn servers(&self) -> &[ServerSpec] {
        &self.inner.servers
    }

    /// Whether the model gets the `lsp` tool.
    pub fn tool_enabled(&self) -> bool {
        self.inner.tool
    }

    pub fn root(&self) -> &Path {
        &self.inner.place.root
    }

    /// Each server's state.
    pub async fn status(&self) -> Vec<ServerStatus> {
        let path = path_var(&self.inner.place);
        let mut out = Vec::new();
        for (spec, slot) in self.inner.servers.iter().zip(&self.inner.slots) {
            let slot = slot.lock().await;
            out.push(ServerStatus {
                name: spec.name.clone(),
                command: spec.config.command.clone(),
                found: config::find_program(&spec.config.command, path.as_deref()),
                configured: spec.configured,
                extensions: spec.config.extension_to_language.keys().cloned().collect(),
                state: slot.state,
                root: self.inner.place.root.clone(),
                open_documents: slot.server.as_ref().map_or(0, |s| s.open_documents()),
                last_error: slot.last_error.clone(),
            });
        }
        out
    }

    /// The running server for `path`'s language (started, or restarted after a crash, now),
    /// with a note for the model; `Err` with the note (once) when there is none.
    async fn server_for(
        &self,
        path: &Path,
    ) -> Option<Result<(Arc<Server>, String, Option<String>), Option<String>>> {
        let (i, language) = config::language_of(&self.inner.servers, path)?;
        Some(
            self.start_slot(i)
                .await
                .map(|(server, note)| (server, language, note)),
        )
    }

    /// Starts every server now, one after the other (`keel lsp status --start`).
    pub async fn start_all(&self) {
        for i in 0..self.inner.servers.len() {
            let _ = self.start_slot(i).await;
        }
    }

    /// Server `i`, running (started, or restarted after a crash, now), with a note for the
    /// model; `Err` with the note (once) when it cannot run.
    async fn start_slot(&self, i: usize) -> Result<(Arc<Server>, Option<String>), Option<String>> {
        let before = self.inner.slots[i].lock().await.state;
        let started = self.start_slot_inner(i).await;
        if self.inner.slots[i].lock().await.state != before {
            self.inner.changed.send_modify(|n| *n += 1);
        }
        started
    }

    async fn start_slot_inner(
        &self,
        i: usize,
    ) -> Result<(Arc<Server>, Option<String>), Option<String>> {
        let spec = &self.inner.servers[i];
        let mut slot = self.inner.slots[i].lock().await;
        let mut note = None;
        if let Some(s) = slot.server.clone() {
            if s.alive() {
                return Ok((s, None));
            }
        }
        // Stopped by keel (idle, in another session sharing it): started again, no notice.
        if slot.server.as_ref().is_some_and(|s| s.was_stopped()) {
            slot.server = None;
            slot.state = State::Idle;
        }
        if let Some(s) = slot.server.clone() {
            let tail = s.stderr_tail();
            slot.server = None;
            slot.state = State::Crashed;
            slot.last_error = Some(match tail.is_empty() {
                true => "it stopped".into(),
                false => format!("it stopped: {tail}"),
            });
            note = Some(format!(
                "(The {} language server had stopped; it was restarted.)",
                spec.name
            ));
        }
        if matches!(slot.state, State::Failed | State::Missing) {
            return Err(None);
        }
        let path_var = path_var(&self.inner.place);
        if config::find_program(&spec.config.command, path_var.as_deref()).is_none() {
            slot.state = State::Missing;
            slot.last_error = Some(format!("`{}` was not found on PATH", spec.config.command));
            let hint = spec
                .hint
                .map(|h| format!("; install it ({h}) to get diagnostics"))
                .unwrap_or_default();
            let note = format!(
                "(The {} language server is configured but `{}` was not found on PATH{hint}. keel never downloads one.)",
                spec.name, spec.config.command
            );
            return Err((!std::mem::replace(&mut slot.told, true)).then_some(note));
        }
        match Server::start_or_share(spec, &self.inner.place).await {
            Ok(s) => {
                slot.server = Some(s.clone());
                slot.state = State::Running;
                self.watch_idle(i, &s);
                Ok((s, note))
            }
            Err(e) => {
                slot.state = State::Failed;
                slot.last_error = Some(e.0.clone());
                let note = format!("(The {} language server did not start: {})", spec.name, e.0);
                Err((!std::mem::replace(&mut slot.told, true)).then_some(note))
            }
        }
    }

    /// Shuts `server` down once it was unused for the idle time (no timer runs more often
    /// than that: an idle session costs no CPU).
    fn watch_idle(&self, i: usize, server: &Arc<Server>) {
        let (inner, weak): (Weak<Inner>, Weak<Server>) =
            (Arc::downgrade(&self.inner), Arc::downgrade(server));
        let idle = self.inner.idle;
        tokio::spawn(async move {
            loop {
                let Some(s) = weak.upgrade() else { return };
                let left = idle.saturating_sub(s.idle_for());
                drop(s);
                if !left.is_zero() {
                    tokio::time::sleep(left).await;
                    continue;
                }
                let Some(inner) = inner.upgrade() else { return };
                let mut slot = inner.slots[i].lock().await;
                let same = slot
                    .server
                    .as_ref()
                    .is_some_and(|s| Weak::ptr_eq(&Arc::downgrade(s), &weak));
                if same {
                    if let Some(s) = slot.server.take() {
                        slot.state = State::Idle;
                        drop(slot);
                        s.stop().await;
                        inner.changed.send_modify(|n| *n += 1);
                    }
                }
                return;
            }
        });
    }

    /// What the language server says about `path` after an edit: the diagnostics of the new
    /// version, or a note. `None`: no server for that language, or diagnostics are off.
    pub async fn after_edit(&self, path: &Path, abort: &AbortSignal) -> Option<LspReport> {
        if self.inner.mode == DiagnosticsMode::Off {
            return None;
        }
        let (i, _) = config::language_of(&self.inner.servers, path)?;
        let name = self.inner.servers[i].name.clone();
        let noted = |note: String| LspReport {
            server: name.clone(),
            note: Some(note),
            ..LspReport::default()
        };
        let (server, language, note) = match self.server_for(path).await? {
            Ok(found) => found,
            Err(note) => return note.map(noted),
        };
        let text = tokio::fs::read_to_string(path).await.ok()?;
        let uri = uri::from_path(path);
        let before = diag::error_keys(&server.all_diagnostics(), &uri);
        let waited = tokio::select! {
            _ = abort.aborted() => return None,
            w = server.change_and_wait(path, &language, text, self.inner.timeout) => w,
        };
        let join = |a: Option<String>, b: String| match a {
            Some(a) => format!("{a}\n{b}"),
            None => b,
        };
        match waited {
            Ok(Some(published)) => {
                let mut r = diag::report(
                    &name,
                    (path, &published),
                    &server.all_diagnostics(),
                    &before,
                    self.root(),
                    self.inner.mode,
                );
                r.note = note;
                Some(r)
            }
            Ok(None) => Some(LspReport {
                timed_out: true,
                ..noted(join(
                    note,
                    format!(
                        "({name} sent no diagnostics for this change within {} ms; none are shown.)",
                        self.inner.timeout.as_millis()
                    ),
                ))
            }),
            Err(_) => {
                let tail = server.stderr_tail();
                let said = match tail.is_empty() {
                    true => String::new(),
                    false => format!(" It said: {tail}"),
                };
                Some(noted(join(
                    note,
                    format!("(The {name} language server stopped while checking this change.{said})"),
                )))
            }
        }
    }

    /// `output` of an `edit` or `write` with what the language server says about the file it
    /// changed: the text appended for the model, the report in `details.lsp`.
    pub async fn annotate(&self, mut output: ToolOutput, abort: &AbortSignal) -> ToolOutput {
        #[derive(Deserialize)]
        struct Changed {
            path: PathBuf,
        }
        let Some(details) = output.details.as_ref() else {
            return output;
        };
        let Ok(changed) = serde_json::from_value::<Changed>(details.clone()) else {
            return output;
        };
        let Some(report) = self.after_edit(&changed.path, abort).await else {
            return output;
        };
        if let Some(text) = diag::text(&report) {
            match output.content.iter_mut().find_map(|c| match c {
                Content::Text { text } => Some(text),
                _ => None,
            }) {
                Some(t) => {
                    t.push_str("\n\n");
                    t.push_str(&text);
                }
                None => output.content.push(Content::text(text)),
            }
        }
        if let (Some(serde_json::Value::Object(d)), Ok(v)) =
            (output.details.as_mut(), serde_json::to_value(&report))
        {
            d.insert("lsp".into(), v);
        }
        output
    }

    /// Stops every running server (`shutdown`, `exit`, then a kill).
    pub async fn shutdown(&self) {
        for slot in &self.inner.slots {
            let server = slot.lock().await.server.take();
            if let Some(s) = server {
                s.stop().await;
            }
        }
    }
}

/// The tools' `PATH`.
fn path_var(place: &Place) -> Option<String> {
    place
        .env
        .resolved()
        .into_iter()
        .find(|(k, _)| k == "PATH")
        .and_then(|(_, v)| v.into_string().ok())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn fake_lsp(root: &Path, idle: Duration) -> Option<Lsp> {
        let python = Path::new("/usr/bin/python3");
        if !python.exists() {
            return None;
        }
        let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/lsp/fake_server.py");
        let settings: LspSettings = serde_json::from_value(serde_json::json!({
            "servers": {"fake": {"command": python, "args": [fake],
                "extensionToLanguage": {".py": "python"}, "env": {"FAKE_MODE": "report"}}},
            "defaults": false, "diagnosticsTimeout": 20000
        }))
        .unwrap();
        let place = Place {
            root: root.to_path_buf(),
            sandbox: Arc::new(crate::kernel::sandbox::Sandbox::off(root)),
            env: Default::default(),
            temp_dir: root.to_path_buf(),
        };
        Some(Lsp::new(&settings, place).unwrap().with_idle(idle))
    }

    /// Two sessions of one root (the daemon's) share one server; one of another root does
    /// not.
    #[tokio::test]
    async fn sessions_of_one_root_share_a_server() {
        let (d, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (Some(a), Some(b), Some(c)) = (
            fake_lsp(d.path(), IDLE),
            fake_lsp(d.path(), IDLE),
            fake_lsp(other.path(), IDLE),
        ) else {
            return;
        };
        let never = AbortSignal::never();
        for (lsp, dir) in [(&a, d.path()), (&b, d.path()), (&c, other.path())] {
            let file = dir.join("a.py");
            std::fs::write(&file, "x = 1\n").unwrap();
            assert_eq!(lsp.after_edit(&file, &never).await.unwrap().file.len(), 1);
        }
        let server = |lsp: &Lsp| {
            let lsp = lsp.clone();
            async move { lsp.inner.slots[0].lock().await.server.clone().unwrap() }
        };
        assert!(Arc::ptr_eq(&server(&a).await, &server(&b).await));
        assert!(!Arc::ptr_eq(&server(&a).await, &server(&c).await));
        a.shutdown().await;
        c.shutdown().await;
        // b's server was stopped by a: started again without a crash notice.
        let file = d.path().join("a.py");
        let r = b.after_edit(&file, &never).await.unwrap();
        assert_eq!((r.file.len(), r.note), (1, None));
        b.shutdown().await;
    }

    /// A server unused for the idle time is shut down, and the next edit starts it again.
    #[tokio::test]
    async fn an_idle_server_is_shut_down_and_started_again_when_needed() {
        let d = tempfile::tempdir().unwrap();
        let Some(lsp) = fake_lsp(d.path(), Duration::from_millis(300)) else {
            return;
        };
        let file = d.path().join("a.py");
        std::fs::write(
            &file, "x = 1
",
        )
        .unwrap();
        let state = |lsp: &Lsp| {
            let lsp = lsp.clone();
            async move { lsp.status().await[0].state }
        };
        let mut changes = lsp.subscribe();
        let never = AbortSignal::never();
        let r = lsp.after_edit(&file, &never).await.unwrap();
        assert_eq!(r.file.len(), 1, "{r:?}");
        assert_eq!(state(&lsp).await, State::Running);
        let idle = async {
            while state(&lsp).await != State::Idle {
                changes.changed().await.unwrap();
            }
        };
        tokio::time::timeout(Duration::from_secs(20), idle)
            .await
            .expect("the server was not shut down when idle");
        assert_eq!(lsp.status().await[0].open_documents, 0);
        let r = lsp.after_edit(&file, &never).await.unwrap();
        assert_eq!((r.file.len(), r.note), (1, None));
        assert_eq!(state(&lsp).await, State::Running);
        lsp.shutdown().await;
    }
}
