//! A link's connection to the daemon: one task owns it, writes the link's commands with ids of
//! its own (each naming the session the link shows when it is written), answers each with the
//! daemon's result as received and the stream's last `seq` when it came, and turns
//! notifications into notes. A command the daemon refused for naming a session that was
//! replaced meanwhile (-32012) goes back to its place in the queue and is sent again with the
//! new id; nothing is written while a command in flight may still be refused so, so the
//! session serves them in the order given. When the connection ends
//! the task hands back what outlives it (the cursor, the commands not written yet) for the
//! next one. It never prints.

use std::collections::{HashMap, VecDeque};

use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use super::error::LinkError;
use super::{Lost, Note};
use crate::client::dial::{Reader, Writer};
use crate::host::Data;
use crate::wire::jsonrpc::{self as j, ErrorObject, Id, Incoming};
use crate::wire::pi::CommandName;
use crate::wire::protocol::Notification;

/// A command's answer: pi's `data` as the daemon wrote it (or the error), and the stream's last
/// `seq` delivered before it.
pub(crate) type Answer = (Result<Data, LinkError>, u64);

/// A command for the connection's task.
pub(crate) struct Order {
    pub method: String,
    /// Its params; `sessionId` is set when it is written.
    pub params: Map<String, Value>,
    /// Where its answer goes (none: nobody waits for it).
    pub back: Option<oneshot::Sender<Answer>>,
    /// Told once the command is written.
    pub written: Option<oneshot::Sender<()>>,
}

/// What outlives one connection of a link: handed to the task, and back when it ends.
pub(crate) struct State {
    pub orders: mpsc::UnboundedReceiver<Order>,
    /// The session the link shows, by its id now.
    pub session: String,
    /// The cursor: the stream's epoch and the last `seq` delivered as a note.
    pub epoch: String,
    pub seq: u64,
    /// Commands not written yet, each with its place in the order the link was given them.
    queued: VecDeque<(u64, Order)>,
    /// The last wire id used.
    next: u64,
    /// The last place given.
    placed: u64,
}

impl State {
    pub fn new(orders: mpsc::UnboundedReceiver<Order>, session: &str, at: (String, u64)) -> State {
        State {
            orders,
            session: session.to_string(),
            epoch: at.0,
            seq: at.1,
            queued: VecDeque::new(),
            // Above the ids the connection's greeting and attach used.
            next: 1000,
            placed: 0,
        }
    }

    /// The note a notification means for the link (tracking the session's id and the
    /// cursor); `None` for another session's, an unknown method, or params that do not fit.
    pub fn note(
        &mut self,
        method: &str,
        params: Option<&serde_json::value::RawValue>,
    ) -> Option<Note> {
        match Notification::decode(method, params)?.ok()? {
            Notification::Event(e) if e.session_id == self.session => {
                self.epoch = e.epoch;
                self.seq = e.seq;
                Some(Note::Event {
                    seq: e.seq,
                    line: e.event.get().into(),
                    typed: None,
                })
            }
            Notification::Replaced(r) if r.session_id == self.session => {
                let rewound = r.new_session_id == r.session_id;
                self.session = r.new_session_id;
                self.epoch = r.epoch.clone();
                self.seq = r.seq;
                Some(Note::Replaced {
                    session: self.session.clone(),
                    epoch: r.epoch,
                    rewound,
                })
            }
            Notification::Event(_) | Notification::Replaced(_) => None,
            Notification::Lagged(l) => Some(Note::Lagged { seq: l.seq }),
            Notification::Notice(n) => Some(Note::Notice(n.message)),
            Notification::Shutdown(s) => Some(Note::Lost(Lost::ShuttingDown(s.reason))),
        }
    }
}

/// A command written and not answered yet.
struct Sent {
    /// The session id it named.
    named: String,
    /// Its place in the order the link was given its commands.
    place: u64,
    /// Whether it makes the session serve another one (`new_session`, `fork`, …).
    replaces: bool,
    order: Order,
}

/// One connection: its commands in flight.
struct Wire {
    write: Writer,
    sent: HashMap<u64, Sent>,
    /// The highest id answered.
    answered: u64,
}

/// Serves one connection until it ends (the daemon closed it, dropped the link for falling
/// behind, or the link is gone); the commands in flight then get no answer.
pub(crate) async fn serve(
    read: BufReader<Reader>,
    write: Writer,
    notes: mpsc::Sender<Note>,
    mut state: State,
    early: Vec<(String, Value)>,
) -> State {
    for (method, params) in early {
        let Ok(params) = serde_json::value::to_raw_value(&params) else {
            continue;
        };
        if let Some(note) = state.note(&method, Some(&params)) {
            if notes.send(note).await.is_err() {
                return state;
            }
        }
    }
    let mut lines = read.split(b'\n');
    let mut wire = Wire {
        write,
        sent: HashMap::new(),
        answered: 0,
    };
    let mut orders = std::mem::replace(&mut state.orders, mpsc::unbounded_channel().1);
    wire.flush(&mut state).await;
    loop {
        tokio::select! {
            line = lines.next_segment() => {
                let Ok(Some(line)) = line else {
                    let _ = notes.send(Note::Lost(Lost::Closed)).await;
                    break;
                };
                let note = match j::parse_line(&line) {
                    Incoming::Response { id, result } => {
                        wire.answer(&id, result, &mut state).await;
                        None
                    }
                    Incoming::Notification { method, params } => {
                        state.note(&method, params.as_deref())
                    }
                    _ => None,
                };
                if let Some(note) = note {
                    let end = matches!(note, Note::Lost(_) | Note::Lagged { .. });
                    if notes.send(note).await.is_err() || end {
                        break;
                    }
                }
            }
            order = orders.recv() => {
                let Some(order) = order else { break };
                state.placed += 1;
                state.queued.push_back((state.placed, order));
                wire.flush(&mut state).await;
            }
        }
    }
    state.orders = orders;
    state
}

impl Wire {
    /// Writes the queued commands in their order, unless one in flight may still change the
    /// session they should name: one that replaces the session (later ones name the new one,
    /// known before its answer comes), or one that may still come back refused for naming a
    /// session that was replaced meanwhile (it goes back to its place, before later ones).
    async fn flush(&mut self, state: &mut State) {
        while !self.blocked(state) {
            let Some((place, order)) = state.queued.pop_front() else {
                break;
            };
            self.write(place, order, state).await;
        }
    }

    /// A command naming an old id can be refused only before the daemon answers a later one
    /// (errors are answered at once, in order).
    fn blocked(&self, state: &State) -> bool {
        self.sent
            .iter()
            .any(|(n, s)| s.replaces || (s.named != state.session && *n > self.answered))
    }

    async fn write(&mut self, place: u64, mut order: Order, state: &mut State) {
        order
            .params
            .insert("sessionId".into(), json!(state.session.clone()));
        state.next += 1;
        let id = Id::from(state.next);
        let Ok(text) = j::request_line(&id, &order.method, &order.params) else {
            return; // never: a map always serializes
        };
        if self.write.write_all(text.as_bytes()).await.is_err() {
            // The reader sees the connection end; this command gets no answer.
            return;
        }
        if let Some(written) = order.written.take() {
            let _ = written.send(());
        }
        let named = state.session.clone();
        tracing::debug!(id = state.next, method = %order.method, session = %named, "link: wrote");
        self.sent.insert(
            state.next,
            Sent {
                named,
                place,
                replaces: CommandName::parse(&order.method)
                    .is_some_and(CommandName::replaces_session),
                order,
            },
        );
    }

    /// The daemon answered command `id`: the answer goes back, or the command is sent again
    /// if it named a session that was replaced meanwhile.
    async fn answer(
        &mut self,
        id: &Id,
        result: Result<Box<serde_json::value::RawValue>, ErrorObject>,
        state: &mut State,
    ) {
        let Some((n, sent)) = id
            .text()
            .parse::<u64>()
            .ok()
            .and_then(|n| Some((n, self.sent.remove(&n)?)))
        else {
            return;
        };
        self.answered = self.answered.max(n);
        tracing::debug!(
            id = n,
            error = result.as_ref().err().map(|e| e.code),
            session = %state.session,
            seq = state.seq,
            "link: answered"
        );
        match result {
            Err(e) if e.code == j::UNKNOWN_SESSION && sent.named != state.session => {
                // Back in its place among the commands not written yet.
                let at = state.queued.partition_point(|(p, _)| *p < sent.place);
                state.queued.insert(at, (sent.place, sent.order));
            }
            result => {
                let answer = result
                    .map(|raw| Data::Raw(raw.get().to_string()))
                    .map_err(LinkError::from_daemon);
                if let Some(back) = sent.order.back {
                    let _ = back.send((answer, state.seq));
                }
            }
        }
        self.flush(state).await;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::error::LinkErrorKind;
    use super::*;
    use tokio::io::AsyncReadExt;

    /// The commands the task wrote so far, as (id, method, sessionId).
    async fn written(daemon: &mut tokio::net::UnixStream) -> Vec<(u64, String, String)> {
        let mut buf = vec![0u8; 64 * 1024];
        let n = daemon.read(&mut buf).await.unwrap();
        String::from_utf8_lossy(&buf[..n])
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                let id = v["id"].as_u64().unwrap();
                let method = v["method"].as_str().unwrap().to_string();
                let session = v["params"]["sessionId"].as_str().unwrap().to_string();
                (id, method, session)
            })
            .collect()
    }

    fn order(method: &str) -> (Order, oneshot::Receiver<Answer>) {
        let (back, rx) = oneshot::channel();
        let order = Order {
            method: method.into(),
            params: Map::new(),
            back: Some(back),
            written: None,
        };
        (order, rx)
    }

    async fn say(daemon: &mut tokio::net::UnixStream, line: Value) {
        let text = format!("{line}\n");
        daemon.write_all(text.as_bytes()).await.unwrap();
    }

    /// A link to a fake daemon: (orders in, the daemon's end, notes out).
    fn linked() -> (
        mpsc::UnboundedSender<Order>,
        tokio::net::UnixStream,
        mpsc::Receiver<Note>,
    ) {
        let (mine, daemon) = tokio::net::UnixStream::pair().unwrap();
        let (read, write) = mine.into_split();
        let read: Reader = Box::new(read);
        let (orders_tx, orders) = mpsc::unbounded_channel();
        let (notes_tx, notes) = mpsc::channel(16);
        let state = State::new(orders, "old", (String::new(), 0));
        tokio::spawn(serve(
            BufReader::new(read),
            Box::new(write),
            notes_tx,
            state,
            Vec::new(),
        ));
        (orders_tx, daemon, notes)
    }

    /// The daemon tells the link session `from` is now `to`.
    async fn replace(
        daemon: &mut tokio::net::UnixStream,
        notes: &mut mpsc::Receiver<Note>,
        from: &str,
        to: &str,
    ) {
        let replaced = json!({"sessionId": from, "newSessionId": to, "epoch": to, "seq": 7});
        say(
            daemon,
            json!({"jsonrpc": "2.0", "method": "session/replaced", "params": replaced}),
        )
        .await;
        assert!(matches!(notes.recv().await, Some(Note::Replaced { .. })));
    }

    async fn refuse(daemon: &mut tokio::net::UnixStream, id: u64, session: &str) {
        let message = format!("no live session {session} in this daemon");
        let refused = json!({"code": j::UNKNOWN_SESSION, "message": message});
        say(
            daemon,
            json!({"jsonrpc": "2.0", "id": id, "error": refused}),
        )
        .await;
    }

    #[tokio::test]
    async fn a_command_refused_for_a_replaced_id_is_sent_again_before_later_ones() {
        let (orders, mut daemon, mut notes) = linked();
        let (get_state, mut state_answer) = order("get_state");
        let (get_messages, _) = order("get_messages");
        orders.send(get_state).unwrap();
        orders.send(get_messages).unwrap();
        let mut sent = written(&mut daemon).await;
        if sent.len() < 2 {
            sent.extend(written(&mut daemon).await);
        }
        assert_eq!(
            sent,
            [
                (1001, "get_state".into(), "old".into()),
                (1002, "get_messages".into(), "old".into())
            ]
        );
        // Another client changed the session before both came to the daemon.
        replace(&mut daemon, &mut notes, "old", "new").await;
        // A later command must wait: both may still come back refused.
        let (get_entries, _) = order("get_entries");
        orders.send(get_entries).unwrap();
        refuse(&mut daemon, 1001, "old").await;
        refuse(&mut daemon, 1002, "old").await;
        let mut sent = written(&mut daemon).await;
        while sent.len() < 3 {
            sent.extend(written(&mut daemon).await);
        }
        assert_eq!(
            sent,
            [
                (1003, "get_state".into(), "new".into()),
                (1004, "get_messages".into(), "new".into()),
                (1005, "get_entries".into(), "new".into())
            ],
            "sent again first, with the new id, in their order"
        );
        assert!(
            state_answer.try_recv().is_err(),
            "the refusal is not answered"
        );
        // A -32012 for the current id is a real error.
        refuse(&mut daemon, 1003, "new").await;
        let (answer, head) = state_answer.await.unwrap();
        let e = answer.unwrap_err();
        assert_eq!(e.kind, LinkErrorKind::UnknownSession);
        assert_eq!(e.message, "no live session new in this daemon");
        assert_eq!(head, 7, "the stream's seq when it came");
    }

    #[tokio::test]
    async fn a_command_after_a_session_change_waits_for_it_and_names_the_new_session() {
        let (orders, mut daemon, mut notes) = linked();
        let (switch, _switched) = order("switch_session");
        let (fork, _forked) = order("fork");
        orders.send(switch).unwrap();
        orders.send(fork).unwrap();
        assert_eq!(
            written(&mut daemon).await,
            [(1001, "switch_session".into(), "old".into())],
            "the fork waits"
        );
        // The switch is served: the session becomes "new", then the switch is answered.
        replace(&mut daemon, &mut notes, "old", "new").await;
        say(
            &mut daemon,
            json!({"jsonrpc": "2.0", "id": 1001, "result": {"cancelled": false}}),
        )
        .await;
        assert_eq!(
            written(&mut daemon).await,
            [(1002, "fork".into(), "new".into())],
            "written once the switch could no longer change what it names"
        );
    }

    #[test]
    fn a_daemon_notice_becomes_a_note_for_the_view() {
        let mut state = State::new(mpsc::unbounded_channel().1, "s1", (String::new(), 0));
        let raw = |v: Value| serde_json::value::to_raw_value(&v).unwrap();
        let params =
            raw(json!({"level": "warning", "message": "scheduled task x ended failed (exit 1)"}));
        assert_eq!(
            state.note("daemon/notice", Some(&params)),
            Some(Note::Notice(
                "scheduled task x ended failed (exit 1)".into()
            ))
        );
        assert_eq!(state.note("daemon/notice", Some(&raw(json!({})))), None);
        assert_eq!(state.note("daemon/unknown", Some(&params)), None);
    }
}
