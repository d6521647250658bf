//! JSON-RPC 2.0 over a language server's stdio with the LSP base protocol's framing
//! (`Content-Length: N\r\n\r\n` then N bytes of JSON). Owns the request ids and the waiting
//! callers; what the server sends on its own (notifications, requests) goes to a [`Handler`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;

/// Why a request got no result.
#[derive(Debug, Clone, PartialEq)]
pub enum RpcError {
    Server { code: i64, message: String },
    Closed,
    Write(String),
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RpcError::Server { code, message } => {
                write!(
                    f,
                    "the language server answered with an error: {message} ({code})"
                )
            }
            RpcError::Closed => f.write_str("the language server stopped"),
            RpcError::Write(e) => write!(f, "cannot write to the language server: {e}"),
        }
    }
}

impl std::error::Error for RpcError {}

/// What the server sends that is not an answer: a notification (`id` is `None`) or a request
/// whose result the handler returns (`Err`: method not found).
pub trait Handler: Send + Sync + 'static {
    fn notification(&self, method: &str, params: Option<Value>);
    fn request(&self, method: &str, params: Option<Value>) -> Result<Value, ()>;
}

type Pending = Mutex<HashMap<i64, oneshot::Sender<Result<Value, RpcError>>>>;

/// One connection's sending half and the callers waiting for answers.
pub struct Conn {
    writer: tokio::sync::Mutex<Box<dyn AsyncWrite + Send + Unpin>>,
    next_id: AtomicI64,
    pending: Arc<Pending>,
}

#[derive(Deserialize)]
struct Incoming {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<ErrorObject>,
}

#[derive(Deserialize, Serialize)]
struct ErrorObject {
    code: i64,
    message: String,
}

#[derive(Serialize)]
struct Request<'a, P: Serialize> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<i64>,
    method: &'a str,
    params: P,
}

#[derive(Serialize)]
struct Response {
    jsonrpc: &'static str,
    id: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorObject>,
}

impl Conn {
    /// A connection writing to `writer` and reading `reader` on a task of its own until the
    /// server closes it; `on_close` runs then (after every waiting caller got `Closed`).
    pub fn start<R>(
        writer: Box<dyn AsyncWrite + Send + Unpin>,
        reader: R,
        handler: Arc<dyn Handler>,
        on_close: impl FnOnce() + Send + 'static,
    ) -> Arc<Conn>
    where
        R: AsyncBufRead + Send + Unpin + 'static,
    {
        let conn = Arc::new(Conn {
            writer: tokio::sync::Mutex::new(writer),
            next_id: AtomicI64::new(1),
            pending: Arc::default(),
        });
        let weak = Arc::downgrade(&conn);
        let pending = conn.pending.clone();
        tokio::spawn(async move {
            let mut reader = reader;
            while let Ok(Some(body)) = read_message(&mut reader).await {
                let Ok(msg) = serde_json::from_slice::<Incoming>(&body) else {
                    continue;
                };
                match (msg.method, msg.id) {
                    (Some(method), Some(id)) => {
                        let answer = handler.request(&method, msg.params);
                        let Some(conn) = weak.upgrade() else { break };
                        let (result, error) = match answer {
                            Ok(v) => (Some(v), None),
                            Err(()) => (
                                None,
                                Some(ErrorObject {
                                    code: -32601,
                                    message: format!("keel does not serve {method}"),
                                }),
                            ),
                        };
                        let reply = Response {
                            jsonrpc: "2.0",
                            id,
                            result,
                            error,
                        };
                        let _ = conn.write(&reply).await;
                    }
                    (Some(method), None) => handler.notification(&method, msg.params),
                    (None, Some(id)) => {
                        let Some(id) = id.as_i64() else { continue };
                        let waiting = lock(&pending).remove(&id);
                        if let Some(tx) = waiting {
                            let answer = match msg.error {
                                Some(e) => Err(RpcError::Server {
                                    code: e.code,
                                    message: e.message,
                                }),
                                None => Ok(msg.result.unwrap_or(Value::Null)),
                            };
                            let _ = tx.send(answer);
                        }
                    }
                    (None, None) => {}
                }
            }
            for (_, tx) in lock(&pending).drain() {
                let _ = tx.send(Err(RpcError::Closed));
            }
            on_close();
        });
        conn
    }

    /// Sends a request and waits for its answer (cancel-safe: a dropped call forgets its id).
    pub async fn request<P: Serialize>(&self, method: &str, params: P) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, tx);
        let forget = Forget(&self.pending, id);
        self.write(&Request {
            jsonrpc: "2.0",
            id: Some(id),
            method,
            params,
        })
        .await?;
        let answer = rx.await.unwrap_or(Err(RpcError::Closed));
        drop(forget);
        answer
    }

    /// Sends a notification.
    pub async fn notify<P: Serialize>(&self, method: &str, params: P) -> Result<(), RpcError> {
        self.write(&Request {
            jsonrpc: "2.0",
            id: None,
            method,
            params,
        })
        .await
    }

    async fn write<T: Serialize>(&self, msg: &T) -> Result<(), RpcError> {
        let body = serde_json::to_vec(msg).map_err(|e| RpcError::Write(e.to_string()))?;
        let mut w = self.writer.lock().await;
        let head = format!("Content-Length: {}\r\n\r\n", body.len());
        let sent = async {
            w.write_all(head.as_bytes()).await?;
            w.write_all(&body).await?;
            w.flush().await
        };
        sent.await.map_err(|e| RpcError::Write(e.to_string()))
    }
}

/// Drops a request's waiting slot when its caller stops waiting.
struct Forget<'a>(&'a Pending, i64);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        lock(self.0).remove(&self.1);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Largest message read (a server sending more is treated as closed).
const MAX_MESSAGE: usize = 64 << 20;

/// Reads one framed message's body; `None` at the end of the stream.
pub async fn read_message<R: AsyncBufRead + Unpin>(r: &mut R) -> std::io::Result<Option<Vec<u8>>> {
    let mut length = None;
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            if length.is_some() {
                break;
            }
            continue;
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                length = value.trim().parse::<usize>().ok();
            }
        }
    }
    let n = length.unwrap_or(0);
    if n > MAX_MESSAGE {
        return Ok(None);
    }
    let mut body = vec![0; n];
    r.read_exact(&mut body).await?;
    Ok(Some(body))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_are_read_whatever_the_headers() {
        let data = b"Content-Length: 2\r\nContent-Type: application/vscode-jsonrpc\r\n\r\n{}content-length:4\r\n\r\nnull";
        let mut r = tokio::io::BufReader::new(&data[..]);
        assert_eq!(read_message(&mut r).await.unwrap().unwrap(), b"{}");
        assert_eq!(read_message(&mut r).await.unwrap().unwrap(), b"null");
        assert!(read_message(&mut r).await.unwrap().is_none());
    }
}
