//! ACP mode (`keel --mode acp`): keel as an Agent Client Protocol v2 agent over stdio, for
//! editors (`reference/daemon-acp.md` §1, `DESIGN.md` §11). stdout carries only ACP messages
//! (newline-delimited JSON-RPC 2.0, written by this loop through `Output`); logs go to stderr.
//!
//! A transport over the session host, like RPC mode and the daemon: each ACP session is a
//! host session in this process ([`Link::local`](crate::client::link::Link::local)), started
//! the way the daemon's `session/open` starts one (`setup::open::start`); the ACP layer reads
//! only its public events and sends it pi commands. Framing, ids and errors are the daemon's
//! JSON-RPC line peer (`wire::jsonrpc`, `wire::jsonl`). `methods` answers the client's
//! requests, `session` runs one session's task, `updates` maps events to `session/update`,
//! `permissions` and `content` are the approval and prompt-block rules, `schema` the wire types.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod config;
mod content;
mod fs;
mod jobs;
mod mcp;
mod methods;
mod permissions;
mod rewind;
mod schema;
mod session;
mod updates;

use crate::front::stdin::Input;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::error::StartupError;
use crate::exit::Exit;
use crate::front::invocation::Invocation;
use crate::kernel::clock::Clock;
use crate::mode::Env;
use crate::output::Output;
use crate::signals::Signals;
use crate::wire::jsonrpc::{self as j, ErrorObject, Id};

/// How long a session's run may take to settle once it is stopped (end of input, a signal,
/// `session/close`) before the session is saved anyway.
pub const STOP_GRACE: Duration = Duration::from_secs(3);

/// Lines for stdout (each with its newline); the serve loop writes them in order.
#[derive(Clone)]
pub(crate) struct Sink(mpsc::UnboundedSender<String>);

impl Sink {
    fn line(&self, line: String) {
        let _ = self.0.send(line);
    }

    fn result(&self, id: &Id, result: &impl Serialize) {
        self.line(j::result_line(id, result));
    }

    fn error(&self, id: Option<&Id>, error: &ErrorObject) {
        self.line(j::error_object_line(id, error));
    }

    fn notify(&self, method: &str, params: &impl Serialize) {
        match j::notification_line(method, params) {
            Ok(line) => self.line(line),
            Err(e) => tracing::error!("cannot encode a {method} notification: {e}"),
        }
    }
}

/// Requests this side sends the client (`session/request_permission`): ids and the routing
/// of their answers.
pub(crate) struct Peer {
    sink: Sink,
    next: AtomicU64,
    pending: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
}

/// The client's answer to one of this side's requests: its result, or its error's message.
pub(crate) type Answer = Result<Value, String>;

impl Peer {
    /// Sends a request; its id and where its answer will come (the channel closes without one
    /// if the connection ends first).
    fn begin(
        &self,
        method: &str,
        params: &impl Serialize,
    ) -> Option<(Id, oneshot::Receiver<Answer>)> {
        let id = Id::from(self.next.fetch_add(1, Ordering::Relaxed));
        let line = j::request_line(&id, method, params).ok()?;
        let (tx, rx) = oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            p.insert(id.text().to_string(), tx);
        }
        self.sink.line(line);
        Some((id, rx))
    }

    /// Withdraws request `id` (its question was settled elsewhere): the client is sent
    /// `$/cancel_request`, and an answer that still comes is dropped.
    fn withdraw(&self, id: &Id) {
        if let Ok(mut p) = self.pending.lock() {
            p.remove(id.text());
        }
        let request_id: Value =
            serde_json::from_str(id.text()).unwrap_or_else(|_| Value::String(id.text().into()));
        self.sink.notify(
            "$/cancel_request",
            &serde_json::json!({"requestId": request_id}),
        );
    }

    /// Routes a response to the request that waits for it (an unknown id is logged).
    fn route(&self, id: &Id, result: Result<Box<RawValue>, ErrorObject>) {
        let waiting = self
            .pending
            .lock()
            .ok()
            .and_then(|mut p| p.remove(id.text()));
        let Some(tx) = waiting else {
            tracing::warn!(
                "a response to {} that this agent did not ask for",
                id.text()
            );
            return;
        };
        let value = match result {
            Ok(raw) => serde_json::from_str(raw.get()).map_err(|e| format!("bad answer: {e}")),
            Err(e) => {
                tracing::info!(
                    "the client answered {} with error {}: {}",
                    id.text(),
                    e.code,
                    e.message
                );
                Err(e.message)
            }
        };
        let _ = tx.send(value);
    }
}

/// Serves ACP until stdin closes (exit 0, every session saved) or a signal arrives (128 + n).
/// ACP sessions ask unless `--permission` was given.
pub async fn serve(
    inv: &Invocation,
    settings: &crate::setup::Settings,
    env: &Env,
    clock: &Clock,
    out: &mut Output,
) -> Result<Exit, StartupError> {
    let daemon = match inv.daemon {
        true => Some(crate::client::open::socket_for(env, inv.socket.as_deref())?),
        false => None,
    };
    if !inv.prompt.is_empty() {
        return Err(StartupError::usage(
            "acp mode takes no prompt arguments; the editor sends session/prompt",
        ));
    }
    crate::setup::check_session_flags(settings, false)?;
    let mut signals = Signals::new()?;
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<String>();
    let sink = Sink(out_tx);
    let mut agent = methods::Agent::new(
        &inv.spec,
        env,
        clock,
        inv.spec.permission.is_some(),
        sink.clone(),
        daemon,
    );
    let (input_tx, mut input_rx) = mpsc::channel::<Input>(4);
    crate::front::stdin::spawn_reader(input_tx);
    let mut stop = None;
    loop {
        tokio::select! {
            biased;
            n = signals.next() => {
                stop = Some(Exit::Signal(n));
                break;
            }
            Some(line) = out_rx.recv() => write(out, &line),
            input = input_rx.recv() => match input {
                Some(Input::Frames(frames)) => {
                    for frame in frames {
                        agent.on_frame(frame);
                    }
                }
                Some(Input::Error(e)) => {
                    tracing::error!("cannot read stdin: {e}");
                    break;
                }
                None => break,
            },
        }
        if out.flush().is_err() {
            stop = Some(out.stdout_exit());
            break;
        }
    }
    // End of input or a signal: stop every session (its run aborted) and save it; lines
    // written meanwhile still go out.
    let closing = agent.shutdown();
    tokio::pin!(closing);
    loop {
        tokio::select! {
            () = &mut closing => break,
            Some(line) = out_rx.recv() => write(out, &line),
        }
    }
    while let Ok(line) = out_rx.try_recv() {
        write(out, &line);
    }
    let _ = out.flush();
    Ok(stop.unwrap_or(Exit::Success))
}

fn write(out: &mut Output, line: &str) {
    if !out.is_stdout_closed() {
        let _ = out.out(line.as_bytes());
    }
}
