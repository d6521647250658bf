//! One client connection of the daemon: protocol v2 (`DESIGN.md` §10.3) over newline-delimited
//! JSON-RPC 2.0. `daemon/hello` first; then daemon methods, `session/*`, `schedule/*` and every
//! pi command (with `sessionId`). `daemon/notice` goes to every connection. Events of attached
//! sessions arrive as `session/event` notifications through one bounded queue; a reply is
//! written only after the events its command caused. A client that stops reading is dropped
//! with `daemon/lagged`; pi commands and `session/open` are served in tasks, and a connection
//! holding too many of them or too many bytes of answers reads no more requests (`later.rs`).
//! Bad input gets an error and the connection stays open (except after -32010 and -32011). When a command makes a session
//! serve another one (`new_session`, `switch_session`, `fork`, `clone`), each attached client
//! gets `session/replaced` and its attachment follows; a request this client sent before it
//! was told still reaches the session it named.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{json, Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot};

use super::server::Shared;
use crate::host::actor::{Call, DialogAnswer, SessionHandle};
use crate::host::stream::{Cursor, Delivery, Item, Lagged, Start, QUEUE};
use crate::kernel::sandbox::inside::Inside;
use crate::wire::jsonl::{Frame, LineDecoder, MAX_LINE_BYTES};
use crate::wire::jsonrpc::{self as j, ErrorObject, Id, Incoming};
use crate::wire::pi::{Command, CommandName};
use crate::wire::protocol::daemon::{
    DaemonInfo, Hello, HelloParams, HelloResult, LiveSession, RunState, StatusResult,
};
use crate::wire::protocol::notify::{self, Replaced, Shutdown};
use crate::wire::protocol::session::{
    self, AttachMode, AttachParams, AttachResult, ListParams, ListResult,
};
use crate::wire::protocol::{Empty, Method, NoParams, Notification, Request, SessionRef, PROTOCOL};

mod later;
#[cfg(test)]
mod tests;
use later::{Back, Later};

/// How long one write to a client may block before the connection is closed.
pub const WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// How long `session/close` lets the session's last writes settle.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// What a method call ends in.
enum Outcome {
    /// The response line (a result, or the error its result became if it could not be
    /// encoded).
    Line(String),
    Error(ErrorObject),
    /// Answered later (a pi command, `session/open`), through the connection's [`Later`].
    Later,
    /// Write this error, then close the connection.
    Fatal(ErrorObject),
    /// Write this response line, then stop the daemon.
    Stop(String),
}

impl Outcome {
    /// The answer to request `id`: its typed result, or an error.
    fn reply<T: Serialize>(id: &Id, r: Result<T, ErrorObject>) -> Outcome {
        match r {
            Ok(result) => Outcome::Line(j::result_line(id, &result)),
            Err(e) => Outcome::Error(e),
        }
    }
}

struct Conn {
    shared: Arc<Shared>,
    client: u64,
    hello: bool,
    interactive: bool,
    /// Why the client is taken to run inside a keel sandbox (then its hello is refused).
    sandboxed: Option<Inside>,
    /// Whether this is a socket connection (counted in `Shared::clients`; `daemon/status`
    /// leaves the asker out).
    counted: bool,
    /// Attached sessions (by the id this client was last told) and their lagged flags.
    attached: HashMap<String, (SessionHandle, Arc<Lagged>)>,
    queue_tx: mpsc::Sender<Delivery>,
    later: Later,
}

/// Serves one accepted connection until the client goes away, is dropped, or the daemon ends.
/// `sandboxed`: why the client is taken to run inside a keel sandbox (see
/// [`crate::kernel::sandbox::inside`]); such a client's hello is refused with -32015.
pub async fn serve(stream: UnixStream, shared: Arc<Shared>, sandboxed: Option<Inside>) {
    shared.clients.fetch_add(1, Ordering::Relaxed);
    let client = shared.next();
    let (mut read, mut write) = stream.into_split();
    // Room for a whole ring's replay plus the usual backlog (a channel allocates as it fills).
    let (queue_tx, mut queue_rx) = mpsc::channel::<Delivery>(shared.options.ring.0 + QUEUE);
    let (later, mut backs) = Later::new();
    let mut shutdown = shared.shutdown.subscribe();
    let mut notices = shared.notices.subscribe();
    let mut conn = Conn {
        shared: shared.clone(),
        client,
        hello: false,
        interactive: false,
        sandboxed,
        counted: true,
        attached: HashMap::new(),
        queue_tx,
        later,
    };
    let mut decoder = LineDecoder::new(MAX_LINE_BYTES);
    let mut buf = vec![0u8; 64 * 1024];
    // Requests read and not taken yet. They are taken while the connection has room for their
    // answers (`later.rs`); until they all are, nothing more is read from the client.
    let mut frames = VecDeque::new();
    let mut out = Vec::new();
    loop {
        out.clear();
        let mut end = false;
        if !frames.is_empty() && conn.later.room(0) {
            end = conn.take(&mut frames, &mut out).await;
        } else {
            tokio::select! {
                biased;
                reason = shutdown.recv() => {
                    let reason = reason.unwrap_or_else(|_| "stopped".into());
                    let line = Notification::Shutdown(Shutdown { reason }).line();
                    if let Ok(line) = line {
                        let _ = write.write_all(line.as_bytes()).await;
                    }
                    break;
                }
                Ok(notice) = notices.recv() => {
                    if let Ok(line) = Notification::Notice(notice).line() {
                        out.extend_from_slice(line.as_bytes());
                    }
                }
                Some(back) = backs.recv() => conn.answered(back, &mut queue_rx, &mut out),
                Some(d) = queue_rx.recv() => {
                    conn.deliver(&d, &mut out);
                    // Written in batches of at most about OUT_BYTES; the rest wait in the queue.
                    while out.len() < later::OUT_BYTES {
                        let Ok(d) = queue_rx.try_recv() else { break };
                        conn.deliver(&d, &mut out);
                    }
                }
                n = read.read(&mut buf), if frames.is_empty() && conn.later.room(0) => match n {
                    Ok(0) | Err(_) => {
                        // What the client sent before it went is answered as far as it can be.
                        frames.extend(decoder.finish());
                        while let Some(frame) = frames.pop_front() {
                            let _ = conn.frame(&frame, &mut out).await;
                        }
                        end = true;
                    }
                    Ok(n) => {
                        let mut read_now = Vec::new();
                        decoder.push(&buf[..n], &mut read_now);
                        frames.extend(read_now);
                    }
                },
            }
        }
        // A client that takes no bytes for this long is gone for our purposes: its session
        // queues have dropped it already; free the connection.
        if !out.is_empty() {
            match tokio::time::timeout(WRITE_TIMEOUT, write.write_all(&out)).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => break,
            }
        }
        if end {
            break;
        }
        if let Some((session, seq)) = conn.lagged() {
            let lagged = notify::Lagged {
                session_id: session,
                seq,
            };
            if let Ok(line) = Notification::Lagged(lagged).line() {
                let _ = write.write_all(line.as_bytes()).await;
            }
            break;
        }
    }
    for (_, (handle, _)) in conn.attached.drain() {
        handle.send(Call::Detach { client });
        shared.journal_fact("detached", &handle.session_id(), client);
    }
    shared.clients.fetch_sub(1, Ordering::Relaxed);
    shared.gone.notify_waiters();
}

/// Serves one protocol v2 request line that came without a connection (the journal's
/// `keel.cmd.<host>` service): the same dispatch as a socket connection's, as if on one that
/// already said `daemon/hello` with `interactive: true`; the answer is the line the socket
/// would write (for a pi command, once it is answered). `daemon/hello`, `session/attach` and
/// `session/detach` belong to a connection and are refused (events are in the journal).
pub async fn one_request(shared: Arc<Shared>, line: &[u8]) -> Vec<u8> {
    let (queue_tx, _queue_rx) = mpsc::channel::<Delivery>(1);
    let (later, mut backs) = Later::new();
    let mut conn = Conn {
        client: shared.next(),
        shared,
        hello: true,
        interactive: true,
        sandboxed: None,
        counted: false,
        attached: HashMap::new(),
        queue_tx,
        later,
    };
    let mut out = Vec::new();
    let mut frames = Vec::new();
    let mut decoder = LineDecoder::new(MAX_LINE_BYTES);
    decoder.push(line, &mut frames);
    if let Some(f) = decoder.finish() {
        frames.push(f);
    }
    let [frame] = frames.as_slice() else {
        let e = ErrorObject::new(j::INVALID_REQUEST, "send exactly one request line");
        return j::error_object_line(None, &e).into_bytes();
    };
    if let Incoming::Request { id, method, .. } = j::parse_frame(frame, MAX_LINE_BYTES) {
        if [Hello::NAME, session::Attach::NAME, session::Detach::NAME].contains(&method.as_str()) {
            let e = ErrorObject::new(
                j::METHOD_NOT_FOUND,
                format!(
                    "{method} needs a connection: over NATS, read the session's events \
                     from the journal (keel.events.>)"
                ),
            );
            return j::error_object_line(Some(&id), &e).into_bytes();
        }
    }
    let _ = conn.frame(frame, &mut out).await;
    // Only a request still being served holds a sender of later answers now.
    drop(conn);
    if out.is_empty() {
        if let Some(Back::Pi { line, .. } | Back::Line(line)) = backs.recv().await {
            out.extend_from_slice(line.as_bytes());
        }
    }
    out
}

/// `session/event {sessionId, epoch, seq, event}`: the wire event is copied in as it is.
fn event_line(d: &Delivery, event: &crate::host::Published, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"session/event\",\"params\":");
    event_params(&d.session, &d.epoch, event, out);
    out.extend_from_slice(b"}\n");
}

/// The params of `session/event`, `{"sessionId":…,"epoch":…,"seq":…,"event":…}`: the bytes
/// every client gets and the event journal publishes.
pub fn event_params(session: &str, epoch: &str, event: &crate::host::Published, out: &mut Vec<u8>) {
    event_params_head(session, epoch, out);
    out.extend_from_slice(itoa::Buffer::new().format(event.seq).as_bytes());
    out.extend_from_slice(b",\"event\":");
    out.extend_from_slice(event.line.as_bytes());
    out.push(b'}');
}

/// What [`event_params`] writes before the `seq`: `{"sessionId":…,"epoch":…,"seq":` (the same
/// for every event of a session in one epoch).
pub fn event_params_head(session: &str, epoch: &str, out: &mut Vec<u8>) {
    // Writing a string into a Vec cannot fail.
    out.extend_from_slice(b"{\"sessionId\":");
    let _ = serde_json::to_writer(&mut *out, session);
    out.extend_from_slice(b",\"epoch\":");
    let _ = serde_json::to_writer(&mut *out, epoch);
    out.extend_from_slice(b",\"seq\":");
}

impl Conn {
    /// Writes a delivery of an attached session. `session/replaced` also moves this client's
    /// attachment to the new id: from here on it names the session by that id.
    fn deliver(&mut self, d: &Delivery, out: &mut Vec<u8>) {
        let (new, seq) = match &d.item {
            Item::Event(event) => return event_line(d, event, out),
            Item::Replaced { new, seq } => (new, *seq),
        };
        if let Some(attached) = self.attached.remove(&*d.session) {
            self.attached.insert(new.to_string(), attached);
        }
        let replaced = Replaced {
            session_id: d.session.to_string(),
            new_session_id: new.to_string(),
            epoch: d.epoch.to_string(),
            seq,
        };
        if let Ok(line) = Notification::Replaced(replaced).line() {
            out.extend_from_slice(line.as_bytes());
        }
    }

    /// Takes requests read earlier while the connection has room for their answers; true when
    /// one of them closes the connection.
    async fn take(&mut self, frames: &mut VecDeque<Frame>, out: &mut Vec<u8>) -> bool {
        while self.later.room(out.len()) {
            let Some(frame) = frames.pop_front() else {
                break;
            };
            if self.frame(&frame, out).await.is_err() {
                return true;
            }
        }
        false
    }

    /// Writes an answer that came later; a pi command's after the events its session published
    /// before it and before the later ones.
    fn answered(&mut self, back: Back, queue: &mut mpsc::Receiver<Delivery>, out: &mut Vec<u8>) {
        self.later.taken(&back);
        let (stream, head, line) = match back {
            Back::Line(line) => return out.extend_from_slice(line.as_bytes()),
            Back::Pi { stream, head, line } => (stream, head, line),
        };
        let mut after = Vec::new();
        while let Ok(d) = queue.try_recv() {
            if d.stream == stream && d.seq() > head {
                after.push(d);
            } else if after.is_empty() {
                self.deliver(&d, out);
            } else {
                after.push(d);
            }
        }
        out.extend_from_slice(line.as_bytes());
        for d in &after {
            self.deliver(d, out);
        }
    }

    /// Handles one framed line; `Err` closes the connection (after what was written).
    async fn frame(&mut self, frame: &Frame, out: &mut Vec<u8>) -> Result<(), ()> {
        let (id, method, params) = match j::parse_frame(frame, MAX_LINE_BYTES) {
            Incoming::Request { id, method, params } => (Some(id), method, params),
            Incoming::Notification { method, params } => (None, method, params),
            Incoming::Response { .. } => return Ok(()), // the daemon sends no requests
            Incoming::Invalid(e) => {
                out.extend_from_slice(e.line().as_bytes());
                return Ok(());
            }
        };
        let Some(id) = id else {
            // Notifications: none are defined; unknown ones are ignored.
            tracing::debug!("notification {method} ignored");
            return Ok(());
        };
        self.shared.pending.fetch_add(1, Ordering::Relaxed);
        let outcome = self.call(&id, &method, params.as_deref()).await;
        self.shared.pending.fetch_sub(1, Ordering::Relaxed);
        match outcome {
            Outcome::Line(line) => out.extend_from_slice(line.as_bytes()),
            Outcome::Error(e) => {
                out.extend_from_slice(j::error_object_line(Some(&id), &e).as_bytes())
            }
            Outcome::Later => {}
            Outcome::Fatal(e) => {
                out.extend_from_slice(j::error_object_line(Some(&id), &e).as_bytes());
                return Err(());
            }
            Outcome::Stop(line) => {
                out.extend_from_slice(line.as_bytes());
                let _ = self.shared.stop.send(true);
            }
        }
        Ok(())
    }

    async fn call(
        &mut self,
        id: &Id,
        method: &str,
        params: Option<&serde_json::value::RawValue>,
    ) -> Outcome {
        if let Some(answer) = self.hello_gate(id, method, params) {
            return answer;
        }
        match Request::decode(method, params) {
            Ok(request) => self.dispatch(id, request).await,
            Err(e) => Outcome::Error(e),
        }
    }

    /// `daemon/hello` first, and only once: the answer to a request that is not let through.
    fn hello_gate(
        &mut self,
        id: &Id,
        method: &str,
        params: Option<&serde_json::value::RawValue>,
    ) -> Option<Outcome> {
        if !self.hello {
            if method != Hello::NAME {
                return Some(Outcome::Fatal(ErrorObject::new(
                    j::HELLO_FIRST,
                    format!("daemon/hello must be the first request on a connection, not {method}"),
                )));
            }
            return Some(match j::params(params) {
                Ok(hello) => self.hello(id, hello),
                Err(e) => Outcome::Error(e),
            });
        }
        (method == Hello::NAME).then(|| {
            Outcome::Error(ErrorObject::new(
                j::INVALID_REQUEST,
                "daemon/hello was already sent on this connection",
            ))
        })
    }

    /// Serves a decoded request (every method of protocol v2, and pi commands).
    async fn dispatch(&mut self, id: &Id, request: Request) -> Outcome {
        match request {
            // Answered above: only the first request of a connection is a hello.
            Request::Hello(_) => Outcome::Error(ErrorObject::new(
                j::INVALID_REQUEST,
                "daemon/hello was already sent on this connection",
            )),
            Request::Ping(NoParams) => Outcome::reply(id, Ok(Empty {})),
            Request::Status(NoParams) => Outcome::reply(id, Ok(self.status().await)),
            Request::Stop(stop) => {
                if !stop.force && self.any_running().await {
                    return Outcome::Error(ErrorObject::new(
                        j::COMMAND_FAILED,
                        "a run is active; stop it first, or pass force:true (keel daemon stop --force)",
                    ));
                }
                Outcome::Stop(j::result_line(id, &Empty {}))
            }
            Request::Open(open) => {
                self.later.open(&self.shared, id.clone(), *open);
                Outcome::Later
            }
            Request::ScheduleReload(NoParams) => {
                Outcome::reply(id, crate::daemon::scheduler::reload_method(&self.shared))
            }
            Request::ScheduleRun(run) => Outcome::reply(
                id,
                crate::daemon::scheduler::run_method(&self.shared, run).await,
            ),
            Request::Attach(a) => Outcome::reply(id, self.attach(a).await),
            Request::Detach(r) => Outcome::reply(id, Ok(self.detach(r))),
            Request::Close(r) => Outcome::reply(id, self.close(r).await),
            Request::List(l) => Outcome::reply(id, self.list(l).await),
            Request::Pi(call) => {
                self.pi_command(id, &call.command, call.params.as_deref())
                    .await
            }
        }
    }

    fn detach(&mut self, r: SessionRef) -> Empty {
        if let Some((h, _)) = self.attached.remove(&r.session_id) {
            h.send(Call::Detach {
                client: self.client,
            });
            self.shared
                .journal_fact("detached", &h.session_id(), self.client);
        }
        Empty {}
    }

    /// Ends a live session that nothing else uses: saved, released, gone from the daemon
    /// (the next `--continue` or `--resume` opens it from its file). A session with a run
    /// going, or shown by another client, is -32013.
    /// `session/list {cwd}`: the saved sessions of `cwd` and of every directory, newest first,
    /// as the TUI's picker shows them (for a client on another machine, whose files are here).
    async fn list(&self, r: ListParams) -> Result<ListResult, ErrorObject> {
        let home = self.shared.options.keel_home.clone();
        tokio::task::spawn_blocking(move || {
            let here =
                crate::kernel::session::list(&crate::kernel::session::session_dir(&home, &r.cwd));
            let all = crate::kernel::session::list_all(&home);
            ListResult { here, all }
        })
        .await
        .map_err(|e| ErrorObject::new(j::COMMAND_FAILED, e.to_string()))
    }

    async fn close(&mut self, r: SessionRef) -> Result<Empty, ErrorObject> {
        let handle = self.target(&r.session_id).await?;
        let Some(status) = handle.status().await else {
            return Err(ErrorObject::new(
                j::UNKNOWN_SESSION,
                "the session has ended",
            ));
        };
        let mine = usize::from(self.attached.contains_key(&r.session_id));
        let busy = if status.summary.running {
            Some("a run is active; abort it first".to_string())
        } else if status.clients > mine {
            Some(format!(
                "{} other client(s) show this session; they must detach first",
                status.clients - mine
            ))
        } else {
            None
        };
        if let Some(why) = busy {
            return Err(ErrorObject::new(
                j::SESSION_BUSY,
                format!("session {} cannot be closed: {why}", r.session_id),
            ));
        }
        self.attached.remove(&r.session_id);
        self.shared.forget(&handle).await;
        handle.stop(CLOSE_GRACE).await;
        if let Some(j) = &self.shared.journal {
            j.fact("closed", &handle.session_id(), json!({"reason": "closed"}));
        }
        Ok(Empty {})
    }

    fn hello(&mut self, id: &Id, hello: HelloParams) -> Outcome {
        if let Some(why) = &self.sandboxed {
            tracing::warn!(
                "client {} ({}) refused: {why}",
                self.client,
                hello.client.name
            );
            return Outcome::Fatal(ErrorObject::new(
                j::SANDBOXED_PEER,
                format!(
                    "this client runs inside a keel sandbox ({why}): the daemon takes no \
                     request from inside one"
                ),
            ));
        }
        if hello.protocol_version != PROTOCOL {
            let mut e = ErrorObject::new(
                j::VERSION_MISMATCH,
                format!(
                    "protocol version mismatch (client {}, daemon {PROTOCOL}): this daemon is \
                     keel {}; stop it (`keel daemon stop`, sessions are saved) so this keel \
                     starts its own, or use keel {0} to reach it",
                    hello.protocol_version,
                    env!("CARGO_PKG_VERSION"),
                ),
            );
            e.data = Some(json!({
                "clientProtocol": hello.protocol_version,
                "daemonProtocol": PROTOCOL,
                "daemonVersion": env!("CARGO_PKG_VERSION"),
            }));
            return Outcome::Fatal(e);
        }
        tracing::debug!(
            "client {} ({} {})",
            self.client,
            hello.client.name,
            hello.client.version
        );
        self.hello = true;
        self.interactive = hello.interactive;
        let s = &self.shared;
        let result = HelloResult {
            protocol_version: PROTOCOL,
            daemon: DaemonInfo {
                version: env!("CARGO_PKG_VERSION").to_string(),
                pid: s.pid,
                started_at: s.started_at.clone(),
                keel_home: s.options.keel_home.display().to_string(),
                socket: s.options.socket.display().to_string(),
            },
        };
        Outcome::reply(id, Ok(result))
    }

    async fn handles(&self) -> Vec<SessionHandle> {
        self.shared
            .sessions
            .lock()
            .await
            .values()
            .cloned()
            .collect()
    }

    async fn any_running(&self) -> bool {
        for h in self.handles().await {
            if h.status().await.is_some_and(|s| s.summary.running) {
                return true;
            }
        }
        false
    }

    async fn status(&self) -> StatusResult {
        let mut sessions = Vec::new();
        for h in self.handles().await {
            let Some(s) = h.status().await else { continue };
            let state = if s.summary.running {
                RunState::Running
            } else {
                RunState::Idle
            };
            sessions.push(LiveSession {
                session_id: s.summary.session_id,
                cwd: s.summary.cwd,
                name: s.summary.name,
                first_prompt: s.summary.first_prompt,
                state,
                clients: s.clients,
                epoch: s.epoch,
                seq: s.seq,
                age_ms: s.live_for.as_millis() as u64,
                session_file: s.summary.file,
                parent_session_id: s.summary.parent_session_id,
                sandbox: Some(s.summary.sandbox),
                jobs: s.summary.jobs,
                worktree: s.summary.worktree.as_ref().map(|w| w.0.clone()),
                branch: s.summary.worktree.map(|w| w.1),
            });
        }
        let s = &self.shared;
        StatusResult {
            version: env!("CARGO_PKG_VERSION").to_string(),
            pid: s.pid,
            uptime_ms: s.started.elapsed().as_millis() as u64,
            clients: s
                .clients
                .load(Ordering::Relaxed)
                .saturating_sub(usize::from(self.counted)),
            sessions,
            schedules: s.scheduler.status(),
            journal: s.journal.as_ref().map(|j| j.status()),
        }
    }

    async fn session(&self, id: &str) -> Result<SessionHandle, ErrorObject> {
        self.shared.live(id).await.ok_or_else(|| {
            ErrorObject::new(
                j::UNKNOWN_SESSION,
                format!("no live session {id} in this daemon"),
            )
        })
    }

    /// The session a pi command names: an attached one under the id this client was last told
    /// (so a request sent before `session/replaced` reached it goes where it was meant to),
    /// else a live one.
    async fn target(&self, id: &str) -> Result<SessionHandle, ErrorObject> {
        match self.attached.get(id) {
            Some((h, _)) => Ok(h.clone()),
            None => self.session(id).await,
        }
    }

    /// -32013 if `switch_session {sessionPath: path}` on `handle` would load a session that
    /// another handle of this daemon serves (it must never be live twice; the file lock would
    /// refuse it too, but as if another process held it).
    async fn live_elsewhere(&self, handle: &SessionHandle, path: &str) -> Option<ErrorObject> {
        let target = handle.switch_target(path).await.ok()?;
        for h in self.handles().await {
            if h.stream_id() == handle.stream_id() {
                continue;
            }
            let Some(s) = h.status().await else { continue };
            let Some(file) = s
                .summary
                .file
                .filter(|f| crate::kernel::session::same_file(f.as_ref(), &target))
            else {
                continue;
            };
            let id = s.summary.session_id;
            let mut e = ErrorObject::new(
                j::SESSION_BUSY,
                format!(
                    "session busy: session {id} ({file}) is live in this daemon; \
                     attach to it (session/attach) instead of switching to it"
                ),
            );
            e.data = Some(json!({"sessionId": id, "sessionFile": file}));
            return Some(e);
        }
        None
    }

    async fn attach(&mut self, a: AttachParams) -> Result<AttachResult, ErrorObject> {
        let handle = self.session(&a.session_id).await?;
        let (reply, rx) = oneshot::channel();
        handle.send(Call::Attach {
            client: self.client,
            interactive: self.interactive,
            cursor: a.cursor.map(|c| Cursor {
                epoch: c.epoch,
                seq: c.seq,
            }),
            queue: self.queue_tx.clone(),
            reply,
        });
        let Ok(attached) = rx.await else {
            return Err(ErrorObject::new(
                j::UNKNOWN_SESSION,
                "the session has ended",
            ));
        };
        self.shared
            .journal_fact("attached", &a.session_id, self.client);
        self.attached
            .insert(a.session_id, (handle, attached.lagged.clone()));
        let mode = match attached.start {
            Start::Replay => AttachMode::Replay,
            Start::Snapshot => AttachMode::Snapshot,
        };
        Ok(AttachResult {
            mode,
            epoch: attached.epoch,
            seq: attached.seq,
            snapshot: attached.snapshot,
        })
    }

    /// A pi command: its params are pi's fields plus `sessionId`.
    async fn pi_command(
        &mut self,
        id: &Id,
        command: &str,
        params: Option<&serde_json::value::RawValue>,
    ) -> Outcome {
        let Some(name) = CommandName::parse(command) else {
            return Outcome::Error(ErrorObject::new(
                j::METHOD_NOT_FOUND,
                format!("unknown method {command}"),
            ));
        };
        let mut fields: Map<String, Value> = match j::params::<Option<Map<String, Value>>>(params) {
            Ok(f) => f.unwrap_or_default(),
            Err(e) => return Outcome::Error(e),
        };
        let Some(Value::String(session_id)) = fields.remove("sessionId") else {
            return Outcome::Error(ErrorObject::new(
                j::INVALID_PARAMS,
                format!("Invalid params: {command} needs `sessionId` (a string)"),
            ));
        };
        let handle = match self.target(&session_id).await {
            Ok(h) => h,
            Err(e) => return Outcome::Error(e),
        };
        let req = crate::wire::rpc::Request::new(command, Value::Object(fields));
        if name == CommandName::SwitchSession {
            if let Ok(Command::SwitchSession { session_path }) = name.decode(&req) {
                if let Some(e) = self.live_elsewhere(&handle, &session_path).await {
                    return Outcome::Error(e);
                }
            }
        }
        if name == CommandName::ExtensionUiResponse {
            return self.ui_answer(id, &handle, req).await;
        }
        // Sent now, so the session serves this connection's commands in the order they came.
        let answer = handle.submit(req);
        self.later
            .pi(&self.shared, id.clone(), handle.stream_id(), answer);
        Outcome::Later
    }

    /// A dialog answer: only interactive clients may answer; the first answer wins.
    async fn ui_answer(
        &self,
        id: &Id,
        handle: &SessionHandle,
        req: crate::wire::rpc::Request,
    ) -> Outcome {
        if !self.interactive {
            return Outcome::Error(ErrorObject::new(
                j::COMMAND_FAILED,
                "only a client that said interactive:true in daemon/hello may answer dialogs",
            ));
        }
        match handle.answer_dialog(req).await {
            Ok(()) => Outcome::reply(id, Ok(Empty {})),
            Err(e @ DialogAnswer::NoId) => {
                Outcome::Error(ErrorObject::new(j::INVALID_PARAMS, e.to_string()))
            }
            Err(e @ DialogAnswer::Closed(_)) => {
                Outcome::Error(ErrorObject::new(j::ALREADY_ANSWERED, e.to_string()))
            }
        }
    }

    /// The first attached session that dropped this client, with the seq it had reached. The
    /// id is the one it is live under now (the client may have missed `session/replaced`).
    fn lagged(&self) -> Option<(String, u64)> {
        self.attached
            .values()
            .find_map(|(h, lag)| lag.at().map(|seq| (h.session_id().to_string(), seq)))
    }
}
