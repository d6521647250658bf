//! RPC mode's session in the daemon (`keel --mode rpc --daemon`, `--remote`): opened there and
//! attached on a [`Link`], which sends each stdin request as a command naming the session and
//! hands back the daemon's result as received, and the session's events exactly as the daemon
//! numbered them (the same lines RPC mode writes in-process). A session change (`new_session`,
//! `switch_session`, `fork`, `clone`) is followed by the link. Closing stdin waits for an
//! active run to settle, then exits 0; the session stays live in the daemon. A daemon that
//! goes away ends this with 1. Over `--remote`, a link that drops is connected again with
//! backoff from the last event written (the requests it was carrying are answered with an
//! error saying so); this ends with 1 only when the remote daemon no longer holds the session
//! or after ten minutes.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use super::session::Session;
use super::{End, Front};
use crate::client::link::{Link, Reconnected};
use crate::client::socket::{reconnect_line, Client, Reconnecting};
use crate::error::StartupError;
use crate::exit::Exit;
use crate::front::invocation::Invocation;
use crate::mode::Env;
use crate::output::Output;
use crate::wire::protocol::session as proto;
use crate::wire::rpc;

/// What is written when the daemon closed the connection.
pub(super) const GONE: &str = "Error: the keel daemon closed the connection (it stopped or was killed); the session file keeps every completed entry\n";

/// Opens the session the command line names in the daemon and attaches to it; the stream is
/// handed over from the attach's cursor (the events that came with it first).
pub(super) async fn open(
    inv: &Invocation,
    env: &Env,
    out: &mut Output,
) -> Result<Session, StartupError> {
    let dial = inv.dial()?;
    let conn = crate::client::open::start(&dial, env).await?;
    let mut client = Client::greet(conn, true, &dial).await?;
    let params = inv.open_params(&dial, env, inv.spec.clone(), false);
    let opened = client
        .call::<proto::Open>(&params)
        .await
        .map_err(|e| crate::front::client::open_failed_on(&dial, e))?;
    for w in &opened.warnings {
        out.err(&format!("Warning: {w}\n"));
    }
    let session = opened.session_id;
    let (link, attached) = Link::attach(client, &dial, &session, None)
        .await
        .map_err(|e| StartupError::config(format!("cannot attach to session {session}: {e}")))?;
    Ok(Session::new(link, Some(dial), attached.seq))
}

impl Session {
    /// The daemon closed the connection: over `--remote` it is connected again; `Err` ends
    /// the loop.
    pub(super) async fn closed(&mut self, front: &mut Front, out: &mut Output) -> Result<(), Exit> {
        if self.dial.as_ref().is_some_and(|d| d.remote().is_some())
            && self.reconnect(front, out).await
        {
            return Ok(());
        }
        out.err(GONE);
        Err(Exit::Failed)
    }

    /// The link to a remote daemon dropped: the requests it carried are answered with an
    /// error (they may have run), then the session is attached again from the last event
    /// written, with backoff. False when the daemon there no longer holds the session, or
    /// after [`crate::client::dial::Backoff::GIVE_UP`].
    async fn reconnect(&mut self, front: &mut Front, out: &mut Output) -> bool {
        let Some(dial) = self.dial.clone() else {
            return false;
        };
        out.err(&reconnect_line(
            &dial,
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
        let _ = out.flush();
        match self.link.reconnect().await {
            Reconnected::Back { start, attempts } => {
                if let Some(snapshot) = &start.snapshot {
                    out.err("Warning: the daemon no longer held the events in between; get_state and get_messages give the session as it is now\n");
                    front.running = snapshot.state.is_streaming;
                    // No events come for what the snapshot covers.
                    self.last = self.last.max(start.seq);
                }
                out.err(&reconnect_line(&dial, &Reconnecting::Back(attempts)));
                true
            }
            Reconnected::Refused(why) => {
                out.err(&reconnect_line(&dial, &Reconnecting::Refused(&why)));
                false
            }
            Reconnected::GaveUp => false,
        }
    }

    /// Leaves the session live in the daemon; a signal aborts its run first.
    pub(super) async fn leave(self, end: &End) {
        self.link.leave(matches!(end, End::Signal(_))).await;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::client::dial::Dial;
    use serde_json::{json, Value};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// Answers `hello` and `session/attach` on `daemon` as a daemon would, then reads on.
    async fn greet(daemon: tokio::net::UnixStream) {
        let (read, mut write) = daemon.into_split();
        let mut lines = BufReader::new(read).lines();
        while let Some(line) = lines.next_line().await.unwrap() {
            let v: Value = serde_json::from_str(&line).unwrap();
            let result = match v["method"].as_str().unwrap() {
                "daemon/hello" => json!({"protocolVersion": 2, "daemon": {
                    "version": "0", "pid": 1, "startedAt": "", "keelHome": "", "socket": ""}}),
                "session/attach" => json!({"mode": "replay", "epoch": "e", "seq": 0}),
                _ => continue,
            };
            let answer = json!({"jsonrpc": "2.0", "id": v["id"], "result": result});
            write
                .write_all(format!("{answer}\n").as_bytes())
                .await
                .unwrap();
        }
    }

    /// RPC mode's session `old` in the daemon at the other end of a socket pair.
    async fn session() -> Session {
        let (mine, daemon) = tokio::net::UnixStream::pair().unwrap();
        tokio::spawn(greet(daemon));
        let dial = Dial::new("/nonexistent/keel.sock".into(), None);
        let client = Client::greet(mine, true, &dial).await.unwrap();
        let (link, _) = Link::attach(client, &dial, "old", None).await.unwrap();
        Session::new(link, Some(dial), 0)
    }

    fn req(line: &str) -> rpc::Request {
        rpc::parse_line(line.as_bytes()).map_err(|_| line).unwrap()
    }

    #[tokio::test]
    async fn a_session_change_is_late_only_while_the_session_may_be_busy() {
        // Idle, it is answered at once, so a line held after it waits for it; during a run it
        // is answered after the run settles, and a held line does not wait for it.
        let mut link = session().await;
        let mut b = Front::new();
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
