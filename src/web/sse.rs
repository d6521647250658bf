//! `GET /events/SESSION`: one session's stream, read-only, as server-sent events, for clients
//! simpler than the page (`curl -N`, `EventSource`). The server says hello (not interactive)
//! and attaches with the cursor `Last-Event-ID: EPOCH/SEQ` names (a snapshot without one);
//! then each line the daemon writes is one SSE message whose `data:` is the line as it is, and
//! a `session/event` also gets `id: EPOCH/SEQ`, so a client that comes back (EventSource does
//! by itself) resumes with no gap and no duplicate. The attach's own answer comes first, as
//! `event: attach`. An unknown session is 404 before anything streams.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body::Frame;
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

use super::Shared;
use crate::client::dial::Dial;
use crate::client::socket::{CallError, Client};
use crate::wire::protocol::session::{Attach, AttachParams, Cursor};
use crate::wire::web::EventHead;

/// The cursor a `Last-Event-ID` value names (`EPOCH/SEQ`).
pub fn cursor_of(id: &str) -> Option<Cursor> {
    let (epoch, seq) = id.trim().rsplit_once('/')?;
    Some(Cursor {
        epoch: epoch.to_string(),
        seq: seq.parse().ok()?,
    })
}

/// One SSE message holding `line` (one JSON line: it has no line feed).
fn message(line: &str) -> Bytes {
    let id = serde_json::from_str::<EventHead>(line)
        .ok()
        .filter(|h| h.method.as_deref() == Some("session/event"))
        .and_then(|h| h.params)
        .map(|p| format!("id: {}/{}\n", p.epoch, p.seq))
        .unwrap_or_default();
    Bytes::from(format!("{id}data: {line}\n\n"))
}

/// The handler.
pub async fn events(
    State(s): State<Arc<Shared>>,
    Path(session): Path<String>,
    headers: HeaderMap,
) -> Response {
    let cursor = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(cursor_of);
    let stream = match crate::client::open::start_local(&s.socket, &s.env).await {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!("keel web: no daemon: {}", e.message);
            return (StatusCode::BAD_GATEWAY, "the daemon cannot be reached\n").into_response();
        }
    };
    let dial = Dial::Local(s.socket.clone());
    let Ok(mut client) = Client::greet(stream, false, &dial).await else {
        return (StatusCode::BAD_GATEWAY, "the daemon refused hello\n").into_response();
    };
    let params = AttachParams {
        session_id: session,
        cursor,
    };
    let attached = match client.call::<Attach>(&params).await {
        Ok(r) => r,
        Err(CallError::Rpc(e)) => {
            return (StatusCode::NOT_FOUND, format!("{}\n", e.message)).into_response()
        }
        Err(CallError::Lost(_)) => {
            return (
                StatusCode::BAD_GATEWAY,
                "the daemon closed the connection\n",
            )
                .into_response()
        }
    };
    let first = serde_json::to_string(&attached).unwrap_or_default();
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let (mut read, write) = client.into_parts();
    tokio::spawn(async move {
        // Kept until the client goes: the daemon's side of the connection.
        let _write = write;
        if tx
            .send(Bytes::from(format!("event: attach\ndata: {first}\n\n")))
            .await
            .is_err()
        {
            return;
        }
        let mut line = String::new();
        loop {
            line.clear();
            match read.read_line(&mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if tx.send(message(line.trim_end_matches('\n'))).await.is_err() {
                return;
            }
        }
    });
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::new(Messages(rx)),
    )
        .into_response()
}

/// The response body: the messages as they come, until the daemon's connection ends.
struct Messages(mpsc::Receiver<Bytes>);

impl HttpBody for Messages {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|m| m.map(|b| Ok(Frame::data(b))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_event_gets_its_cursor_as_id_and_every_line_is_data_as_it_is() {
        let line = r#"{"jsonrpc":"2.0","method":"session/event","params":{"sessionId":"s","epoch":"1-2-3.1","seq":7,"event":{"type":"agent_start"}}}"#;
        assert_eq!(message(line), format!("id: 1-2-3.1/7\ndata: {line}\n\n"));
        let other = r#"{"jsonrpc":"2.0","method":"daemon/notice","params":{"level":"warn"}}"#;
        assert_eq!(message(other), format!("data: {other}\n\n"));
        let cursor = cursor_of("1-2-3.1/7").unwrap();
        assert_eq!((cursor.epoch.as_str(), cursor.seq), ("1-2-3.1", 7));
        assert!(cursor_of("7").is_none());
        assert!(cursor_of("a/b").is_none());
    }
}
