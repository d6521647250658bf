//! `keel --mode rpc --daemon`: pi's RPC over stdio, with the session living in the daemon.
//! Each stdin request becomes a protocol v1 call with the session's id; its answer is written
//! in pi's envelope, and the session's events exactly as the daemon numbered them (the same
//! lines RPC mode writes in-process). A session change (`new_session`, `switch_session`,
//! `fork`, `clone`) is followed: `session/replaced` gives the id later requests name. Closing
//! stdin waits for an active run to settle, then exits 0; the session stays live in the
//! daemon. A daemon that goes away ends this with 1. Over `--remote`, a link that drops is
//! connected again with backoff and the cursor (the requests it was carrying are answered with
//! an error saying so); this ends with 1 only when the remote daemon no longer holds the
//! session or after ten minutes.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::collections::{HashMap, VecDeque};

use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use crate::cli::args::Cli;
use crate::client::dial::Dial;
use crate::client::socket::{reconnect_line, Client, Reattached, Reconnecting};
use crate::error::StartupError;
use crate::exit::Exit;
use crate::front::stdin::Input;
use crate::host::actor::SESSION_CHANGES;
use crate::mode::Env;
use crate::output::Output;
use crate::signals::Signals;
use crate::wire::jsonl::Frame;
use crate::wire::jsonrpc::{self as j, Id, Incoming};
use crate::wire::rpc;

/// Commands whose answer can come after the answers of later requests (in-process too).
const LATE: &[&str] = &["abort", "bash", "compact"];

/// A stdin request on its way through the daemon.
struct Pending {
    /// Its place among the stdin lines.
    order: u64,
    /// pi's id and command.
    id: Option<rpc::Id>,
    command: String,
    /// Its fields (without `sessionId`).
    params: Map<String, Value>,
    /// Its answer may come after those of later requests.
    late: bool,
}

/// A request sent to the daemon and not answered yet.
struct Sent {
    /// The order it was sent in: 1, 2, 3, …
    n: u64,
    /// The session id it named.
    session: String,
    req: Pending,
}

/// A line this client writes itself (for a line it could not parse), held until every
/// earlier request that answers at once has been answered, so it keeps its in-process place.
struct Held {
    after: u64,
    line: String,
}

/// The bridge's state between the daemon connection and stdio.
///
/// A session change is followed: after `session/replaced` requests name the new id. A request
/// sent with the old id before this client read the notification may reach the daemon after
/// it stopped naming the session (-32012); it is sent again with the new id, and later stdin
/// requests wait meanwhile, so the session serves them all in stdin order, as in-process. A
/// request can only get that -32012 before the daemon answers any later one (errors are
/// answered at once, in order), which tells when none can any more.
struct Bridge {
    write: crate::client::dial::Writer,
    session: String,
    sent: HashMap<String, Sent>,
    next: u64,
    /// The highest `n` answered.
    answered: u64,
    /// stdin requests not sent yet (see above).
    queued: VecDeque<Pending>,
    held: VecDeque<Held>,
    /// stdin lines so far.
    order: u64,
    running: bool,
    /// The last event written: its epoch and `seq` (the cursor of a reconnection).
    epoch: String,
    seq: u64,
}

impl Bridge {
    /// A `session/event` of this session: its line goes out as RPC mode writes it.
    fn event(&mut self, params: &serde_json::value::RawValue, out: &mut Output) {
        let Ok(p) = serde_json::from_str::<EventParams>(params.get()) else {
            return;
        };
        if p.seq <= self.seq && p.epoch == self.epoch {
            return;
        }
        match p.event.get().contains("\"type\":\"agent_start\"") {
            true => self.running = true,
            false if p.event.get().contains("\"type\":\"agent_settled\"") => self.running = false,
            false => {}
        }
        self.seq = p.seq;
        self.epoch = p.epoch;
        let _ = out.out(p.event.get().as_bytes());
        let _ = out.out(b"\n");
    }

    /// A stdin request: sent, unless a request naming an old id may still come back.
    async fn submit(&mut self, req: rpc::Request) -> bool {
        self.order += 1;
        let mut params = req.fields().clone();
        if req.command == "extension_ui_response" {
            if let Some(dialog) = req.id.as_ref().and_then(rpc::Id::as_string) {
                params.insert("id".into(), json!(dialog));
            }
        }
        // A session change is answered at once when the session is idle, and after the
        // active run has been aborted and has settled otherwise (in-process too).
        let late = LATE.contains(&req.command.as_str())
            || (SESSION_CHANGES.contains(&req.command.as_str()) && self.maybe_busy());
        self.queued.push_back(Pending {
            order: self.order,
            id: req.id,
            command: req.command,
            params,
            late,
        });
        self.flush().await
    }

    /// A line of this client's own, written in its place.
    fn hold(&mut self, line: String, out: &mut Output) {
        self.held.push_back(Held {
            after: self.order,
            line,
        });
        self.release(out);
    }

    /// Whether a run or a compaction may be active when the next request is served (a
    /// session change then waits for it to settle).
    fn maybe_busy(&self) -> bool {
        let busy = |p: &Pending| matches!(p.command.as_str(), "prompt" | "compact");
        self.running || self.sent.values().any(|s| busy(&s.req)) || self.queued.iter().any(busy)
    }

    async fn flush(&mut self) -> bool {
        while !self.blocked() {
            let Some(req) = self.queued.pop_front() else {
                break;
            };
            if !self.send(req).await {
                return false;
            }
        }
        true
    }

    fn blocked(&self) -> bool {
        self.sent
            .values()
            .any(|s| s.session != self.session && s.n > self.answered)
    }

    async fn send(&mut self, req: Pending) -> bool {
        self.next += 1;
        let id = Id::from(self.next);
        let mut params = req.params.clone();
        params.insert("sessionId".into(), json!(self.session));
        let Ok(line) = j::request_line(&id, &req.command, &Value::Object(params)) else {
            return true;
        };
        let sent = Sent {
            n: self.next,
            session: self.session.clone(),
            req,
        };
        self.sent.insert(id.text().to_string(), sent);
        self.write.write_all(line.as_bytes()).await.is_ok()
    }

    /// The daemon answered request `id`: writes what RPC mode writes for it, or sends it again
    /// if it named a session that was replaced meanwhile. False if the daemon is gone.
    async fn answer(
        &mut self,
        id: &Id,
        result: Result<Box<serde_json::value::RawValue>, j::ErrorObject>,
        out: &mut Output,
    ) -> bool {
        let Some(Sent { n, session, req }) = self.sent.remove(id.text()) else {
            return true;
        };
        self.answered = self.answered.max(n);
        if let Err(e) = &result {
            if e.code == j::UNKNOWN_SESSION && session != self.session {
                return self.send(req).await && self.flush().await;
            }
        }
        let command = &req.command;
        let text = match result {
            Ok(raw) => rpc::ok_raw_line(req.id.as_ref(), command, raw.get()),
            Err(e) if e.code == j::METHOD_NOT_FOUND => rpc::error_line(
                req.id.as_ref(),
                Some(command),
                &format!("Unknown command: {command}"),
            ),
            Err(e) => rpc::error_line(req.id.as_ref(), Some(command), &e.message),
        };
        if command == "prompt" && text.contains("\"disposition\":\"started\"") {
            self.running = true; // its events follow: wait for agent_settled
        }
        if command != "extension_ui_response" {
            let _ = out.out(text.as_bytes());
        }
        self.release(out);
        self.flush().await
    }

    /// Writes the held lines whose earlier requests that answer at once have been answered.
    fn release(&mut self, out: &mut Output) {
        while let Some(h) = self.held.front() {
            let waits = |p: &Pending| p.order <= h.after && !p.late;
            if self.sent.values().any(|s| waits(&s.req)) || self.queued.iter().any(waits) {
                return;
            }
            if let Some(h) = self.held.pop_front() {
                let _ = out.out(h.line.as_bytes());
            }
        }
    }

    /// Nothing more will be written.
    fn done(&self) -> bool {
        !self.running && self.sent.is_empty() && self.queued.is_empty() && self.held.is_empty()
    }
}

/// Serves RPC mode against the daemon until stdin closes or a signal arrives.
pub async fn serve(cli: &Cli, env: &Env, out: &mut Output) -> Result<Exit, StartupError> {
    let mut signals = Signals::new()?;
    let dial = crate::front::daemon::cli_dial(cli, env)?;
    let conn = crate::front::daemon::start(&dial, env).await?;
    let mut client = crate::client::socket::Client::greet(conn, true, &dial).await?;
    let args = crate::front::daemon::session_args(cli.argv.iter().cloned());
    let params = crate::front::daemon::open_params_for(&dial, cli, env, args, false);
    let opened = client
        .call("session/open", params)
        .await
        .map_err(|e| crate::front::client::open_failed_on(&dial, e))?;
    for w in opened["warnings"].as_array().into_iter().flatten() {
        out.err(&format!("Warning: {}\n", w.as_str().unwrap_or_default()));
    }
    let session = opened["sessionId"].as_str().unwrap_or_default().to_string();
    let attached = client
        .call("session/attach", json!({"sessionId": session}))
        .await
        .map_err(|e| StartupError::config(format!("cannot attach to session {session}: {e}")))?;
    let early = std::mem::take(&mut client.notifications);
    let (read, write) = client.into_parts();
    let mut lines = read.split(b'\n');
    let (input_tx, mut input_rx) = tokio::sync::mpsc::channel::<Input>(4);
    crate::front::stdin::spawn_reader(input_tx);
    let mut bridge = Bridge {
        write,
        session,
        sent: HashMap::new(),
        next: 0,
        answered: 0,
        queued: VecDeque::new(),
        held: VecDeque::new(),
        order: 0,
        running: false,
        epoch: attached["epoch"].as_str().unwrap_or_default().to_string(),
        seq: attached["seq"].as_u64().unwrap_or(0),
    };
    // Events that arrived while attaching come first.
    bridge.events(early, out);
    let mut eof = false;
    let gone = "Error: the keel daemon closed the connection (it stopped or was killed); the session file keeps every completed entry\n";
    let exit = loop {
        if eof && bridge.done() {
            break Exit::Success;
        }
        tokio::select! {
            biased;
            n = signals.next() => {
                let params = json!({"sessionId": bridge.session});
                if let Ok(line) = j::request_line(&Id::from(0), "abort", &params) {
                    let _ = bridge.write.write_all(line.as_bytes()).await;
                }
                break Exit::Signal(n);
            }
            line = lines.next_segment() => {
                let Ok(Some(line)) = line else {
                    if dial.remote().is_some() {
                        if let Some((read, write)) = reconnect(&dial, &mut bridge, out).await {
                            lines = read.split(b'\n');
                            bridge.write = write;
                            continue;
                        }
                    }
                    out.err(gone);
                    break Exit::Failed;
                };
                match j::parse_line(&line) {
                    Incoming::Notification { method, params } if method == "session/event" => {
                        let Some(params) = params else { continue };
                        bridge.event(&params, out);
                    }
                    Incoming::Notification { method, params } if method == "session/replaced" => {
                        // Later requests name the session by its new id.
                        let Some(params) = params else { continue };
                        if let Ok(p) = serde_json::from_str::<Replaced>(params.get()) {
                            if p.session_id == bridge.session {
                                bridge.session = p.new_session_id;
                                bridge.epoch = p.epoch;
                                bridge.seq = p.seq;
                            }
                        }
                    }
                    Incoming::Response { id, result } => {
                        let alive = bridge.answer(&id, result, out).await;
                        if !alive {
                            out.err(gone);
                            break Exit::Failed;
                        }
                    }
                    Incoming::Notification { method, .. } if method == "daemon/shutdown" => {
                        out.err("Error: the keel daemon is shutting down\n");
                        break Exit::Failed;
                    }
                    _ => {}
                }
            }
            input = input_rx.recv(), if !eof => match input {
                Some(Input::Frames(frames)) => {
                    for frame in frames {
                        let req = match request(frame) {
                            Ok(req) => req,
                            Err(line) => {
                                bridge.hold(line, out);
                                continue;
                            }
                        };
                        if !bridge.submit(req).await {
                            out.err("Error: the keel daemon closed the connection\n");
                            return Ok(Exit::Failed);
                        }
                    }
                }
                Some(Input::Error(_)) | None => eof = true,
            },
        }
        if out.flush().is_err() {
            break Exit::Signal(crate::exit::SIGPIPE);
        }
    };
    let _ = out.flush();
    Ok(exit)
}

impl Bridge {
    /// Notifications read with an answer, in order: the events among them go out.
    fn events(&mut self, notes: impl IntoIterator<Item = (String, Value)>, out: &mut Output) {
        for (method, params) in notes {
            if method != "session/event" {
                continue;
            }
            if let Ok(raw) = serde_json::value::to_raw_value(&params) {
                self.event(&raw, out);
            }
        }
    }
}

/// The link to a remote daemon dropped: the requests it carried are answered with an error
/// (they may have run), then the session is attached again from the last event written, with
/// backoff. `None` when the daemon there no longer holds the session, or after
/// [`crate::client::dial::Backoff::GIVE_UP`].
async fn reconnect(
    dial: &Dial,
    bridge: &mut Bridge,
    out: &mut Output,
) -> Option<(
    tokio::io::BufReader<crate::client::dial::Reader>,
    crate::client::dial::Writer,
)> {
    out.err(&reconnect_line(
        dial,
        &Reconnecting::Lost("it closed the connection"),
    ));
    let place = dial.describe();
    let mut carried: Vec<Sent> = bridge.sent.drain().map(|(_, s)| s).collect();
    carried.sort_by_key(|s| s.n);
    for s in carried {
        let why = format!(
            "the connection to the keel daemon on {place} was lost before the answer; the command may have run"
        );
        let _ = out.out(rpc::error_line(s.req.id.as_ref(), Some(&s.req.command), &why).as_bytes());
    }
    bridge.answered = bridge.next;
    let _ = out.flush();
    let cursor = (bridge.epoch.clone(), bridge.seq);
    match Client::reattach(dial, &bridge.session, (&cursor.0, cursor.1), true).await {
        Reattached::Back(mut client, attached, attempts) => {
            if attached["mode"] == "snapshot" {
                out.err("Warning: the daemon no longer held the events in between; get_state and get_messages give the session as it is now\n");
                bridge.epoch = attached["epoch"].as_str().unwrap_or_default().to_string();
                bridge.seq = attached["seq"].as_u64().unwrap_or(bridge.seq);
                bridge.running = attached["snapshot"]["state"]["isStreaming"] == true;
            }
            let notes = std::mem::take(&mut client.notifications);
            bridge.events(notes, out);
            out.err(&reconnect_line(dial, &Reconnecting::Back(attempts)));
            Some(client.into_parts())
        }
        Reattached::Refused(why) => {
            out.err(&reconnect_line(dial, &Reconnecting::Refused(&why)));
            None
        }
        Reattached::GaveUp => None,
    }
}

#[derive(serde::Deserialize)]
struct EventParams {
    epoch: String,
    seq: u64,
    event: Box<serde_json::value::RawValue>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Replaced {
    session_id: String,
    new_session_id: String,
    epoch: String,
    seq: u64,
}

/// A stdin line as a pi request, or the error line RPC mode writes for it.
fn request(frame: Frame) -> Result<rpc::Request, String> {
    let line = match frame {
        Frame::Line(l) => l,
        Frame::TooLong { bytes } => return Err(super::too_long_line(bytes)),
    };
    let req = rpc::parse_line(&line).map_err(|rejected| rpc::rejected_line(&rejected))?;
    if !crate::host::COMMANDS.contains(&req.command.as_str()) {
        let error = format!("Unknown command: {}", req.command);
        return Err(rpc::error_line(req.id.as_ref(), Some(&req.command), &error));
    }
    Ok(req)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};
    use tokio::io::AsyncReadExt;

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn bridge(write: tokio::net::unix::OwnedWriteHalf) -> Bridge {
        Bridge {
            write: Box::new(write),
            session: "old".into(),
            sent: HashMap::new(),
            next: 0,
            answered: 0,
            queued: VecDeque::new(),
            held: VecDeque::new(),
            order: 0,
            running: false,
            epoch: String::new(),
            seq: 0,
        }
    }

    fn req(line: &str) -> rpc::Request {
        rpc::parse_line(line.as_bytes()).map_err(|_| line).unwrap()
    }

    /// The requests the bridge wrote so far, as (id, method, sessionId).
    async fn written(daemon: &mut tokio::net::UnixStream) -> Vec<(u64, String, String)> {
        let mut buf = vec![0u8; 64 * 1024];
        let n = daemon.read(&mut buf).await.unwrap();
        String::from_utf8_lossy(&buf[..n])
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                let id = v["id"].as_u64().unwrap();
                let method = v["method"].as_str().unwrap().to_string();
                (
                    id,
                    method,
                    v["params"]["sessionId"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn a_request_refused_for_a_replaced_id_is_sent_again_before_later_ones() {
        let (mine, mut daemon) = tokio::net::UnixStream::pair().unwrap();
        let (_read, write) = mine.into_split();
        let mut b = bridge(write);
        let buf = Buf::default();
        let mut out = Output::new(Box::new(buf.clone()), Box::new(std::io::sink()));
        assert!(b.submit(req(r#"{"id":"n","type":"new_session"}"#)).await);
        assert!(b.submit(req(r#"{"id":"s","type":"get_state"}"#)).await);
        let sent = written(&mut daemon).await;
        assert_eq!(
            sent,
            [
                (1, "new_session".into(), "old".into()),
                (2, "get_state".into(), "old".into())
            ]
        );
        // The change is answered and made known; get_state reached the daemon too late.
        assert!(
            b.answer(
                &Id::from(1),
                Ok(serde_json::value::to_raw_value(&json!({"cancelled": false})).unwrap()),
                &mut out
            )
            .await
        );
        b.session = "new".into();
        // A stdin request now must wait: get_state may still come back refused.
        assert!(b.submit(req(r#"{"id":"m","type":"get_messages"}"#)).await);
        assert!(b.blocked());
        let refused = j::ErrorObject::new(j::UNKNOWN_SESSION, "no live session old in this daemon");
        assert!(b.answer(&Id::from(2), Err(refused), &mut out).await);
        let sent = written(&mut daemon).await;
        assert_eq!(
            sent,
            [
                (3, "get_state".into(), "new".into()),
                (4, "get_messages".into(), "new".into())
            ],
            "sent again first, with the new id"
        );
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert!(
            !text.contains("no live session"),
            "the refusal is not written: {text}"
        );
        assert_eq!(text.lines().count(), 1, "{text}");
        // A -32012 for the current id is a real error.
        let gone = j::ErrorObject::new(j::UNKNOWN_SESSION, "no live session new in this daemon");
        assert!(b.answer(&Id::from(3), Err(gone), &mut out).await);
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert!(
            text.contains(r#""id":"s","type":"response","command":"get_state","success":false"#),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_session_change_is_late_only_while_the_session_may_be_busy() {
        // Idle, it is answered at once, so a line held after it waits for it; during a run it
        // is answered after the run settles, and a held line does not wait for it.
        let (mine, _daemon) = tokio::net::UnixStream::pair().unwrap();
        let (_read, write) = mine.into_split();
        let mut b = bridge(write);
        for line in [
            r#"{"id":"n","type":"new_session"}"#,
            r#"{"id":"p","type":"prompt","message":"x"}"#,
            r#"{"id":"f","type":"fork","entryId":"e"}"#,
        ] {
            assert!(b.submit(req(line)).await);
        }
        let late: HashMap<String, bool> = b
            .sent
            .values()
            .map(|s| (s.req.command.clone(), s.req.late))
            .collect();
        assert!(!late["new_session"], "idle");
        assert!(late["fork"], "after a prompt");
    }
}
