//! Sending pi commands (and protocol v2 calls) on a [`super::Link`]: to the host in this
//! process as typed calls, or to the link's connection task for the daemon. A command's
//! answer is pi's `data` (or why not); [`Commands::submit`] also gives the stream's `seq` when
//! it was answered, so a client writing both in one order (RPC mode) puts the events up to it
//! first.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use serde_json::{json, Map, Value};
use tokio::sync::oneshot;

use super::error::{LinkError, LinkErrorKind};
use super::socket::{Answer, Order};
use super::Kind;
use crate::host::actor::{self, Call};
use crate::host::Data;
use crate::wire::pi::CommandName;
use crate::wire::protocol::session;
use crate::wire::protocol::Method;
use crate::wire::rpc::Request;

/// Sends pi commands to a link's session; cheap to clone.
#[derive(Clone)]
pub struct Commands {
    kind: Kind,
}

impl Commands {
    pub(super) fn new(kind: Kind) -> Commands {
        Commands { kind }
    }

    /// Runs a pi command: pi's `data` (`{}` without one) or why not.
    pub async fn request(&self, command: &str, params: Value) -> Result<Value, LinkError> {
        match &self.kind {
            Kind::Local(handle)
                if CommandName::parse(command) == Some(CommandName::ExtensionUiResponse) =>
            {
                handle
                    .answer_dialog(Request::new(command, params))
                    .await
                    .map(|()| json!({}))
                    .map_err(|e| LinkError::new(LinkErrorKind::Refused, e.to_string()))
            }
            Kind::Local(handle) => {
                let (answer, _) = handle.request(Request::new(command, params)).await;
                answer.map_err(LinkError::from).and_then(value_of)
            }
            Kind::Daemon { .. } => {
                let params = match params {
                    Value::Object(map) => map,
                    _ => Map::new(),
                };
                let rx = self.order(command, params)?;
                let (answer, _) = rx.await.map_err(|_| LinkError::closed())?;
                answer.and_then(value_of)
            }
        }
    }

    /// Calls protocol v2's method `M` on the daemon this link goes through (`sessionId` added,
    /// as for a pi command); in-process, whatever the host answers (an error for a method it
    /// does not serve).
    pub async fn call<M: Method>(&self, params: &M::Params) -> Result<M::Result, LinkError> {
        let params = serde_json::to_value(params)
            .map_err(|e| LinkError::new(LinkErrorKind::Malformed, e.to_string()))?;
        let result = self.request(M::NAME, params).await?;
        serde_json::from_value(result).map_err(|e| {
            let message = format!("the daemon's answer to {} does not fit: {e}", M::NAME);
            LinkError::new(LinkErrorKind::Malformed, message)
        })
    }

    /// Sends a pi command as a client that writes its answer in the stream's order (RPC
    /// mode): the answer comes with the stream's last `seq` when it was given. Commands are
    /// served in the order sent. `Ok(None)`: none comes (`extension_ui_response` in this
    /// process, which pi never answers).
    pub fn submit(&self, req: Request) -> Result<Option<Reply>, LinkError> {
        match &self.kind {
            Kind::Local(handle)
                if CommandName::parse(&req.command) == Some(CommandName::ExtensionUiResponse) =>
            {
                // Its `id` names the dialog.
                handle.send(Call::Request { req, answer: None });
                Ok(None)
            }
            Kind::Local(handle) => Ok(Some(Reply(Back::Local(handle.submit(req))))),
            Kind::Daemon { .. } => {
                let mut params = req.fields().clone();
                if CommandName::parse(&req.command) == Some(CommandName::ExtensionUiResponse) {
                    if let Some(dialog) = req.id.as_ref().and_then(crate::wire::rpc::Id::as_string)
                    {
                        params.insert("id".into(), json!(dialog));
                    }
                }
                let rx = self.order(&req.command, params)?;
                Ok(Some(Reply(Back::Daemon(rx))))
            }
        }
    }

    /// Hands a daemon's command to the link's connection task.
    fn order(
        &self,
        method: &str,
        params: Map<String, Value>,
    ) -> Result<oneshot::Receiver<Answer>, LinkError> {
        let Kind::Daemon { orders } = &self.kind else {
            return Err(LinkError::closed());
        };
        let (back, rx) = oneshot::channel();
        let order = Order {
            method: method.to_string(),
            params,
            back: Some(back),
            written: None,
        };
        orders.send(order).map_err(|_| LinkError::closed())?;
        Ok(rx)
    }

    /// Ends a session served in this process: its run is stopped (settling for at most
    /// `grace`) and the session saved; the link's stream ends after the last events. A
    /// daemon's session is closed there only if nothing else uses it (`session/close`: no
    /// run going, no other client); otherwise it stays live for them.
    pub async fn stop(&self, grace: std::time::Duration) {
        match &self.kind {
            Kind::Local(handle) => handle.stop(grace).await,
            Kind::Daemon { .. } => {
                if let Err(e) = self.request(session::Close::NAME, json!({})).await {
                    tracing::info!("the session stays live in the daemon: {e}");
                }
            }
        }
    }

    /// Ends a session served in this process as [`Commands::stop`] does, answering why it
    /// could not be saved (its last entries, the final sync), if it could not. A daemon's
    /// session stays live there: nothing is done and nothing answered.
    pub async fn close(&self, grace: std::time::Duration) -> Option<String> {
        match &self.kind {
            Kind::Local(handle) => handle.close(grace).await,
            Kind::Daemon { .. } => None,
        }
    }

    /// [`Commands::stop`] when the user left the prompt (the TUI): a session in this process
    /// tells its `SessionEnd` hooks `prompt_input_exit`, as Claude Code does.
    pub async fn exit(&self, grace: std::time::Duration) {
        match &self.kind {
            Kind::Local(handle) => {
                handle.close_as(grace, "prompt_input_exit").await;
            }
            Kind::Daemon { .. } => self.stop(grace).await,
        }
    }

    /// Tells a session in this process that its client's input ended: open dialogs are
    /// closed unanswered. The receiver is answered once nothing runs there. `None` for a
    /// daemon's session (it stays live there).
    pub fn input_ended(&self) -> Option<oneshot::Receiver<()>> {
        let Kind::Local(handle) = &self.kind else {
            return None;
        };
        let (idle, rx) = oneshot::channel();
        handle.send(Call::InputEnded { idle });
        Some(rx)
    }

    /// Tells a session in this process that its client sent a line that was no request (its
    /// startup warnings are published, as after a request).
    pub fn heard(&self) {
        if let Kind::Local(handle) = &self.kind {
            handle.send(Call::Heard);
        }
    }
}

/// pi's `data` of an answer as a value (`{}` without one).
fn value_of(data: Data) -> Result<Value, LinkError> {
    match data {
        Data::Empty => Ok(json!({})),
        Data::Json(v) => Ok(v),
        Data::Raw(text) => serde_json::from_str(&text)
            .map_err(|e| LinkError::new(LinkErrorKind::Malformed, e.to_string())),
    }
}

/// The answer to a command sent with [`Commands::submit`]: pi's `data` (a daemon's as it
/// wrote it) or why not, and the stream's last `seq` when it was given; `None` if it never
/// came (the session ended, or the connection was lost, first).
pub struct Reply(Back);

enum Back {
    Local(oneshot::Receiver<actor::Answered>),
    Daemon(oneshot::Receiver<Answer>),
}

impl Reply {
    /// The answer if it came (`Some(None)`: it never will).
    pub fn try_take(&mut self) -> Option<Option<Answer>> {
        use oneshot::error::TryRecvError;
        match &mut self.0 {
            Back::Local(rx) => match rx.try_recv() {
                Err(TryRecvError::Empty) => None,
                r => Some(local_answer(r.ok())),
            },
            Back::Daemon(rx) => match rx.try_recv() {
                Err(TryRecvError::Empty) => None,
                r => Some(r.ok()),
            },
        }
    }
}

impl Future for Reply {
    type Output = Option<Answer>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.0 {
            Back::Local(rx) => Pin::new(rx).poll(cx).map(|r| local_answer(r.ok())),
            Back::Daemon(rx) => Pin::new(rx).poll(cx).map(Result::ok),
        }
    }
}

/// The host's answer; one it never gave (it ended first) is none.
fn local_answer(r: Option<actor::Answered>) -> Option<Answer> {
    match r {
        Some((result, head)) if head != u64::MAX => Some((result.map_err(LinkError::from), head)),
        _ => None,
    }
}
