//! RPC mode's session in the daemon (`keel --mode rpc --daemon`, `--remote`): each stdin
//! request becomes a protocol v1 call naming the session; its answer comes back as the
//! daemon's result, and the session's events exactly as the daemon numbered them (the same
//! lines RPC mode writes in-process). A session change (`new_session`, `switch_session`,
//! `fork`, `clone`) is followed: `session/replaced` gives the id later requests name. Closing
//! stdin waits for an active run to settle, then exits 0; the session stays live in the
//! daemon. A daemon that goes away ends this with 1. Over `--remote`, a link that drops is
//! connected again with backoff and the cursor (the requests it was carrying are answered with
//! an error saying so); this ends with 1 only when the remote daemon no longer holds the
//! session or after ten minutes.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::{End, Front, Got, Sent};
use crate::cli::args::Cli;
use crate::client::dial::{Dial, Reader, Writer};
use crate::client::socket::{reconnect_line, Client, Reattached, Reconnecting};
use crate::error::StartupError;
use crate::exit::Exit;
use crate::host::Data;
use crate::mode::Env;
use crate::output::Output;
use crate::wire::jsonrpc::{self as j, Id, Incoming};
use crate::wire::protocol::session as proto;
use crate::wire::rpc;

/// What is written when the daemon closed the connection.
pub(super) const GONE: &str = "Error: the keel daemon closed the connection (it stopped or was killed); the session file keeps every completed entry\n";

/// The connection to the daemon that serves the session.
pub(super) struct Socket {
    dial: Dial,
    lines: tokio::io::Split<BufReader<Reader>>,
    write: Writer,
}

impl Socket {
    /// Opens the session the command line names in the daemon and attaches to it; the
    /// client's state starts at the attach's cursor, after the events that came with it.
    pub(super) async fn open(
        cli: &Cli,
        env: &Env,
        out: &mut Output,
    ) -> Result<(Socket, Front), StartupError> {
        let dial = crate::client::open::cli_dial(cli, env)?;
        let conn = crate::client::open::start(&dial, env).await?;
        let mut client = Client::greet(conn, true, &dial).await?;
        let args = crate::cli::args::session_args(cli.argv.iter().cloned());
        let params = crate::client::open::open_params_for(&dial, cli, env, args, false);
        let opened = client
            .call::<proto::Open>(&params)
            .await
            .map_err(|e| crate::front::client::open_failed_on(&dial, e))?;
        for w in &opened.warnings {
            out.err(&format!("Warning: {w}\n"));
        }
        let session = opened.session_id;
        let attach = proto::AttachParams {
            session_id: session.clone(),
            cursor: None,
        };
        let attached = client.call::<proto::Attach>(&attach).await.map_err(|e| {
            StartupError::config(format!("cannot attach to session {session}: {e}"))
        })?;
        let early = std::mem::take(&mut client.notifications);
        let (read, write) = client.into_parts();
        let mut front = Front::new(session, attached.epoch, attached.seq);
        // Events that arrived while attaching come first.
        events(&mut front, early, out);
        let socket = Socket {
            dial,
            lines: read.split(b'\n'),
            write,
        };
        Ok((socket, front))
    }

    /// Sends request `key` naming `session`.
    pub(super) async fn send(&mut self, key: u64, session: &str, req: &rpc::Request) -> Sent {
        let mut params: Map<String, Value> = req.fields().clone();
        if req.command == "extension_ui_response" {
            if let Some(dialog) = req.id.as_ref().and_then(rpc::Id::as_string) {
                params.insert("id".into(), json!(dialog));
            }
        }
        params.insert("sessionId".into(), json!(session));
        let Ok(line) = j::request_line(&Id::from(key), &req.command, &Value::Object(params)) else {
            return Sent::Waiting; // never: a map always serializes
        };
        match self.write.write_all(line.as_bytes()).await {
            Ok(()) => Sent::Waiting,
            Err(_) => Sent::Gone,
        }
    }

    /// The next line from the daemon, as what it means for the client. Cancel-safe.
    pub(super) async fn next(&mut self) -> Got {
        let Ok(Some(line)) = self.lines.next_segment().await else {
            return Got::Closed;
        };
        match j::parse_line(&line) {
            Incoming::Notification { method, params } => {
                let Some(params) = params else {
                    return Got::Nothing;
                };
                notification(&method, &params)
            }
            Incoming::Response { id, result } => {
                let Ok(key) = id.text().parse::<u64>() else {
                    return Got::Nothing;
                };
                let result = result.map(|raw| Data::Raw(raw.get().to_string()));
                Got::Answer { key, result }
            }
            _ => Got::Nothing,
        }
    }

    /// The daemon closed the connection: over `--remote` it is connected again; `Err` ends
    /// the loop.
    pub(super) async fn closed(&mut self, front: &mut Front, out: &mut Output) -> Result<(), Exit> {
        if self.dial.remote().is_some() {
            if let Some((read, write)) = reconnect(&self.dial, front, out).await {
                self.lines = read.split(b'\n');
                self.write = write;
                return Ok(());
            }
        }
        out.err(GONE);
        Err(Exit::Failed)
    }

    /// Leaves the session live in the daemon; a signal aborts its run first.
    pub(super) async fn leave(mut self, end: &End, session: &str) {
        if let End::Signal(_) = end {
            let params = json!({"sessionId": session});
            if let Ok(line) = j::request_line(&Id::from(0), "abort", &params) {
                let _ = self.write.write_all(line.as_bytes()).await;
            }
        }
    }
}

/// A notification of the daemon, as what it means for the client.
fn notification(method: &str, params: &serde_json::value::RawValue) -> Got {
    match method {
        "session/event" => match serde_json::from_str::<EventParams>(params.get()) {
            Ok(p) => Got::Event {
                epoch: Some(p.epoch),
                seq: p.seq,
                line: p.event.get().into(),
            },
            Err(_) => Got::Nothing,
        },
        "session/replaced" => match serde_json::from_str::<Replaced>(params.get()) {
            Ok(p) => Got::Replaced {
                old: p.session_id,
                new: p.new_session_id,
                epoch: p.epoch,
                seq: p.seq,
            },
            Err(_) => Got::Nothing,
        },
        "daemon/shutdown" => Got::Shutdown,
        _ => Got::Nothing,
    }
}

/// Notifications read with an answer, in order: the events among them go out.
fn events(front: &mut Front, notes: impl IntoIterator<Item = (String, Value)>, out: &mut Output) {
    for (method, params) in notes {
        if method != "session/event" {
            continue;
        }
        let Ok(raw) = serde_json::value::to_raw_value(&params) else {
            continue;
        };
        if let Got::Event { epoch, seq, line } = notification(&method, &raw) {
            front.event(epoch, seq, &line, out);
        }
    }
}

/// The link to a remote daemon dropped: the requests it carried are answered with an error
/// (they may have run), then the session is attached again from the last event written, with
/// backoff. `None` when the daemon there no longer holds the session, or after
/// [`crate::client::dial::Backoff::GIVE_UP`].
async fn reconnect(
    dial: &Dial,
    front: &mut Front,
    out: &mut Output,
) -> Option<(BufReader<Reader>, Writer)> {
    out.err(&reconnect_line(
        dial,
        &Reconnecting::Lost("it closed the connection"),
    ));
    let place = dial.describe();
    let mut carried: Vec<super::Waiting> = front.waiting.drain().map(|(_, s)| s).collect();
    carried.sort_by_key(|s| s.n);
    for s in carried {
        let why = format!(
            "the connection to the keel daemon on {place} was lost before the answer; the command may have run"
        );
        let req = &s.req.req;
        let _ = out.out(rpc::error_line(req.id.as_ref(), Some(&req.command), &why).as_bytes());
    }
    front.answered = front.next;
    let _ = out.flush();
    let cursor = (front.epoch.clone(), front.seq);
    match Client::reattach(dial, &front.session, (&cursor.0, cursor.1), true).await {
        Reattached::Back(mut client, attached, attempts) => {
            if attached.mode == proto::AttachMode::Snapshot {
                out.err("Warning: the daemon no longer held the events in between; get_state and get_messages give the session as it is now\n");
                front.epoch = attached.epoch;
                front.seq = attached.seq;
                front.running = attached.snapshot.is_some_and(|s| s.state.is_streaming);
            }
            let notes = std::mem::take(&mut client.notifications);
            events(front, notes, out);
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::Session;
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

    /// A client whose session is `old` in the daemon at the other end of `mine`.
    fn bridge(mine: tokio::net::UnixStream) -> (Front, Session) {
        let (read, write) = mine.into_split();
        let read: Reader = Box::new(read);
        let socket = Socket {
            dial: Dial::new("/nonexistent/keel.sock".into(), None),
            lines: BufReader::new(read).split(b'\n'),
            write: Box::new(write),
        };
        (
            Front::new("old".into(), String::new(), 0),
            Session::Daemon(socket),
        )
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
        let (mut b, mut link) = bridge(mine);
        let buf = Buf::default();
        let mut out = Output::new(Box::new(buf.clone()), Box::new(std::io::sink()));
        assert!(
            b.submit(req(r#"{"id":"n","type":"new_session"}"#), &mut link)
                .await
        );
        assert!(
            b.submit(req(r#"{"id":"s","type":"get_state"}"#), &mut link)
                .await
        );
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
                1,
                Ok(Data::Raw(json!({"cancelled": false}).to_string())),
                &mut link,
                &mut out
            )
            .await
        );
        b.session = "new".into();
        // A stdin request now must wait: get_state may still come back refused.
        assert!(
            b.submit(req(r#"{"id":"m","type":"get_messages"}"#), &mut link)
                .await
        );
        assert!(b.blocked());
        let refused = j::ErrorObject::new(j::UNKNOWN_SESSION, "no live session old in this daemon");
        assert!(b.answer(2, Err(refused), &mut link, &mut out).await);
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
        assert!(b.answer(3, Err(gone), &mut link, &mut out).await);
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
        let (mut b, mut link) = bridge(mine);
        for line in [
            r#"{"id":"n","type":"new_session"}"#,
            r#"{"id":"p","type":"prompt","message":"x"}"#,
            r#"{"id":"f","type":"fork","entryId":"e"}"#,
        ] {
            assert!(b.submit(req(line), &mut link).await);
        }
        let late: std::collections::HashMap<String, bool> = b
            .waiting
            .values()
            .map(|s| (s.req.req.command.clone(), s.req.late))
            .collect();
        assert!(!late["new_session"], "idle");
        assert!(late["fork"], "after a prompt");
    }
}
