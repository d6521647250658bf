//! A front end's link to the session it shows, served by a host in this process or by the
//! daemon over its socket. Both give the same two things: pi commands answered with pi's
//! `data` or pi's error text, and the session's numbered stream of wire lines (plus the
//! session being replaced, and for the daemon the link being dropped or lost). A front end
//! written against a [`Link`] behaves the same in-process and through the daemon
//! (`DESIGN.md` §10.1: "no daemon" only means the host lives in this process).
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use crate::client::dial::Dial;
use crate::client::socket::{CallError, Client};
use crate::host::actor::{self, Call, SessionHandle};
use crate::host::stream::{Cursor, Delivery, Item, QUEUE};
use crate::host::{Data, HostSetup};
use crate::wire::jsonrpc::{self as j, Id, Incoming};
use crate::wire::protocol::daemon::DaemonInfo;
use crate::wire::protocol::session::{self, AttachParams, Cursor as At};
use crate::wire::protocol::{Method, Notification};
use crate::wire::rpc::Request;

/// What the stream brings, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Note {
    /// A wire line of the session's stream (compact JSON, no newline).
    Event { seq: u64, line: Arc<str> },
    /// The session now serves another one, in a new epoch (`new_session`, `fork`, …).
    Replaced { session: String, epoch: String },
    /// This link fell behind and was dropped (by the daemon, or by the session in this
    /// process); attach again from `seq` (`Link::daemon` with a cursor, `reattach_local`).
    Lagged { seq: u64 },
    /// The daemon went away (why).
    Lost(String),
    /// A daemon-wide message for the user (`daemon/notice`: a scheduled run that failed).
    Notice(String),
}

/// Why attaching to a session of the daemon failed.
#[derive(Debug, Clone, PartialEq)]
pub enum AttachError {
    /// The daemon could not be reached (or the connection ended).
    Unreachable(String),
    /// The daemon answered with an error (no such session, …).
    Refused(String),
}

impl std::fmt::Display for AttachError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AttachError::Unreachable(why) | AttachError::Refused(why) => f.write_str(why),
        }
    }
}

/// How attaching started: a replay of what followed the cursor, or a snapshot
/// (`DESIGN.md` §10.4).
#[derive(Debug, Clone, PartialEq)]
pub struct Start {
    pub epoch: String,
    /// The last `seq` the replay or snapshot covers.
    pub seq: u64,
    pub snapshot: Option<Box<crate::wire::protocol::snapshot::Snapshot>>,
}

type Back = oneshot::Sender<Result<Value, String>>;
type Pending = HashMap<String, Back>;
/// A command for the daemon connection's task: method, params and where the answer goes.
type Outgoing = (String, Value, Back);

#[derive(Clone)]
enum Kind {
    Local(SessionHandle),
    Daemon {
        requests: mpsc::UnboundedSender<Outgoing>,
    },
}

/// A link to one served session.
pub struct Link {
    session: String,
    kind: Kind,
    notes: Notes,
    /// The daemon, as its `hello` answer describes it (`None` in-process).
    pub daemon: Option<DaemonInfo>,
}

impl Link {
    /// Serves `setup` in this process and attaches to it (a snapshot of the start).
    pub async fn local(setup: HostSetup, ring: (usize, usize)) -> Result<(Link, Start), String> {
        let epoch = format!("local-{}", std::process::id());
        let handle = actor::spawn(setup, epoch, ring);
        let session = handle
            .status()
            .await
            .map(|s| s.summary.session_id)
            .ok_or("the session ended at once")?;
        let (notes, start) = attach_local(&handle, None, ring.0, true).await?;
        let link = Link {
            session,
            kind: Kind::Local(handle),
            notes,
            daemon: None,
        };
        Ok((link, start))
    }

    /// Serves `setup` in this process for a print or JSON run: attached from its first event
    /// as a client that answers no dialogs, through a queue that never drops it (a slow stdout
    /// holds the stream back, as when the run drove the kernel itself; nothing is replayed,
    /// so the ring keeps one event).
    pub async fn headless(setup: HostSetup) -> Result<Link, String> {
        let epoch = format!("local-{}", std::process::id());
        let handle = actor::spawn(setup, epoch.clone(), (1, 0));
        let session = handle.session_id().to_string();
        let from = Cursor { epoch, seq: 0 };
        let (notes, _) = attach_local(&handle, Some(from), UNBOUNDED, false).await?;
        Ok(Link {
            session,
            kind: Kind::Local(handle),
            notes,
            daemon: None,
        })
    }

    /// Attaches again to the session in this process from `cursor` (after
    /// [`Note::Lagged`]): a replay of what followed it, or a snapshot. `None` for a daemon's
    /// session (attach with [`Link::daemon`] instead).
    pub async fn reattach_local(&mut self, cursor: (&str, u64)) -> Option<Result<Start, String>> {
        let Kind::Local(handle) = &self.kind else {
            return None;
        };
        let cursor = Cursor {
            epoch: cursor.0.to_string(),
            seq: cursor.1,
        };
        Some(
            attach_local(handle, Some(cursor), RING_FOR_LOCAL, true)
                .await
                .map(|(notes, start)| {
                    self.notes = notes;
                    start
                }),
        )
    }

    /// Attaches to `session` in the daemon `dial` names (from `cursor` if given).
    pub async fn daemon(
        dial: &Dial,
        session: &str,
        cursor: Option<(&str, u64)>,
        interactive: bool,
    ) -> Result<(Link, Start), AttachError> {
        let mut client = Client::dial(dial, interactive)
            .await
            .map_err(|e| AttachError::Unreachable(e.to_string()))?;
        let params = AttachParams {
            session_id: session.to_string(),
            cursor: cursor.map(|(epoch, seq)| At {
                epoch: epoch.to_string(),
                seq,
            }),
        };
        let attached = client
            .call::<session::Attach>(&params)
            .await
            .map_err(|e| match e {
                CallError::Rpc(e) => AttachError::Refused(e.message),
                lost => AttachError::Unreachable(lost.to_string()),
            })?;
        let start = Start {
            epoch: attached.epoch,
            seq: attached.seq,
            snapshot: attached.snapshot,
        };
        Ok((Link::over(client, session).await, start))
    }

    /// A link over a connection to the daemon that has attached to `session` already (its
    /// `session/attach` answered): the notifications that came with the answer are the
    /// first notes.
    pub async fn over(mut client: Client, session: &str) -> Link {
        let early: Vec<(String, Value)> = client.notifications.drain(..).collect();
        let hello = Some(client.hello.daemon.clone());
        let (read, write) = client.into_parts();
        let (tx, notes) = mpsc::channel(QUEUE);
        let (requests, request_rx) = mpsc::unbounded_channel::<Outgoing>();
        let mut current = session.to_string();
        for (method, params) in early {
            let Ok(params) = serde_json::value::to_raw_value(&params) else {
                continue;
            };
            if let Some(note) = note_of(&method, Some(&params), &mut current) {
                let _ = tx.send(note).await;
            }
        }
        let owner = current.clone();
        tokio::spawn(serve_socket(read, write, tx, request_rx, current));
        Link {
            session: owner,
            kind: Kind::Daemon { requests },
            notes: Notes::Channel(notes),
            daemon: hello,
        }
    }

    /// The session this link shows (it changes with [`Note::Replaced`]).
    pub fn session_id(&self) -> &str {
        &self.session
    }

    /// Runs a pi command: pi's `data` (`{}` without one) or pi's error text.
    pub async fn request(&self, command: &str, params: Value) -> Result<Value, String> {
        self.commands().request(command, params).await
    }

    /// A handle for sending commands from other tasks.
    pub fn commands(&self) -> Commands {
        Commands {
            kind: self.kind.clone(),
        }
    }
}

/// Sends pi commands to a link's session; cheap to clone.
#[derive(Clone)]
pub struct Commands {
    kind: Kind,
}

impl Commands {
    /// Runs a pi command: pi's `data` (`{}` without one) or pi's error text.
    pub async fn request(&self, command: &str, params: Value) -> Result<Value, String> {
        match &self.kind {
            Kind::Local(handle) if command == "extension_ui_response" => handle
                .answer_dialog(Request::new(command, params))
                .await
                .map(|()| json!({}))
                .map_err(|e| e.to_string()),
            Kind::Local(handle) => {
                let (answer, _) = handle.request(Request::new(command, params)).await;
                answer.map_err(|e| e.message).and_then(|data| match data {
                    Data::Empty => Ok(json!({})),
                    Data::Json(v) => Ok(v),
                    Data::Raw(text) => serde_json::from_str(&text).map_err(|e| e.to_string()),
                })
            }
            Kind::Daemon { requests } => {
                let (back, rx) = oneshot::channel();
                requests
                    .send((command.to_string(), params, back))
                    .map_err(|_| "the daemon connection is closed".to_string())?;
                rx.await
                    .map_err(|_| "the daemon connection is closed".to_string())?
            }
        }
    }
}

impl Commands {
    /// Calls protocol v1's method `M` on the daemon this link goes through (`sessionId` added,
    /// as for a pi command); in-process, whatever the host answers (an error for a method it
    /// does not serve).
    pub async fn call<M: Method>(&self, params: &M::Params) -> Result<M::Result, String> {
        let params = serde_json::to_value(params).map_err(|e| e.to_string())?;
        let result = self.request(M::NAME, params).await?;
        serde_json::from_value(result)
            .map_err(|e| format!("the daemon's answer to {} does not fit: {e}", M::NAME))
    }

    /// Ends a session served in this process: its run is stopped (settling for at most
    /// `grace`) and the session saved; the link's stream ends after the last events. A
    /// daemon's session is closed there only if nothing else uses it (`session/close`: no
    /// run going, no other client); otherwise it stays live for them.
    pub async fn stop(&self, grace: std::time::Duration) {
        match &self.kind {
            Kind::Local(handle) => handle.stop(grace).await,
            Kind::Daemon { .. } => {
                if let Err(e) = self.request(session::Close::NAME, json!({})).await {
                    tracing::info!("the session stays live in the daemon: {e}");
                }
            }
        }
    }
}

impl Commands {
    /// Ends a session served in this process as [`Commands::stop`] does, answering why it
    /// could not be saved (its last entries, the final sync), if it could not. A daemon's
    /// session stays live there: nothing is done and nothing answered.
    pub async fn close(&self, grace: std::time::Duration) -> Option<String> {
        match &self.kind {
            Kind::Local(handle) => handle.close(grace).await,
            Kind::Daemon { .. } => None,
        }
    }
}

impl Link {
    /// The next item of the stream (`None` once the link has ended).
    pub async fn next(&mut self) -> Option<Note> {
        let note = self.notes.recv().await?;
        Some(self.follow(note))
    }

    /// The next item if one is already there.
    pub fn try_next(&mut self) -> Option<Note> {
        let note = self.notes.try_recv()?;
        Some(self.follow(note))
    }

    fn follow(&mut self, note: Note) -> Note {
        if let Note::Replaced { session, .. } = &note {
            self.session = session.clone();
        }
        note
    }
}

/// Where a link's notes come from: a session in this process hands its deliveries straight to
/// the link (no task in between, on the path of every event), the daemon's connection task
/// sends notes.
enum Notes {
    Local {
        deliveries: mpsc::Receiver<Delivery>,
        /// Taken once the deliveries end: where the session dropped this client, if it did.
        lagged: Option<Arc<crate::host::stream::Lagged>>,
    },
    Channel(mpsc::Receiver<Note>),
}

impl Notes {
    async fn recv(&mut self) -> Option<Note> {
        match self {
            Notes::Channel(rx) => rx.recv().await,
            Notes::Local { deliveries, lagged } => match deliveries.recv().await {
                Some(d) => Some(note_of_delivery(d)),
                None => lagged.take()?.at().map(|seq| Note::Lagged { seq }),
            },
        }
    }

    fn try_recv(&mut self) -> Option<Note> {
        match self {
            Notes::Channel(rx) => rx.try_recv().ok(),
            Notes::Local { deliveries, lagged } => match deliveries.try_recv() {
                Ok(d) => Some(note_of_delivery(d)),
                Err(mpsc::error::TryRecvError::Empty) => None,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    lagged.take()?.at().map(|seq| Note::Lagged { seq })
                }
            },
        }
    }
}

/// The note a delivery of a session in this process is.
fn note_of_delivery(d: Delivery) -> Note {
    match d.item {
        Item::Event(e) => Note::Event {
            seq: e.seq,
            line: e.line,
        },
        Item::Replaced { new, .. } => Note::Replaced {
            session: new.to_string(),
            epoch: d.epoch.to_string(),
        },
    }
}

/// The queue of an in-process link beyond its session's ring (a re-attach).
const RING_FOR_LOCAL: usize = crate::host::stream::RING_EVENTS;

/// The queue of a link whose client writes everything it gets (print, JSON and RPC in this
/// process: [`Link::headless`], [`Link::local_from_start`]): more than any run publishes, so
/// the session never drops it (a channel allocates only as far as it is used).
const UNBOUNDED: usize = 1 << 28;

/// Subscribes to a session served in this process as a client that is interactive (watches
/// the session: its dialogs can be answered) or not: its notes (ending with [`Note::Lagged`]
/// if the subscriber fell behind) and how the attach started.
async fn attach_local(
    handle: &SessionHandle,
    cursor: Option<Cursor>,
    ring: usize,
    interactive: bool,
) -> Result<(Notes, Start), String> {
    let (queue, deliveries) = mpsc::channel::<Delivery>(ring + QUEUE);
    let (reply, rx) = oneshot::channel();
    handle.send(Call::Attach {
        client: 1,
        interactive,
        cursor,
        queue,
        reply,
    });
    let attached = rx.await.map_err(|_| "the session has ended")?;
    let notes = Notes::Local {
        deliveries,
        lagged: Some(attached.lagged.clone()),
    };
    let start = Start {
        epoch: attached.epoch,
        seq: attached.seq,
        snapshot: attached.snapshot,
    };
    Ok((notes, start))
}

/// A link for a client that writes the session's stream and its answers in one order (RPC
/// mode in this process): the answers of [`Commands::submit`] carry the stream's `seq` when
/// they were given, so the events up to it go first.
impl Link {
    /// Serves `setup` in this process for a client that does not watch the session (its
    /// approval dialogs time out) and attaches from the stream's first event, so nothing the
    /// session published while starting is missed. The queue holds as many events as the
    /// client is behind (the host never waits for it, and it is never dropped).
    pub async fn local_from_start(setup: HostSetup) -> Result<Link, String> {
        let epoch = format!("local-{}", std::process::id());
        // Only what is published before the attach is replayed from the ring.
        let ring = (1024, 1 << 20);
        let handle = actor::spawn(setup, epoch.clone(), ring);
        let cursor = Cursor { epoch, seq: 0 };
        let (notes, _) = attach_local(&handle, Some(cursor), UNBOUNDED, false).await?;
        Ok(Link {
            session: handle.session_id().to_string(),
            kind: Kind::Local(handle),
            notes,
            daemon: None,
        })
    }
}

impl Commands {
    /// Sends a pi command to a session in this process: its answer comes with the stream's
    /// last `seq` when it was given. Commands are served in the order sent. `None` for a
    /// daemon's session.
    pub fn submit(&self, req: Request) -> Option<oneshot::Receiver<actor::Answered>> {
        match &self.kind {
            Kind::Local(handle) => Some(handle.submit(req)),
            Kind::Daemon { .. } => None,
        }
    }

    /// Hands a session in this process a command pi never answers (`extension_ui_response`),
    /// in order with the others.
    pub fn tell(&self, req: Request) {
        if let Kind::Local(handle) = &self.kind {
            handle.send(Call::Request { req, answer: None });
        }
    }

    /// Tells a session in this process that its client's input ended: open dialogs are
    /// closed unanswered. The receiver is answered once nothing runs there.
    pub fn input_ended(&self) -> Option<oneshot::Receiver<()>> {
        let Kind::Local(handle) = &self.kind else {
            return None;
        };
        let (idle, rx) = oneshot::channel();
        handle.send(Call::InputEnded { idle });
        Some(rx)
    }

    /// Tells a session in this process that its client sent a line that was no request (its
    /// startup warnings are published, as after a request).
    pub fn heard(&self) {
        if let Kind::Local(handle) = &self.kind {
            handle.send(Call::Heard);
        }
    }
}

/// The task that owns a link's connection to the daemon: notes from what it reads, commands
/// written with ids of their own and answered through their channel.
async fn serve_socket(
    read: tokio::io::BufReader<crate::client::dial::Reader>,
    mut write: crate::client::dial::Writer,
    tx: mpsc::Sender<Note>,
    mut request_rx: mpsc::UnboundedReceiver<Outgoing>,
    mut current: String,
) {
    let mut pending: Pending = HashMap::new();
    let mut next = 1000u64;
    let mut lines = read.split(b'\n');
    loop {
        tokio::select! {
            line = lines.next_segment() => {
                let Ok(Some(line)) = line else {
                    let _ = tx.send(Note::Lost(CLOSED.into())).await;
                    break;
                };
                let note = match j::parse_line(&line) {
                    Incoming::Response { id, result } => {
                        if let Some(back) = pending.remove(id.text()) {
                            let _ = back.send(match result {
                                Ok(raw) => serde_json::from_str(raw.get()).map_err(|e| e.to_string()),
                                Err(e) => Err(e.message),
                            });
                        }
                        None
                    }
                    Incoming::Notification { method, params } => {
                        note_of(&method, params.as_deref(), &mut current)
                    }
                    _ => None,
                };
                if let Some(note) = note {
                    let end = matches!(note, Note::Lost(_) | Note::Lagged { .. });
                    if tx.send(note).await.is_err() || end {
                        break;
                    }
                }
            }
            req = request_rx.recv() => {
                let Some((method, mut params, back)) = req else { break };
                params["sessionId"] = json!(current);
                next += 1;
                let id = Id::from(next);
                let Ok(text) = j::request_line(&id, &method, &params) else { continue };
                if write.write_all(text.as_bytes()).await.is_err() {
                    let _ = back.send(Err("the daemon connection is closed".into()));
                    continue;
                }
                pending.insert(id.text().to_string(), back);
            }
        }
    }
    for (_, back) in pending.drain() {
        let _ = back.send(Err("the daemon connection is closed".into()));
    }
}

/// Why a link to the daemon ended when the daemon closed the connection.
pub const CLOSED: &str = "the daemon closed the connection";

/// The note a daemon notification means (tracking the session's current id); `None` for
/// another session's, an unknown method, or params that do not fit it.
fn note_of(
    method: &str,
    params: Option<&serde_json::value::RawValue>,
    current: &mut String,
) -> Option<Note> {
    match Notification::decode(method, params)?.ok()? {
        Notification::Event(e) if e.session_id == *current => Some(Note::Event {
            seq: e.seq,
            line: e.event.get().into(),
        }),
        Notification::Replaced(r) if r.session_id == *current => {
            *current = r.new_session_id;
            Some(Note::Replaced {
                session: current.clone(),
                epoch: r.epoch,
            })
        }
        Notification::Event(_) | Notification::Replaced(_) => None,
        Notification::Lagged(l) => Some(Note::Lagged { seq: l.seq }),
        Notification::Notice(n) => Some(Note::Notice(n.message)),
        Notification::Shutdown(s) => Some(Note::Lost(format!(
            "the daemon is shutting down ({})",
            s.reason
        ))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_daemon_notice_becomes_a_note_for_the_view() {
        let mut current = "s1".to_string();
        let raw = |v: Value| serde_json::value::to_raw_value(&v).unwrap();
        let params =
            raw(json!({"level": "warning", "message": "scheduled task x ended failed (exit 1)"}));
        assert_eq!(
            note_of("daemon/notice", Some(&params), &mut current),
            Some(Note::Notice(
                "scheduled task x ended failed (exit 1)".into()
            ))
        );
        assert_eq!(
            note_of("daemon/notice", Some(&raw(json!({}))), &mut current),
            None
        );
        assert_eq!(note_of("daemon/unknown", Some(&params), &mut current), None);
    }
}
