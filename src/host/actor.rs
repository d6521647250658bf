//! A host shared by many clients: a task that owns one [`Host`] and its [`Stream`], serves
//! calls from any number of connections one at a time (this task's loop is the session's
//! lock: an attach's switch from replay to live happens between two events), numbers and fans
//! out the host's events, and routes each reply to the request that asked. When a command
//! makes the host serve another session (`new_session`, `switch_session`, `fork`, `clone`),
//! the handle's id changes and the stream starts a new epoch before that command is answered.
//! It also tells the host whether an interactive client is attached (approval dialogs time out
//! only while none is). Transport neutral: clients are channels.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::stream::{Cursor, Delivery, Lagged, Start, Stream};
use super::{CommandError, Data, Host, HostSetup, Out, Summary};
use crate::wire::pi::CommandName;
use crate::wire::rpc::{Id, Request};

/// What a request's caller gets back: pi's `data`, or an error with its kind and pi's text.
pub type Answer = Result<Data, CommandError>;

/// An answer and the stream's last `seq` when it was given: a transport writes the events up
/// to that `seq` before the answer and the later ones after it, as RPC mode does in-process.
pub type Answered = (Answer, u64);

/// A call into a shared session.
pub enum Call {
    /// A pi command; the answer comes once the events it caused are queued for subscribers.
    /// Without `answer` nothing is sent back (`extension_ui_response`, which pi never answers).
    Request {
        req: Request,
        answer: Option<oneshot::Sender<Answered>>,
    },
    /// Subscribes `client` (replacing an earlier subscription of it). An `interactive` client
    /// (one that may answer dialogs) watches the session: while one is attached, approval
    /// dialogs wait for an answer instead of timing out.
    Attach {
        client: u64,
        interactive: bool,
        cursor: Option<Cursor>,
        queue: mpsc::Sender<Delivery>,
        reply: oneshot::Sender<Attached>,
    },
    Detach {
        client: u64,
    },
    /// Whether an interactive client watches this subagent's parent: then the subagent's
    /// dialogs (shown to the parent's clients) wait for an answer as if it were watched.
    ParentWatched(bool),
    /// Whether dialog `id` is still open (a later answer gets "already answered").
    DialogOpen {
        id: String,
        reply: oneshot::Sender<bool>,
    },
    Status {
        reply: oneshot::Sender<Status>,
    },
    /// The file `switch_session {sessionPath: path}` would load, or pi's error text.
    SwitchTarget {
        path: String,
        reply: oneshot::Sender<Result<PathBuf, CommandError>>,
    },
    /// The client's input ended (RPC's stdin): open dialogs can never be answered and new
    /// ones are denied; `idle` is answered once nothing runs (no run, compaction or shell
    /// command).
    InputEnded {
        idle: oneshot::Sender<()>,
    },
    /// The client sent a line that was no request (RPC's unparsable lines): the startup
    /// warnings are published now, as after a request.
    Heard,
    /// Aborts the run, lets it settle (at most `grace`), saves the session and ends the task.
    /// A second `Stop` while it settles cuts the wait short. The answer is why the session
    /// could not be saved, if it could not.
    Stop {
        grace: Duration,
        /// The `SessionEnd` hooks' `reason` (Claude's word).
        reason: &'static str,
        reply: oneshot::Sender<Option<String>>,
    },
}

/// How an attach started.
#[derive(Debug)]
pub struct Attached {
    pub start: Start,
    pub epoch: String,
    /// The last `seq` included in the replay or the snapshot; live events follow it.
    pub seq: u64,
    pub snapshot: Option<Box<crate::wire::protocol::snapshot::Snapshot>>,
    /// Set if the client is dropped for not reading.
    pub lagged: Arc<Lagged>,
}

/// A shared session as `daemon/status` shows it.
#[derive(Debug, Clone)]
pub struct Status {
    pub summary: Summary,
    pub clients: usize,
    pub epoch: String,
    pub seq: u64,
    /// How long the served session has been live here.
    pub live_for: Duration,
    /// The spec the session was opened with ([`crate::host::HostSetup::open_spec`]).
    pub open_spec: crate::wire::protocol::spec::SessionSpec,
}

/// Why a dialog answer was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DialogAnswer {
    /// The answer names no dialog.
    NoId,
    /// Dialog `0` was already answered or is closed.
    Closed(String),
}

impl std::fmt::Display for DialogAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DialogAnswer::NoId => {
                f.write_str("Invalid params: extension_ui_response needs `id` (a string)")
            }
            DialogAnswer::Closed(id) => write!(f, "dialog {id} was already answered or is closed"),
        }
    }
}

/// A handle on a shared session; cheap to clone. The task ends when every handle is gone or
/// after [`Call::Stop`].
#[derive(Debug, Clone)]
pub struct SessionHandle {
    tx: mpsc::UnboundedSender<Call>,
    /// The id of the session served now (set before anyone is told of a change).
    id: Arc<Mutex<Arc<str>>>,
    stream: u64,
}

impl SessionHandle {
    /// Sends a call; false if the session has ended.
    pub fn send(&self, call: Call) -> bool {
        self.tx.send(call).is_ok()
    }

    /// The id of the session this handle serves now.
    pub fn session_id(&self) -> Arc<str> {
        current(&self.id)
    }

    /// The stream's [`Stream::id`]: the deliveries of this handle's session carry it.
    pub fn stream_id(&self) -> u64 {
        self.stream
    }

    /// Sends a pi command; its answer comes on the returned channel. Calls sent one after the
    /// other are served in that order.
    pub fn submit(&self, req: Request) -> oneshot::Receiver<Answered> {
        let (answer, rx) = oneshot::channel();
        self.send(Call::Request {
            req,
            answer: Some(answer),
        });
        rx
    }

    /// Runs a pi command and waits for its answer.
    pub async fn request(&self, req: Request) -> Answered {
        answered(self.submit(req).await)
    }

    /// Answers dialog `req.id` (`extension_ui_response`, which pi never answers itself): the
    /// first answer wins; a later one, or one for a dialog that is not open, is refused.
    pub async fn answer_dialog(&self, mut req: Request) -> Result<(), DialogAnswer> {
        let dialog = req
            .str("id")
            .map(str::to_string)
            .map_err(|_| DialogAnswer::NoId)?;
        let (reply, rx) = oneshot::channel();
        self.send(Call::DialogOpen {
            id: dialog.clone(),
            reply,
        });
        if !rx.await.unwrap_or(false) {
            return Err(DialogAnswer::Closed(dialog));
        }
        req.id = Some(Id::string(&dialog));
        self.send(Call::Request { req, answer: None });
        Ok(())
    }

    pub async fn status(&self) -> Option<Status> {
        let (reply, rx) = oneshot::channel();
        self.send(Call::Status { reply });
        rx.await.ok()
    }

    /// The file `switch_session` to `path` would load (pi's error text if none).
    pub async fn switch_target(&self, path: &str) -> Result<PathBuf, CommandError> {
        let (reply, rx) = oneshot::channel();
        self.send(Call::SwitchTarget {
            path: path.to_string(),
            reply,
        });
        rx.await
            .unwrap_or_else(|_| Err(CommandError::ended("the session has ended")))
    }

    pub async fn stop(&self, grace: Duration) {
        self.close(grace).await;
    }

    /// [`SessionHandle::stop`], answering why the session could not be saved (its last
    /// entries, the final sync), if it could not.
    pub async fn close(&self, grace: Duration) -> Option<String> {
        self.close_as(grace, "other").await
    }

    /// [`SessionHandle::close`], its `SessionEnd` hooks told `reason` (Claude's word:
    /// `prompt_input_exit` when the user left the TUI's prompt).
    pub async fn close_as(&self, grace: Duration, reason: &'static str) -> Option<String> {
        let (reply, rx) = oneshot::channel();
        if !self.send(Call::Stop {
            grace,
            reason,
            reply,
        }) {
            return None;
        }
        rx.await.ok().flatten()
    }
}

/// What an answer channel gives: the answer, or "ended" if the session went away first.
pub fn answered(rx: Result<Answered, oneshot::error::RecvError>) -> Answered {
    rx.unwrap_or_else(|_| (Err(CommandError::ended("the session has ended")), u64::MAX))
}

/// The next call, or never without a receiver.
async fn next_call(calls: &mut Option<&mut mpsc::UnboundedReceiver<Call>>) -> Option<Call> {
    match calls {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

fn current(id: &Mutex<Arc<str>>) -> Arc<str> {
    id.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Numbers the streams of this process.
static STREAMS: AtomicU64 = AtomicU64::new(0);

/// Starts serving `setup` in its own task, with a new `epoch` and ring bounds. When the host
/// comes to serve another session, the new epoch is `epoch` with `.1`, `.2`, … appended.
pub fn spawn(setup: HostSetup, epoch: String, ring: (usize, usize)) -> SessionHandle {
    spawn_journaled(setup, epoch, ring, None)
}

/// [`spawn`], with every delivery of the session's stream also handed to `journal` (the
/// daemon's event journal) from the first event on.
pub fn spawn_journaled(
    setup: HostSetup,
    epoch: String,
    ring: (usize, usize),
    journal: Option<Arc<dyn super::stream::Tap>>,
) -> SessionHandle {
    let (tx, rx) = mpsc::unbounded_channel();
    let host = Host::new(setup);
    let summary = host.summary();
    let name: Arc<str> = summary.session_id.into();
    let stream = STREAMS.fetch_add(1, Ordering::Relaxed) + 1;
    let id = Arc::new(Mutex::new(name.clone()));
    let mut numbered = Stream::new(stream, name, epoch.clone(), ring.0, ring.1);
    if let Some(j) = journal {
        numbered.journal(j);
    }
    let actor = Actor {
        host,
        stream: numbered,
        id: id.clone(),
        file: summary.file,
        first_epoch: epoch,
        changes: 0,
        since: std::time::Instant::now(),
        waiting: HashMap::new(),
        next: 0,
        interactive: HashSet::new(),
        watched: false,
        parent_watched: false,
        idle: Vec::new(),
    };
    tokio::spawn(actor.run(rx));
    SessionHandle { tx, id, stream }
}

struct Actor {
    host: Host,
    stream: Stream,
    /// Shared with the handles: the served session's id.
    id: Arc<Mutex<Arc<str>>>,
    /// The served session's file.
    file: Option<String>,
    first_epoch: String,
    /// How many times the host came to serve another session.
    changes: u64,
    /// When the served session became live here.
    since: std::time::Instant,
    /// Requests whose answer has not come yet, by the id the host was given.
    waiting: HashMap<String, oneshot::Sender<Answered>>,
    next: u64,
    /// Attached clients that said they are interactive (the host is told when this set
    /// becomes empty or stops being empty).
    interactive: HashSet<u64>,
    /// What the host was last told: an interactive client is attached (or watches the parent
    /// of this subagent).
    watched: bool,
    /// An interactive client watches this subagent's parent ([`Call::ParentWatched`]).
    parent_watched: bool,
    /// Told once nothing runs ([`Call::InputEnded`]).
    idle: Vec<oneshot::Sender<()>>,
}

impl Actor {
    async fn run(mut self, mut calls: mpsc::UnboundedReceiver<Call>) {
        loop {
            tokio::select! {
                biased;
                Some(step) = self.host.next_step() => self.host.apply(step),
                call = calls.recv() => match call {
                    None => break,
                    Some(Call::Stop { grace, reason, reply }) => {
                        let second = self.stop(grace, reason, Some(&mut calls)).await;
                        for reply in std::iter::once(reply).chain(second) {
                            let _ = reply.send(self.host.save_fault());
                        }
                        return;
                    }
                    Some(call) => self.call(call).await,
                },
            }
            self.host.run_deferred().await;
            self.distribute();
            self.watch();
            if !self.idle.is_empty() && self.host.idle() {
                for tx in self.idle.drain(..) {
                    let _ = tx.send(());
                }
            }
        }
        self.stop(Duration::from_secs(3), "other", None).await;
    }

    async fn call(&mut self, call: Call) {
        match call {
            Call::Request { mut req, answer } => {
                // A request that wants an answer keeps its id (`bash` updates name it) unless
                // it has none or another one waiting has it: then it is renumbered, so the
                // reply finds its way back. One that wants no answer (a dialog answer) keeps
                // its id, which names the dialog.
                if let Some(answer) = answer {
                    let key = self.routing_key(&mut req);
                    self.waiting.insert(key, answer);
                }
                self.host.request(req).await;
            }
            Call::Attach {
                client,
                interactive,
                cursor,
                queue,
                reply,
            } => {
                // Everything published so far is numbered first: the attach sees the true head,
                // and nothing is published between the attach and the snapshot (this task is
                // the only one that drains the host).
                self.host.flush();
                self.distribute();
                let (start, lagged) = self.stream.attach(client, cursor.as_ref(), queue);
                if interactive {
                    self.interactive.insert(client);
                } else {
                    self.interactive.remove(&client);
                }
                let snapshot = (start == Start::Snapshot).then(|| Box::new(self.host.snapshot()));
                let _ = reply.send(Attached {
                    start,
                    epoch: self.stream.epoch.clone(),
                    seq: self.stream.head(),
                    snapshot,
                    lagged,
                });
            }
            Call::Detach { client } => {
                self.stream.detach(client);
                self.interactive.remove(&client);
            }
            Call::ParentWatched(watched) => self.parent_watched = watched,
            Call::DialogOpen { id, reply } => {
                let _ = reply.send(self.host.dialog_open(&id));
            }
            Call::Status { reply } => {
                let _ = reply.send(Status {
                    summary: self.host.summary(),
                    clients: self.stream.clients(),
                    epoch: self.stream.epoch.clone(),
                    seq: self.stream.head(),
                    live_for: self.since.elapsed(),
                    open_spec: self.host.open_spec().clone(),
                });
            }
            Call::SwitchTarget { path, reply } => {
                let _ = reply.send(self.host.switch_target(&path).map_err(Into::into));
            }
            Call::InputEnded { idle } => {
                self.host.on_eof();
                self.idle.push(idle);
            }
            Call::Heard => self.host.publish_warnings(),
            Call::Stop { .. } => {}
        }
    }

    /// The key a request's reply is routed back by: its own id if no other request waiting
    /// has it, otherwise a fresh number (set as its id).
    fn routing_key(&mut self, req: &mut Request) -> String {
        if let Some(id) = &req.id {
            if !self.waiting.contains_key(id.text()) {
                return id.text().to_string();
            }
        }
        loop {
            self.next += 1;
            let id = Id::from(self.next);
            let key = id.text().to_string();
            if !self.waiting.contains_key(&key) {
                req.id = Some(id);
                return key;
            }
        }
    }

    /// Numbers and fans out the host's events; answers the requests whose reply came. A
    /// session change is made known (the handle's id, then the stream's new epoch) after the
    /// old session's events and before the command's answer.
    fn distribute(&mut self) {
        let out: Vec<Out> = self.host.take_out().collect();
        for item in out {
            match item {
                Out::Event(e) => self.stream.publish(e),
                Out::Moved => self.new_epoch(self.stream.name.clone()),
                Out::Reply(r) => {
                    if r.result.is_ok() && replaces_session(&r.command) {
                        self.follow_session();
                    }
                    let key = r.id.as_ref().map(|i| i.text().to_string());
                    if let Some(tx) = key.and_then(|k| self.waiting.remove(&k)) {
                        let _ = tx.send((r.result, self.stream.head()));
                    }
                }
            }
        }
    }

    /// Tells the host when the first interactive client came or the last one went (detached,
    /// or dropped by the stream for not reading or for a closed queue).
    fn watch(&mut self) {
        let stream = &self.stream;
        self.interactive.retain(|c| stream.has(*c));
        let now = !self.interactive.is_empty() || self.parent_watched;
        if now != self.watched {
            self.watched = now;
            self.host.set_watched(now);
        }
    }

    /// If the host serves another session now (another id or file): the new id for the
    /// handles, then the stream's rename into a new epoch (which tells every subscriber).
    fn follow_session(&mut self) {
        let summary = self.host.summary();
        if *summary.session_id == *self.stream.name && summary.file == self.file {
            return; // not changed (`switch_session` to the current file)
        }
        self.file = summary.file;
        let now: Arc<str> = summary.session_id.into();
        *self.id.lock().unwrap_or_else(|e| e.into_inner()) = now.clone();
        self.new_epoch(now);
        self.since = std::time::Instant::now();
    }

    /// The stream serves `now` (or the same session, its conversation rewound) in a new epoch.
    fn new_epoch(&mut self, now: Arc<str>) {
        self.changes += 1;
        let epoch = format!("{}.{}", self.first_epoch, self.changes);
        tracing::info!("session {} is now {now} (epoch {epoch})", self.stream.name);
        self.stream.rename(now, epoch);
    }

    /// Stops serving; while the run settles, a second [`Call::Stop`] on `calls` cuts the wait
    /// short (other calls are dropped: the session is ending).
    async fn stop(
        &mut self,
        grace: Duration,
        reason: &str,
        mut calls: Option<&mut mpsc::UnboundedReceiver<Call>>,
    ) -> Option<oneshot::Sender<Option<String>>> {
        self.host.halt();
        let mut second = None;
        let deadline = tokio::time::Instant::now() + grace;
        while !self.host.idle() {
            tokio::select! {
                Some(step) = self.host.next_step() => self.host.apply(step),
                _ = tokio::time::sleep_until(deadline) => break,
                Some(call) = next_call(&mut calls) => {
                    if let Call::Stop { reply, .. } = call {
                        // Answered with the first, once the session is saved.
                        second = Some(reply);
                        break;
                    }
                }
            }
            self.distribute();
        }
        self.host.close(reason).await;
        self.distribute();
        for (_, tx) in self.waiting.drain() {
            let _ = tx.send((
                Err(CommandError::ended("the session was stopped")),
                u64::MAX,
            ));
        }
        second
    }
}

/// Whether command `word` may make the host serve another session.
pub fn replaces_session(word: &str) -> bool {
    CommandName::parse(word).is_some_and(CommandName::replaces_session)
}
