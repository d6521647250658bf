//! A front end's link to the session it shows, served by a host in this process or by the
//! daemon over its socket. Both give the same two things: pi commands answered with pi's
//! `data` or pi's error text ([`Commands`]), and the session's numbered stream of wire lines
//! (plus the session being replaced, and for the daemon the link being dropped or lost). A
//! front end written against a [`Link`] behaves the same in-process and through the daemon
//! (`DESIGN.md` §10.1: "no daemon" only means the host lives in this process). This file owns
//! the link and its in-process side; `daemon` opens, reconnects and leaves a daemon's link,
//! `socket` runs its connection, `commands` sends.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod commands;
mod daemon;
pub mod error;
mod socket;

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

pub use commands::{Commands, Reply};
pub use daemon::Reconnected;
pub use error::{LinkError, LinkErrorKind};

use crate::host::actor::{self, Call, SessionHandle};
use crate::host::stream::{Cursor, Delivery, Item, QUEUE};
use crate::host::HostSetup;
use crate::wire::events::TypedEvent;
use crate::wire::protocol::daemon::DaemonInfo;

/// What the stream brings, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Note {
    /// A wire line of the session's stream (compact JSON, no newline); from a session in
    /// this process, the event typed as well (read it instead of parsing the line).
    Event {
        seq: u64,
        line: Arc<str>,
        typed: Option<TypedEvent>,
    },
    /// The session now serves another one, in a new epoch (`new_session`, `fork`, …), or the
    /// same one whose conversation a rewind moved (`rewound`).
    Replaced {
        session: String,
        epoch: String,
        rewound: bool,
    },
    /// This link fell behind and was dropped (by the daemon, or by the session in this
    /// process); attach again from `seq` (`Link::daemon` with a cursor, `reattach_local`).
    Lagged { seq: u64 },
    /// The daemon went away.
    Lost(Lost),
    /// A daemon-wide message for the user (`daemon/notice`: a scheduled run that failed).
    Notice(String),
}

/// How the daemon went away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lost {
    /// The connection ended.
    Closed,
    /// The daemon said it is shutting down (why).
    ShuttingDown(String),
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lost::Closed => f.write_str(CLOSED),
            Lost::ShuttingDown(reason) => write!(f, "the daemon is shutting down ({reason})"),
        }
    }
}

/// Why a link to the daemon ended when the daemon closed the connection.
pub const CLOSED: &str = "the daemon closed the connection";

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

#[derive(Clone)]
enum Kind {
    Local(SessionHandle),
    Daemon {
        orders: mpsc::UnboundedSender<socket::Order>,
    },
}

/// A link to one served session.
pub struct Link {
    session: String,
    kind: Kind,
    notes: Notes,
    /// The daemon, as its `hello` answer describes it (`None` in-process).
    pub daemon: Option<DaemonInfo>,
    /// The daemon's side: how to reach it again, and the connection's task.
    socket: Option<daemon::Socket>,
}

impl Link {
    /// Serves `setup` in this process and attaches to it (a snapshot of the start).
    pub async fn local(setup: HostSetup, ring: (usize, usize)) -> Result<(Link, Start), LinkError> {
        let epoch = format!("local-{}", std::process::id());
        let handle = actor::spawn(setup, epoch, ring);
        let session = handle
            .status()
            .await
            .map(|s| s.summary.session_id)
            .ok_or(LinkError::new(
                LinkErrorKind::Closed,
                "the session ended at once",
            ))?;
        let (notes, start) = attach_local(&handle, None, ring.0, true).await?;
        Ok((Link::in_process(session, handle, notes), start))
    }

    /// Serves `setup` in this process for a print or JSON run: attached from its first event
    /// as a client that answers no dialogs, through a queue that never drops it (a slow stdout
    /// holds the stream back, as when the run drove the kernel itself; nothing is replayed,
    /// so the ring keeps one event).
    pub async fn headless(setup: HostSetup) -> Result<Link, LinkError> {
        let epoch = format!("local-{}", std::process::id());
        let handle = actor::spawn(setup, epoch.clone(), (1, 0));
        let session = handle.session_id().to_string();
        let from = Cursor { epoch, seq: 0 };
        let (notes, _) = attach_local(&handle, Some(from), UNBOUNDED, false).await?;
        Ok(Link::in_process(session, handle, notes))
    }

    /// Serves `setup` in this process for a client that writes the session's stream and its
    /// answers in one order (RPC mode) and does not watch the session (its approval dialogs
    /// time out); attached from the stream's first event, so nothing the session published
    /// while starting is missed. The queue holds as many events as the client is behind (the
    /// host never waits for it, and it is never dropped).
    pub async fn local_from_start(setup: HostSetup) -> Result<Link, LinkError> {
        let epoch = format!("local-{}", std::process::id());
        // Only what is published before the attach is replayed from the ring.
        let ring = (1024, 1 << 20);
        let handle = actor::spawn(setup, epoch.clone(), ring);
        let cursor = Cursor { epoch, seq: 0 };
        let (notes, _) = attach_local(&handle, Some(cursor), UNBOUNDED, false).await?;
        Ok(Link::in_process(
            handle.session_id().to_string(),
            handle,
            notes,
        ))
    }

    fn in_process(session: String, handle: SessionHandle, notes: Notes) -> Link {
        Link {
            session,
            kind: Kind::Local(handle),
            notes,
            daemon: None,
            socket: None,
        }
    }

    /// Attaches again to the session in this process from `cursor` (after
    /// [`Note::Lagged`]): a replay of what followed it, or a snapshot. `None` for a daemon's
    /// session (attach with [`Link::daemon`] instead).
    pub async fn reattach_local(
        &mut self,
        cursor: (&str, u64),
    ) -> Option<Result<Start, LinkError>> {
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

    /// The session this link shows (it changes with [`Note::Replaced`]).
    pub fn session_id(&self) -> &str {
        &self.session
    }

    /// Runs a pi command: pi's `data` (`{}` without one) or why not.
    pub async fn request(&self, command: &str, params: Value) -> Result<Value, LinkError> {
        self.commands().request(command, params).await
    }

    /// A handle for sending commands from other tasks (it outlives a reconnection).
    pub fn commands(&self) -> Commands {
        Commands::new(self.kind.clone())
    }

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
            typed: e.typed,
        },
        Item::Replaced { new, .. } => Note::Replaced {
            rewound: new == d.session,
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
) -> Result<(Notes, Start), LinkError> {
    let (queue, deliveries) = mpsc::channel::<Delivery>(ring + QUEUE);
    let (reply, rx) = oneshot::channel();
    handle.send(Call::Attach {
        client: 1,
        interactive,
        cursor,
        queue,
        reply,
    });
    let attached = rx
        .await
        .map_err(|_| LinkError::new(LinkErrorKind::Closed, "the session has ended"))?;
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
