//! A protocol v2 client connection: `daemon/hello`, then calls answered in order (session
//! events and other notifications that arrive meanwhile are kept for the caller). A call is
//! typed by its [`Method`] (`client.call::<session::Attach>(&params)`); only pi commands,
//! forwarded as they are, go through [`Client::call_raw`]. Never prints.

use std::collections::VecDeque;
use std::path::Path;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::dial::{Backoff, Conn, Dial, Reader, Writer};
use crate::wire::jsonrpc::{self as j, ErrorObject, Id, Incoming};
use crate::wire::protocol::daemon::{ClientInfo, Hello, HelloParams, HelloResult};
use crate::wire::protocol::session::{self, AttachParams, AttachResult, Cursor};
use crate::wire::protocol::{Method, PROTOCOL};
use crate::wire::socket::DaemonError;

/// An open, greeted connection.
pub struct Client {
    read: BufReader<Reader>,
    write: Writer,
    next: u64,
    /// The daemon's `hello` result.
    pub hello: HelloResult,
    /// Notifications received while waiting for answers: `(method, params)`.
    pub notifications: VecDeque<(String, Value)>,
    /// Whether it said hello as an interactive client (one that answers dialogs).
    pub interactive: bool,
}

/// Why a call failed.
#[derive(Debug)]
pub enum CallError {
    /// The daemon answered with an error.
    Rpc(ErrorObject),
    /// The connection failed or closed.
    Lost(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Rpc(e) => write!(f, "{} (code {})", e.message, e.code),
            CallError::Lost(why) => write!(f, "the daemon connection was lost: {why}"),
        }
    }
}

impl Client {
    /// Connects to a running daemon on `socket` (never spawns one) and says hello.
    pub async fn connect(socket: &Path, interactive: bool) -> Result<Client, DaemonError> {
        Client::dial(&Dial::Local(socket.to_path_buf()), interactive).await
    }

    /// Connects to the daemon `dial` names (a remote one over ssh) and says hello.
    pub async fn dial(dial: &Dial, interactive: bool) -> Result<Client, DaemonError> {
        let conn = dial.connect().await?;
        Client::greet(conn, interactive, dial).await
    }

    /// Says hello on a connection to the daemon `dial` names. A remote connection that ends
    /// before the answer is explained with what ssh said.
    pub async fn greet(
        conn: impl Into<Conn>,
        interactive: bool,
        dial: &Dial,
    ) -> Result<Client, DaemonError> {
        let conn: Conn = conn.into();
        let ssh_stderr = conn.ssh_stderr;
        let mut client = Client {
            read: BufReader::new(conn.read),
            write: conn.write,
            next: 0,
            hello: HelloResult::default(),
            notifications: VecDeque::new(),
            interactive,
        };
        let params = HelloParams {
            protocol_version: PROTOCOL,
            client: ClientInfo {
                name: "keel".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            interactive,
        };
        match (client.call::<Hello>(&params).await, ssh_stderr) {
            (Ok(hello), _) => {
                client.hello = hello;
                Ok(client)
            }
            (Err(CallError::Lost(why)), Some(stderr)) => {
                let said = stderr.settled().await;
                let last = said.lines().last().unwrap_or("").trim();
                let because = if last.is_empty() {
                    why
                } else {
                    last.to_string()
                };
                Err(DaemonError::new(format!(
                    "cannot reach the keel daemon on {}: {because}",
                    dial.describe()
                ))
                .with_hint(remote_hint(last)))
            }
            (Err(e), _) => Err(DaemonError::new(format!("the daemon refused hello: {e}"))),
        }
    }

    /// The connection's halves, for a caller that reads and writes it itself (whatever was
    /// read ahead stays in the reader; notifications already read are in `notifications`).
    pub fn into_parts(self) -> (BufReader<Reader>, Writer) {
        (self.read, self.write)
    }

    /// Calls method `M` and waits for its answer. A result that does not decode as
    /// `M::Result` is [`CallError::Lost`] (the peer is not a daemon of this protocol).
    pub async fn call<M: Method>(&mut self, params: &M::Params) -> Result<M::Result, CallError> {
        let raw = self.send(M::NAME, params).await?;
        serde_json::from_str(raw.get()).map_err(|e| {
            CallError::Lost(format!(
                "the daemon's answer to {} does not fit: {e}",
                M::NAME
            ))
        })
    }

    /// Sends a pi command (`prompt`, `abort`, …: pi's fields plus `sessionId`) and waits for
    /// pi's `data`. Protocol v2's own methods go through [`Client::call`].
    pub async fn call_raw(&mut self, command: &str, params: Value) -> Result<Value, CallError> {
        let raw = self.send(command, &params).await?;
        serde_json::from_str(raw.get()).map_err(|e| CallError::Lost(e.to_string()))
    }

    /// Sends a request and waits for its result, as received.
    async fn send(
        &mut self,
        method: &str,
        params: &impl serde::Serialize,
    ) -> Result<Box<serde_json::value::RawValue>, CallError> {
        self.next += 1;
        let id = Id::from(self.next);
        let line =
            j::request_line(&id, method, params).map_err(|e| CallError::Lost(e.to_string()))?;
        self.write
            .write_all(line.as_bytes())
            .await
            .map_err(|e| CallError::Lost(e.to_string()))?;
        loop {
            let mut buf = Vec::new();
            let n = self
                .read
                .read_until(b'\n', &mut buf)
                .await
                .map_err(|e| CallError::Lost(e.to_string()))?;
            if n == 0 {
                return Err(CallError::Lost("the daemon closed the connection".into()));
            }
            let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
            match j::parse_line(line) {
                Incoming::Response { id: got, result } if got == id => {
                    return result.map_err(CallError::Rpc);
                }
                Incoming::Notification { method, params } => {
                    let params = params
                        .and_then(|p| serde_json::from_str(p.get()).ok())
                        .unwrap_or(Value::Null);
                    self.notifications.push_back((method, params));
                }
                _ => {}
            }
        }
    }
}

/// How attaching again after a dropped link ended ([`Client::reattach`]).
pub enum Reattached {
    /// Attached again: the connection, `session/attach`'s answer, and the attempts it took.
    Back(Box<Client>, AttachResult, u32),
    /// The daemon answered but no longer serves the session (why).
    Refused(String),
    /// Nothing answered within [`Backoff::GIVE_UP`].
    GaveUp,
}

impl Client {
    /// Connects again to `dial` (never prompting: [`Dial::quietly`]) with [`Backoff`] and
    /// attaches to `session` from the cursor `(epoch, seq)`, until it is back, the daemon
    /// refuses, or [`Backoff::GIVE_UP`].
    pub async fn reattach(
        dial: &Dial,
        session: &str,
        cursor: (&str, u64),
        interactive: bool,
    ) -> Reattached {
        let dial = dial.quietly();
        let mut backoff = Backoff::default();
        while !backoff.exhausted() {
            tokio::time::sleep(backoff.next_delay()).await;
            let mut client = match Client::dial(&dial, interactive).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::info!("reconnect attempt failed: {e}");
                    continue;
                }
            };
            let params = AttachParams {
                session_id: session.to_string(),
                cursor: Some(Cursor {
                    epoch: cursor.0.to_string(),
                    seq: cursor.1,
                }),
            };
            match client.call::<session::Attach>(&params).await {
                Ok(attached) => {
                    return Reattached::Back(Box::new(client), attached, backoff.attempts())
                }
                Err(CallError::Rpc(e)) => return Reattached::Refused(e.message),
                Err(CallError::Lost(e)) => tracing::info!("reconnect attempt failed: {e}"),
            }
        }
        Reattached::GaveUp
    }
}

/// The stderr lines of a headless client whose link to `dial` dropped, as it reconnects.
pub fn reconnect_line(dial: &Dial, what: &Reconnecting) -> String {
    let place = dial.describe();
    match what {
        Reconnecting::Lost(why) => {
            format!(
                "keel: the connection to the daemon on {place} was lost ({why}); reconnecting…\n"
            )
        }
        Reconnecting::Back(attempts) => {
            format!("keel: reconnected to {place} (attempt {attempts})\n")
        }
        Reconnecting::Refused(why) => {
            format!("keel: {place} no longer serves this session: {why}\n")
        }
    }
}

/// See [`reconnect_line`].
pub enum Reconnecting<'a> {
    Lost(&'a str),
    Back(u32),
    Refused(&'a str),
}

/// What to try when ssh got through but the remote side did not answer as a daemon.
fn remote_hint(said: &str) -> String {
    if said.contains("not found") || said.contains("No such file") {
        "keel is not on the remote PATH of a non-interactive ssh session: name it with \
         --remote-keel PATH (e.g. ~/.cargo/bin/keel)"
            .into()
    } else {
        "check that `ssh -T HOST keel daemon bridge` works from this shell (--ssh-opt passes \
         ssh options; KEEL_SSH names the ssh program)"
            .into()
    }
}
