//! A protocol v1 client connection: `daemon/hello`, then calls answered in order (session
//! events and other notifications that arrive meanwhile are kept for the caller). Used by
//! `keel daemon status|stop|start` and `keel ps`; never prints.

use std::collections::VecDeque;
use std::path::Path;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;

use super::connection::PROTOCOL;
use super::DaemonError;
use crate::wire::jsonrpc::{self as j, ErrorObject, Id, Incoming};

/// An open, greeted connection.
pub struct Client {
    read: BufReader<OwnedReadHalf>,
    write: OwnedWriteHalf,
    next: u64,
    /// The daemon's `hello` result.
    pub hello: Value,
    /// Notifications received while waiting for answers: `(method, params)`.
    pub notifications: VecDeque<(String, Value)>,
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
    /// Connects to a running daemon (never spawns one) and says hello.
    pub async fn connect(socket: &Path, interactive: bool) -> Result<Client, DaemonError> {
        let stream = UnixStream::connect(socket).await.map_err(|e| {
            DaemonError::new(format!(
                "no keel daemon is listening on {}: {e}",
                socket.display()
            ))
            .with_hint("start one with: keel daemon start")
        })?;
        Client::greet(stream, interactive).await
    }

    /// Says hello on a connected stream.
    pub async fn greet(stream: UnixStream, interactive: bool) -> Result<Client, DaemonError> {
        let (read, write) = stream.into_split();
        let mut client = Client {
            read: BufReader::new(read),
            write,
            next: 0,
            hello: Value::Null,
            notifications: VecDeque::new(),
        };
        let params = json!({
            "protocolVersion": PROTOCOL,
            "client": {"name": "keel", "version": env!("CARGO_PKG_VERSION")},
            "interactive": interactive,
        });
        client.hello = client
            .call("daemon/hello", params)
            .await
            .map_err(|e| DaemonError::new(format!("the daemon refused hello: {e}")))?;
        Ok(client)
    }

    /// The connection's halves, for a caller that reads and writes it itself (whatever was
    /// read ahead stays in the reader; notifications already read are in `notifications`).
    pub fn into_parts(self) -> (BufReader<OwnedReadHalf>, OwnedWriteHalf) {
        (self.read, self.write)
    }

    /// Sends a request and waits for its answer.
    pub async fn call(&mut self, method: &str, params: Value) -> Result<Value, CallError> {
        self.next += 1;
        let id = Id::from(self.next);
        let line =
            j::request_line(&id, method, &params).map_err(|e| CallError::Lost(e.to_string()))?;
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
                    return match result {
                        Ok(raw) => serde_json::from_str(raw.get())
                            .map_err(|e| CallError::Lost(e.to_string())),
                        Err(e) => Err(CallError::Rpc(e)),
                    };
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
