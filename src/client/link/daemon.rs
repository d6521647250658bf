//! A link to a session of the daemon: attached on a greeted connection (the one way every
//! front end opens one), connected again with backoff from the link's own cursor when a
//! remote link drops, and left with the session live there.

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::socket::{self, Order, State};
use super::{AttachError, Kind, Link, Notes, Start};
use crate::client::dial::Dial;
use crate::client::socket::{CallError, Client, Reattached};
use crate::host::stream::QUEUE;
use crate::wire::protocol::daemon::DaemonInfo;
use crate::wire::protocol::session::{self, AttachParams, AttachResult, Cursor as At};

/// The daemon's side of a link.
pub(super) struct Socket {
    dial: Dial,
    interactive: bool,
    /// The connection's task; it hands its state back when the connection ends.
    task: Option<JoinHandle<State>>,
}

/// How connecting a link again went ([`Link::reconnect`]).
pub enum Reconnected {
    /// Attached again (a replay of what followed the link's cursor, or a snapshot), after
    /// this many attempts.
    Back { start: Start, attempts: u32 },
    /// The daemon answered but no longer serves the session (why).
    Refused(String),
    /// Nothing answered within [`crate::client::dial::Backoff::GIVE_UP`] (or this link is
    /// not a daemon's).
    GaveUp,
}

impl Link {
    /// Attaches to `session` in the daemon `dial` names (from `cursor` if given).
    pub async fn daemon(
        dial: &Dial,
        session: &str,
        cursor: Option<(&str, u64)>,
        interactive: bool,
    ) -> Result<(Link, Start), AttachError> {
        let client = Client::dial(dial, interactive)
            .await
            .map_err(|e| AttachError::Unreachable(e.to_string()))?;
        let (link, attached) = Link::attach(client, dial, session, cursor)
            .await
            .map_err(|e| match e {
                CallError::Rpc(e) => AttachError::Refused(e.message),
                lost => AttachError::Unreachable(lost.to_string()),
            })?;
        let start = Start {
            epoch: attached.epoch.clone(),
            seq: attached.seq,
            snapshot: attached.snapshot.clone(),
        };
        Ok((link, start))
    }

    /// Attaches to `session` (from `cursor` if given) on `client`, a greeted connection to the
    /// daemon `dial` names, which then carries the link: `session/attach`'s answer, and the
    /// notifications that came with it as the first notes.
    pub async fn attach(
        mut client: Client,
        dial: &Dial,
        session: &str,
        cursor: Option<(&str, u64)>,
    ) -> Result<(Link, AttachResult), CallError> {
        let params = AttachParams {
            session_id: session.to_string(),
            cursor: cursor.map(|(epoch, seq)| At {
                epoch: epoch.to_string(),
                seq,
            }),
        };
        let attached = client.call::<session::Attach>(&params).await?;
        let (orders_tx, orders) = mpsc::unbounded_channel();
        let state = State::new(orders, session, (attached.epoch.clone(), attached.seq));
        let carried = carry(client, state);
        let link = Link {
            session: session.to_string(),
            kind: Kind::Daemon { orders: orders_tx },
            notes: carried.notes,
            daemon: Some(carried.hello),
            socket: Some(Socket {
                dial: dial.clone(),
                interactive: carried.interactive,
                task: Some(carried.task),
            }),
        };
        Ok((link, attached))
    }

    /// The link to the daemon dropped ([`super::Note::Lost`]): connects again (never
    /// prompting) with backoff and attaches from the last event this link delivered, the
    /// commands not written yet going out on the new connection. Only after the link's
    /// stream said it was lost (before that, this waits for it).
    pub async fn reconnect(&mut self) -> Reconnected {
        let Some(socket) = self.socket.as_mut() else {
            return Reconnected::GaveUp;
        };
        let Some(task) = socket.task.take() else {
            return Reconnected::GaveUp;
        };
        let Ok(mut state) = task.await else {
            return Reconnected::GaveUp;
        };
        let cursor = (state.epoch.clone(), state.seq);
        let back = Client::reattach(
            &socket.dial,
            &state.session,
            (&cursor.0, cursor.1),
            socket.interactive,
        )
        .await;
        match back {
            Reattached::Back(client, attached, attempts) => {
                state.epoch = attached.epoch.clone();
                state.seq = attached.seq;
                self.session = state.session.clone();
                let carried = carry(*client, state);
                self.notes = carried.notes;
                self.daemon = Some(carried.hello);
                socket.task = Some(carried.task);
                let start = Start {
                    epoch: attached.epoch,
                    seq: attached.seq,
                    snapshot: attached.snapshot,
                };
                Reconnected::Back { start, attempts }
            }
            Reattached::Refused(why) => Reconnected::Refused(why),
            Reattached::GaveUp => Reconnected::GaveUp,
        }
    }

    /// Leaves a daemon's session live there; with `abort`, its run is aborted first (the
    /// command written, its answer not waited for). Nothing for a session in this process.
    pub async fn leave(self, abort: bool) {
        let Kind::Daemon { orders } = &self.kind else {
            return;
        };
        if !abort {
            return;
        }
        let (written, rx) = oneshot::channel();
        let order = Order {
            method: "abort".into(),
            params: serde_json::Map::new(),
            back: None,
            written: Some(written),
        };
        if orders.send(order).is_ok() {
            let _ = rx.await;
        }
    }
}

/// A connection carrying a link.
struct Carried {
    notes: Notes,
    task: JoinHandle<State>,
    /// The daemon, as its `hello` answer describes it.
    hello: DaemonInfo,
    interactive: bool,
}

/// Starts the task that carries a link on `client`'s connection; the notifications read with
/// the attach's answer are its first notes.
fn carry(mut client: Client, state: State) -> Carried {
    let early: Vec<_> = client.notifications.drain(..).collect();
    let hello = client.hello.daemon.clone();
    let interactive = client.interactive;
    let (read, write) = client.into_parts();
    let (tx, notes) = mpsc::channel(QUEUE);
    let task = tokio::spawn(socket::serve(read, write, tx, state, early));
    Carried {
        notes: Notes::Channel(notes),
        task,
        hello,
        interactive,
    }
}
