//! One WebSocket relayed to its own daemon connection: each text message the page sends is
//! written to the socket as one line, each line the daemon writes is sent as one text message.
//! Nothing is parsed: the page speaks the daemon's protocol v2 itself (hello, typed methods,
//! numbered events, cursors), so a tab that comes back resumes with `session/attach` and its
//! cursor as any client does. A message that is not one line of text (binary, or with a line
//! feed) closes the WebSocket (1003): it could not be relayed as exactly one frame. Either
//! side closing ends both.

use axum::extract::ws::{close_code, CloseFrame, Message, WebSocket};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::mpsc;

/// The longest line (and message) relayed: the daemon's own limit (16 MiB).
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// Relays until either side closes.
pub async fn relay(mut ws: WebSocket, daemon: UnixStream) {
    let (from_daemon, mut to_daemon) = daemon.into_split();
    let (tx, mut lines) = mpsc::channel::<String>(64);
    // Reads lines apart from the loop below: a read cut by `select!` would lose bytes.
    let reader = tokio::spawn(async move {
        let mut from_daemon = BufReader::new(from_daemon);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match from_daemon.read_until(b'\n', &mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if buf.last() == Some(&b'\n') {
                buf.pop();
            }
            // The daemon writes JSON (UTF-8); anything else is not relayed.
            let Ok(line) = String::from_utf8(std::mem::take(&mut buf)) else {
                return;
            };
            if tx.send(line).await.is_err() {
                return;
            }
        }
    });
    loop {
        tokio::select! {
            line = lines.recv() => match line {
                Some(line) => {
                    if ws.send(Message::Text(line.into())).await.is_err() {
                        break;
                    }
                }
                None => {
                    let _ = ws.send(Message::Close(Some(CloseFrame {
                        code: close_code::AWAY,
                        reason: "the daemon closed the connection".into(),
                    }))).await;
                    break;
                }
            },
            message = ws.recv() => match message {
                Some(Ok(Message::Text(text))) => {
                    if text.contains('\n') {
                        let _ = ws.send(unsupported("one message is one line")).await;
                        break;
                    }
                    let mut line = Vec::with_capacity(text.len() + 1);
                    line.extend_from_slice(text.as_bytes());
                    line.push(b'\n');
                    if to_daemon.write_all(&line).await.is_err() {
                        break;
                    }
                }
                Some(Ok(Message::Binary(_))) => {
                    let _ = ws.send(unsupported("text messages only")).await;
                    break;
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
            },
        }
    }
    reader.abort();
    let _ = to_daemon.shutdown().await;
}

fn unsupported(why: &'static str) -> Message {
    Message::Close(Some(CloseFrame {
        code: close_code::UNSUPPORTED,
        reason: why.into(),
    }))
}
